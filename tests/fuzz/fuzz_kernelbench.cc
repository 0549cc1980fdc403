// Fuzz target: a KernelBench problem file as the loader reads it (it never
// runs Python: it checks the three definitions and builds the task), then
// the check the coordinator makes of such a task when it arrives.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/task/kernelbench.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  (void)kevo::task::LooksLikeKernelBench(source);
  auto task = kevo::task::KernelBenchTask("level1/fuzz_problem.py", source);
  if (task.ok()) (void)kevo::task::ValidateReceivedTask(*task);
  return 0;
}
