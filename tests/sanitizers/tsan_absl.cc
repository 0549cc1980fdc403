// ThreadSanitizer and Debian's Abseil: libabsl_synchronization is not built
// with -fsanitize=thread, so TSan cannot see that an absl::Mutex orders what
// two threads do under it, and reports every access guarded by one as a data
// race. Linked into each program of a `-DKEVO_SANITIZE=thread` build (and
// nowhere else), this file defines the Mutex, CondVar, Notification and
// BlockingCounter operations the program calls: each calls the library's own
// (found with dlsym(RTLD_NEXT)) and tells TSan of the happens-before edge it
// makes: a release on the object's address before an unlock, an acquire after
// a lock. The program's definitions take precedence over the library's for
// every caller that links against it, gRPC's own mutexes included. Deadlock
// detection is not modelled; races are. docs/fuzzing.md, "Sanitizers".
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include <sanitizer/tsan_interface.h>

// In the TSan runtime, not declared by GCC 12's header.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

namespace {

#define KEVO_STR2(x) #x
#define KEVO_STR(x) KEVO_STR2(x)

// "_ZN4absl<len><inline namespace>" + rest: the library's mangled name.
std::string Mangled(const char* rest) {
  const std::string ns = KEVO_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN" + std::string(rest[0] == 'K' ? "K" : "") + "4absl" + std::to_string(ns.size()) + ns +
         (rest[0] == 'K' ? rest + 1 : rest);
}

template <typename Fn>
Fn Real(const char* rest) {
  void* f = dlsym(RTLD_NEXT, Mangled(rest).c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl: %s not found in Abseil\n", Mangled(rest).c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

// The library's function `rest` (its mangled name after the namespace), found once.
#define KEVO_REAL(type, rest) static const auto real = Real<type>(rest)

void Acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
void Release(const void* p) { __tsan_release(const_cast<void*>(p)); }

// The library's call, with this thread's memory accesses ignored: Abseil runs
// the program's code inside it (a waiter's Condition is evaluated by the
// thread that unlocks, after that thread's release edge and before the
// waiter's acquire), and its own bookkeeping (deadlock detection's graph)
// is ordered by the lock TSan cannot see. Without this, both are reported
// as races.
template <typename Fn, typename... Args>
auto Call(Fn fn, Args&&... args) {
  __tsan_ignore_thread_begin();
  struct End {
    ~End() { __tsan_ignore_thread_end(); }
  } end;
  return fn(std::forward<Args>(args)...);
}

}  // namespace

namespace absl {

void Mutex::Lock() {
  KEVO_REAL(void (*)(Mutex*), "5Mutex4LockEv");
  Call(real, this);
  Acquire(this);
}
void Mutex::ReaderLock() {
  KEVO_REAL(void (*)(Mutex*), "5Mutex10ReaderLockEv");
  Call(real, this);
  Acquire(this);
}
void Mutex::Unlock() {
  KEVO_REAL(void (*)(Mutex*), "5Mutex6UnlockEv");
  Release(this);
  Call(real, this);
}
void Mutex::ReaderUnlock() {
  KEVO_REAL(void (*)(Mutex*), "5Mutex12ReaderUnlockEv");
  Release(this);
  Call(real, this);
}
bool Mutex::TryLock() {
  KEVO_REAL(bool (*)(Mutex*), "5Mutex7TryLockEv");
  const bool locked = Call(real, this);
  if (locked) Acquire(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  KEVO_REAL(bool (*)(Mutex*), "5Mutex13ReaderTryLockEv");
  const bool locked = Call(real, this);
  if (locked) Acquire(this);
  return locked;
}
void Mutex::LockWhen(const Condition& cond) {
  KEVO_REAL(void (*)(Mutex*, const Condition&), "5Mutex8LockWhenERKNS0_9ConditionE");
  Call(real, this, cond);
  Acquire(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  KEVO_REAL(void (*)(Mutex*, const Condition&), "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Call(real, this, cond);
  Acquire(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  KEVO_REAL(bool (*)(Mutex*, const Condition&, Duration),
            "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = Call(real, this, cond, timeout);
  Acquire(this);  // held either way
  return met;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  KEVO_REAL(bool (*)(Mutex*, const Condition&, Time), "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = Call(real, this, cond, deadline);
  Acquire(this);
  return met;
}
void Mutex::Await(const Condition& cond) {
  KEVO_REAL(void (*)(Mutex*, const Condition&), "5Mutex5AwaitERKNS0_9ConditionE");
  Release(this);
  Call(real, this, cond);
  Acquire(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  KEVO_REAL(bool (*)(Mutex*, const Condition&, Duration), "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Release(this);
  const bool met = Call(real, this, cond, timeout);
  Acquire(this);
  return met;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  KEVO_REAL(bool (*)(Mutex*, const Condition&, Time), "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Release(this);
  const bool met = Call(real, this, cond, deadline);
  Acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  KEVO_REAL(void (*)(CondVar*, Mutex*), "7CondVar4WaitEPNS0_5MutexE");
  Release(mu);
  Call(real, this, mu);
  Acquire(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  KEVO_REAL(bool (*)(CondVar*, Mutex*, Duration), "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Release(mu);
  const bool timed_out = Call(real, this, mu, timeout);
  Acquire(mu);
  return timed_out;
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  KEVO_REAL(bool (*)(CondVar*, Mutex*, Time), "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Release(mu);
  const bool timed_out = Call(real, this, mu, deadline);
  Acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  KEVO_REAL(void (*)(Notification*), "12Notification6NotifyEv");
  Release(this);
  Call(real, this);
}
void Notification::WaitForNotification() const {
  KEVO_REAL(void (*)(const Notification*), "K12Notification19WaitForNotificationEv");
  Call(real, this);
  Acquire(this);
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  KEVO_REAL(bool (*)(const Notification*, Duration), "K12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = Call(real, this, timeout);
  if (notified) Acquire(this);
  return notified;
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  KEVO_REAL(bool (*)(const Notification*, Time), "K12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = Call(real, this, deadline);
  if (notified) Acquire(this);
  return notified;
}

bool BlockingCounter::DecrementCount() {
  KEVO_REAL(bool (*)(BlockingCounter*), "15BlockingCounter14DecrementCountEv");
  Release(this);
  const bool zero = Call(real, this);
  if (zero) Acquire(this);
  return zero;
}
void BlockingCounter::Wait() {
  KEVO_REAL(void (*)(BlockingCounter*), "15BlockingCounter4WaitEv");
  Call(real, this);
  Acquire(this);
}

}  // namespace absl
