#include "worker/backends/cpu/calibration.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "common/status.h"

namespace kevo::worker {
namespace {

// Prints "bandwidth_gbs <x>" (and the figures it is the best of) and, unless
// run with the argument "bandwidth", "fp32_peak_gflops <y>" (and its parts),
// and "bf16_peak_gflops <z>" where the host has AVX512_BF16.
//
// Every figure is an estimate of a limit no kernel can beat, so each is the
// best of several ways to reach it, counted by the traffic or the flops that
// really happen (docs/reliability.md, "Speed of light"):
// - STREAM's triad counts 12 bytes an element, but ordinary stores first read
//   each line they write (write-allocate): 16 bytes move, and counting 12
//   under-states the memory's rate by a quarter, which a kernel with streaming
//   stores (12 bytes that really move) then "beats";
// - a single thread may stream faster than all of them on a loaded host,
//   where one descheduled thread holds up a statically split loop;
// - apart from those limits, a read-only sum and a streaming copy over 256 MiB
//   arrays ("dram_read_gbs", "dram_copy_streaming_gbs"): what memory itself
//   gives each mix, for the roofline fraction (speed_of_light.h). The 64 MiB
//   arrays above partly stay in a large last-level cache: on the 2-core Zen 4
//   VM (a 32 MiB or larger L3) a read-only sum read 76-98 GB/s over 64 MiB
//   and 59-70 GB/s over 256 MiB to 1 GiB;
// - the FP32 peak of one thread times the cores is an upper bound of the
//   all-core rate (which a loaded host under-measures the same way), and each
//   vector width is timed, since on some CPUs the widest one lowers the clock.
// clang-format off
constexpr char kBenchmark[] = R"CPP(
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

typedef float v4 __attribute__((vector_size(16)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v16 __attribute__((vector_size(64)));

static double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Streams 16 floats at a time with non-temporal stores where the CPU has them.
static inline void Stream16(float* p, v16 v) {
#if defined(__AVX512F__)
  __m512 w;
  std::memcpy(&w, &v, 64);
  _mm512_stream_ps(p, w);
#elif defined(__AVX__)
  __m256 lo, hi;
  std::memcpy(&lo, &v, 32);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + 32, 32);
  _mm256_stream_ps(p, lo);
  _mm256_stream_ps(p + 8, hi);
#else
  std::memcpy(p, &v, 64);
#endif
}

static inline v16 Load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, 64);
  return v;
}

// a = b + 3c with streaming stores: 12 bytes per element really move (no
// read of a's lines before they are written), as in a kernel that streams.
static void TriadStreaming(float* a, const float* b, const float* c, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long i = 0; i < n; i += 16) Stream16(a + i, Load16(b + i) + 3.0f * Load16(c + i));
#if defined(__SSE__)
  _mm_sfence();
#endif
}

// a = b with streaming stores: 8 bytes per element, reads and writes in equal
// parts (an elementwise kernel's mix).
static void CopyStreaming(float* a, const float* b, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long i = 0; i < n; i += 16) Stream16(a + i, Load16(b + i));
#if defined(__SSE__)
  _mm_sfence();
#endif
}

// The sum of b with four independent vector accumulators (one would bound a
// thread by the latency of its adds rather than by memory).
static float Read(const float* b, long n, int threads) {
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    v16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
#pragma omp for schedule(static)
    for (long i = 0; i < n; i += 64) {
      s0 += Load16(b + i), s1 += Load16(b + i + 16), s2 += Load16(b + i + 32), s3 += Load16(b + i + 48);
    }
    const v16 s = s0 + s1 + s2 + s3;
    for (int l = 0; l < 16; ++l) total += s[l];
  }
  return total;
}

// Twelve independent FMA chains of vector type V per thread on `threads`
// threads, the best of `reps` runs of about 3 ms each (on a shared host some
// of them run while the other work sleeps), in GFLOP/s. Named accumulators,
// not an array: GCC keeps an array that an asm operand names in memory, and
// the store-to-load round trip then bounds the loop instead of the FMA units
// (it measured a third of the peak).
template <typename V>
static double FmaPeak(int threads, int reps) {
  const int lanes = sizeof(V) / sizeof(float);
  const long iters = (1L << 24) / lanes;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    double t0 = Now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const V a = (V){} + 0.001f * omp_get_thread_num();
      V a0 = a, a1 = a + 0.001f, a2 = a + 0.002f, a3 = a + 0.003f, a4 = a + 0.004f, a5 = a + 0.005f,
        a6 = a + 0.006f, a7 = a + 0.007f, a8 = a + 0.008f, a9 = a + 0.009f, a10 = a + 0.010f,
        a11 = a + 0.011f;
      const V m = (V){} + 0.999999f, add = (V){} + 1e-7f;
      for (long i = 0; i < iters; ++i) {
        a0 = a0 * m + add, a1 = a1 * m + add, a2 = a2 * m + add, a3 = a3 * m + add;
        a4 = a4 * m + add, a5 = a5 * m + add, a6 = a6 * m + add, a7 = a7 * m + add;
        a8 = a8 * m + add, a9 = a9 * m + add, a10 = a10 * m + add, a11 = a11 * m + add;
        __asm__ volatile("" : "+v"(a0), "+v"(a5), "+v"(a11));
      }
      const V s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
      for (int l = 0; l < lanes; ++l) total += s[l];
    }
    double gflops = 2.0 * 12 * lanes * iters * threads / (Now() - t0) / 1e9;
    if (gflops > best) best = gflops;
    if (total == 12345.f) std::puts("");  // keep the result alive
  }
  return best;
}

