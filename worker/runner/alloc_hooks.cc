#include "worker/runner/alloc_hooks.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <atomic>

// glibc's allocator under its internal names (exported since glibc 2.2.5).
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void __libc_free(void* p);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
}

namespace kevo::runner {
namespace {

std::atomic<int> g_report_fd{-1};
std::atomic<int> g_reported{0};
constexpr int kMaxReports = 16;  // a retry loop must not flood the report

void ReportFailure(size_t bytes) {
  int fd = g_report_fd.load(std::memory_order_relaxed);
  if (fd < 0 || g_reported.fetch_add(1, std::memory_order_relaxed) >= kMaxReports) return;
  char line[64] = "alloc_failed ";
  int pos = 13;
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + bytes % 10);
    bytes /= 10;
  } while (bytes > 0 && n < 23);
  while (n > 0) line[pos++] = digits[--n];
  line[pos++] = '\n';
  (void)!write(fd, line, pos);
}

size_t Product(size_t a, size_t b) {
  size_t r;
  return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

}  // namespace

void SetAllocReportFd(int fd) { g_report_fd.store(fd); }

}  // namespace kevo::runner

using kevo::runner::ReportFailure;

extern "C" {

void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  if (p == nullptr) ReportFailure(size);
  return p;
}

void free(void* p) { __libc_free(p); }

void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  if (p == nullptr && n != 0 && size != 0) ReportFailure(kevo::runner::Product(n, size));
  return p;
}

void* realloc(void* old, size_t size) {
  void* p = __libc_realloc(old, size);
  if (p == nullptr && size != 0) ReportFailure(size);
  return p;
}

void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) ReportFailure(size);
  return p;
}

void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

void* valloc(size_t size) {
  void* p = __libc_valloc(size);
  if (p == nullptr) ReportFailure(size);
  return p;
}

void* pvalloc(size_t size) {
  void* p = __libc_pvalloc(size);
  if (p == nullptr) ReportFailure(size);
  return p;
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) {
    ReportFailure(size);
    return ENOMEM;
  }
  *out = p;
  return 0;
}

}  // extern "C"
