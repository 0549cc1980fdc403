# A small DLRM-style ranking model, the example model of campaigns/demo.textproto:
# bucketized dense features, two embedding-bag tables, a bottom and a top MLP, a
# softmax over the candidate items. Written in the KernelBench layout (Model,
# get_inputs, get_init_inputs) so that scripts/model_profile.py can profile it.
# Each operator that a kevo task covers runs inside record_function("kevo:<task>"),
# which is how model_profile.py attributes the model's time to kevo's tasks.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

B = 1024          # requests per batch (the first GEMM is the matmul task's 1024^3)
DENSE = 1024      # dense features
V, D = 200000, 64  # embedding table rows and width
BAGS = 20         # indices per bag, on average
ITEMS = 1024      # candidate items scored


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.boundaries = torch.linspace(-3, 3, 1024)
        self.sum_table = nn.EmbeddingBag(V, D, mode="sum")
        self.mean_table = nn.EmbeddingBag(V, D, mode="mean")
        self.bottom = nn.Parameter(torch.randn(DENSE, DENSE) / DENSE ** 0.5)
        self.top = nn.Parameter(torch.randn(DENSE + 2 * D, ITEMS) / DENSE ** 0.5)

    def forward(self, dense, indices, offsets):
        with record_function("kevo:bucketize"):
            buckets = torch.bucketize(dense, self.boundaries).to(torch.float32) / 1024
        with record_function("kevo:matmul"):
            h = (dense + buckets) @ self.bottom
        with record_function("kevo:relu"):
            h = torch.relu(h)
        with record_function("kevo:embedding_bag_sum"):
            s = self.sum_table(indices, offsets)
        with record_function("kevo:embedding_bag_mean"):
            m = self.mean_table(indices, offsets)
        z = torch.cat([h, s, m], dim=1)
        with record_function("kevo:matmul"):
            z = z @ self.top
        with record_function("kevo:silu"):
            z = F.silu(z)
        with record_function("kevo:gelu_tanh"):
            z = F.gelu(z, approximate="tanh")
        with record_function("kevo:vector_add"):
            z = z + h
        with record_function("kevo:row_sum"):
            norm = torch.sum(z, dim=1, keepdim=True)
        with record_function("kevo:softmax"):
            return torch.softmax(z - norm / ITEMS, dim=-1)


def get_inputs():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 2 * BAGS, (B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)[:-1]])
    indices = torch.randint(0, V, (int(lengths.sum()),), generator=g)
    return [torch.randn(B, DENSE, generator=g), indices, offsets]


def get_init_inputs():
    return []