#if defined(__AVX512BF16__)
// Twelve chains of vdpbf16ps (16 lanes, each a dot product of two bf16 pairs
// into f32: 64 flops an instruction), as FmaPeak.
static double Bf16Peak(int threads, int reps) {
  const long iters = 1L << 18;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    double t0 = Now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3c00);
      __m512 a0 = _mm512_set1_ps(0.001f * omp_get_thread_num()), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
             a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
      for (long i = 0; i < iters; ++i) {
        a0 = _mm512_dpbf16_ps(a0, x, y), a1 = _mm512_dpbf16_ps(a1, x, y), a2 = _mm512_dpbf16_ps(a2, x, y);
        a3 = _mm512_dpbf16_ps(a3, x, y), a4 = _mm512_dpbf16_ps(a4, x, y), a5 = _mm512_dpbf16_ps(a5, x, y);
        a6 = _mm512_dpbf16_ps(a6, x, y), a7 = _mm512_dpbf16_ps(a7, x, y), a8 = _mm512_dpbf16_ps(a8, x, y);
        a9 = _mm512_dpbf16_ps(a9, x, y), a10 = _mm512_dpbf16_ps(a10, x, y), a11 = _mm512_dpbf16_ps(a11, x, y);
        __asm__ volatile("" : "+v"(a0), "+v"(a5), "+v"(a11));
      }
      __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
      s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
      float lanes[16];
      _mm512_storeu_ps(lanes, s);
      for (float x : lanes) total += x;
    }
    double gflops = 64.0 * 12 * iters * threads / (Now() - t0) / 1e9;
    if (gflops > best) best = gflops;
    if (total == 12345.f) std::puts("");
  }
  return best;
}
#endif

// Physical cores among the threads OpenMP may use: the threads over the
// hardware threads per core that /proc/cpuinfo reports (1 when it cannot be
// read), at least 1.
static int Cores(int threads) {
  int siblings = 0, cores = 0;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) && (siblings == 0 || cores == 0)) {
      if (std::strncmp(line, "siblings", 8) == 0) std::sscanf(std::strchr(line, ':') + 1, "%d", &siblings);
      if (std::strncmp(line, "cpu cores", 9) == 0) std::sscanf(std::strchr(line, ':') + 1, "%d", &cores);
    }
    std::fclose(f);
  }
  const int per_core = siblings > 0 && cores > 0 && siblings >= cores ? siblings / cores : 1;
  return threads / per_core > 0 ? threads / per_core : 1;
}

