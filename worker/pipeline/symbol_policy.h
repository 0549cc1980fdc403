// Which external symbols a CPU candidate may import: the first sandbox layer,
// checked on the candidate's object file before any of its code runs. A
// kernel computes; it needs math, memory, OpenMP and the C++ runtime, and
// nothing that touches processes, files, the network or the clock. Raw
// `syscall` instructions import nothing and are stopped by the runner's
// seccomp filter instead (worker/runner/seccomp_policy.h).
//
// Thread-safe (pure functions).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kevo::worker {

// Whether a candidate built for x86-64 Linux (g++, glibc, libgomp) may import
// `name`.
bool IsAllowedImport(std::string_view name);

// The subset of `imports` that is not allowed, in the given order.
std::vector<std::string> ForbiddenImports(const std::vector<std::string>& imports);

// The import policy of a GPU platform's host object (the launcher code a
// CUDA or HIP candidate compiles to): what it may import, and which imports
// belong to a vendor library (refused with their own message).
struct DeviceImportPolicy {
  bool (*allowed)(std::string_view name);
  bool (*vendor)(std::string_view name);
  std::string_view vendor_advice;    // e.g. "cuBLAS is the baseline, not a building block"
  std::string_view allowed_summary;  // e.g. "CUDA candidates may use kernel launches, ..."
};
struct ImportVerdict {
  bool ok = true;
  std::string message;                 // SANDBOX_VIOLATION's message when !ok
  std::vector<std::string> forbidden;  // every refused import
};
ImportVerdict CheckDeviceImports(const std::vector<std::string>& imports,
                                 const DeviceImportPolicy& policy);

}  // namespace kevo::worker
