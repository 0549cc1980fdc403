// Which external symbols a CPU candidate may import: the first sandbox layer,
// checked on the candidate's object file before any of its code runs. A
// kernel computes; it needs math, memory, OpenMP and the C++ runtime, and
// nothing that touches processes, files, the network or the clock. Raw
// `syscall` instructions import nothing and are stopped by the runner's
// seccomp filter instead (worker/runner/seccomp_policy.h).
//
// Thread-safe (pure functions).
#pragma once

#include <functional>
#include <set>
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
// belong to a vendor library (refused with their own message). The runtime
// calls a kernel launcher needs are the same in CUDA and HIP but for the
// runtime's prefix (cudaMalloc, hipMalloc), so they are listed once
// (symbol_policy.cc); a policy adds what its runtime has beyond them.
struct DeviceImportPolicy {
  std::string_view language;  // "CUDA", "HIP": for the messages
  // The runtime API's prefix ("cuda", "hip").
  std::string_view api_prefix;
  // The compiler's registration and launch stubs ("__cuda", "__hip").
  std::string_view stub_prefix;
  // Vendor libraries ("cublas", "rocblas", ...): never, whatever else matches.
  std::vector<std::string_view> vendor_prefixes;
  // Beyond the shared ones, API families ("Graph": cudaGraph*) and single
  // calls ("GetDeviceProperties_v2") this runtime's launchers may use.
  std::vector<std::string_view> extra_families;
  std::set<std::string, std::less<>> extra_calls;
  std::string_view vendor_advice;  // e.g. "cuBLAS is the baseline, not a building block"
};
// Whether `name` belongs to one of the policy's vendor libraries.
bool IsVendorImport(std::string_view name, const DeviceImportPolicy& policy);
// Whether the host object may import `name`: the CPU policy's math, memory
// and C++ runtime (IsAllowedImport), atexit (the generated module
// destructor), the stubs, and the runtime calls a launcher needs (launches,
// streams, events, async copies and memsets, function attributes,
// occupancy, errors, device attributes, plain device allocation); never a
// vendor library's symbol.
bool IsAllowedDeviceImport(std::string_view name, const DeviceImportPolicy& policy);
struct ImportVerdict {
  bool ok = true;
  std::string message;                 // SANDBOX_VIOLATION's message when !ok
  std::vector<std::string> forbidden;  // every refused import
};
ImportVerdict CheckDeviceImports(const std::vector<std::string>& imports, const DeviceImportPolicy& policy);

}  // namespace kevo::worker
