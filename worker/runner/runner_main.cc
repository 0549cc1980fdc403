// kevo-runner-cpu: the only process that executes candidate code on a CPU
// worker. It is started by the CPU backend inside the sandbox (rlimits,
// bubblewrap), opens every file it needs, installs its seccomp filter, and
// only then dlopens the kernels. See worker/runner/protocol.h for the
// command line and the files it writes.
//
//   run:     validation -- for each binding x seed: deterministic inputs,
//            NaN-poisoned outputs, input hashes before/after, guard bytes past
//            every buffer, and a second call on fresh buffers for determinism.
//   profile: the candidate and the baseline timed in one process, interleaved,
//            on rotating input copies larger than the last-level cache; each
//            sample's copies re-poisoned and perturbed from a secret seed,
//            and a random choice of timed calls kept for the worker's check.
//
// Built a second time with KEVO_RUNNER_MTIA as kevo-runner-mtia, the runner of
// the mtia-sim platform: a kernel .so that exports kevo_mtia_launch (the MTIA
// candidate ABI, mtia_sim/mtia.h) runs on a fresh simulated device per
// call (--mtia_config=2i|1) with the call's host tensors mapped as its DRAM;
// one exporting kevo_entry (the task's C++ reference, for golden outputs) is
// called as on the CPU. Its profile mode times nothing on the host: the
// simulated time is deterministic, so each kernel runs once and the report
// carries the simulator's counters.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "common/tensor.h"
#include "kevo/v1/task.pb.h"
#include "worker/runner/alloc_hooks.h"
#include "worker/runner/perturb.h"
#include "worker/runner/protocol.h"
#include "worker/runner/runner_io.h"
#include "worker/runner/runner_modes.h"
#include "worker/runner/seccomp_policy.h"
#ifdef KEVO_RUNNER_MTIA
#include "mtia_sim/device.h"
#endif

