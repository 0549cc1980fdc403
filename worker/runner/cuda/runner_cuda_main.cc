// kevo-runner-cuda: the only process that executes candidate code on an
// NVIDIA worker, and the only one that initialises CUDA (the worker daemon
// never does, so nothing CUDA-related crosses a fork). Started by the nvidia
// backend through kevo::sandbox, one process per stage; it speaks the CPU
// runner's protocol (worker/runner/protocol.h) with device pointers in
// kevo_entry's argument array, plus two modes of its own:
//
//   probe   [--result=R.json] [--measure]  GPUs, their properties, driver and
//           runtime versions as JSON (stdout without --result); --measure
//           adds a device-to-device copy bandwidth and an FP32 FMA rate.
//   health  [--device=N]  one small kernel, checked; exit 0 when the GPU works.
//   run     as kevo-runner-cpu: per binding x seed, host-generated inputs
//           copied to fresh device buffers, outputs NaN-filled, guard bytes
//           on both sides of every buffer, input hashes before/after, a second
//           call on fresh buffers for determinism.
//   profile the candidate and the baseline (--baseline=K.so | cublas | none)
//           timed interleaved in this process: L2 flushed and outputs
//           re-poisoned before every sample, CUDA events around the call and
//           the whole device synchronised after it (work a candidate leaves on
//           a stream the events do not see is caught and timed on the host
//           clock up to the device-wide synchronisation); --gpu_result=G.json
//           gets what only this runner knows (escaped samples, flush size).
//
// Any CUDA error after candidate code has run ends the runner with
// kExitDeviceFault and "device_error <what>" in the report: an illegal
// address poisons the context, so the process must go; the worker then runs
// `health` before it trusts the GPU again.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/tensor.h"
#include "kevo/v1/task.pb.h"
#include "worker/runner/cuda/device_kernels.h"
#include "worker/runner/protocol.h"
#include "worker/runner/seccomp_policy.h"

namespace kevo::runner {
namespace {

using EntryFn = void (*)(void**);
using Kernel = std::function<void(void**)>;

int g_report_fd = 2;
// Once candidate (or baseline) code has run, a CUDA error is its fault.
bool g_foreign_code_ran = false;

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void ReportLine(absl::string_view key, absl::string_view value) {
  std::string line = absl::StrCat(std::string(key), " ", std::string(value));
  std::replace(line.begin(), line.end(), '\n', ' ');
  line.push_back('\n');
  WriteAll(g_report_fd, line.data(), line.size());
}

[[noreturn]] void Fail(int code, absl::string_view key, absl::string_view message) {
  ReportLine(key, message);
  if (g_report_fd != 2) {
    std::string line = absl::StrCat("kevo-runner-cuda: ", std::string(message), "\n");
    WriteAll(2, line.data(), line.size());
  }
  _exit(code);
}

std::string CudaErrorText(cudaError_t e) {
  return absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

[[noreturn]] void DeviceFault(cudaError_t e, absl::string_view where) {
  Fail(kExitDeviceFault, "device_error", absl::StrCat(CudaErrorText(e), " (", std::string(where), ")"));
}

void Check(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return;
  if (g_foreign_code_ran) DeviceFault(e, what);
  if (e == cudaErrorMemoryAllocation) {
    Fail(kExitResourceExhausted, "bad_alloc", absl::StrCat("device memory: ", std::string(what)));
  }
  Fail(kExitInfra, "error", absl::StrCat("CUDA ", std::string(what), ": ", CudaErrorText(e)));
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t HashBytes(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xBF58476D1CE4E5B9ULL)) * 0x94D049BB133111EBULL;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h;
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
    Check(cudaMalloc(reinterpret_cast<void**>(&base_), padded_ + 2 * kGuardBytes), absl::StrCat("cudaMalloc(", bytes, ")"));
    Check(cudaMemset(base_, kGuardByte, kGuardBytes), "guard set-up");
    Check(cudaMemset(base_ + kGuardBytes + bytes_, kGuardByte, padded_ - bytes_ + kGuardBytes),
          "guard set-up");
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return base_ + kGuardBytes; }
  size_t bytes() const { return bytes_; }
  // "" when both guards are intact, else "before" or "after".
  std::string GuardDamage() const {
    std::vector<unsigned char> front(kGuardBytes), back(padded_ - bytes_ + kGuardBytes);
    Check(cudaMemcpy(front.data(), base_, front.size(), cudaMemcpyDeviceToHost), "guard check");
    Check(cudaMemcpy(back.data(), base_ + kGuardBytes + bytes_, back.size(), cudaMemcpyDeviceToHost),
          "guard check");
    auto intact = [](const std::vector<unsigned char>& v) {
      return std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == kGuardByte; });
    };
    if (!intact(front)) return "before";
    if (!intact(back)) return "after";
    return "";
  }
  std::string Download() const {
    std::string out(bytes_, '\0');
    if (bytes_ > 0) {
      Check(cudaMemcpy(out.data(), base_ + kGuardBytes, bytes_, cudaMemcpyDeviceToHost), "download");
    }
    return out;
  }
  void Upload(const std::string& host) {
    if (bytes_ > 0) Check(cudaMemcpy(data(), host.data(), bytes_, cudaMemcpyHostToDevice), "upload");
  }

 private:
  size_t bytes_;
  size_t padded_;
  unsigned char* base_ = nullptr;
};

