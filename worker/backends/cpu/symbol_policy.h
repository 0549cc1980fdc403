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

}  // namespace kevo::worker
