# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/36_RMSNorm_): x divided by the root mean square over a
# dim that is not the last, in the two forms the bridge lowers (x ** 2 over
# the channels, torch.pow over dim 0 with another eps), and over the last dim
# and with a scaled eps, which it does not lower to a column kernel.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-5):
        super(Model, self).__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        over_batch = x / torch.sqrt(torch.mean(torch.pow(x, 2), dim=0, keepdim=True) + 1e-3)
        last = x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps)
        scaled = x / rms  # fx names the divides in order: this one after the two above
        # eps added with a scale (torch.add's alpha): not the RMS norm's form.
        alpha = x / torch.sqrt(torch.add(torch.mean(x ** 2, dim=1, keepdim=True), self.eps, alpha=2.0))
        return scaled, over_batch, last, alpha


def get_inputs():
    return [torch.randn(3, 20, 7, 9)]


def get_init_inputs():
    return []