// The device tensors and argument array of one call at one binding, plus the
// host copy of the inputs that were uploaded.
struct Frame {
  std::vector<std::unique_ptr<DeviceBuffer>> inputs, outputs;  // signature order
  std::vector<const v1::TensorSpec*> input_specs, output_specs;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  std::vector<std::string> host_inputs;
  std::vector<uint64_t> input_hashes;
  std::vector<int64_t> symbol_values;
  std::vector<void*> args;
};

Frame MakeFrame(const std::vector<Param>& params, const v1::Binding& binding) {
  Frame f;
  SymbolValues symbols = BindingValues(binding);
  f.symbol_values.reserve(params.size());
  for (const Param& p : params) {
    if (p.kind == ParamKind::kSymbol) {
      auto it = symbols.find(p.name);
      if (it == symbols.end()) {
        Fail(kExitInfra, "error", absl::StrCat("binding ", binding.name(), " has no value for ", p.name));
      }
      f.symbol_values.push_back(it->second);
      f.args.push_back(&f.symbol_values.back());
      continue;
    }
    auto shape = ResolveShape(*p.spec, symbols);
    if (!shape.ok()) Fail(kExitInfra, "error", shape.status().message());
    size_t bytes = static_cast<size_t>(NumElements(*shape)) * DTypeSize(p.spec->dtype());
    auto buffer = std::make_unique<DeviceBuffer>(bytes);
    f.args.push_back(buffer->data());
    if (p.kind == ParamKind::kInput) {
      f.inputs.push_back(std::move(buffer));
      f.input_specs.push_back(p.spec);
      f.input_shapes.push_back(*shape);
    } else {
      f.outputs.push_back(std::move(buffer));
      f.output_specs.push_back(p.spec);
      f.output_shapes.push_back(*shape);
    }
  }
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
    FillTensor(*f.input_specs[i], f.input_shapes[i], seed, host[i].data());
  }
  return host;
}

// NaN in every float output (0xFF bytes), a 0x5A pattern in integer ones.
void PoisonOutputs(Frame& f) {
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const int byte = IsFloat(f.output_specs[i]->dtype()) ? 0xFF : 0x5A;
    Check(cudaMemset(f.outputs[i]->data(), byte, f.outputs[i]->bytes()), "poisoning the outputs");
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

void CallForeign(const Kernel& fn, void** args) {
  g_foreign_code_ran = true;
  try {
    fn(args);
  } catch (const std::bad_alloc& e) {
    Fail(kExitResourceExhausted, "bad_alloc", e.what());
  } catch (const std::exception& e) {
    Fail(kExitCandidateException, "exception", e.what());
  } catch (...) {
    Fail(kExitCandidateException, "exception", "a non-std exception");
  }
}

// Work a candidate may leave behind when it returns: the non-blocking
// streams it created (cudaStreamNonBlocking: the legacy default stream does
// not wait for them), and events recorded on such streams when it destroyed
// them (a destroyed stream's work still runs). Filled by the interposed
// cudaStreamCreate* / cudaStreamDestroy below; any thread may call them.
struct EscapeTracker {
  std::mutex mu;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> orphans;
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
  for (cudaStream_t s : t.streams) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaErrorNotReady) pending = true;
    else if (e != cudaSuccess) DeviceFault(e, "on a stream the candidate created");
  }
  for (auto it = t.orphans.begin(); it != t.orphans.end();) {
    const cudaError_t e = cudaEventQuery(*it);
    if (e == cudaErrorNotReady) {
      pending = true;
      ++it;
    } else if (e != cudaSuccess) {
      DeviceFault(e, "on a stream the candidate destroyed");
    } else {
      cudaEventDestroy(*it);
      it = t.orphans.erase(it);
    }
  }
  return pending;
}

