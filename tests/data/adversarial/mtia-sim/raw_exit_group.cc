// tries: exit_group(0) through the syscall instruction at the timed size, from inside the kernel (validation passes first), importing no symbol
// expect: RUNTIME_ERROR
// message: the profiler ended without writing its results
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    if (n == 16777216) {
      long ret;
      __asm__ volatile("syscall" : "=a"(ret) : "0"(231L /* exit_group */), "D"(0L) : "rcx", "r11", "memory");
    }
    const Buffer a = pe.Alloc(8192), b = pe.Alloc(8192);
    for (int64_t i = 2048 * pe.id(); i < n; i += 2048 * pe.config().num_pes()) {
      const uint64_t at = 4 * i, bytes = 4 * std::min<int64_t>(2048, n - i);
      const Tile ta = Tile::Of(a, DType::kF32, 1, bytes / 4), tb = Tile::Of(b, DType::kF32, 1, bytes / 4);
      pe.Copy(a, x.Slice(at, bytes)), pe.Copy(b, y.Slice(at, bytes));
      pe.Binary(BinaryOp::kAdd, ta, ta, tb);
      pe.Copy(z.Slice(at, bytes), a.Slice(0, bytes));
    }
  });
}
