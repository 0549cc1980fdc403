# expect: rejected
# class: KernelBench's result-reuse case: allocates the output uninitialised and returns it, hoping for the reference's freed result
# problem: matmul.py
# verdict: WRONG_ANSWER|NONFINITE output0
#
# The output has the reference's shape and dtype and nothing is written to
# it: it passes only where the allocator hands back a block that still
# holds the reference's result (same process, same size, just freed).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
