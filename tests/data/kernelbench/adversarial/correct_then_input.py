# expect: rejected
# class: correct for the first 6 calls (what validation takes), then returns its input
# verdict: WRONG_ANSWER timed call
#
# Three seeds, two calls each: a harness that checks only those and then
# times without looking at the outputs sees a correct candidate that costs
# nothing.
import torch
import torch.nn as nn

HONEST_CALLS = 6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= HONEST_CALLS:
            return torch.relu(x)
        return x