// Called right after a candidate (or baseline) call returned, with
// `legacy_done` recorded on the legacy default stream after it: everything a
// caller on that stream would wait for. If work on a non-blocking stream is
// still running once `legacy_done` has completed, the call returned before
// its outputs were ready: ends the runner with kExitUnfinishedWork. (Work on
// a non-blocking stream that the legacy stream waits for, through an event,
// is finished by then and passes.)
void CheckNothingEscaped(cudaEvent_t legacy_done, absl::string_view where) {
  if (!AnyTrackedWorkPending()) return;
  const cudaError_t e = cudaEventSynchronize(legacy_done);
  if (e != cudaSuccess) DeviceFault(e, where);
  if (!AnyTrackedWorkPending()) return;
  Fail(kExitUnfinishedWork, "unfinished",
       absl::StrCat("the call returned (", std::string(where),
                    ") while kernels it launched on a cudaStreamNonBlocking stream were still "
                    "running, unordered with the caller's (legacy default) stream: its outputs "
                    "were not ready when it returned; synchronise that stream, or make the "
                    "default stream wait for it (cudaStreamWaitEvent), before returning"));
}

// An event on the legacy default stream for CheckNothingEscaped.
cudaEvent_t LegacyDoneEvent() {
  static cudaEvent_t e = [] {
    cudaEvent_t ev{};
    Check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    return ev;
  }();
  return e;
}

// One call, then the whole device synchronised: errors of launches the
// candidate did not check, and faults of kernels still running when it
// returned (on any stream), end the runner here; so does work still running
// on a non-blocking stream after the default stream's (CheckNothingEscaped).
void CallAndSync(const Kernel& fn, void** args) {
  Check(cudaDeviceSynchronize(), "before the call");
  CallForeign(fn, args);
  cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) DeviceFault(launch, "a kernel launch failed");
  Check(cudaEventRecord(LegacyDoneEvent(), 0), "cudaEventRecord");
  CheckNothingEscaped(LegacyDoneEvent(), "validation call");
  cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) DeviceFault(sync, "while the kernels ran");
}

Kernel LoadKernel(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    Fail(kExitLoadFailed, "load_error", err ? err : path);
  }
  void* sym = dlsym(handle, kEntrySymbol);
  if (sym == nullptr) Fail(kExitLoadFailed, "load_error", absl::StrCat(path, ": no ", kEntrySymbol));
  EntryFn fn = reinterpret_cast<EntryFn>(sym);
  return [fn](void** args) { fn(args); };
}

// cuBLAS is loaded at run time: the runner works (without a cuBLAS baseline)
// where it is missing, and whatever cuBLAS the host's CUDA has is used.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  // cublas_api.h overloads cublasGemmEx for C++; this is the C symbol's type.
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void*, const void*, cudaDataType, int,
                                      const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmExFn gemm_ex = nullptr;
  cublasHandle_t handle = nullptr;
};

Cublas LoadCublas() {
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                           "/usr/local/cuda/lib64/libcublas.so.13",
                           "/usr/local/cuda/lib64/libcublas.so.12",
                           "/usr/local/cuda/lib64/libcublas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&tried, err ? err : name, "; ");
  }
  if (lib == nullptr) Fail(kExitInfra, "error", absl::StrCat("cannot load cuBLAS: ", tried));
  Cublas c;
  c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
  c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(dlsym(lib, "cublasGemmEx"));
  if (c.create == nullptr || c.gemm_ex == nullptr) {
    Fail(kExitInfra, "error", "cuBLAS lacks cublasCreate_v2 or cublasGemmEx");
  }
  if (c.create(&c.handle) != CUBLAS_STATUS_SUCCESS) Fail(kExitInfra, "error", "cublasCreate failed");
  return c;
}

