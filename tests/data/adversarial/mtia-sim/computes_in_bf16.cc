// tries: silently lowers precision: converts x and y to bfloat16 on the SIMD engine and adds them there in bf16
// expect: WRONG_ANSWER
// message: z[
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    const Buffer a = pe.Alloc(8192), b = pe.Alloc(8192), ha = pe.Alloc(4096), hb = pe.Alloc(4096);
    for (int64_t i = 2048 * pe.id(); i < n; i += 2048 * pe.config().num_pes()) {
      const int64_t m = std::min<int64_t>(2048, n - i);
      const Tile ta = Tile::Of(a, DType::kF32, 1, m), tb = Tile::Of(b, DType::kF32, 1, m);
      const Tile la = Tile::Of(ha, DType::kBF16, 1, m), lb = Tile::Of(hb, DType::kBF16, 1, m);
      pe.Copy(a, x.Slice(4 * i, 4 * m)), pe.Copy(b, y.Slice(4 * i, 4 * m));
      pe.Convert(la, ta, 1.0f), pe.Convert(lb, tb, 1.0f);
      pe.Binary(BinaryOp::kAdd, la, la, lb);
      pe.Convert(ta, la, 1.0f);
      pe.Copy(z.Slice(4 * i, 4 * m), a.Slice(0, 4 * m));
    }
  });
}
