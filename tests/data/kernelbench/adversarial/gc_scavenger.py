# expect: honest
# class: walks gc.get_objects() for a tensor shaped like the reference's output and returns it
# expect on a GPU: rejected
#
# Where the reference ran in the same interpreter its output is somewhere on
# the heap; returning it costs nothing. In kevo the reference runs in the
# judge's process, and while ModelNew runs the candidate's process holds no
# earlier call's output either (the serve loop drops each call's outputs
# before the next call), so on the cpu worker the walk finds nothing and it
# computes: correct, and slower than eager by the walk. Where one call runs
# ModelNew on several input sets (on a GPU, docs/kernelbench.md), what it
# finds is another set's input or output, which is wrong there.
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
