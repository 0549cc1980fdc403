// mtia_sim_bench: the MTIA simulator's example kernels at the sizes of the
// issue (softmax 4096x1024 on 64 PEs, a 2048^3 fp16 GEMM) and a few
// variants, on MTIA 2i, MTIA 1 and MTIA 300, with simulated cycles and time,
// % of the roofline, and the host seconds the simulation took (values
// computed, not only timed); first, each config's roofline (peaks, bandwidths,
// ridge points). Not a ctest; docs/benchmarks.md "MTIA simulator" records its
// tables.
//
//   build-d/bin/mtia_sim_bench [--quick]   (--quick skips the 2048^3 GEMMs)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "mtia_sim/device.h"
#include "mtia_sim/examples/kernels.h"
#include "mtia_sim/mtia.h"
#include "mtia_sim/numerics.h"

namespace kevo::mtia {
namespace {

struct Row {
  std::string config, kernel, bound;
  RunStats stats;
  double roofline_cycles = 0;
  double host_seconds = 0;
};

std::vector<Row> g_rows;

void Report(const Config& c, const std::string& kernel, const std::string& bound, double roofline_cycles,
            const std::function<absl::StatusOr<RunStats>(Device&)>& body) {
  auto dev = Device::Create(c);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", std::string(dev.status().message()).c_str());
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<RunStats> s = body(**dev);
  double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kernel.c_str(), std::string(s.status().message()).c_str());
    return;
  }
  g_rows.push_back(Row{c.name, kernel, bound, *s, roofline_cycles, host});
}

void Softmax(const Config& c, int64_t rows, int64_t cols, examples::SoftmaxOptions o, const std::string& name) {
  std::vector<float> x(rows * cols), y(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 100.f + static_cast<float>((i * 7919) % 1000) / 125.f - 4.f;
  const double bytes = 8.0 * rows * cols;
  Report(c, name, "DRAM", bytes / c.dram_bytes_per_cycle, [&](Device& d) -> absl::StatusOr<RunStats> {
    Buffer xb = *d.MapHost(x.data(), x.size() * 4), yb = *d.MapHost(y.data(), y.size() * 4);
    return d.Run(examples::SoftmaxF32(xb, yb, rows, cols, o));
  });
}

void Stream(const Config& c, Space space, uint64_t bytes, const std::string& name, examples::StreamOptions o = {}) {
  std::vector<float> x(bytes / 4, 1.f), y(bytes / 4);
  const double cap = space == Space::kDram ? c.dram_bytes_per_cycle : c.sram_bytes_per_cycle;
  Report(c, name, space == Space::kDram ? "DRAM" : "SRAM", 2.0 * bytes / cap,
         [&](Device& d) -> absl::StatusOr<RunStats> {
           Buffer xb, yb;
           if (space == Space::kDram) {
             xb = *d.MapHost(x.data(), bytes);
             yb = *d.MapHost(y.data(), bytes);
           } else {
             xb = *d.NewSram(bytes);
             yb = *d.NewSram(bytes);
           }
           return d.Run(examples::StreamScale(xb, yb, bytes, o));
         });
}

void Gemm(const Config& c, int64_t n, Space space, examples::GemmOptions o, const std::string& name) {
  std::vector<uint16_t> a(n * n), b(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = internal::FloatToHalf(static_cast<float>((i * 7 + 3) % 17) / 16.f - 0.5f);
    b[i] = internal::FloatToHalf(static_cast<float>((i * 5 + 1) % 13) / 12.f - 0.5f);
  }
  std::vector<float> out(n * n);
  const double flops = 2.0 * n * n * n;
  const double compute = flops / c.dpe_peak_flops_per_cycle(false);
  const double bytes = 2.0 * n * n * 2 + 4.0 * n * n;  // A, B once; C (fp32) once
  const double mem = bytes / (space == Space::kDram ? c.dram_bytes_per_cycle : c.sram_bytes_per_cycle);
  Report(c, name, compute >= mem ? "DPE" : (space == Space::kDram ? "DRAM" : "SRAM"), std::max(compute, mem),
         [&](Device& d) -> absl::StatusOr<RunStats> {
           Buffer ab, bb, cb;
           if (space == Space::kDram) {
             ab = *d.MapHost(a.data(), n * n * 2);
             bb = *d.MapHost(b.data(), n * n * 2);
             cb = *d.MapHost(out.data(), n * n * 4);
           } else {
             ab = *d.NewSram(n * n * 2);
             bb = *d.NewSram(n * n * 2);
             cb = *d.NewSram(n * n * 4);
             if (absl::Status s = d.Write(ab, a.data(), n * n * 2); !s.ok()) return s;
             if (absl::Status s = d.Write(bb, b.data(), n * n * 2); !s.ok()) return s;
           }
           return d.Run(examples::GemmF16(ab, bb, cb, n, n, n, o));
         });
}

// One row of the roofline table: the config's dense DPE peaks, its DRAM and
// SRAM bandwidths and the ridge points (FLOP per byte) against each.
void PrintRoofline(const Config& c) {
  const double f16 = c.dpe_peak_flops_per_cycle(false) * c.clock_hz;
  const double i8 = c.dpe_peak_flops_per_cycle(true) * c.clock_hz;
  const double dram = c.dram_bytes_per_cycle * c.clock_hz, sram = c.sram_bytes_per_cycle * c.clock_hz;
  std::printf("| %s | %.3f GHz | %dx%d | %llu KiB | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f |\n", c.name.c_str(),
              c.clock_hz / 1e9, c.grid_rows, c.grid_cols, static_cast<unsigned long long>(c.local_memory_bytes / 1024),
              f16 / 1e12, i8 / 1e12, dram / 1e9, sram / 1e9, f16 / dram, f16 / sram);
}

}  // namespace
}  // namespace kevo::mtia