namespace kevo::runner {
namespace {

using EntryFn = void (*)(void**);

// Bytes written past the end of every buffer: a kernel that overruns its
// output is caught even when the write lands in mapped memory.
constexpr size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xA5;

// A 64-byte aligned tensor buffer followed by guard bytes.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    // Large buffers are 2 MiB aligned and backed by transparent huge pages:
    // page-faulting hundreds of MiB in 4 KiB pages costs seconds per run.
    const size_t align = bytes >= (size_t{4} << 20) ? (size_t{2} << 20) : 64;
    size_t total = (bytes + kGuardBytes + align - 1) / align * align;
    data_ = static_cast<unsigned char*>(aligned_alloc(align, total));
    if (data_ != nullptr && align > 64) madvise(data_, total, MADV_HUGEPAGE);
    if (data_ == nullptr) {
      // The alloc hook has recorded the failure; the task does not fit the
      // memory limit.
      Fail(kExitResourceExhausted, "bad_alloc", absl::StrCat("runner could not allocate a ", bytes, "-byte tensor"));
    }
    std::memset(data_ + bytes_, kGuardByte, total - bytes_);
    guard_end_ = total;
  }
  ~Buffer() { free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool GuardIntact() const {
    for (size_t i = bytes_; i < guard_end_; ++i) {
      if (data_[i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  size_t guard_end_ = 0;
  unsigned char* data_ = nullptr;
};

// A loaded kernel: the CPU ABI (kevo_entry) or, in kevo-runner-mtia, the MTIA
// candidate ABI (kevo_mtia_launch).
struct Kernel {
  EntryFn entry = nullptr;
#ifdef KEVO_RUNNER_MTIA
  mtia::LaunchFn launch = nullptr;
#endif
};

Kernel LoadKernel(const std::string& path) {
  void* handle = OpenKernelLibrary(path);
  Kernel k;
#ifdef KEVO_RUNNER_MTIA
  if (void* sym = dlsym(handle, mtia::kLaunchSymbol); sym != nullptr) {
    k.launch = reinterpret_cast<mtia::LaunchFn>(sym);
    return k;
  }
#endif
  void* sym = dlsym(handle, kEntrySymbol);
  if (sym == nullptr) {
#ifdef KEVO_RUNNER_MTIA
    Fail(kExitLoadFailed, "load_error",
         absl::StrCat(path, ": exports neither ", mtia::kLaunchSymbol, " nor ", kEntrySymbol));
#else
    Fail(kExitLoadFailed, "load_error", absl::StrCat(path, ": no ", kEntrySymbol));
#endif
  }
  k.entry = reinterpret_cast<EntryFn>(sym);
  return k;
}

// The tensors and argument array of one call at one binding, in host memory.
using CallFrame = CallArgs<Buffer>;

// Resolves shapes and allocates buffers (inputs unfilled, outputs unpoisoned).
CallFrame MakeFrame(const v1::Task& task, const std::vector<Param>& params, const v1::Binding& binding) {
  CallFrame f;
  AllocateCallArgs(params, binding, f);
  return f;
}

void FillInputs(CallFrame& f, uint64_t seed) {
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    FillTensor(*f.input_specs[i], f.input_shapes[i], seed, f.inputs[i]->data(), &f.symbols);
  }
}

void PoisonOutputs(CallFrame& f) {
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    PoisonTensor(f.output_specs[i]->dtype(), NumElements(f.output_shapes[i]), f.outputs[i]->data());
  }
}

std::string FirstOverflow(const CallFrame& f) {
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (!f.inputs[i]->GuardIntact()) return f.input_specs[i]->name();
  }
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    if (!f.outputs[i]->GuardIntact()) return f.output_specs[i]->name();
  }
  return "";
}

#ifdef KEVO_RUNNER_MTIA
mtia::Config g_mtia_config = mtia::Mtia2iConfig();
mtia::RunStats g_last_stats;  // of the last MTIA call

// One MTIA call on a fresh simulated device (no state survives between
// calls: no LLS contents, no statistics): the frame's tensors are mapped as
// DRAM buffers and passed as kevo::mtia::Buffer*, symbols as int64_t*.
void CallMtia(mtia::LaunchFn fn, CallFrame& f) {
  auto device = mtia::Device::Create(g_mtia_config);
  if (!device.ok()) Fail(kExitInfra, "error", device.status().ToString());
  std::vector<mtia::Buffer> buffers(f.args.size());
  std::vector<void*> args(f.args.size());
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (f.arg_bytes[i] < 0) {
      args[i] = f.args[i];
      continue;
    }
    auto b = (*device)->MapHost(f.args[i], static_cast<uint64_t>(f.arg_bytes[i]));
    if (!b.ok()) Fail(kExitInfra, "error", b.status().ToString());
    buffers[i] = *b;
    args[i] = &buffers[i];
  }
  Guarded([&] { fn(**device, args.data()); });
  if (absl::Status s = (*device)->status(); !s.ok()) {
    Fail(kExitCandidateException, "exception", absl::StrCat("the simulated kernel failed: ", s.ToString()));
  }
  // What the simulator counted, not what the kernel may have rewritten.
  absl::StatusOr<mtia::RunStats> stats = (*device)->CheckedStats();
  if (!stats.ok()) {
    Fail(kExitCandidateException, "exception", absl::StrCat("the simulated kernel failed: ", stats.status().message()));
  }
  g_last_stats = *stats;
}
#endif

// Calls a kernel on the frame's arguments.
void Call(const Kernel& k, CallFrame& f) {
#ifdef KEVO_RUNNER_MTIA
  if (k.launch != nullptr) return CallMtia(k.launch, f);
#endif
  Guarded([&] { k.entry(f.args.data()); });
  RestoreFpEnvironment();
}

// The bytes of buffer `b`, for comparing two calls' outputs.
std::string_view Bytes(const Buffer& b) { return {static_cast<const char*>(b.data()), b.bytes()}; }

