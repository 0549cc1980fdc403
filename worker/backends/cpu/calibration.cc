#include "worker/backends/cpu/calibration.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace kevo::worker {
namespace {

// Prints "bandwidth_gbs <x>" (and the three figures it is the best of) and,
// unless run with the argument "bandwidth", "fp32_peak_gflops <y>".
constexpr char kBenchmark[] = R"CPP(
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

// The widest vector the host has: an asm "+v" operand must fit one register.
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vf __attribute__((vector_size(4 * LANES)));

static double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// a = b + 3c with streaming stores: 12 bytes per element really move (no
// read of a's lines before they are written), as in a kernel that streams.
static void TriadStreaming(float* a, const float* b, const float* c, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long i = 0; i < n; i += 16) {
#if defined(__AVX512F__)
    _mm512_stream_ps(a + i, _mm512_add_ps(_mm512_load_ps(b + i), _mm512_mul_ps(_mm512_set1_ps(3.0f), _mm512_load_ps(c + i))));
#elif defined(__AVX__)
    for (int h = 0; h < 16; h += 8) {
      _mm256_stream_ps(a + i + h, _mm256_add_ps(_mm256_load_ps(b + i + h),
                                                _mm256_mul_ps(_mm256_set1_ps(3.0f), _mm256_load_ps(c + i + h))));
    }
#else
    for (int h = 0; h < 16; ++h) a[i + h] = b[i + h] + 3.0f * c[i + h];
#endif
  }
#if defined(__SSE__)
  _mm_sfence();
#endif
}

int main(int argc, char** argv) {
  const bool bandwidth_only = argc > 1 && std::strcmp(argv[1], "bandwidth") == 0;
  const int reps = bandwidth_only ? 2 : 5;
  // Arrays well past the last-level cache: 3 x 64 MiB.
  const long n = 16L << 20;
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!a || !b || !c) return 1;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;  // first touch by the owning thread
  // The memory ceiling is the best of three ways to stream: STREAM's triad
  // (12 bytes counted per element, as STREAM counts it, though the hardware
  // also reads a's lines before writing them), the triad with streaming
  // stores, and a read-only sum (4 bytes per element); each on all cores and
  // on one (on a loaded host one thread may stream faster than several that
  // wait for each other's time slices).
  double triad = 1e30, triad_nt = 1e30, read = 1e30;
  float total = 0;
  const int all = omp_get_max_threads();
  for (int threads : {all, 1}) {
    if (threads == 1 && all == 1) break;
    for (int rep = 0; rep < reps; ++rep) {
      double t0 = Now();
#pragma omp parallel for simd schedule(static) num_threads(threads)
      for (long i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
      double t1 = Now();
      TriadStreaming(a, b, c, n, threads);
      double t2 = Now();
      float s = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : s) num_threads(threads)
      for (long i = 0; i < n; ++i) s += b[i];
      double t3 = Now();
      total += s;
      if (t1 - t0 < triad) triad = t1 - t0;
      if (t2 - t1 < triad_nt) triad_nt = t2 - t1;
      if (t3 - t2 < read) read = t3 - t2;
    }
  }
  volatile float sink = a[n / 2] + total;
  (void)sink;
  const double triad_gbs = 3.0 * n * sizeof(float) / triad / 1e9;
  const double triad_nt_gbs = 3.0 * n * sizeof(float) / triad_nt / 1e9;
  const double read_gbs = 1.0 * n * sizeof(float) / read / 1e9;
  double bandwidth = triad_gbs;
  if (triad_nt_gbs > bandwidth) bandwidth = triad_nt_gbs;
  if (read_gbs > bandwidth) bandwidth = read_gbs;
  std::printf("bandwidth_gbs %.3f\ntriad_gbs %.3f\ntriad_streaming_gbs %.3f\nread_gbs %.3f\n", bandwidth,
              triad_gbs, triad_nt_gbs, read_gbs);
  if (bandwidth_only) return 0;

  // FP32 peak: 12 independent FMA chains per thread, LANES lanes each.
  // Ten short repetitions (about 3 ms each here), the best kept: on a shared
  // host some of them run while the other work sleeps.
  const long iters = 1L << 20;
  double peak_best = 0;
  for (int rep = 0; rep < 10; ++rep) {
    double t0 = Now();
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      // Twelve named accumulators, not an array: GCC keeps an array that an asm
      // operand names in memory, and the store-to-load round trip then bounds
      // the loop instead of the FMA units (it measured a third of the peak).
      const vf a = (vf){} + 0.001f * omp_get_thread_num();
      vf a0 = a, a1 = a + 0.001f, a2 = a + 0.002f, a3 = a + 0.003f, a4 = a + 0.004f, a5 = a + 0.005f,
          a6 = a + 0.006f, a7 = a + 0.007f, a8 = a + 0.008f, a9 = a + 0.009f, a10 = a + 0.010f,
          a11 = a + 0.011f;
      const vf m = (vf){} + 0.999999f, add = (vf){} + 1e-7f;
      for (long i = 0; i < iters; ++i) {
        a0 = a0 * m + add, a1 = a1 * m + add, a2 = a2 * m + add, a3 = a3 * m + add;
        a4 = a4 * m + add, a5 = a5 * m + add, a6 = a6 * m + add, a7 = a7 * m + add;
        a8 = a8 * m + add, a9 = a9 * m + add, a10 = a10 * m + add, a11 = a11 * m + add;
        __asm__ volatile("" : "+v"(a0), "+v"(a5), "+v"(a11));
      }
      const vf acc[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};
      vf s = {};
      for (int k = 0; k < 12; ++k) s += acc[k];
      for (int l = 0; l < LANES; ++l) total += s[l];
    }
    double t = Now() - t0;
    double gflops = 2.0 * 12 * LANES * iters * omp_get_max_threads() / t / 1e9;
    if (gflops > peak_best) peak_best = gflops;
    if (total == 12345.f) std::puts("");  // keep the result alive
  }
  std::printf("fp32_peak_gflops %.3f\n", peak_best);
  return 0;
}
)CPP";

}  // namespace

