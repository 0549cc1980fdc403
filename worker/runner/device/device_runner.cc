#include "worker/runner/device/device_runner.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include <nlohmann/json.hpp>

#include "common/tensor.h"
#include "worker/runner/perturb.h"
#include "worker/runner/runner_io.h"
#include "worker/runner/runner_modes.h"
#include "worker/runner/seccomp_policy.h"

namespace kevo::runner::device {
namespace {

using EntryFn = void (*)(void**);

Runtime* g_rt = nullptr;
// Once candidate (or baseline) code has run, a runtime error is its fault.
bool g_foreign_code_ran = false;

[[noreturn]] void DeviceFault(Error e, absl::string_view where) {
  Fail(kExitDeviceFault, "device_error", absl::StrCat(g_rt->ErrorText(e), " (", std::string(where), ")"));
}

// Guard bytes on both sides of every device buffer (and in the slack up to
// the next 256 bytes): a kernel that writes out of bounds by a little lands
// in them and is reported; one that writes far out of bounds usually hits
// unmapped memory, an illegal address, which ends the runner.
constexpr size_t kGuardBytes = 4096;
constexpr unsigned char kGuardByte = 0xA5;

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes), padded_((bytes + 255) / 256 * 256) {
    void* base = nullptr;
    Check(g_rt->Malloc(&base, padded_ + 2 * kGuardBytes), absl::StrCat(g_rt->ApiPrefix(), "Malloc(", bytes, ")"));
    base_ = static_cast<unsigned char*>(base);
    Check(g_rt->Memset(base_, kGuardByte, kGuardBytes), "guard set-up");
    Check(g_rt->Memset(base_ + kGuardBytes + bytes_, kGuardByte, padded_ - bytes_ + kGuardBytes), "guard set-up");
  }
  ~DeviceBuffer() { g_rt->Free(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return base_ + kGuardBytes; }
  size_t bytes() const { return bytes_; }
  // "" when both guards are intact, else "before" or "after".
  std::string GuardDamage() const {
    std::vector<unsigned char> front(kGuardBytes), back(padded_ - bytes_ + kGuardBytes);
    Check(g_rt->CopyToHost(front.data(), base_, front.size()), "guard check");
    Check(g_rt->CopyToHost(back.data(), base_ + kGuardBytes + bytes_, back.size()), "guard check");
    auto intact = [](const std::vector<unsigned char>& v) {
      return std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == kGuardByte; });
    };
    if (!intact(front)) return "before";
    if (!intact(back)) return "after";
    return "";
  }
  std::string Download() const {
    std::string out(bytes_, '\0');
    if (bytes_ > 0) Check(g_rt->CopyToHost(out.data(), base_ + kGuardBytes, bytes_), "download");
    return out;
  }
  void Upload(const std::string& host) {
    if (bytes_ > 0) Check(g_rt->CopyToDevice(data(), host.data(), bytes_), "upload");
  }

 private:
  size_t bytes_;
  size_t padded_;
  unsigned char* base_ = nullptr;
};

// The device tensors and argument array of one call at one binding, plus the
// host copy of the inputs that were uploaded.
struct Frame : CallArgs<DeviceBuffer> {
  std::vector<std::string> host_inputs;
  std::vector<uint64_t> input_hashes;
};

Frame MakeFrame(const std::vector<Param>& params, const v1::Binding& binding) {
  Frame f;
  AllocateCallArgs(params, binding, f);
  return f;
}

// Sets the host inputs (generated or given), uploads them and remembers
// their hashes.
void SetInputs(Frame& f, std::vector<std::string> host) {
  f.host_inputs = std::move(host);
  f.input_hashes.clear();
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    f.inputs[i]->Upload(f.host_inputs[i]);
    f.input_hashes.push_back(HashBytes(f.host_inputs[i].data(), f.host_inputs[i].size()));
  }
}

std::vector<std::string> GenerateInputs(const Frame& f, uint64_t seed) {
  std::vector<std::string> host(f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    host[i].resize(f.inputs[i]->bytes());
    FillTensor(*f.input_specs[i], f.input_shapes[i], seed, host[i].data(), &f.symbols);
  }
  return host;
}

