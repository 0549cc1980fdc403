// The shared core of the GPU runners, kevo-runner-cuda (NVIDIA) and
// kevo-runner-hip (AMD): everything they do the same way, written once over
// a small interface to the GPU runtime (Runtime below), which each runner
// implements with its runtime's calls (runtime_shim.h forwards the calls
// CUDA and HIP spell alike).
//
// A runner is the only process that executes candidate code on a GPU, and
// the only one that initialises the runtime (the worker daemon never does,
// so nothing of it crosses a fork). It speaks the CPU runner's protocol
// (worker/runner/protocol.h) with device pointers in kevo_entry's argument
// array, plus two modes of its own:
//
//   probe   [--result=R.json] [--measure]  GPUs, their properties, driver and
//           runtime versions as JSON (stdout without --result); --measure
//           adds a device-to-device copy bandwidth and an FP32 FMA rate.
//   health  [--device=N]  one small kernel, checked; exit 0 when the GPU works.
//   run     as kevo-runner-cpu: per binding x seed, host-generated inputs
//           (the shared RNG, FillTensor) copied to fresh device buffers,
//           outputs NaN-filled, guard bytes on both sides of every buffer,
//           input hashes before/after, a second call on fresh buffers for
//           determinism.
//   profile the candidate and the baseline (--baseline=K.so | none | a name
//           the runtime provides, e.g. cublas) timed interleaved in this
//           process: L2 flushed and outputs re-poisoned before every sample,
//           the candidate's inputs perturbed in a few elements from a secret
//           seed, and (with a baseline kernel) kTimedChecks timed calls'
//           outputs kept and checked against the baseline's on the same
//           inputs (protocol.h),
//           the runtime's events around the call and the whole device
//           synchronised after it (work a candidate leaves on a stream the
//           events do not see is caught and timed on the host clock up to the
//           device-wide synchronisation); R's profile also holds what only
//           a GPU runner knows (escaped samples, flush size, overflow).
//
// Any runtime error after candidate code has run ends the runner with
// kExitDeviceFault and "device_error <what>" in the report: an illegal
// address poisons the context (the error is sticky), so the process must go;
// the worker then runs `health` in a fresh runner before it trusts the GPU
// again.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include <nlohmann/json_fwd.hpp>

#include "kevo/v1/task.pb.h"
#include "worker/runner/protocol.h"
#include "worker/runner/runner_io.h"

namespace kevo::runner::device {

// A runtime error code: cudaError_t or hipError_t, 0 (success) in both.
using Error = int;
using Kernel = std::function<void(void**)>;

class Runtime {
 public:
  virtual ~Runtime() = default;

  // For messages: "kevo-runner-cuda", "CUDA", and the API's prefix "cuda".
  virtual const char* RunnerName() const = 0;
  virtual const char* Name() const = 0;
  virtual const char* ApiPrefix() const = 0;
  // "cudaErrorIllegalAddress: an illegal memory access was encountered".
  virtual std::string ErrorText(Error e) const = 0;
  virtual bool IsOutOfMemory(Error e) const = 0;
  virtual bool IsNotReady(Error e) const = 0;

  // Creates the context on the current device (the driver opens its device
  // files and starts its threads: before the seccomp filter).
  virtual Error InitContext() = 0;
  virtual Error SetDevice(int device) = 0;
  virtual Error Malloc(void** p, size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  virtual Error Memset(void* p, int byte, size_t bytes) = 0;
  virtual Error CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual Error CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual Error CopyOnDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual Error Synchronize() = 0;  // the whole device
  // Returns and clears the last launch error.
  virtual Error TakeLastError() = 0;
  virtual Error L2Bytes(int* bytes) = 0;

  // Events; a null stream is the default (legacy, null) stream.
  virtual Error EventCreate(void** event, bool timing) = 0;
  virtual void EventDestroy(void* event) = 0;
  virtual Error EventRecord(void* event, void* stream) = 0;
  virtual Error EventQuery(void* event) = 0;
  virtual Error EventSynchronize(void* event) = 0;
  virtual Error EventElapsedMs(float* ms, void* start, void* stop) = 0;
  virtual Error StreamQuery(void* stream) = 0;

  // The runner's own kernels. FlushL2 reads `bytes` (a multiple of 16) at
  // `buf` on the default stream, evicting whatever L2 held and leaving it
  // clean; asynchronous. HealthCheck runs a small kernel and checks its
  // result, synchronously.
  virtual Error FlushL2(const void* buf, size_t bytes, float* sink) = 0;
  virtual Error HealthCheck() = 0;

  // `probe`. DeviceCount fails (hipErrorNoDevice, ...) or finds 0 where
  // there is no GPU. DescribeDevice adds what the runtime knows of device
  // `d` to `dev` (DescribeCommonProperties in runtime_shim.h, then its own),
  // with memory_clock_khz and memory_bus_bits for the datasheet bandwidth.
  virtual Error DeviceCount(int* count) = 0;
  virtual Error DriverVersion(int* version) = 0;
  virtual Error RuntimeVersion(int* version) = 0;
  virtual Error DescribeDevice(int d, nlohmann::json* dev) = 0;
  // GFLOP/s of an FMA loop on every multiprocessor (the runner's kernel).
  virtual Error MeasureFp32Peak(double* gflops) = 0;

  // A baseline the runtime provides by name (kevo-runner-cuda: "cublas"),
  // created before the seccomp filter. nullptr when `name` is none of them.
  virtual std::unique_ptr<Kernel> NamedBaseline(const std::string& name, const v1::Task& task,
                                                const std::vector<Param>& params) {
    (void)name;
    (void)task;
    (void)params;
    return nullptr;
  }
  // The names NamedBaseline knows, for --baseline's message.
  virtual std::vector<std::string> BaselineNames() const { return {}; }
};

// The runner's entry point: parses the flags and runs the mode (see the
// header comment) on `rt`. Returns the exit code.
int RunnerMain(Runtime& rt, int argc, char** argv);

// Success passes; an error after candidate code ran is a device fault,
// running out of memory is kExitResourceExhausted, anything else kExitInfra.
void Check(Error e, absl::string_view what);

// The interposed stream calls of runtime_shim.h report here: streams created
// non-blocking (the default stream does not wait for them), and streams
// destroyed (work still queued on one keeps running: an event recorded on it
// stands in for it). Any thread may call them.
void TrackStream(void* stream);
void ForgetStream(void* stream);

}  // namespace kevo::runner::device
