# Wrong: a leaky ReLU (slope 0.01 below zero) instead of ReLU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, 0.01)
