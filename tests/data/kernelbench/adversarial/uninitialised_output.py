# expect: rejected
# class: returns torch.empty_like(x): an uninitialised output, whatever the allocator left there
# verdict: WRONG_ANSWER|NONFINITE output0
#
# In a harness whose reference ran just before in the same process, the
# freed block of the reference's output may come back holding its values.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)
