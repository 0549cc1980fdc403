# expect: rejected
# class: KernelBench's input-modification case: zeroes its input in place and returns what a zero input gives
# problem: matmul.py
# verdict: INPUT_MODIFIED input0
#
# With x zeroed, x @ W^T + b is the bias in every row. A harness that runs
# the reference after the candidate, on the same tensors, gets the same.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.zero_()
        return self.linear.bias.expand(x.shape[0], -1).clone()