int RunMode(const v1::Task& task, const Kernel& fn, const std::vector<uint64_t>& seeds, int outputs_fd, int result_fd) {
  return RunValidationCases(
      task, seeds, result_fd, [&](const std::vector<Param>& params, const v1::Binding& binding, CaseReport& report) {
        const uint64_t seed = report.seed;
        CallFrame first = MakeFrame(task, params, binding);
        FillInputs(first, seed);
        std::vector<uint64_t> hashes;
        for (const auto& in : first.inputs) hashes.push_back(HashBytes(in->data(), in->bytes()));
        PoisonOutputs(first);
        Call(fn, first);
        bool refill = false;
        for (size_t i = 0; i < first.inputs.size(); ++i) {
          if (HashBytes(first.inputs[i]->data(), first.inputs[i]->bytes()) != hashes[i]) {
            if (report.modified_input.empty()) report.modified_input = first.input_specs[i]->name();
            refill = true;
          }
        }
        report.overflowed = FirstOverflow(first);
        for (const auto& out : first.outputs) WriteAll(outputs_fd, out->data(), out->bytes());

        // Same inputs, fresh poisoned outputs: the results must match bitwise.
        CallFrame second = MakeFrame(task, params, binding);
        if (refill) {
          FillInputs(second, seed);
        } else {
          for (size_t i = 0; i < first.inputs.size(); ++i) {
            std::memcpy(second.inputs[i]->data(), first.inputs[i]->data(), first.inputs[i]->bytes());
          }
        }
        PoisonOutputs(second);
        Call(fn, second);
        for (size_t i = 0; i < first.outputs.size(); ++i) {
          NoteNondeterminism(*first.output_specs[i], Bytes(*first.outputs[i]), Bytes(*second.outputs[i]), report);
        }
        if (report.overflowed.empty()) report.overflowed = FirstOverflow(second);
      });
}

struct ProfileOptions {
  double time_cap_s = 3.0;
  int64_t mem_budget_bytes = int64_t{1} << 30;
  int64_t llc_bytes = 32 << 20;
  double target_spread = 0.01;
  // Drawn from the OS before any kernel is loaded (SeedFromOs).
  uint64_t secret_seed = 0;
};

// Fills `bytes` at `data` (64-byte aligned) with `pattern` repeated, by
// streaming stores where the CPU has them: the lines go to memory and leave
// the caches, so a timed call finds its outputs as cold as the rotation
// leaves them, not warmed by the poison.
void StreamPattern(void* data, size_t bytes, const uint64_t (&pattern)[8]) {
  auto* d = static_cast<unsigned char*>(data);
  size_t i = 0;
#if defined(__SSE2__)
  const auto* p = reinterpret_cast<const __m128i*>(pattern);
  const __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1);
  const __m128i c = _mm_loadu_si128(p + 2), e = _mm_loadu_si128(p + 3);
  for (; i + 64 <= bytes; i += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  _mm_sfence();
#endif
  for (; i < bytes; i += 64) std::memcpy(d + i, pattern, std::min<size_t>(64, bytes - i));
}

// Poisons every output of `f` with 64 random bytes repeated (a fresh pattern
// per call): unlike a constant NaN, nothing tells a kernel that an output is
// poisoned rather than its own result, so one that skips its work when the
// output "looks written" leaves garbage that the timed checks see.
void PoisonOutputsRandomly(CallFrame& f, SecretRng& rng) {
  uint64_t pattern[8];
  for (uint64_t& w : pattern) w = rng.Next();
  for (auto& out : f.outputs) StreamPattern(out->data(), out->bytes(), pattern);
}

// The elements of frame `f`'s inputs that pokes name, in its host buffers.
PokeAccess FrameAccess(CallFrame& f) {
  auto element = [&f](const Poke& p) {
    return static_cast<unsigned char*>(f.inputs[p.input]->data()) + p.index * p.bytes;
  };
  return {[element](const Poke& p) {
            uint64_t now = 0;
            std::memcpy(&now, element(p), p.bytes);
            return now;
          },
          [element](const Poke& p, uint64_t bytes) { std::memcpy(element(p), &bytes, p.bytes); }};
}

// Fills the frame's inputs from the worker's timed-inputs file, or generates
// them (seed 1) when there is none.
void ReadTimedInputs(CallFrame& f, int inputs_fd) {
  if (inputs_fd < 0) {
    FillInputs(f, /*seed=*/1);
    return;
  }
  // Inputs generated once per task by the worker (FillTensor, seed 1):
  // generating 10^7 elements here would cost seconds per evaluation.
  for (auto& in : f.inputs) ReadTimedInputBytes(inputs_fd, in->data(), in->bytes());
}

