// Example MTIA kernels written only against mtia_sim/mtia.h, the way
// a candidate is: a tiled fp16 GEMM (broadcast reads, double buffering), a
// row softmax (DMA, RE, SIMD lookup tables) and a streaming scale kernel.
// The simulator's calibration tests and benchmark run them; the knowledge
// base points at them as samples. Each returns a Kernel to pass to
// Grid::Launch / Device::Run.
#pragma once

#include <cstdint>

#include "mtia_sim/mtia.h"

namespace kevo::mtia::examples {

struct GemmOptions {
  int64_t k_tile = 32;    // reduction depth per step
  int slots = 2;          // 2 = double buffering; 1 = load, compute, load, ...
  bool broadcast = true;  // A along PE rows, B along PE columns
};

// c (m x n, fp32) = a (m x k, fp16) * b (k x n, fp16), all row-major, on an
// R x C grid where PE (r, c) owns the (m/R) x (n/C) block of c. Needs m % R
// == 0, n % C == 0, k % k_tile == 0, and the c block, a and b tiles to fit in
// local memory (2048^3 fits MTIA 2i with k_tile 32).
Kernel GemmF16(Buffer a, Buffer b, Buffer c, int64_t m, int64_t n, int64_t k, GemmOptions options = {});

struct SoftmaxOptions {
  int64_t tile_rows = 8;  // a multiple of 8 keeps fp32 row blocks 32-byte aligned
  int slots = 2;
  bool wait_each_dma = false;  // the naive way: stall on every transfer
};

// y = softmax(x) along rows, fp32, rows x cols row-major in DRAM (or LLS).
// Each PE takes a block of rows starting on a multiple of 8.
Kernel SoftmaxF32(Buffer x, Buffer y, int64_t rows, int64_t cols, SoftmaxOptions options = {});

struct StreamOptions {
  uint64_t tile_bytes = 16 * 1024;
  int slots = 2;
  bool wait_each_dma = false;
  int active_pes = 0;  // PEs 0..active_pes-1 do the work; 0 = all
};

// y = 2 * x over `bytes` of fp32 (a multiple of 32 * PEs): every active PE
// streams a contiguous share through local memory.
Kernel StreamScale(Buffer x, Buffer y, uint64_t bytes, StreamOptions options = {});

}  // namespace kevo::mtia::examples
