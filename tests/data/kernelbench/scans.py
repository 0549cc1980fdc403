# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/89_cumsum to 93_masked_cumsum): cumulative sums and
# products along the last dim, a reverse one, an exclusive one and a masked
# one, as KernelBench writes them, and one that only looks reverse.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x, mask):
        inclusive = torch.cumsum(x, dim=self.dim)
        product = torch.cumprod(x, dim=self.dim)
        reverse = torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)
        exclusive = torch.cat(
            (torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)),
             torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), dim=self.dim)),
            dim=self.dim)
        masked = torch.cumsum(x * mask, dim=self.dim)
        # Flipped along both dims inside, the last outside: not a reverse scan.
        mixed = torch.cumsum(x.flip(self.dim, 0), dim=self.dim).flip(self.dim)
        return inclusive, product, reverse, exclusive, masked, mixed


def get_inputs():
    # Values around 1: the products neither vanish nor grow past float32.
    # Rows of 5003: more than two tiles of the CUDA scan (512 x 4), and a tail.
    x = torch.rand(8, 5003) * 0.5 + 0.7605  # the mean of log(x) near 0
    mask = torch.randint(0, 2, x.shape).bool()
    return [x, mask]


def get_init_inputs():
    return [1]