// NaN in every float output (0xFF bytes), a 0x5A pattern in integer ones.
void PoisonOutputs(Frame& f) {
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const int byte = IsFloat(f.output_specs[i]->dtype()) ? 0xFF : 0x5A;
    Check(g_rt->Memset(f.outputs[i]->data(), byte, f.outputs[i]->bytes()), "poisoning the outputs");
  }
}

// The first input whose device contents no longer hash as uploaded.
std::string FirstModifiedInput(const Frame& f) {
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    std::string now = f.inputs[i]->Download();
    if (HashBytes(now.data(), now.size()) != f.input_hashes[i]) return f.input_specs[i]->name();
  }
  return "";
}

std::string FirstOverflow(const Frame& f) {
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (!f.inputs[i]->GuardDamage().empty()) return f.input_specs[i]->name();
  }
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    if (!f.outputs[i]->GuardDamage().empty()) return f.output_specs[i]->name();
  }
  return "";
}

// Every output of `f`, downloaded and written to `fd` in signature order.
void WriteOutputs(int fd, const Frame& f) {
  for (const auto& out : f.outputs) {
    const std::string data = out->Download();
    WriteAll(fd, data.data(), data.size());
  }
}

void CallForeign(const Kernel& fn, void** args) {
  g_foreign_code_ran = true;
  Guarded([&] { fn(args); });
}

// Work a candidate may leave behind when it returns: the non-blocking
// streams it created (the default stream does not wait for them), and events
// recorded on such streams when it destroyed them (a destroyed stream's work
// still runs). Filled by the interposed stream calls (runtime_shim.h).
struct EscapeTracker {
  std::mutex mu;
  std::vector<void*> streams;
  std::vector<void*> orphans;
};
EscapeTracker& Tracker() {
  static auto* t = new EscapeTracker();
  return *t;
}

// True when any tracked stream or orphan event still has work; finished
// orphans are dropped.
bool AnyTrackedWorkPending() {
  EscapeTracker& t = Tracker();
  std::lock_guard<std::mutex> l(t.mu);
  bool pending = false;
  for (void* s : t.streams) {
    const Error e = g_rt->StreamQuery(s);
    if (g_rt->IsNotReady(e))
      pending = true;
    else if (e != 0)
      DeviceFault(e, "on a stream the candidate created");
  }
  for (auto it = t.orphans.begin(); it != t.orphans.end();) {
    const Error e = g_rt->EventQuery(*it);
    if (g_rt->IsNotReady(e)) {
      pending = true;
      ++it;
    } else if (e != 0) {
      DeviceFault(e, "on a stream the candidate destroyed");
    } else {
      g_rt->EventDestroy(*it);
      it = t.orphans.erase(it);
    }
  }
  return pending;
}

// Called right after a candidate (or baseline) call returned, with
// `default_done` recorded on the default stream after it: everything a
// caller on that stream would wait for. If work on a non-blocking stream is
// still running once `default_done` has completed, the call returned before
// its outputs were ready: ends the runner with kExitUnfinishedWork. (Work on
// a non-blocking stream that the default stream waits for, through an
// event, is finished by then and passes.)
void CheckNothingEscaped(void* default_done, absl::string_view where) {
  if (!AnyTrackedWorkPending()) return;
  const Error e = g_rt->EventSynchronize(default_done);
  if (e != 0) DeviceFault(e, where);
  if (!AnyTrackedWorkPending()) return;
  const std::string api = g_rt->ApiPrefix();
  Fail(kExitUnfinishedWork, "unfinished",
       absl::StrCat("the call returned (", std::string(where), ") while kernels it launched on a ", api,
                    "StreamNonBlocking stream were still running, unordered with the "
                    "caller's (default) stream: its outputs were not ready when it returned; "
                    "synchronise that stream, or make the default stream wait for it (",
                    api, "StreamWaitEvent), before returning"));
}

// An event on the default stream for CheckNothingEscaped.
void* DefaultDoneEvent() {
  static void* e = [] {
    void* ev = nullptr;
    Check(g_rt->EventCreate(&ev, /*timing=*/false), "creating an event");
    return ev;
  }();
  return e;
}

