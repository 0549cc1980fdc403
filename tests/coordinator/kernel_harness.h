// Test and benchmark harness for generated kernels: compiles C++ source with
// g++ into a shared object in a temporary folder, dlopens it, and calls the
// task's exported function on buffers made from the task's specs. No sandbox:
// only for trusted (built-in, generated) code in tests and benchmarks; the
// worker's CPU backend is what evaluates candidates in production.
// Not thread-safe per object; distinct objects may be used concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "common/tensor.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"

namespace kevo::harness {

// A folder under $TMPDIR (or /tmp) removed with its contents on destruction.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Create(const std::string& prefix);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Flags candidates are compiled with (the worker's): -O3 -march=native
// -fopenmp -fPIC -shared, then candidate.extra_flags.
std::vector<std::string> CandidateFlags(const v1::Candidate& candidate);
// Flags the reference is compiled with: -O2 -fPIC -shared.
std::vector<std::string> ReferenceFlags();

class CompiledKernel {
 public:
  // Compiles `source` with g++ and `flags` into DIR/NAME.so and looks up
  // `function`. Returns InvalidArgument with the compiler's output when it
  // fails to compile, NotFound when the symbol is missing.
  static absl::StatusOr<std::unique_ptr<CompiledKernel>> Compile(const std::string& source,
                                                                 const std::vector<std::string>& flags,
                                                                 const std::string& function, const std::string& dir,
                                                                 const std::string& name);
  ~CompiledKernel();

  // The most parameters Call passes.
  static constexpr size_t kMaxParams = 12;
  // Calls the function with 1 to kMaxParams integer-class arguments (pointers
  // and int64_t are both passed in 64-bit integer registers or stack slots).
  void Call(const std::vector<intptr_t>& args) const;

 private:
  CompiledKernel(void* handle, void* fn) : handle_(handle), fn_(fn) {}
  void* handle_;
  void* fn_;
};

// 64-byte aligned bytes.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data = nullptr;
  size_t size = 0;
};

// The tensors of one call of a task's function at one binding.
struct TaskCall {
  std::vector<std::unique_ptr<AlignedBuffer>> inputs;   // task.inputs() order
  std::vector<std::unique_ptr<AlignedBuffer>> outputs;  // task.outputs() order
  std::vector<int64_t> output_counts;
  std::vector<intptr_t> args;  // in signature order
  // Refills the outputs with NaN / 0x5A (PoisonTensor).
  void PoisonOutputs(const v1::Task& task);
};

// Allocates and fills the inputs (FillTensor with `seed`), poisons the
// outputs, and lays out the arguments. InvalidArgument for a bad task.
absl::StatusOr<std::unique_ptr<TaskCall>> MakeTaskCall(const v1::Task& task, const v1::Binding& binding, uint64_t seed);

// Compares every output of `got` with `want` under the task's tolerances.
// Returns OK or FailedPrecondition naming the output, the first bad index and
// the errors.
absl::Status CompareOutputs(const v1::Task& task, const TaskCall& got, const TaskCall& want);

}  // namespace kevo::harness