absl::StatusOr<Ceilings> MeasureCeilings(const KernelBuilder& builder, const sandbox::Sandbox& sandbox,
                                         const std::string& scratch_dir,
                                         std::vector<std::string> visible_paths, CeilingProbe probe) {
  // std::aligned_alloc is C++17: g++ 12 defaults to it, clang++ 14 to C++14.
  KEVO_ASSIGN_OR_RETURN(std::string program,
                        builder.BuildProgram(kBenchmark, {"-std=c++17", "-O3", "-march=native", "-fopenmp"}));
  std::error_code ec;
  std::filesystem::create_directories(scratch_dir, ec);
  sandbox::Command cmd;
  cmd.argv = {program};
  if (probe == CeilingProbe::kBandwidth) cmd.argv.push_back("bandwidth");
  cmd.env = {"PATH=/usr/bin:/bin"};
  cmd.cwd = scratch_dir;
  cmd.writable_dirs = {scratch_dir};
  // The benchmark lives in the build cache, which may be under /tmp (private
  // inside bubblewrap): make its folder visible explicitly.
  visible_paths.push_back(std::filesystem::path(program).parent_path().string());
  cmd.visible_paths = std::move(visible_paths);
  cmd.limits.wall_timeout = absl::Seconds(60);
  cmd.limits.address_space_bytes = int64_t{2} << 30;
  KEVO_ASSIGN_OR_RETURN(sandbox::Result run, sandbox.Run(cmd));
  if (!run.Succeeded()) {
    return absl::InternalError(absl::StrCat("calibration benchmark failed: ", run.Summary(), ": ",
                                            run.stderr_data));
  }
  Ceilings ceilings;
  for (absl::string_view line : absl::StrSplit(run.stdout_data, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    double value = 0;
    if (!absl::SimpleAtod(kv.second, &value)) continue;
    if (kv.first == "bandwidth_gbs") ceilings.mem_bandwidth_gbs = value;
    if (kv.first == "fp32_peak_gflops") ceilings.fp32_peak_gflops = value;
  }
  if (ceilings.mem_bandwidth_gbs <= 0 || (probe == CeilingProbe::kAll && ceilings.fp32_peak_gflops <= 0)) {
    return absl::DataLossError(absl::StrCat("calibration output does not parse: ", run.stdout_data));
  }
  return ceilings;
}

}  // namespace kevo::worker
