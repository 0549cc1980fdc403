// The system-call policy of kevo-runner-cpu, the process that loads candidate
// code. Installed before the candidate is dlopen'ed, it allows only what
// loading a .so, OpenMP threads, malloc and writing to already-open files
// need; anything else raises SIGSYS, whose handler (installed first) writes
// "sigsys <nr>" to the report and exits with kExitSandboxViolation. The
// handler cannot be replaced afterwards: rt_sigaction is not allowed.
//
// Not thread-safe: call from the runner's main thread before any thread starts.
#pragma once

#include "absl/status/status.h"

namespace kevo::runner {

// Installs the SIGSYS handler that reports to `report_fd`. Returns Internal
// when sigaction fails.
absl::Status InstallSigsysHandler(int report_fd);

// Installs the main filter (sets no_new_privs). Returns Internal when the
// kernel refuses it.
absl::Status InstallRunnerFilter();

// Installs a second, stacked filter once every kernel is loaded: from then on
// openat fails with EACCES (candidate code cannot read host files through the
// read-only openat that dlopen needed) and seccomp/prctl raise SIGSYS. Returns
// Internal when the kernel refuses it.
absl::Status InstallPostLoadFilter();

}  // namespace kevo::runner