int ProfileMode(const v1::Task& task, const Kernel& candidate, const Kernel& baseline, const ProfileOptions& opts,
                int inputs_fd, int outputs_fd, int result_fd) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  ProfileReport report;
  SecretRng rng(opts.secret_seed);

  // One set of inputs and outputs, copied until the working set exceeds the
  // last-level cache (twice over), within the memory budget (less what the
  // timed checks keep aside).
  std::vector<CallFrame> frames;
  frames.push_back(MakeFrame(task, *params, task.time()));
  int64_t set_bytes = 0, out_bytes = 0;
  for (const auto& b : frames[0].inputs) set_bytes += static_cast<int64_t>(b->bytes());
  for (const auto& b : frames[0].outputs) out_bytes += static_cast<int64_t>(b->bytes());
  set_bytes = std::max<int64_t>(set_bytes + out_bytes, 1);
  const int64_t frame_budget = opts.mem_budget_bytes - kTimedChecks * out_bytes;
  // Some VMs report absurd LLC sizes; beyond 256 MiB the rotation buys nothing.
  int64_t target = 2 * std::min<int64_t>(opts.llc_bytes, int64_t{256} << 20);
  int64_t copies = std::clamp<int64_t>((target + set_bytes - 1) / set_bytes, 1, 256);
  copies = std::max<int64_t>(1, std::min(copies, frame_budget / set_bytes));
  ReadTimedInputs(frames[0], inputs_fd);
  PoisonOutputs(frames[0]);
  std::vector<uint64_t> input_hashes;
  for (const auto& in : frames[0].inputs) input_hashes.push_back(HashBytes(in->data(), in->bytes()));
  InputPerturber perturber(frames[0].input_specs, frames[0].input_shapes, frames[0].symbols, rng);
  report.perturbed_inputs = perturber.perturbed();
  report.unperturbed_inputs = perturber.left_alone();
  // pokes[f]: what frame f holds in place of the timed inputs.
  std::vector<std::vector<Poke>> pokes(1);
  auto add_frame = [&] {
    CallFrame f = MakeFrame(task, *params, task.time());
    for (size_t i = 0; i < frames[0].inputs.size(); ++i) {
      std::memcpy(f.inputs[i]->data(), frames[0].inputs[i]->data(), frames[0].inputs[i]->bytes());
    }
    std::vector<Poke> base_pokes = pokes[0];
    UndoPokes(FrameAccess(f), base_pokes, f.input_specs, /*modified=*/nullptr);
    // Page the outputs in now: first touches of huge pages can cost
    // milliseconds each (compaction), which belong to set-up, not the cap.
    PoisonOutputs(f);
    frames.push_back(std::move(f));
    pokes.emplace_back();
  };
  for (int64_t c = 1; c < copies; ++c) add_frame();
  // The outputs of the last call of each timed sample kept for the
  // worker's check (every output, in signature order), by slot.
  std::vector<KeptSample> kept = KeptSampleSlots();
  std::vector<std::unique_ptr<Buffer>> kept_outputs;
  for (size_t i = 0; i < kept.size(); ++i) {
    kept_outputs.push_back(std::make_unique<Buffer>(static_cast<size_t>(out_bytes)));
    std::memset(kept_outputs.back()->data(), 0, out_bytes);  // paged in, as the frames are
  }
  std::string modified;  // the first input found changed while timing
  // The time cap covers warm-up and sampling, not generating the inputs.
  const double start = Now();

  size_t next = 0;
  // Each sample's frames are perturbed and poisoned afresh outside the timer;
  // a sample never has more calls than there are frames.
  auto time_calls = [&](const Kernel& fn, int64_t calls) {
    for (int64_t k = 0; k < calls; ++k) {
      const size_t f = (next + static_cast<size_t>(k)) % frames.size();
      const PokeAccess access = FrameAccess(frames[f]);
      perturber.Repoke(access, access.read, frames[f].input_specs, pokes[f], &modified);
      PoisonOutputsRandomly(frames[f], rng);
    }
    double t0 = Now();
    for (int64_t k = 0; k < calls; ++k) {
      Call(fn, frames[next]);
      next = (next + 1) % frames.size();
    }
    return (Now() - t0) / static_cast<double>(calls);
  };

  // Warm-up: page in, spin up the OpenMP pool, and estimate one call.
  double t_cand = 1e9, t_base = 1e9;
  for (int i = 0; i < 3 || (Now() - start < 0.05 * opts.time_cap_s && i < 50); ++i) {
    t_cand = std::min(t_cand, time_calls(candidate, 1));
    t_base = std::min(t_base, time_calls(baseline, 1));
    if (Now() - start > 0.25 * opts.time_cap_s && i >= 2) break;
  }
  // Short kernels are timed in batches so each sample is well above the
  // clock's resolution and the loop overhead.
  constexpr double kMinSample = 200e-6;
  auto batch = [&](double t) {
    return std::clamp<int64_t>(static_cast<int64_t>(kMinSample / std::max(t, 1e-9)) + 1, 1, 100000);
  };
  // A frame used twice in one sample would hold its first call's outputs and
  // the same inputs: short kernels get more frames (small ones), as many as
  // a batch has calls where the budget allows, and batches no longer than that.
  constexpr int64_t kMaxFrames = 4096;
  const int64_t want = std::max(batch(t_cand), batch(t_base));
  const int64_t room = std::max<int64_t>(static_cast<int64_t>(frames.size()), frame_budget / set_bytes);
  while (static_cast<int64_t>(frames.size()) < std::min({want, kMaxFrames, room})) add_frame();
  const int64_t n_frames = static_cast<int64_t>(frames.size());
  report.candidate.calls_per_sample = std::min(batch(t_cand), n_frames);
  report.baseline.calls_per_sample = std::min(batch(t_base), n_frames);
  report.copies = n_frames;
  report.working_set_bytes = n_frames * set_bytes;

  // A candidate sample, and whether its last call is kept for the check:
  // reservoir sampling (Algorithm R) keeps a uniform choice of kTimedChecks
  // of all the samples taken, however many that turns out to be, and draws
  // after the calls, so nothing a call sees says whether it is checked.
  auto sample_candidate = [&] {
    report.candidate.samples_s.push_back(time_calls(candidate, report.candidate.calls_per_sample));
    const size_t last = (next + frames.size() - 1) % frames.size();
    KeptSample* k = KeepSample(kept, report, pokes[last], rng);
    if (k == nullptr) return;
    size_t offset = 0;
    for (const auto& out : frames[last].outputs) {
      std::memcpy(static_cast<unsigned char*>(kept_outputs[k->slot]->data()) + offset, out->data(), out->bytes());
      offset += out->bytes();
    }
  };
  // Alternating, so neither side always runs on a just-warmed core.
  SampleUntilStable(start, opts.time_cap_s, opts.target_spread, report, sample_candidate, [&] {
    report.baseline.samples_s.push_back(time_calls(baseline, report.baseline.calls_per_sample));
  });

  // Every frame's inputs as the timed inputs again (each poked element must
  // still hold what was written), then each compared with them: frame 0 by
  // its hash, the others byte for byte with frame 0.
  for (size_t f = 0; f < frames.size(); ++f) {
    UndoPokes(FrameAccess(frames[f]), pokes[f], frames[f].input_specs, &modified);
  }
  CallFrame& check = frames[0];
  auto first_modified = [&]() -> std::string {
    for (size_t i = 0; i < check.inputs.size(); ++i) {
      if (HashBytes(check.inputs[i]->data(), check.inputs[i]->bytes()) != input_hashes[i]) {
        return check.input_specs[i]->name();
      }
    }
    return "";
  };
  if (modified.empty()) modified = first_modified();
  for (size_t f = 1; f < frames.size() && modified.empty(); ++f) {
    for (size_t i = 0; i < check.inputs.size() && modified.empty(); ++i) {
      if (std::memcmp(frames[f].inputs[i]->data(), check.inputs[i]->data(), check.inputs[i]->bytes()) != 0) {
        modified = check.input_specs[i]->name();
      }
    }
  }
  report.modified_input = modified;

  // Check the timed binding too: both kernels once more on pristine inputs
  // (unless the candidate changed them) and fresh poisoned outputs.
  PoisonOutputs(check);
  Call(candidate, check);
  if (report.modified_input.empty()) report.modified_input = first_modified();
  for (const auto& out : check.outputs) WriteAll(outputs_fd, out->data(), out->bytes());
  PoisonOutputs(check);
  Call(baseline, check);
  for (const auto& out : check.outputs) WriteAll(outputs_fd, out->data(), out->bytes());

  // Then the checked timed samples, earliest first: the candidate's outputs
  // as the timed call left them, and the baseline's on the inputs that call
  // had (frame 0 with the same pokes), outside the timer.
  WriteTimedChecks(kept, FrameAccess(check), check.input_specs, report, [&](size_t slot) {
    PoisonOutputs(check);
    Call(baseline, check);
    WriteAll(outputs_fd, kept_outputs[slot]->data(), kept_outputs[slot]->bytes());
    for (const auto& out : check.outputs) WriteAll(outputs_fd, out->data(), out->bytes());
  });

  std::string json = ProfileToJson(report);
  WriteAll(result_fd, json.data(), json.size());
  return kExitOk;
}

