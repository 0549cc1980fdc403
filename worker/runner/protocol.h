// The contract between the CPU backend (trusted, in the worker) and
// kevo-runner-cpu (the sandboxed process that loads candidate code):
//
//   kevo-runner-cpu run --task=T --kernel=K.so --seeds=1,2,3
//                       --outputs=O --result=R.json --report=P
//   kevo-runner-cpu profile --task=T --kernel=K.so --baseline=B.so [--inputs=I]
//                       --outputs=O --result=R.json --report=P --time_cap_s=3
//                       --mem_budget_bytes=N
//
// I (optional) holds the inputs of the timed binding, generated with
// FillTensor(seed 1), raw bytes in signature order; without it the runner
// generates them itself. After timing, the profile mode calls the candidate
// and then the baseline once more on these inputs and fresh NaN-poisoned
// outputs and writes both results to O (candidate outputs, then baseline
// outputs, each in signature order: the "check pair"), so the worker can
// check the timed binding too (a kernel that is right only at the validated
// sizes must not win).
//
// kevo-runner-cpu's profile also guards the timed calls themselves, with a
// seed it draws from the OS (getrandom) before it loads any kernel:
//   - before every timed sample, outside the timer, the outputs of each input
//     copy ("frame") the sample will use are poisoned again, with random
//     bytes, so a kernel that skips work when its output looks written leaves
//     garbage; no sample uses a frame twice;
//   - before every sample each of its frames' inputs differ from I in a few
//     elements (kPokesPerInput per input, positions and values drawn afresh,
//     the values from the input's own distribution; inputs sorted along their
//     last dimension are left alone), so a cache keyed on a few input
//     elements or on the buffer's address returns stale results;
//   - the last call of kTimedChecks timed samples of the candidate, chosen
//     uniformly among all samples taken (reservoir sampling, decided after
//     each sample), is kept: after the check pair O holds, per such sample in
//     ProfileReport::timed_checks order, the candidate's outputs of that call
//     and then the baseline's on the same inputs, computed outside the timer.
// The GPU runners (worker/runner/device) do the same with one input set per
// kernel, on the device: before every sample of the candidate, a few of its
// input elements perturbed as above (small copies, outside the timer), and
// with a baseline kernel (--baseline=K.so or a named one) kTimedChecks timed
// calls kept and checked the same way. Their outputs are poisoned with NaN
// before every sample rather than random bytes. With --baseline=none (the
// worker compares with the C++ reference's outputs at I) O holds the
// candidate's outputs after timing alone, and timed_checks is empty.
// Runners that do not check timed calls (kevo-runner-mtia's simulated
// profile) write the check pair alone and an empty timed_checks; the worker
// reads 2 * (1 + timed_checks.size()) output sets.
// T is a binary-serialised kevo.v1.Task. Every .so exports the generated
// `extern "C" void kevo_entry(void** args)` (GenerateWrapperSource): args[i]
// points at the tensor data of the i-th signature parameter, or at an int64_t
// for a shape symbol. The runner opens all its files before it installs the
// seccomp filter and writes:
//   - P (report): one line per event, written with raw write(2) so it works
//     from a signal handler or a failing malloc: "sigsys <nr>",
//     "alloc_failed <bytes>", "bad_alloc <what>", "exception <what>",
//     "load_error <dlerror>", "error <infra message>", and from
//     kevo-runner-cuda "device_error <CUDA error and where>" and
//     "unfinished <what>".
//   - O (run): the outputs of the first call of every case, raw bytes, in the
//     order binding (task.validate) x seed x output tensor (OutputLayout).
//   - R (run): {"cases":[CaseReport...]}; (profile): ProfileReport.
// The exit status says how it ended (kExit*); a signal means it crashed.
//
// All functions here are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "kevo/v1/task.pb.h"