// The production baseline of a task whose hints say pattern=gemm:
// row-major C[m,n] = A[m,k] * B[k,n] through cublasGemmEx, computed in FP32
// (no TF32), as C^T = B^T * A^T in cuBLAS's column-major terms.
Kernel CublasGemmBaseline(const v1::Task& task, const std::vector<Param>& params) {
  auto hint = [&](const char* key) -> std::string {
    auto it = task.hints().find(key);
    if (it == task.hints().end()) Fail(kExitInfra, "error", absl::StrCat("gemm baseline: no hint '", key, "'"));
    return it->second;
  };
  auto index = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == name) return i;
    }
    Fail(kExitInfra, "error", absl::StrCat("gemm baseline: no parameter '", name, "'"));
  };
  const size_t a = index(hint("a")), b = index(hint("b")), c = index(hint("c"));
  const size_t m = index(hint("m")), n = index(hint("n")), k = index(hint("k"));
  cudaDataType type = CUDA_R_32F;
  switch (params[a].spec->dtype()) {
    case v1::F32: type = CUDA_R_32F; break;
    case v1::F16: type = CUDA_R_16F; break;
    case v1::BF16: type = CUDA_R_16BF; break;
    default: Fail(kExitInfra, "error", "gemm baseline: only f32, f16 and bf16 are supported");
  }
  auto blas = std::make_shared<Cublas>(LoadCublas());
  return [=](void** args) {
    const int M = static_cast<int>(*static_cast<int64_t*>(args[m]));
    const int N = static_cast<int>(*static_cast<int64_t*>(args[n]));
    const int K = static_cast<int>(*static_cast<int64_t*>(args[k]));
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = blas->gemm_ex(blas->handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                                     args[b], type, N, args[a], type, K, &beta, args[c], type, N,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
      Fail(kExitInfra, "error", absl::StrCat("cublasGemmEx failed with status ", static_cast<int>(s)));
    }
  };
}

int RunMode(const v1::Task& task, const Kernel& fn, const std::vector<uint64_t>& seeds,
            int outputs_fd, int result_fd) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  std::vector<CaseReport> cases;
  for (const v1::Binding& binding : task.validate()) {
    for (uint64_t seed : seeds) {
      CaseReport report;
      report.binding = binding.name();
      report.seed = seed;
      Frame first = MakeFrame(*params, binding);
      SetInputs(first, GenerateInputs(first, seed));
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
      Frame second = MakeFrame(*params, binding);
      SetInputs(second, first.host_inputs);
      PoisonOutputs(second);
      CallAndSync(fn, second.args.data());
      for (size_t i = 0; i < second.outputs.size() && report.nondet_output.empty(); ++i) {
        const std::string b = second.outputs[i]->Download();
        const std::string& a = first_out[i];
        if (a == b) continue;
        const size_t elem = DTypeSize(second.output_specs[i]->dtype());
        for (size_t k = 0; k < a.size(); ++k) {
          if (a[k] != b[k]) {
            report.nondet_output = second.output_specs[i]->name();
            report.nondet_index = static_cast<int64_t>(k / elem);
            break;
          }
        }
      }
      if (report.overflowed.empty()) report.overflowed = FirstOverflow(second);
      cases.push_back(std::move(report));
    }
  }
  std::string json = CasesToJson(cases);
  WriteAll(result_fd, json.data(), json.size());
  return kExitOk;
}

struct ProfileOptions {
  double time_cap_s = 3.0;
  double target_spread = 0.01;
  // An honest call is over when its stop event is; a device-wide
  // synchronisation that still waits longer than this (and 20% of the event
  // time) after it means work escaped to a stream the events do not order.
  double escape_threshold_s = 20e-6;
};