#ifdef KEVO_RUNNER_MTIA
// The simulator's counters of one run, for the evaluation's profile map.
void AddCounters(const mtia::RunStats& s, const std::string& prefix, std::map<std::string, double>& out) {
  auto put = [&](const std::string& key, double v) { out[prefix + key] = v; };
  put("launches", static_cast<double>(s.launches));
  put("cycles", static_cast<double>(s.cycles));
  put("simulated_s", s.seconds);
  const std::pair<const char*, const mtia::UnitCounters*> units[] = {
      {"dma", &s.dma}, {"dpe", &s.dpe}, {"simd", &s.simd}, {"re", &s.re}, {"mlu", &s.mlu}};
  for (const auto& [name, u] : units) {
    put(absl::StrCat(name, "_ops"), static_cast<double>(u->ops));
    put(absl::StrCat(name, "_busy_cycles"), u->busy_cycles);
    put(absl::StrCat(name, "_stall_cycles"), u->stall_cycles);
  }
  put("dma_contention_cycles", s.dma_contention_cycles);
  put("wait_cycles", s.wait_cycles);
  put("barrier_cycles", s.barrier_cycles);
  put("dram_read_bytes", static_cast<double>(s.dram_read_bytes));
  put("dram_write_bytes", static_cast<double>(s.dram_write_bytes));
  put("sram_read_bytes", static_cast<double>(s.sram_read_bytes));
  put("sram_write_bytes", static_cast<double>(s.sram_write_bytes));
  put("local_bytes", static_cast<double>(s.local_bytes));
  put("neighbour_bytes", static_cast<double>(s.neighbour_bytes));
  put("broadcast_saved_bytes", static_cast<double>(s.broadcast_saved_bytes));
  put("dpe_flops", static_cast<double>(s.dpe_flops));
  put("dpe_int8_ops", static_cast<double>(s.dpe_int8_ops));
  put("simd_elements", static_cast<double>(s.simd_elements));
  put("pe_utilization", s.pe_utilization);
  put("dpe_utilization", s.dpe_utilization);
  put("dram_utilization", s.dram_utilization);
  put("sram_utilization", s.sram_utilization);
}