namespace kevo::runner {

// Runner exit codes (kept below 64 so bubblewrap's 128+signal never collides).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInfra = 2;              // bad arguments, unreadable files, seccomp set-up
inline constexpr int kExitSandboxViolation = 3;   // SIGSYS from the seccomp filter
inline constexpr int kExitResourceExhausted = 4;  // std::bad_alloc escaped the candidate
inline constexpr int kExitCandidateException = 5;
inline constexpr int kExitLoadFailed = 6;  // dlopen/dlsym of a kernel failed
// kevo-runner-cuda: a CUDA error after a candidate call (illegal address,
// launch failure, bad launch configuration). A sticky error leaves the GPU
// context unusable, so the runner always ends; "device_error <what>" says why.
inline constexpr int kExitDeviceFault = 7;
// kevo-runner-cuda: the call returned while work it launched still ran on a
// stream that the legacy default stream does not wait for (its outputs were
// not ready); "unfinished <what>" says which call.
inline constexpr int kExitUnfinishedWork = 8;

// Name of the function every kernel .so exports.
inline constexpr char kEntrySymbol[] = "kevo_entry";

// Profile mode (see the top of this file): timed samples whose last candidate
// call is checked against the baseline, and input elements perturbed per
// input in each frame before each sample.
inline constexpr int kTimedChecks = 4;
inline constexpr int kPokesPerInput = 8;
// The size of a profile's outputs file O for a task whose outputs at the
// timed binding take `output_bytes`: the check pair (the candidate's outputs
// alone with --baseline=none), then a pair per kept timed call. With
// kept = kTimedChecks it is the most O may hold (the runner's file-size limit).
inline constexpr int64_t ProfileOutputsBytes(int64_t output_bytes, int64_t kept, bool with_baseline = true) {
  return (with_baseline ? 2 : 1) * output_bytes + 2 * output_bytes * kept;
}

enum class ParamKind { kInput, kOutput, kSymbol };
struct Param {
  std::string name;
  ParamKind kind;
  const v1::TensorSpec* spec = nullptr;  // null for symbols; points into the task
};
// The signature's parameters, classified like RenderSignature does. Returns
// InvalidArgument when a parameter names nothing in the task.
absl::StatusOr<std::vector<Param>> ClassifyParams(const v1::Task& task);

// C++ source of the wrapper TU linked into every kernel .so: declares the
// task's function (RenderSignature) and defines kevo_entry. Returns
// InvalidArgument for a malformed signature.
absl::StatusOr<std::string> GenerateWrapperSource(const v1::Task& task);

// Seeds validated per binding: 1..max(3, task.seeds()), the same on every host.
std::vector<uint64_t> ValidationSeeds(const v1::Task& task);

// One output tensor of one case inside the outputs file.
struct OutputSlot {
  std::string binding;
  uint64_t seed = 0;
  std::string output;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  int64_t count = 0;   // elements
  int64_t offset = 0;  // bytes from the start of the file
  int64_t bytes = 0;
};
// The layout of the outputs file for `seeds` (outputs in signature order).
// Returns the shape-resolution error when a binding does not give every
// symbol, InvalidArgument for a malformed signature.
absl::StatusOr<std::vector<OutputSlot>> OutputLayout(const v1::Task& task, const std::vector<uint64_t>& seeds);

// What the runner observed in one (binding, seed) case; correctness against the
// reference is judged by the worker, outside the sandbox.
struct CaseReport {
  std::string binding;
  uint64_t seed = 0;
  std::string modified_input;  // first input whose hash changed, empty if none
  std::string nondet_output;   // first output that differed bitwise between two calls
  int64_t nondet_index = -1;   // first differing element
  std::string overflowed;      // tensor whose guard bytes past the end were written
};

struct TimingSeries {
  std::vector<double> samples_s;
  double median_s = 0;
  double spread = 0;  // (p75 - p25) / median
  int64_t calls_per_sample = 1;
};

struct ProfileReport {
  TimingSeries candidate;
  TimingSeries baseline;
  int64_t copies = 1;  // input sets rotated to defeat the caches
  int64_t working_set_bytes = 0;
  double elapsed_s = 0;
  bool converged = false;  // spread under target for both before the cap
  // First input of the timed binding found changed, in any frame, while
  // timing or in the final check (a kernel that zeroes its inputs so the
  // baseline agrees).
  std::string modified_input;
  // The samples (0-based, in the candidate's series) whose last call's outputs
  // follow the check pair in O, each with the baseline's on the same inputs,
  // in this order. Empty where the runner checks no timed call.
  std::vector<int64_t> timed_checks;
  // Inputs whose frames were perturbed before each sample, and those left as
  // I has them (sorted along their last dimension, or a constant
  // distribution). Both empty where the runner perturbs nothing.
  std::vector<std::string> perturbed_inputs;
  std::vector<std::string> unperturbed_inputs;
  // Platform counters of the timed calls (kevo-runner-mtia: the simulator's
  // cycles, per-unit busy/stall cycles, bytes per memory level, utilisation;
  // the baseline's prefixed "baseline_"). Empty on the CPU.
  std::map<std::string, double> counters;
  // What only the GPU runners (worker/runner/device) observe; zero or empty
  // elsewhere: samples whose work outlived the runtime's events (left on a
  // stream they do not see; caught by the device-wide synchronisation and
  // timed on the host clock up to it), the L2 flush buffer's size, and the
  // first tensor whose guard bytes past its end were written while timing.
  int64_t escaped_samples_candidate = 0;
  int64_t escaped_samples_baseline = 0;
  int64_t l2_flush_bytes = 0;
  std::string overflowed;
};

// (Median, spread) of `samples` (unsorted); zeros when empty.
void Summarise(TimingSeries& series);

// The result files' JSON, written and read through the structs above (one
// form: nlohmann's field-by-field mapping, no hand-written keys). Reading
// returns DataLoss for text that is not such a result.
std::string CasesToJson(const std::vector<CaseReport>& cases);
absl::StatusOr<std::vector<CaseReport>> CasesFromJson(std::string_view json);
std::string ProfileToJson(const ProfileReport& report);
absl::StatusOr<ProfileReport> ProfileFromJson(std::string_view json);

// The report file, parsed. Unknown lines are ignored.
struct Report {
  std::optional<int> sigsys_nr;
  std::vector<int64_t> alloc_failures;
  std::string bad_alloc;
  std::string exception;
  std::string load_error;
  std::string error;
  std::string device_error;  // kevo-runner-cuda: the CUDA error that ended it
  std::string unfinished;    // kevo-runner-cuda: work left running at return
};
Report ParseReport(std::string_view text);

}  // namespace kevo::runner