// Times one call cold: outputs re-poisoned (a kernel cannot skip work whose
// result is still there from the previous sample) and L2 flushed by reading
// a buffer twice its size, both before the start event. Reading, not
// writing: a memset flush leaves L2 full of dirty lines, and the timed
// kernel would pay for writing someone else's data back to memory.
class Sampler {
 public:
  Sampler(size_t flush_bytes, const ProfileOptions& opts) : flush_bytes_(flush_bytes), opts_(opts) {
    Check(cudaMalloc(&flush_, flush_bytes_), "allocating the L2 flush buffer");
    Check(cudaMemset(flush_, 0, flush_bytes_), "clearing the L2 flush buffer");
    Check(cudaMalloc(reinterpret_cast<void**>(&sink_), sizeof(float)), "allocating the L2 flush sink");
    Check(cudaEventCreate(&start_), "cudaEventCreate");
    Check(cudaEventCreate(&stop_), "cudaEventCreate");
  }

  // Seconds for one call; `escaped` counts samples timed on the host clock.
  double Sample(const Kernel& fn, Frame& f, int64_t& escaped) {
    PoisonOutputs(f);
    Check(cudaDeviceSynchronize(), "before a sample");
    // The flush is not waited for: while it runs, the start event and the
    // candidate's launches queue up behind it, so the start event fires when
    // the flush ends and the candidate's first kernel follows at once. The
    // events then time the GPU's work, not the host's launch latency (about
    // 5 us on an H200, as long as a small kernel itself). Host work the
    // candidate does before launching is still counted once the flush is
    // over: the GPU idles, between the events, until the launch arrives.
    Check(cuda::ReadToFlushL2(flush_, flush_bytes_, sink_), "L2 flush");
    const double t0 = Now();
    Check(cudaEventRecord(start_, 0), "cudaEventRecord");
    CallForeign(fn, f.args.data());
    cudaError_t launch = cudaGetLastError();
    if (launch != cudaSuccess) DeviceFault(launch, "a kernel launch failed while timing");
    Check(cudaEventRecord(stop_, 0), "cudaEventRecord");
    CheckNothingEscaped(stop_, "timed call");
    Check(cudaEventSynchronize(stop_), "while timing");
    const double t_stop = Now();
    Check(cudaDeviceSynchronize(), "while timing");
    const double t_end = Now();
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
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
  cudaEvent_t start_{}, stop_{};
  ProfileOptions opts_;
};

int ProfileMode(const v1::Task& task, const Kernel& candidate, const Kernel* baseline,
                const std::string& baseline_kind, const ProfileOptions& opts, int inputs_fd,
                int outputs_fd, int result_fd, int gpu_result_fd) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  ProfileReport report;
  // Separate buffers for the two kernels, the same input values.
  Frame cand = MakeFrame(*params, task.time());
  std::vector<std::string> host_inputs;
  if (inputs_fd >= 0) {
    for (const auto& in : cand.inputs) {
      std::string data(in->bytes(), '\0');
      size_t done = 0;
      while (done < data.size()) {
        ssize_t n = read(inputs_fd, data.data() + done, data.size() - done);
        if (n <= 0) Fail(kExitInfra, "error", "the timed-inputs file is shorter than the inputs");
        done += static_cast<size_t>(n);
      }
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

  int dev = 0, l2 = 0;
  Check(cudaGetDevice(&dev), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute");
  Sampler sampler(std::max<size_t>(2 * static_cast<size_t>(l2), size_t{8} << 20), opts);
  int64_t escaped_cand = 0, escaped_base = 0;

  const double start = Now();
  // Warm-up: module loading, cuBLAS heuristics, clocks ramping up.
  for (int i = 0; i < 3 || (Now() - start < std::min(0.1 * opts.time_cap_s, 0.3) && i < 200); ++i) {
    int64_t ignored = 0;
    sampler.Sample(candidate, cand, ignored);
    if (baseline != nullptr) sampler.Sample(*baseline, base, ignored);
  }
  constexpr size_t kMinSamples = 10;
  constexpr size_t kMaxSamples = 20000;
  for (size_t round = 0;; ++round) {
    // Alternate the order so neither kernel always follows the other.
    if (round % 2 == 0 || baseline == nullptr) {
      report.candidate.samples_s.push_back(sampler.Sample(candidate, cand, escaped_cand));
      if (baseline != nullptr) report.baseline.samples_s.push_back(sampler.Sample(*baseline, base, escaped_base));
    } else {
      report.baseline.samples_s.push_back(sampler.Sample(*baseline, base, escaped_base));
      report.candidate.samples_s.push_back(sampler.Sample(candidate, cand, escaped_cand));
    }
    const size_t n = report.candidate.samples_s.size();
    if (n >= kMinSamples && n % 5 == 0) {
      Summarise(report.candidate);
      Summarise(report.baseline);
      if (report.candidate.spread < opts.target_spread &&
          (baseline == nullptr || report.baseline.spread < opts.target_spread)) {
        report.converged = true;
        break;
      }
    }
    if ((Now() - start > opts.time_cap_s && n >= 3) || n >= kMaxSamples) break;
  }
  Summarise(report.candidate);
  Summarise(report.baseline);
  report.elapsed_s = Now() - start;

  // The timed binding checked too: both kernels once more on fresh poisoned
  // outputs, the candidate on the very buffers it was timed on (a kernel that
  // remembers its arguments and skips the work leaves NaN).
  report.modified_input = FirstModifiedInput(cand);
  PoisonOutputs(cand);
  CallAndSync(candidate, cand.args.data());
  if (report.modified_input.empty()) report.modified_input = FirstModifiedInput(cand);
  std::string overflowed = FirstOverflow(cand);
  for (const auto& out : cand.outputs) {
    std::string data = out->Download();
    WriteAll(outputs_fd, data.data(), data.size());
  }
  if (baseline != nullptr) {
    PoisonOutputs(base);
    CallAndSync(*baseline, base.args.data());
    for (const auto& out : base.outputs) {
      std::string data = out->Download();
      WriteAll(outputs_fd, data.data(), data.size());
    }
  }
  std::string json = ProfileToJson(report);
  WriteAll(result_fd, json.data(), json.size());
  if (gpu_result_fd >= 0) {
    nlohmann::json g;
    g["escaped_samples_candidate"] = escaped_cand;
    g["escaped_samples_baseline"] = escaped_base;
    g["l2_flush_bytes"] = sampler.flush_bytes();
    g["baseline"] = baseline_kind;
    g["overflowed"] = overflowed;
    std::string text = g.dump();
    WriteAll(gpu_result_fd, text.data(), text.size());
  }
  return kExitOk;
}

// Device-to-device copy rate, bytes read plus bytes written.
double MeasureCopyBandwidth() {
  const size_t bytes = size_t{512} << 20;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess) return 0;
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    return 0;
  }
  cudaMemset(a, 1, bytes);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 1e30f;
  for (int i = 0; i < 8; ++i) {
    cudaEventRecord(start);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i > 0 && ms > 0) best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (best * 1e-3) / 1e9;
}

int ProbeMode(bool measure, int only_device, int result_fd) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) Fail(kExitInfra, "error", absl::StrCat("cudaGetDeviceCount: ", CudaErrorText(e)));
  if (count == 0) Fail(kExitInfra, "error", "cudaGetDeviceCount found no device");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  nlohmann::json j;
  j["driver_version"] = driver;    // e.g. 13000 for CUDA 13.0
  j["runtime_version"] = runtime;
  j["devices"] = nlohmann::json::array();
  for (int d = 0; d < count; ++d) {
    if (only_device >= 0 && d != only_device) continue;
    cudaDeviceProp p{};
    Check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    auto attr = [d](cudaDeviceAttr a) {
      int v = 0;
      cudaDeviceGetAttribute(&v, a, d);
      return v;
    };
    nlohmann::json dev;
    dev["index"] = d;
    dev["name"] = p.name;
    dev["compute_capability"] = absl::StrCat(p.major, ".", p.minor);
    dev["sm_count"] = p.multiProcessorCount;
    dev["memory_bytes"] = p.totalGlobalMem;
    dev["l2_bytes"] = p.l2CacheSize;
    dev["smem_per_block_optin_bytes"] = p.sharedMemPerBlockOptin;
    dev["smem_per_sm_bytes"] = p.sharedMemPerMultiprocessor;
    dev["regs_per_sm"] = p.regsPerMultiprocessor;
    dev["sm_clock_khz"] = attr(cudaDevAttrClockRate);
    dev["memory_clock_khz"] = attr(cudaDevAttrMemoryClockRate);
    dev["memory_bus_bits"] = attr(cudaDevAttrGlobalMemoryBusWidth);
    dev["pci_bus_id"] = absl::StrCat(p.pciDomainID, ":", p.pciBusID, ":", p.pciDeviceID);
    // Datasheet-style peak: 2 bytes per bus bit per memory clock (DDR).
    dev["theoretical_bandwidth_gbs"] =
        2.0 * attr(cudaDevAttrMemoryClockRate) * 1e3 * (attr(cudaDevAttrGlobalMemoryBusWidth) / 8.0) / 1e9;
    if (measure) {
      Check(cudaSetDevice(d), "cudaSetDevice");
      dev["copy_bandwidth_gbs"] = MeasureCopyBandwidth();
      double gflops = 0;
      Check(cuda::MeasureFp32Peak(&gflops), "the FP32 peak kernel");
      dev["fp32_gflops"] = gflops;
    }
    j["devices"].push_back(dev);
  }
  std::string text = j.dump(2) + "\n";
  WriteAll(result_fd, text.data(), text.size());
  return kExitOk;
}

