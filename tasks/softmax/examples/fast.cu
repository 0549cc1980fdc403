// softmax, fast (CUDA): one warp per row. Rows of up to 1024 columns are read
// once into registers (16-byte loads when the row is a multiple of 4 floats),
// so x is read once and y written once: the kernel moves the compulsory
// 8 bytes per element. Max and sum are warp shuffles. Wider rows fall back to
// a block per row with an online (max, sum) pass and a second pass that
// writes y (x read twice).
#include <cuda_runtime.h>

#include <cstdint>

namespace {

// Blocks of 4 warps (4 rows). At the 80 registers a thread the row cache
// costs, an H200 SM holds 6 such blocks, so 4096 rows are 1.3 waves on 132
// SMs, as they were with 8 warps (3 blocks an SM); measured the same.
constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// kVec float4 per lane: cols % 4 == 0 and cols <= 128 * kVec.
template <int kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    SoftmaxWarpVec(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
  float4* yr = reinterpret_cast<float4*>(y + row * cols);
  const int n4 = static_cast<int>(cols / 4);
  float4 v[kVec];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int c = lane + i * 32;
    v[i] = c < n4 ? __ldg(xr + c) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
  }
  m = WarpMax(m);
  float s = 0;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    v[i].x = expf(v[i].x - m);
    v[i].y = expf(v[i].y - m);
    v[i].z = expf(v[i].z - m);
    v[i].w = expf(v[i].w - m);
    s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
  }
  const float inv = 1.0f / WarpSum(s);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int c = lane + i * 32;
    if (c < n4) yr[c] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
  }
}

// kPer floats per lane: any cols <= 32 * kPer.
template <int kPer>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    SoftmaxWarp(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float v[kPer];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = lane + i * 32;
    v[i] = c < cols ? __ldg(xr + c) : -INFINITY;
    m = fmaxf(m, v[i]);
  }
  m = WarpMax(m);
  float s = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = expf(v[i] - m);  // exp(-inf) = 0 for the padding
    s += v[i];
  }
  const float inv = 1.0f / WarpSum(s);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = lane + i * 32;
    if (c < cols) yr[c] = v[i] * inv;
  }
}

// Any width: a block per row; online max/sum, then a second pass.
__global__ void __launch_bounds__(256)
    SoftmaxBlock(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  __shared__ float sm[32], ss[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -INFINITY, s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = xr[c];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  // Combine (m, s) pairs: first within each warp, then across warps.
  for (int o = 16; o > 0; o >>= 1) {
    const float mo = __shfl_xor_sync(0xffffffffu, m, o);
    const float so = __shfl_xor_sync(0xffffffffu, s, o);
    const float mn = fmaxf(m, mo);
    s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * expf(mo - mn));
    m = mn;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  const int warps = blockDim.x / 32;
  float M = -INFINITY;
  for (int w = 0; w < warps; ++w) M = fmaxf(M, sm[w]);
  float S = 0;
  for (int w = 0; w < warps; ++w) S += sm[w] == -INFINITY ? 0.0f : ss[w] * expf(sm[w] - M);
  const float inv = 1.0f / S;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - M) * inv;
}

}  // namespace

extern "C" void softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 block(kWarpsPerBlock * 32);
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  if (cols % 4 == 0 && cols <= 1024) {
    if (cols <= 128)
      SoftmaxWarpVec<1><<<grid, block>>>(x, y, rows, cols);
    else if (cols <= 256)
      SoftmaxWarpVec<2><<<grid, block>>>(x, y, rows, cols);
    else if (cols <= 512)
      SoftmaxWarpVec<4><<<grid, block>>>(x, y, rows, cols);
    else
      SoftmaxWarpVec<8><<<grid, block>>>(x, y, rows, cols);
  } else if (cols <= 32) {
    SoftmaxWarp<1><<<grid, block>>>(x, y, rows, cols);
  } else if (cols <= 128) {
    SoftmaxWarp<4><<<grid, block>>>(x, y, rows, cols);
  } else if (cols <= 512) {
    SoftmaxWarp<16><<<grid, block>>>(x, y, rows, cols);
  } else if (cols <= 1024) {
    SoftmaxWarp<32><<<grid, block>>>(x, y, rows, cols);
  } else {
    SoftmaxBlock<<<static_cast<unsigned>(rows), 256>>>(x, y, rows, cols);
  }
}
