// kevo-runner-cpu replaces malloc and friends with thin wrappers around
// glibc's own allocator (__libc_malloc, ...) so that an allocation failure --
// most often the address-space rlimit refusing a huge request -- is recorded
// in the report ("alloc_failed <bytes>") before NULL is returned. The worker
// then classifies the crash or error that usually follows as
// RESOURCE_EXHAUSTED instead of a plain crash.
//
// The wrappers are async-signal-safe in their failure path (raw write(2)).
#pragma once

namespace kevo::runner {

// Where failures are reported from now on; -1 turns reporting off.
// Not thread-safe against concurrent allocation failures while changing it:
// call once at start-up.
void SetAllocReportFd(int fd);

}  // namespace kevo::runner
