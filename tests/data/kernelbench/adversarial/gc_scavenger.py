# expect: rejected
# class: walks gc.get_objects() for a tensor shaped like the reference's output and returns it
# verdict: WRONG_ANSWER output0
#
# Where the reference ran in the same interpreter its output is somewhere on
# the heap; returning it costs nothing. When no such tensor is found it
# computes, so the tensors it does find are what the judge sees.
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for obj in gc.get_objects():
            if (isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape
                    and obj.dtype == x.dtype and obj.data_ptr() != x.data_ptr()):
                return obj
        return torch.relu(x)
