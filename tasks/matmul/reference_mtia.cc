// MTIA baseline for matmul (the mtia-sim platform times candidates against
// it): a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle. The Dot Product Engine multiplies fp16 (or bf16) only,
// so fp32 accuracy comes from the usual split: x = hi + lo with hi = fp16(x)
// and lo = fp16(x - hi), and C += Ahi*Bhi + Ahi*Blo + Alo*Bhi, accumulated
// in fp32. For each panel of 8 rows of A (8 fp32 rows start 32-byte aligned
// whatever K is) it walks K in panels of 8 rows of B, one buffer each, and
// stores the 8 rows of C before the next panel: no double buffering, no
// broadcast, small DPE tiles.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

namespace {

// hi = fp16(x), lo = fp16(x - hi); x (fp32) is clobbered, tmp is scratch.
void Split(Pe& pe, const Tile& x, const Tile& hi, const Tile& lo, const Tile& tmp) {
  pe.Convert(hi, x, 1.0f);
  pe.Convert(tmp, hi, 1.0f);
  pe.Binary(BinaryOp::kSub, x, x, tmp);
  pe.Convert(lo, x, 1.0f);
}

}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer A = *static_cast<const Buffer*>(args[0]);
  const Buffer B = *static_cast<const Buffer*>(args[1]);
  const Buffer C = *static_cast<const Buffer*>(args[2]);
  const int64_t M = *static_cast<const int64_t*>(args[3]);
  const int64_t N = *static_cast<const int64_t*>(args[4]);
  const int64_t K = *static_cast<const int64_t*>(args[5]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    constexpr int64_t kRows = 8, kDepth = 8;
    const Buffer a32 = pe.Alloc(kRows * K * 4), ah = pe.Alloc(kRows * K * 2), al = pe.Alloc(kRows * K * 2);
    const Buffer b32 = pe.Alloc(kDepth * N * 4), bh = pe.Alloc(kDepth * N * 2), bl = pe.Alloc(kDepth * N * 2);
    const Buffer c = pe.Alloc(kRows * N * 4), tmp = pe.Alloc(std::max(kRows * K, kDepth * N) * 4);
    for (int64_t i0 = 0; i0 < M; i0 += kRows) {
      const int64_t m = std::min(kRows, M - i0);
      pe.Copy(a32.Slice(0, m * K * 4), A.Slice(i0 * K * 4, m * K * 4));
      const Tile ahi = Tile::Of(ah, DType::kF16, m, K), alo = Tile::Of(al, DType::kF16, m, K);
      Split(pe, Tile::Of(a32, DType::kF32, m, K), ahi, alo, Tile::Of(tmp, DType::kF32, m, K));
      const Tile ct = Tile::Of(c, DType::kF32, m, N);
      for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
        const int64_t kk = std::min(kDepth, K - k0);
        pe.Copy(b32.Slice(0, kk * N * 4), B.Slice(k0 * N * 4, kk * N * 4));
        const Tile bhi = Tile::Of(bh, DType::kF16, kk, N), blo = Tile::Of(bl, DType::kF16, kk, N);
        Split(pe, Tile::Of(b32, DType::kF32, kk, N), bhi, blo, Tile::Of(tmp, DType::kF32, kk, N));
        const Tile a_hi = ahi.Sub(0, k0, m, kk), a_lo = alo.Sub(0, k0, m, kk);
        pe.MatMul(ct, a_hi, bhi, /*accumulate=*/k0 > 0);
        pe.MatMul(ct, a_hi, blo, /*accumulate=*/true);
        pe.MatMul(ct, a_lo, bhi, /*accumulate=*/true);
      }
      pe.Wait(pe.Copy(C.Slice(i0 * N * 4, m * N * 4), c.Slice(0, m * N * 4)));
    }
  });
}