// Profile on the simulator: the cycle model is deterministic, so the
// candidate and the baseline each run once at the timed binding on the
// same inputs; the one "sample" is the simulated time (spread 0). Their
// outputs go to O as in ProfileMode, for the worker's check.
int SimulatedProfileMode(const v1::Task& task, const Kernel& candidate, const Kernel& baseline, int inputs_fd,
                         int outputs_fd, int result_fd) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  const double start = Now();
  ProfileReport report;
  CallFrame f = MakeFrame(task, *params, task.time());
  ReadTimedInputs(f, inputs_fd);
  std::vector<uint64_t> hashes;
  for (const auto& in : f.inputs) hashes.push_back(HashBytes(in->data(), in->bytes()));
  for (const auto& b : f.inputs) report.working_set_bytes += static_cast<int64_t>(b->bytes());
  for (const auto& b : f.outputs) report.working_set_bytes += static_cast<int64_t>(b->bytes());
  auto first_modified = [&]() -> std::string {
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      if (HashBytes(f.inputs[i]->data(), f.inputs[i]->bytes()) != hashes[i]) return f.input_specs[i]->name();
    }
    return "";
  };
  auto run_one = [&](const Kernel& k, TimingSeries& series, const std::string& prefix) {
    PoisonOutputs(f);
    g_last_stats = mtia::RunStats{};
    Call(k, f);
    series.samples_s = {g_last_stats.seconds};
    series.calls_per_sample = 1;
    Summarise(series);
    AddCounters(g_last_stats, prefix, report.counters);
    for (const auto& out : f.outputs) WriteAll(outputs_fd, out->data(), out->bytes());
  };
  run_one(candidate, report.candidate, "");
  report.modified_input = first_modified();
  run_one(baseline, report.baseline, "baseline_");
  report.copies = 1;
  report.converged = true;
  report.elapsed_s = Now() - start;
  std::string json = ProfileToJson(report);
  WriteAll(result_fd, json.data(), json.size());
  return kExitOk;
}
#endif