int main(int argc, char** argv) {
  using namespace kevo::mtia;
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const Config m2 = Mtia2iConfig(), m1 = Mtia1Config(), m300 = Mtia300Config();

  examples::SoftmaxOptions naive_sm;
  naive_sm.slots = 1;
  naive_sm.wait_each_dma = true;
  Softmax(m2, 4096, 1024, {}, "softmax f32 4096x1024 (DRAM, double-buffered)");
  Softmax(m2, 4096, 1024, naive_sm, "softmax f32 4096x1024 (DRAM, wait on every DMA)");
  Stream(m2, Space::kDram, 32 << 20, "stream y=2x 32 MiB (DRAM)");
  Stream(m2, Space::kSram, 32 << 20, "stream y=2x 32 MiB (LLS)");
  if (!quick) {
    examples::GemmOptions plain, no_bcast, single;
    no_bcast.broadcast = false;
    single.slots = 1;
    Gemm(m2, 2048, Space::kSram, plain, "gemm fp16 2048^3 (LLS, broadcast, double-buffered)");
    Gemm(m2, 2048, Space::kSram, no_bcast, "gemm fp16 2048^3 (LLS, no broadcast)");
    Gemm(m2, 2048, Space::kSram, single, "gemm fp16 2048^3 (LLS, single-buffered)");
    Gemm(m2, 2048, Space::kDram, plain, "gemm fp16 2048^3 (DRAM, broadcast)");
  }
  examples::SoftmaxOptions small_tiles;  // 128 KiB of local memory: 4-row tiles
  small_tiles.tile_rows = 4;
  Softmax(m1, 4096, 1024, small_tiles, "softmax f32 4096x1024 (DRAM, double-buffered, 4-row tiles)");
  Gemm(m1, 1024, Space::kSram, {}, "gemm fp16 1024^3 (LLS, broadcast)");
  // MTIA 300: the same kernels, first as tuned for 2i, then with four slots:
  // at 6.1 TB/s and a 550-cycle latency two 16 KiB slots per PE are too few
  // bytes in flight. Its DRAM ridge is 98 FLOP/B, so the 2048^3 GEMM (512
  // FLOP/B) is compute-bound even from DRAM, where on 2i it is DRAM-bound.
  examples::SoftmaxOptions four_sm;
  four_sm.slots = 4;
  examples::StreamOptions four;
  four.slots = 4;
  Softmax(m300, 4096, 1024, {}, "softmax f32 4096x1024 (DRAM, double-buffered)");
  Softmax(m300, 4096, 1024, four_sm, "softmax f32 4096x1024 (DRAM, 4 slots)");
  Softmax(m300, 16384, 1024, four_sm, "softmax f32 16384x1024 (DRAM, 4 slots)");
  Stream(m300, Space::kDram, 32 << 20, "stream y=2x 32 MiB (DRAM)");
  Stream(m300, Space::kDram, 128 << 20, "stream y=2x 128 MiB (DRAM, 4 slots)", four);
  Stream(m300, Space::kSram, 32 << 20, "stream y=2x 32 MiB (LLS)");
  if (!quick) {
    Gemm(m300, 2048, Space::kSram, {}, "gemm fp16 2048^3 (LLS, broadcast, double-buffered)");
    Gemm(m300, 2048, Space::kDram, {}, "gemm fp16 2048^3 (DRAM, broadcast)");
  }

  std::printf("Rooflines (dense DPE peaks; 8-bit is the simulator's int8 path; ridge = fp16 peak / bandwidth):\n\n");
  std::printf(
      "| config | clock | PEs | local mem | fp16/bf16 TFLOP/s | int8 TOP/s | DRAM GB/s | SRAM GB/s | "
      "ridge DRAM FLOP/B | ridge LLS FLOP/B |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Config& c : {m2, m1, m300}) PrintRoofline(c);
  std::printf("\n");
  std::printf("| config | kernel | simulated cycles | simulated time | bound | %% of roofline | host s |\n");
  std::printf("|---|---|---:|---:|---|---:|---:|\n");
  for (const auto& r : g_rows) {
    std::printf("| %s | %s | %llu | %.1f us | %s | %.1f%% | %.2f |\n", r.config.c_str(), r.kernel.c_str(),
                static_cast<unsigned long long>(r.stats.cycles), r.stats.seconds * 1e6, r.bound.c_str(),
                100.0 * r.roofline_cycles / r.stats.cycles, r.host_seconds);
  }
  std::printf("\nCounters (sums over PEs; utilisation of the whole grid):\n\n");
  std::printf(
      "| config | kernel | DPE util | PE util | DRAM util | SRAM util | DMA busy/stall | SIMD busy/stall | "
      "RE busy | wait | contention |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : g_rows) {
    const RunStats& s = r.stats;
    std::printf("| %s | %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.3g / %.3g | %.3g / %.3g | %.3g | %.3g | %.3g |\n",
                r.config.c_str(), r.kernel.c_str(), 100 * s.dpe_utilization, 100 * s.pe_utilization,
                100 * s.dram_utilization, 100 * s.sram_utilization, s.dma.busy_cycles, s.dma.stall_cycles,
                s.simd.busy_cycles, s.simd.stall_cycles, s.re.busy_cycles, s.wait_cycles, s.dma_contention_cycles);
  }
  return 0;
}
