// MTIA baseline for gelu_tanh (the mtia-sim platform times candidates against it):
// a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle: chunks of 8192 elements (every chunk starts 32-byte
// aligned) are copied into ONE local buffer, 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))) is computed on the SIMD
// engine and copied out, and the next chunk waits for the store: no double
// buffering, no overlap.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]);
  const Buffer y = *static_cast<const Buffer*>(args[1]);
  const int64_t n = *static_cast<const int64_t*>(args[2]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    constexpr int64_t kChunk = 8192;
    const Buffer a = pe.Alloc(kChunk * 4), b = pe.Alloc(kChunk * 4);
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      const uint64_t bytes = m * 4;
      pe.Copy(a.Slice(0, bytes), x.Slice(i0 * 4, bytes));
      const Tile v = Tile::Of(a, DType::kF32, 1, m);
      const Tile t = Tile::Of(b, DType::kF32, 1, m);
      pe.Binary(BinaryOp::kMul, t, v, v);                // x^2
      pe.BinaryScalar(BinaryOp::kMul, t, t, 0.044715f);  // 0.044715 x^2
      pe.BinaryScalar(BinaryOp::kAdd, t, t, 1.0f);       // 1 + 0.044715 x^2
      pe.Binary(BinaryOp::kMul, t, t, v);                // x + 0.044715 x^3
      pe.BinaryScalar(BinaryOp::kMul, t, t, 0.7978845608f);
      pe.Unary(UnaryOp::kTanh, t, t);
      pe.BinaryScalar(BinaryOp::kAdd, t, t, 1.0f);
      pe.Binary(BinaryOp::kMul, t, t, v);
      pe.BinaryScalar(BinaryOp::kMul, v, t, 0.5f);
      pe.Wait(pe.Copy(y.Slice(i0 * 4, bytes), a.Slice(0, bytes)));
    }
  });
}