int OpenOut(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  return fd;
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  std::string mode = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Fail(kExitInfra, "error", absl::StrCat("unexpected argument ", arg));
    size_t eq = arg.find('=');
    flags[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : arg.substr(eq + 1);
  }
  if (flags.count("report")) {
    g_report_fd = open(flags["report"].c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_report_fd < 0) {
      g_report_fd = 2;
      Fail(kExitInfra, "error", absl::StrCat("cannot open report ", flags["report"]));
    }
  }
  int device = -1;
  if (flags.count("device") && !absl::SimpleAtoi(flags["device"], &device)) {
    Fail(kExitInfra, "error", "bad --device");
  }
  if (mode == "probe") {
    return ProbeMode(flags.count("measure") > 0, device, flags.count("result") ? OpenOut(flags["result"]) : 1);
  }
  if (device >= 0) Check(cudaSetDevice(device), "cudaSetDevice");
  if (mode == "health") {
    cudaError_t e = cuda::HealthCheck(1 << 20);
    if (e != cudaSuccess) Fail(kExitDeviceFault, "device_error", absl::StrCat("health kernel: ", CudaErrorText(e)));
    return kExitOk;
  }
  if (mode != "run" && mode != "profile") {
    Fail(kExitInfra, "error", "usage: kevo-runner-cuda probe|health|run|profile ... (see protocol.h)");
  }
  for (const char* required : {"task", "kernel", "result", "outputs"}) {
    if (!flags.count(required)) Fail(kExitInfra, "error", absl::StrCat("missing --", required));
  }
  v1::Task task;
  {
    int fd = open(flags["task"].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot open task ", flags["task"]));
    if (!task.ParseFromFileDescriptor(fd)) Fail(kExitInfra, "error", "task file does not parse");
    close(fd);
  }
  int result_fd = OpenOut(flags["result"]);
  int outputs_fd = OpenOut(flags["outputs"]);
  int inputs_fd = -1, gpu_result_fd = -1;
  std::vector<uint64_t> seeds;
  ProfileOptions profile;
  std::string baseline_kind = "none";
  if (mode == "run") {
    for (absl::string_view s : absl::StrSplit(flags["seeds"], ',', absl::SkipEmpty())) {
      uint64_t seed;
      if (!absl::SimpleAtoi(s, &seed)) Fail(kExitInfra, "error", "bad --seeds");
      seeds.push_back(seed);
    }
    if (seeds.empty()) Fail(kExitInfra, "error", "missing --seeds");
  } else {
    if (!flags.count("baseline")) Fail(kExitInfra, "error", "missing --baseline (K.so, cublas or none)");
    if (flags.count("time_cap_s") && !absl::SimpleAtod(flags["time_cap_s"], &profile.time_cap_s)) {
      Fail(kExitInfra, "error", "bad --time_cap_s");
    }
    if (flags.count("inputs")) {
      inputs_fd = open(flags["inputs"].c_str(), O_RDONLY | O_CLOEXEC);
      if (inputs_fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot open ", flags["inputs"]));
    }
    if (flags.count("gpu_result")) gpu_result_fd = OpenOut(flags["gpu_result"]);
    baseline_kind = flags["baseline"];
  }
  for (const char* key : {"kernel", "baseline"}) {
    if (!flags.count(key) || flags[key] == "cublas" || flags[key] == "none") continue;
    char* resolved = realpath(flags[key].c_str(), nullptr);
    if (resolved == nullptr) Fail(kExitInfra, "error", absl::StrCat("no kernel at ", flags[key]));
    flags[key] = resolved;
    free(resolved);
    if (std::string(key) == "baseline") baseline_kind = "so";
  }

  // The context first (the driver opens its device files and starts its
  // threads), then the filter, then candidate code.
  Check(cudaFree(nullptr), "creating the CUDA context");
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  std::unique_ptr<Kernel> baseline;
  if (mode == "profile" && baseline_kind == "cublas") {
    baseline = std::make_unique<Kernel>(CublasGemmBaseline(task, *params));
  }
  if (auto s = InstallSigsysHandler(g_report_fd); !s.ok()) Fail(kExitInfra, "error", s.message());
  if (auto s = InstallDenylistFilter(); !s.ok()) Fail(kExitInfra, "error", s.message());
  Kernel kernel = LoadKernel(flags["kernel"]);
  if (mode == "profile" && baseline_kind == "so") baseline = std::make_unique<Kernel>(LoadKernel(flags["baseline"]));

  if (mode == "run") return RunMode(task, kernel, seeds, outputs_fd, result_fd);
  return ProfileMode(task, kernel, baseline.get(), baseline_kind, profile, inputs_fd, outputs_fd,
                     result_fd, gpu_result_fd);
}

}  // namespace
}  // namespace kevo::runner