// One call, then the whole device synchronised: errors of launches the
// candidate did not check, and faults of kernels still running when it
// returned (on any stream), end the runner here; so does work still running
// on a non-blocking stream after the default stream's (CheckNothingEscaped).
void CallAndSync(const Kernel& fn, void** args) {
  Check(g_rt->Synchronize(), "before the call");
  CallForeign(fn, args);
  const Error launch = g_rt->TakeLastError();
  if (launch != 0) DeviceFault(launch, "a kernel launch failed");
  Check(g_rt->EventRecord(DefaultDoneEvent(), nullptr), "recording an event");
  CheckNothingEscaped(DefaultDoneEvent(), "validation call");
  const Error sync = g_rt->Synchronize();
  if (sync != 0) DeviceFault(sync, "while the kernels ran");
}

Kernel LoadKernel(const std::string& path) {
  void* handle = OpenKernelLibrary(path);
  void* sym = dlsym(handle, kEntrySymbol);
  if (sym == nullptr) Fail(kExitLoadFailed, "load_error", absl::StrCat(path, ": no ", kEntrySymbol));
  EntryFn fn = reinterpret_cast<EntryFn>(sym);
  return [fn](void** args) { fn(args); };
}

int RunMode(const v1::Task& task, const Kernel& fn, const std::vector<uint64_t>& seeds, int outputs_fd, int result_fd) {
  return RunValidationCases(
      task, seeds, result_fd, [&](const std::vector<Param>& params, const v1::Binding& binding, CaseReport& report) {
        Frame first = MakeFrame(params, binding);
        SetInputs(first, GenerateInputs(first, report.seed));
        PoisonOutputs(first);
        CallAndSync(fn, first.args.data());
        report.modified_input = FirstModifiedInput(first);
        report.overflowed = FirstOverflow(first);
        std::vector<std::string> first_out;
        for (const auto& out : first.outputs) {
          first_out.push_back(out->Download());
          WriteAll(outputs_fd, first_out.back().data(), first_out.back().size());
        }
        // Same inputs (the pristine host copy), fresh poisoned buffers: the
        // results must match bitwise. `first` stays allocated, so the second
        // call gets other addresses.
        Frame second = MakeFrame(params, binding);
        SetInputs(second, first.host_inputs);
        PoisonOutputs(second);
        CallAndSync(fn, second.args.data());
        for (size_t i = 0; i < second.outputs.size() && report.nondet_output.empty(); ++i) {
          NoteNondeterminism(*second.output_specs[i], first_out[i], second.outputs[i]->Download(), report);
        }
        if (report.overflowed.empty()) report.overflowed = FirstOverflow(second);
      });
}

struct ProfileOptions {
  double time_cap_s = 3.0;
  double target_spread = 0.01;
  // An honest call is over when its stop event is; a device-wide
  // synchronisation that still waits longer than this (and 20% of the event
  // time) after it means work escaped to a stream the events do not order.
  double escape_threshold_s = 20e-6;
  // Drawn from the OS before any kernel is loaded (SeedFromOs).
  uint64_t secret_seed = 0;
};

// Times one call cold: outputs re-poisoned (a kernel cannot skip work whose
// result is still there from the previous sample) and L2 flushed by reading
// a buffer twice its size, both before the start event. Reading, not
// writing: a memset flush leaves L2 full of dirty lines, and the timed
// kernel would pay for writing someone else's data back to memory.
class Sampler {
 public:
  Sampler(size_t flush_bytes, const ProfileOptions& opts) : flush_bytes_(flush_bytes), opts_(opts) {
    Check(g_rt->Malloc(&flush_, flush_bytes_), "allocating the L2 flush buffer");
    Check(g_rt->Memset(flush_, 0, flush_bytes_), "clearing the L2 flush buffer");
    void* sink = nullptr;
    Check(g_rt->Malloc(&sink, sizeof(float)), "allocating the L2 flush sink");
    sink_ = static_cast<float*>(sink);
    Check(g_rt->EventCreate(&start_, /*timing=*/true), "creating an event");
    Check(g_rt->EventCreate(&stop_, /*timing=*/true), "creating an event");
  }

