# expect: honest
# class: control: a plain correct ReLU (clamp_min), so the harness is seen accepting what is honest
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0.0)