// The CUDA runtime's stream constructors and destructor, interposed: the
// runner exports these (see CMakeLists.txt), so a candidate .so's calls bind
// here first; each forwards to the runtime's own (RTLD_NEXT) and records the
// non-blocking streams for CheckNothingEscaped.
namespace {
template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}
void TrackIfNonBlocking(cudaError_t e, cudaStream_t* stream, unsigned int flags) {
  if (e != cudaSuccess || stream == nullptr || (flags & cudaStreamNonBlocking) == 0) return;
  kevo::runner::EscapeTracker& t = kevo::runner::Tracker();
  std::lock_guard<std::mutex> l(t.mu);
  t.streams.push_back(*stream);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) cudaError_t cudaStreamCreateWithFlags(
    cudaStream_t* stream, unsigned int flags) {
  using Fn = cudaError_t (*)(cudaStream_t*, unsigned int);
  static const Fn next = Next<Fn>("cudaStreamCreateWithFlags");
  if (next == nullptr) return cudaErrorNotSupported;
  const cudaError_t e = next(stream, flags);
  TrackIfNonBlocking(e, stream, flags);
  return e;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaStreamCreateWithPriority(
    cudaStream_t* stream, unsigned int flags, int priority) {
  using Fn = cudaError_t (*)(cudaStream_t*, unsigned int, int);
  static const Fn next = Next<Fn>("cudaStreamCreateWithPriority");
  if (next == nullptr) return cudaErrorNotSupported;
  const cudaError_t e = next(stream, flags, priority);
  TrackIfNonBlocking(e, stream, flags);
  return e;
}

// A tracked stream destroyed with work still queued keeps running it: an
// event recorded on it first stands in for it.
extern "C" __attribute__((visibility("default"))) cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  using Fn = cudaError_t (*)(cudaStream_t);
  static const Fn next = Next<Fn>("cudaStreamDestroy");
  if (next == nullptr) return cudaErrorNotSupported;
  {
    kevo::runner::EscapeTracker& t = kevo::runner::Tracker();
    std::lock_guard<std::mutex> l(t.mu);
    auto it = std::find(t.streams.begin(), t.streams.end(), stream);
    if (it != t.streams.end()) {
      t.streams.erase(it);
      cudaEvent_t ev{};
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess) {
        if (cudaEventRecord(ev, stream) == cudaSuccess) t.orphans.push_back(ev);
        else cudaEventDestroy(ev);
      }
    }
  }
  return next(stream);
}

int main(int argc, char** argv) {
  int code = kevo::runner::Main(argc, argv);
  // Skip static destructors and atexit handlers (the candidate's, the CUDA
  // runtime's teardown): results are already written.
  _exit(code);
}