  // Seconds for one call; `escaped` counts samples timed on the host clock.
  double Sample(const Kernel& fn, Frame& f, int64_t& escaped) {
    PoisonOutputs(f);
    Check(g_rt->Synchronize(), "before a sample");
    // The flush is not waited for: while it runs, the start event and the
    // candidate's launches queue up behind it, so the start event fires when
    // the flush ends and the candidate's first kernel follows at once. The
    // events then time the GPU's work, not the host's launch latency (about
    // 5 us on an H200, as long as a small kernel itself). Host work the
    // candidate does before launching is still counted once the flush is
    // over: the GPU idles, between the events, until the launch arrives.
    Check(g_rt->FlushL2(flush_, flush_bytes_, sink_), "L2 flush");
    const double t0 = Now();
    Check(g_rt->EventRecord(start_, nullptr), "recording an event");
    CallForeign(fn, f.args.data());
    const Error launch = g_rt->TakeLastError();
    if (launch != 0) DeviceFault(launch, "a kernel launch failed while timing");
    Check(g_rt->EventRecord(stop_, nullptr), "recording an event");
    CheckNothingEscaped(stop_, "timed call");
    Check(g_rt->EventSynchronize(stop_), "while timing");
    const double t_stop = Now();
    Check(g_rt->Synchronize(), "while timing");
    const double t_end = Now();
    float ms = 0;
    Check(g_rt->EventElapsedMs(&ms, start_, stop_), "reading the events' elapsed time");
    const double event_s = ms * 1e-3;
    if (t_end - t_stop > std::max(opts_.escape_threshold_s, 0.2 * event_s)) {
      ++escaped;
      return std::max(event_s, t_end - t0);
    }
    return event_s;
  }

  size_t flush_bytes() const { return flush_bytes_; }

 private:
  void* flush_ = nullptr;
  float* sink_ = nullptr;
  size_t flush_bytes_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  ProfileOptions opts_;
};

// The elements of frame `f`'s inputs that pokes name, on the device: one
// small copy per poke each way, outside the timer.
PokeAccess DeviceAccess(Frame& f) {
  auto element = [&f](const Poke& p) {
    return static_cast<unsigned char*>(f.inputs[p.input]->data()) + p.index * p.bytes;
  };
  return {[element](const Poke& p) {
            uint64_t now = 0;
            Check(g_rt->CopyToHost(&now, element(p), p.bytes), "reading a perturbed input element");
            return now;
          },
          [element](const Poke& p, uint64_t bytes) {
            Check(g_rt->CopyToDevice(element(p), &bytes, p.bytes), "perturbing an input element");
          }};
}

