// One-line structured logging: "2026-11-30T09:00:00.123Z I coordinator worker
// connected id=w1 platform=cpu". Thread-safe; writes to stderr.
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace kevo {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Sets the component name printed on every line (e.g. "coordinator").
void SetLogComponent(std::string_view component);
// Lines below `level` are dropped. Default: kInfo, or KEVO_LOG_LEVEL=debug.
void SetLogLevel(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

// Names the unit of work the calling thread is on (an evaluation and its
// attempt, "e-1a2b/1"): every line the thread logs while this object lives
// reads "... [e-1a2b/1] message". Scopes nest, the innermost naming the
// lines; threads the work starts do not inherit it. Not movable.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(std::string context);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  const std::string context_;
  const std::string* const outer_;
};

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}
template <typename... Args>
void LogDebug(const Args&... args) {
  LogLine(LogLevel::kDebug, absl::StrCat(args...));
}

}  // namespace kevo