#ifdef KEVO_RUNNER_MTIA
constexpr char kRunnerName[] = "kevo-runner-mtia";
#else
constexpr char kRunnerName[] = "kevo-runner-cpu";
#endif

int Main(int argc, char** argv) {
  CommandLine cl = ParseCommandLine(argc, argv, kRunnerName);
  SetAllocReportFd(ReportFd());
  if (cl.mode != "run" && cl.mode != "profile") {
    Fail(kExitInfra, "error", absl::StrCat("usage: ", kRunnerName, " run|profile --task=... (see protocol.h)"));
  }
#ifdef KEVO_RUNNER_MTIA
  if (cl.Has("mtia_config")) {
    const std::string config = cl.Get("mtia_config");
    if (!mtia::ConfigForChip(config, &g_mtia_config)) {
      Fail(kExitInfra, "error", absl::StrCat("bad --mtia_config '", config, "' (", mtia::kChipNames, ")"));
    }
  }
#endif
  Require(cl, {"task", "kernel", "result", "outputs"});
  const v1::Task task = ReadTaskFile(cl.Get("task"));
  const int result_fd = OpenOut(cl.Get("result"));
  const int outputs_fd = OpenOut(cl.Get("outputs"));
  int inputs_fd = -1;
  std::vector<uint64_t> seeds;
  ProfileOptions profile;
  if (cl.mode == "run") {
    seeds = ParseSeeds(cl.Get("seeds"));
  } else {
    Require(cl, {"baseline"});
    if (cl.Has("time_cap_s") && !absl::SimpleAtod(cl.Get("time_cap_s"), &profile.time_cap_s)) {
      Fail(kExitInfra, "error", "bad --time_cap_s");
    }
    if (cl.Has("mem_budget_bytes") && !absl::SimpleAtoi(cl.Get("mem_budget_bytes"), &profile.mem_budget_bytes)) {
      Fail(kExitInfra, "error", "bad --mem_budget_bytes");
    }
    if (cl.Has("inputs")) inputs_fd = OpenIn(cl.Get("inputs"));
    profile.secret_seed = SeedFromOs();
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0) profile.llc_bytes = llc;
  }
  const std::string kernel_path = AbsoluteKernelPath(cl.Get("kernel"));
  const std::string baseline_path = cl.mode == "profile" ? AbsoluteKernelPath(cl.Get("baseline")) : "";

  // glibc installs its SIGSETXID handler lazily at the first pthread_create;
  // do that now, while rt_sigaction is still allowed (OpenMP creates threads).
  std::thread([] {}).join();

  // From here on only the seccomp policy's system calls are possible.
  if (auto s = InstallSigsysHandler(ReportFd()); !s.ok()) Fail(kExitInfra, "error", s.message());
  if (auto s = InstallRunnerFilter(); !s.ok()) Fail(kExitInfra, "error", s.message());
  Kernel kernel = LoadKernel(kernel_path);
  Kernel baseline = cl.mode == "profile" ? LoadKernel(baseline_path) : Kernel{};
  if (auto s = InstallPostLoadFilter(); !s.ok()) Fail(kExitInfra, "error", s.message());

  if (cl.mode == "run") return RunMode(task, kernel, seeds, outputs_fd, result_fd);
#ifdef KEVO_RUNNER_MTIA
  if (kernel.launch != nullptr && baseline.launch != nullptr) {
    return SimulatedProfileMode(task, kernel, baseline, inputs_fd, outputs_fd, result_fd);
  }
  if (kernel.launch != nullptr || baseline.launch != nullptr) {
    Fail(kExitInfra, "error", "profile: the candidate and the baseline must both be MTIA kernels");
  }
#endif
  return ProfileMode(task, kernel, baseline, profile, inputs_fd, outputs_fd, result_fd);
}

}  // namespace
}  // namespace kevo::runner

int main(int argc, char** argv) {
  int code = kevo::runner::Main(argc, argv);
  // Skip static destructors and atexit handlers the candidate may have
  // registered: results are already written.
  _exit(code);
}
