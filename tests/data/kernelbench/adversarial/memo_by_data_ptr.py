# expect: rejected
# class: memoizes the output keyed by x.data_ptr()
# verdict: WRONG_ANSWER output0
#
# A harness that passes the same input tensor every call, or new values in
# the same buffer, gets the first call's result back for free.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = x.data_ptr()
        if key not in self.memo:
            self.memo[key] = torch.relu(x)
        return self.memo[key]
