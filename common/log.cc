#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kevo {
namespace {

absl::Mutex log_mu;
std::string& Component() {
  static std::string* c = new std::string("kevo");
  return *c;
}
std::atomic<int> min_level{[] {
  const char* env = std::getenv("KEVO_LOG_LEVEL");
  if (env != nullptr && std::strcmp(env, "debug") == 0) return 0;
  if (env != nullptr && std::strcmp(env, "warning") == 0) return 2;
  if (env != nullptr && std::strcmp(env, "error") == 0) return 3;
  return 1;
}()};
// The innermost ScopedLogContext of this thread; null outside any.
thread_local const std::string* log_context = nullptr;

}  // namespace

ScopedLogContext::ScopedLogContext(std::string context) : context_(std::move(context)), outer_(log_context) {
  log_context = &context_;
}

ScopedLogContext::~ScopedLogContext() { log_context = outer_; }

void SetLogComponent(std::string_view component) {
  absl::MutexLock l(&log_mu);
  Component() = std::string(component);
}

void SetLogLevel(LogLevel level) { min_level = static_cast<int>(level); }

void LogLine(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < min_level.load()) return;
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  const std::string context = log_context == nullptr ? "" : absl::StrCat("[", *log_context, "] ");
  absl::MutexLock l(&log_mu);
  std::fprintf(stderr, "%s %c %s %s%.*s\n", when.c_str(), kLetters[static_cast<int>(level)], Component().c_str(),
               context.c_str(), static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace kevo
