// Test helper: starts a real kevo binary as a child process, reads its
// stdout line by line, and kills it. Used by integration tests that run the
// coordinator and workers as separate processes on 127.0.0.1.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kevo::testing {

class ChildProcess {
 public:
  // Starts `argv` with stdout piped to us and stderr appended to `log_path`
  // (or inherited when empty). The child dies when the test process dies.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& log_path = "");
  ~ChildProcess();  // SIGKILLs the child if still running

  // Reads stdout until a line starting with `prefix` appears; returns the
  // rest of that line. DeadlineExceeded after `timeout`, Unavailable at EOF.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);

  void Kill(int signal);
  // Waits for exit; returns the raw wait status, or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool Running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string out;
  std::string err;
};
// Runs `argv` to completion (killed after `timeout`), capturing stdout and
// stderr through temporary files.
CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

// Directory of the kevo binaries (KEVO_BIN_DIR, set by ctest) and the
// repository (KEVO_SOURCE_DIR).
std::string BinDir();
std::string SourceDir();
// A fresh temporary folder, removed when the test process exits (see
// test_dir.h: a failed test's logs stay).
std::string MakeTempDir(const std::string& prefix);
// The file's bytes; empty when it cannot be read.
std::string ReadTextFile(const std::string& path);
// Replaces the file's content with `text` (test fixtures).
void WriteTextFile(const std::string& path, const std::string& text);
// Copies the repository's tasks/`name` to `dir`/`name` with `from` replaced
// by `to` in its task.textproto (a smaller timed shape, so that a test whose
// subject is not timing stays fast). False when the file does not hold `from`.
bool CopyTaskReplacing(const std::string& name, const std::string& dir, const std::string& from, const std::string& to);

}  // namespace kevo::testing

namespace kevo::testing {

// A minimal HTTP/1.0 GET over a TCP socket to 127.0.0.1:`port`; returns the
// body. Unavailable when the connection fails, Internal for a non-200 reply
// (its status line and the first 1000 bytes of its body).
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
// A TCP port that was free a moment ago (bind to 0, read, close).
int FreePort();

}  // namespace kevo::testing