int main(int argc, char** argv) {
  const bool bandwidth_only = argc > 1 && std::strcmp(argv[1], "bandwidth") == 0;
  const int reps = bandwidth_only ? 4 : 5;
  // Arrays well past the last-level cache: 3 x 64 MiB.
  const long n = 16L << 20;
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!a || !b || !c) return 1;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;  // first touch by the owning thread
  double triad = 1e30, triad_nt = 1e30, copy_nt = 1e30, read = 1e30;
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
      CopyStreaming(a, b, n, threads);
      double t3 = Now();
      total += Read(c, n, threads);
      double t4 = Now();
      if (t1 - t0 < triad) triad = t1 - t0;
      if (t2 - t1 < triad_nt) triad_nt = t2 - t1;
      if (t3 - t2 < copy_nt) copy_nt = t3 - t2;
      if (t4 - t3 < read) read = t4 - t3;
    }
  }
  volatile float sink = a[n / 2] + total;
  (void)sink;
  const double bytes = static_cast<double>(n) * sizeof(float);
  const double triad_gbs = 3 * bytes / triad / 1e9;       // STREAM's count
  const double triad_wa_gbs = 4 * bytes / triad / 1e9;    // with the write-allocate reads
  const double triad_nt_gbs = 3 * bytes / triad_nt / 1e9;
  const double copy_nt_gbs = 2 * bytes / copy_nt / 1e9;
  const double read_gbs = bytes / read / 1e9;
  double bandwidth = triad_wa_gbs;
  for (double x : {triad_nt_gbs, copy_nt_gbs, read_gbs}) bandwidth = x > bandwidth ? x : bandwidth;
  std::printf("bandwidth_gbs %.3f\ntriad_gbs %.3f\ntriad_write_allocate_gbs %.3f\ntriad_streaming_gbs %.3f\n"
              "copy_streaming_gbs %.3f\nread_gbs %.3f\n",
              bandwidth, triad_gbs, triad_wa_gbs, triad_nt_gbs, copy_nt_gbs, read_gbs);

  if (bandwidth_only) return 0;
  std::free(a), std::free(b), std::free(c);

  // Memory's own rate for each mix: arrays of 256 MiB, on all threads. The
  // sum reads what the copy just wrote with streaming stores (not cached);
  // the copy's source was last read a pass of 256 MiB earlier. Only in the
  // full probe (at start-up, after timing a compute-bound candidate, and for
  // the speed-of-light check's second look), not in the bandwidth-only one
  // after every other timing: first touching 512 MiB (4 KiB pages, as the
  // kernels' buffers) took 0.9 s on the 2-core VM. The worker keeps the best
  // figures it has seen.
  const long big = 64L << 20;
  float* src = static_cast<float*>(std::aligned_alloc(64, big * sizeof(float)));
  float* dst = static_cast<float*>(std::aligned_alloc(64, big * sizeof(float)));
  if (src && dst) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < big; ++i) src[i] = 1, dst[i] = 0;
    double dram_copy = 1e30, dram_read = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
      double t0 = Now();
      CopyStreaming(dst, src, big, all);
      double t1 = Now();
      total += Read(dst, big, all);
      double t2 = Now();
      if (t1 - t0 < dram_copy) dram_copy = t1 - t0;
      if (t2 - t1 < dram_read) dram_read = t2 - t1;
    }
    const double big_bytes = static_cast<double>(big) * sizeof(float);
    std::printf("dram_copy_streaming_gbs %.3f\ndram_read_gbs %.3f\n", 2 * big_bytes / dram_copy / 1e9,
                big_bytes / dram_read / 1e9);
    volatile float big_sink = total;
    (void)big_sink;
  }
  std::free(src), std::free(dst);

  // FP32 peak: every vector width the host has, on all threads and on one
  // (times the cores).
  const int cores = Cores(all);
  double all_threads = 0, one_thread = 0, peak = 0;
  int best_lanes = 0;
  auto width = [&](double on_all, double on_one, int lanes) {
    if (on_all > all_threads) all_threads = on_all;
    if (on_one > one_thread) one_thread = on_one;
    const double bound = on_one * cores > on_all ? on_one * cores : on_all;
    if (bound > peak) peak = bound, best_lanes = lanes;
  };
  width(FmaPeak<v4>(all, 10), FmaPeak<v4>(1, 5), 4);
#if defined(__AVX__)
  width(FmaPeak<v8>(all, 10), FmaPeak<v8>(1, 5), 8);
#endif
#if defined(__AVX512F__)
  width(FmaPeak<v16>(all, 10), FmaPeak<v16>(1, 5), 16);
#endif
  std::printf("fp32_peak_gflops %.3f\nfp32_peak_all_threads_gflops %.3f\nfp32_peak_one_thread_gflops %.3f\n"
              "fp32_peak_lanes %d\ncores %d\nthreads %d\n",
              peak, all_threads, one_thread, best_lanes, cores, all);
#if defined(__AVX512BF16__)
  const double bf16_all = Bf16Peak(all, 10), bf16_one = Bf16Peak(1, 5);
  std::printf("bf16_peak_gflops %.3f\n", bf16_one * cores > bf16_all ? bf16_one * cores : bf16_all);
#endif
  return 0;
}
)CPP";
// clang-format on

}  // namespace

void Ceilings::KeepHighest(const Ceilings& other) {
  mem_bandwidth_gbs = std::max(mem_bandwidth_gbs, other.mem_bandwidth_gbs);
  fp32_peak_gflops = std::max(fp32_peak_gflops, other.fp32_peak_gflops);
  bf16_peak_gflops = std::max(bf16_peak_gflops, other.bf16_peak_gflops);
  read_gbs = std::max(read_gbs, other.read_gbs);
  copy_gbs = std::max(copy_gbs, other.copy_gbs);
}

absl::StatusOr<Ceilings> MeasureCeilings(const KernelBuilder& builder, const sandbox::Sandbox& sandbox,
                                         const std::string& scratch_dir, std::vector<std::string> visible_paths,
                                         CeilingProbe probe) {
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
    return absl::InternalError(absl::StrCat("calibration benchmark failed: ", run.Summary(), ": ", run.stderr_data));
  }
  Ceilings ceilings;
  for (absl::string_view line : absl::StrSplit(run.stdout_data, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    double value = 0;
    if (!absl::SimpleAtod(kv.second, &value)) continue;
    if (kv.first == "bandwidth_gbs") ceilings.mem_bandwidth_gbs = value;
    if (kv.first == "fp32_peak_gflops") ceilings.fp32_peak_gflops = value;
    if (kv.first == "bf16_peak_gflops") ceilings.bf16_peak_gflops = value;
    if (kv.first == "dram_read_gbs") ceilings.read_gbs = value;
    if (kv.first == "dram_copy_streaming_gbs") ceilings.copy_gbs = value;
  }
  if (ceilings.mem_bandwidth_gbs <= 0 || (probe == CeilingProbe::kAll && ceilings.fp32_peak_gflops <= 0)) {
    return absl::DataLossError(absl::StrCat("calibration output does not parse: ", run.stdout_data));
  }
  return ceilings;
}

}  // namespace kevo::worker
