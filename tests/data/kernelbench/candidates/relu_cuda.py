# Correct, for a GPU worker: ReLU as a CUDA kernel built with
# torch.utils.cpp_extension.load_inline when the module is imported (the
# KernelBench way of writing custom kernels). Needs a CUDA build of PyTorch
# and nvcc; the nvidia worker imports it on a CPU slot, ahead of the GPU.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = fmaxf(x[i], 0.0f);
  }
}

torch::Tensor relu_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "x must be a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  const int threads = 256;
  const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
  relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

_CPP = "torch::Tensor relu_cuda(torch::Tensor x);"

_ext = load_inline(name="kevo_test_relu_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["relu_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_cuda(x)
