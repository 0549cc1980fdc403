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

// The policy of kevo-runner-cuda, whose GPU driver needs ioctl, mmap of
// device files, opening /dev/nvidia* and threads of its own, so an allowlist
// like the CPU runner's is not practical. Instead a denylist: starting
// programs (execve, execveat, fork, vfork, clone without CLONE_THREAD),
// sockets, ptrace and reaching into other processes (process_vm_*), changing
// limits or identity and loading kernel modules raise SIGSYS; clone3 fails
// with ENOSYS so glibc falls back to the filterable clone. Install it after
// the GPU context exists and before candidate code is loaded (sets
// no_new_privs). Returns Internal when the kernel refuses it.
absl::Status InstallDenylistFilter();

}  // namespace kevo::runner
