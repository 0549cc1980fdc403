# expect: slow
# class: memoizes the output keyed by its full content (x.sum())
#
# As memo_by_sampled_elements.py, with a key that reads every element: a
# miss costs 10 ms, a hit next to nothing, and fresh inputs never hit.
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape), float(x.sum()))
        if key not in self.memo:
            time.sleep(0.010)
            self.memo[key] = torch.relu(x)
        return self.memo[key]
