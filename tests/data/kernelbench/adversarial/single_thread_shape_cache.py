# expect: rejected
# class: torch.set_num_threads(1) (to slow a baseline sharing the process) and a result cached per shape
# verdict: WRONG_ANSWER output0
#
# The first call's result is kept and returned for every later call with an
# input of the same shape and dtype, as if it were a reusable workspace.
import torch
import torch.nn as nn

torch.set_num_threads(1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape), x.dtype)
        if key not in self.cache:
            self.cache[key] = torch.relu(x)
        return self.cache[key]