int ProfileMode(const v1::Task& task, const Kernel& candidate, const Kernel* baseline, const ProfileOptions& opts,
                int inputs_fd, int outputs_fd, int result_fd) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  ProfileReport report;
  // Separate buffers for the two kernels, the same input values.
  Frame cand = MakeFrame(*params, task.time());
  std::vector<std::string> host_inputs;
  if (inputs_fd >= 0) {
    for (const auto& in : cand.inputs) {
      std::string data(in->bytes(), '\0');
      ReadTimedInputBytes(inputs_fd, data.data(), data.size());
      host_inputs.push_back(std::move(data));
    }
  } else {
    host_inputs = GenerateInputs(cand, /*seed=*/1);
  }
  SetInputs(cand, host_inputs);
  Frame base = MakeFrame(*params, task.time());
  if (baseline != nullptr) SetInputs(base, host_inputs);
  int64_t set_bytes = 0;
  for (const auto& b : cand.inputs) set_bytes += static_cast<int64_t>(b->bytes());
  for (const auto& b : cand.outputs) set_bytes += static_cast<int64_t>(b->bytes());
  report.copies = 1;
  report.working_set_bytes = set_bytes;

  int l2 = 0;
  Check(g_rt->L2Bytes(&l2), "reading the L2 size");
  Sampler sampler(std::max<size_t>(2 * static_cast<size_t>(l2), size_t{8} << 20), opts);
  int64_t escaped_cand = 0, escaped_base = 0;

  // Before every sample of the candidate, outside the timer, its inputs
  // differ from the timed inputs in a few elements drawn afresh (the last
  // sample's put back first, each checked), so a kernel that caches its
  // result by its arguments' addresses, or by a few input values, returns a
  // stale one. The baseline is timed on the timed inputs as they are.
  SecretRng rng(opts.secret_seed);
  InputPerturber perturber(cand.input_specs, cand.input_shapes, cand.symbols, rng);
  report.perturbed_inputs = perturber.perturbed();
  report.unperturbed_inputs = perturber.left_alone();
  const PokeAccess cand_access = DeviceAccess(cand);
  auto timed_value = [&cand](const Poke& p) {
    uint64_t v = 0;
    std::memcpy(&v, cand.host_inputs[p.input].data() + p.index * p.bytes, p.bytes);
    return v;
  };
  std::vector<Poke> cand_pokes;  // what cand's inputs hold in place of the timed inputs
  std::string modified;          // the first input found changed while timing
  auto sample_candidate = [&](int64_t& escaped) {
    perturber.Repoke(cand_access, timed_value, cand.input_specs, cand_pokes, &modified);
    return sampler.Sample(candidate, cand, escaped);
  };
  // With a baseline kernel, the outputs of kTimedChecks of the candidate's
  // timed calls are kept, with their pokes, for the baseline to be run on
  // the same inputs after timing. Without one (the worker compares with the
  // C++ reference's outputs at the timed inputs) nothing can be compared
  // with a perturbed call, and only the check after timing is made.
  // The kept calls' outputs (every output, in signature order, copied on
  // the device), by slot.
  std::vector<KeptSample> kept = KeptSampleSlots(baseline != nullptr ? kTimedChecks : 0);
  size_t out_bytes = 0;
  for (const auto& out : cand.outputs) out_bytes += out->bytes();
  std::vector<std::unique_ptr<DeviceBuffer>> kept_outputs;
  for (size_t i = 0; i < kept.size(); ++i) kept_outputs.push_back(std::make_unique<DeviceBuffer>(out_bytes));
  // A candidate sample, and whether its call is kept for the check (drawn
  // after the call: nothing a call sees says whether it is checked).
  auto sample_and_keep = [&] {
    report.candidate.samples_s.push_back(sample_candidate(escaped_cand));
    KeptSample* k = KeepSample(kept, report, cand_pokes, rng);
    if (k == nullptr) return;
    size_t offset = 0;
    for (const auto& out : cand.outputs) {
      Check(g_rt->CopyOnDevice(static_cast<unsigned char*>(kept_outputs[k->slot]->data()) + offset, out->data(),
                               out->bytes()),
            "keeping a timed call's outputs");
      offset += out->bytes();
    }
  };

  const double start = Now();
  // Warm-up: module loading, library heuristics, clocks ramping up.
  for (int i = 0; i < 3 || (Now() - start < std::min(0.1 * opts.time_cap_s, 0.3) && i < 200); ++i) {
    int64_t ignored = 0;
    sample_candidate(ignored);
    if (baseline != nullptr) sampler.Sample(*baseline, base, ignored);
  }
  // Alternating, so neither kernel always follows the other.
  std::function<void()> sample_baseline;
  if (baseline != nullptr) {
    sample_baseline = [&] { report.baseline.samples_s.push_back(sampler.Sample(*baseline, base, escaped_base)); };
  }
  SampleUntilStable(start, opts.time_cap_s, opts.target_spread, report, sample_and_keep, sample_baseline);

  // The candidate's inputs as the timed inputs again (each poked element
  // must still hold what was written), then hashed.
  UndoPokes(cand_access, cand_pokes, cand.input_specs, &modified);
  report.modified_input = modified.empty() ? FirstModifiedInput(cand) : modified;
  // The timed binding checked too: both kernels once more on the timed
  // inputs and fresh poisoned outputs, the candidate on the very buffers it
  // was timed on (a kernel that remembers its arguments and skips the work
  // leaves NaN).
  PoisonOutputs(cand);
  CallAndSync(candidate, cand.args.data());
  if (report.modified_input.empty()) report.modified_input = FirstModifiedInput(cand);
  report.overflowed = FirstOverflow(cand);
  WriteOutputs(outputs_fd, cand);
  if (baseline != nullptr) {
    PoisonOutputs(base);
    CallAndSync(*baseline, base.args.data());
    WriteOutputs(outputs_fd, base);
  }
  // Then the checked timed calls, earliest first: the candidate's outputs as
  // the timed call left them, and the baseline's on the inputs that call had
  // (its own buffers, with the same pokes), outside the timer.
  WriteTimedChecks(kept, DeviceAccess(base), base.input_specs, report, [&](size_t slot) {
    PoisonOutputs(base);
    CallAndSync(*baseline, base.args.data());
    const std::string outputs = kept_outputs[slot]->Download();
    WriteAll(outputs_fd, outputs.data(), outputs.size());
    WriteOutputs(outputs_fd, base);
  });
  report.escaped_samples_candidate = escaped_cand;
  report.escaped_samples_baseline = escaped_base;
  report.l2_flush_bytes = static_cast<int64_t>(sampler.flush_bytes());
  std::string json = ProfileToJson(report);
  WriteAll(result_fd, json.data(), json.size());
  return kExitOk;
}

// Device-to-device copy rate of a 512 MiB buffer (bytes read plus written)
// in GB/s; 0 when the memory is not there.
double MeasureCopyBandwidth(Runtime& rt) {
  const size_t bytes = size_t{512} << 20;
  void *a = nullptr, *b = nullptr;
  if (rt.Malloc(&a, bytes) != 0) return 0;
  if (rt.Malloc(&b, bytes) != 0) {
    rt.Free(a);
    return 0;
  }
  rt.Memset(a, 1, bytes);
  void *start = nullptr, *stop = nullptr;
  rt.EventCreate(&start, /*timing=*/true);
  rt.EventCreate(&stop, /*timing=*/true);
  float best = 1e30f;
  for (int i = 0; i < 8; ++i) {
    rt.EventRecord(start, nullptr);
    rt.CopyOnDevice(b, a, bytes);
    rt.EventRecord(stop, nullptr);
    rt.EventSynchronize(stop);
    float ms = 0;
    rt.EventElapsedMs(&ms, start, stop);
    if (i > 0 && ms > 0) best = std::min(best, ms);
  }
  rt.EventDestroy(start);
  rt.EventDestroy(stop);
  rt.Free(a);
  rt.Free(b);
  return 2.0 * static_cast<double>(bytes) / (best * 1e-3) / 1e9;
}

int ProbeMode(Runtime& rt, bool measure, int only_device, int result_fd) {
  int count = 0;
  const std::string api = rt.ApiPrefix();
  const Error e = rt.DeviceCount(&count);
  if (e != 0) Fail(kExitInfra, "error", absl::StrCat(api, "GetDeviceCount: ", rt.ErrorText(e)));
  if (count == 0) Fail(kExitInfra, "error", absl::StrCat(api, "GetDeviceCount found no device"));
  int driver = 0, runtime = 0;
  rt.DriverVersion(&driver);
  rt.RuntimeVersion(&runtime);
  nlohmann::json j;
  j["driver_version"] = driver;  // e.g. 13000 for CUDA 13.0
  j["runtime_version"] = runtime;
  j["devices"] = nlohmann::json::array();
  for (int d = 0; d < count; ++d) {
    if (only_device >= 0 && d != only_device) continue;
    nlohmann::json dev;
    dev["index"] = d;
    Check(rt.DescribeDevice(d, &dev), "reading the device's properties");
    // Datasheet-style peak: 2 bytes per bus bit per memory clock (DDR).
    dev["theoretical_bandwidth_gbs"] =
        2.0 * dev.value("memory_clock_khz", 0) * 1e3 * (dev.value("memory_bus_bits", 0) / 8.0) / 1e9;
    if (measure) {
      Check(rt.SetDevice(d), "selecting the device");
      dev["copy_bandwidth_gbs"] = MeasureCopyBandwidth(rt);
      double gflops = 0;
      Check(rt.MeasureFp32Peak(&gflops), "the FP32 peak kernel");
      dev["fp32_gflops"] = gflops;
    }
    j["devices"].push_back(dev);
  }
  std::string text = j.dump(2) + "\n";
  WriteAll(result_fd, text.data(), text.size());
  return kExitOk;
}

}  // namespace

void Check(Error e, absl::string_view what) {
  if (e == 0) return;
  if (g_foreign_code_ran) DeviceFault(e, what);
  if (g_rt->IsOutOfMemory(e)) {
    Fail(kExitResourceExhausted, "bad_alloc", absl::StrCat("device memory: ", std::string(what)));
  }
  Fail(kExitInfra, "error", absl::StrCat(g_rt->Name(), " ", std::string(what), ": ", g_rt->ErrorText(e)));
}

void TrackStream(void* stream) {
  EscapeTracker& t = Tracker();
  std::lock_guard<std::mutex> l(t.mu);
  t.streams.push_back(stream);
}

void ForgetStream(void* stream) {
  EscapeTracker& t = Tracker();
  std::lock_guard<std::mutex> l(t.mu);
  auto it = std::find(t.streams.begin(), t.streams.end(), stream);
  if (it == t.streams.end() || g_rt == nullptr) return;
  t.streams.erase(it);
  void* ev = nullptr;
  if (g_rt->EventCreate(&ev, /*timing=*/false) != 0) return;
  if (g_rt->EventRecord(ev, stream) == 0) {
    t.orphans.push_back(ev);
  } else {
    g_rt->EventDestroy(ev);
  }
}

int RunnerMain(Runtime& rt, int argc, char** argv) {
  g_rt = &rt;
  CommandLine cl = ParseCommandLine(argc, argv, rt.RunnerName());
  int device = -1;
  if (cl.Has("device") && !absl::SimpleAtoi(cl.Get("device"), &device)) Fail(kExitInfra, "error", "bad --device");
  if (cl.mode == "probe") {
    return ProbeMode(rt, cl.Has("measure"), device, cl.Has("result") ? OpenOut(cl.Get("result")) : 1);
  }
  if (device >= 0) Check(rt.SetDevice(device), "selecting the device");
  if (cl.mode == "health") {
    const Error e = rt.HealthCheck();
    if (e != 0) Fail(kExitDeviceFault, "device_error", absl::StrCat("health kernel: ", rt.ErrorText(e)));
    return kExitOk;
  }
  if (cl.mode != "run" && cl.mode != "profile") {
    Fail(kExitInfra, "error",
         absl::StrCat("usage: ", rt.RunnerName(), " probe|health|run|profile ... (see protocol.h)"));
  }
  Require(cl, {"task", "kernel", "result", "outputs"});
  const v1::Task task = ReadTaskFile(cl.Get("task"));
  const int result_fd = OpenOut(cl.Get("result"));
  const int outputs_fd = OpenOut(cl.Get("outputs"));
  int inputs_fd = -1;
  std::vector<uint64_t> seeds;
  ProfileOptions profile;
  // "none", a name the runtime knows (cuBLAS, ...), or "so": a kernel library.
  std::string baseline_kind = "none";
  std::string baseline_path;
  const std::vector<std::string> named = rt.BaselineNames();
  if (cl.mode == "run") {
    seeds = ParseSeeds(cl.Get("seeds"));
  } else {
    if (!cl.Has("baseline")) {
      Fail(
          kExitInfra, "error",
          absl::StrCat("missing --baseline (K.so, ", absl::StrJoin(named, ", "), named.empty() ? "" : " or ", "none)"));
    }
    if (cl.Has("time_cap_s") && !absl::SimpleAtod(cl.Get("time_cap_s"), &profile.time_cap_s)) {
      Fail(kExitInfra, "error", "bad --time_cap_s");
    }
    if (cl.Has("inputs")) inputs_fd = OpenIn(cl.Get("inputs"));
    profile.secret_seed = SeedFromOs();
    baseline_kind = cl.Get("baseline");
    if (baseline_kind != "none" && std::find(named.begin(), named.end(), baseline_kind) == named.end()) {
      baseline_path = AbsoluteKernelPath(baseline_kind);
      baseline_kind = "so";
    }
  }
  const std::string kernel_path = AbsoluteKernelPath(cl.Get("kernel"));

  // The context first (the driver opens its device files and starts its
  // threads), then the filter, then candidate code.
  Check(rt.InitContext(), "creating the context");
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  std::unique_ptr<Kernel> baseline;
  if (cl.mode == "profile" && baseline_kind != "so" && baseline_kind != "none") {
    baseline = rt.NamedBaseline(baseline_kind, task, *params);
    if (baseline == nullptr) Fail(kExitInfra, "error", absl::StrCat("unknown baseline ", baseline_kind));
  }
  if (auto s = InstallSigsysHandler(ReportFd()); !s.ok()) Fail(kExitInfra, "error", s.message());
  if (auto s = InstallDenylistFilter(); !s.ok()) Fail(kExitInfra, "error", s.message());
  Kernel kernel = LoadKernel(kernel_path);
  if (cl.mode == "profile" && baseline_kind == "so") baseline = std::make_unique<Kernel>(LoadKernel(baseline_path));

  if (cl.mode == "run") return RunMode(task, kernel, seeds, outputs_fd, result_fd);
  return ProfileMode(task, kernel, baseline.get(), profile, inputs_fd, outputs_fd, result_fd);
}

}  // namespace kevo::runner::device
