// Runs an untrusted or resource-hungry command (a compiler, the CPU runner that
// loads candidate code) as a child process with hard limits: its own process
// group (the whole group is killed on wall-clock timeout), rlimits (CPU time,
// address space, file size, open files, no core dumps), capped capture of
// stdout/stderr, and, when /usr/bin/bwrap works on this host, a bubblewrap
// container (read-only root, private /tmp, no network, own pid/ipc namespaces,
// new session, dies with its parent; only the named folders are writable).
//
// The API is fork+exec only: nothing runs between fork and exec except
// async-signal-safe set-up, so callers may be multi-threaded (and a GPU
// runtime initialised in the parent is never touched by the child).
//
// Thread-safety: a Sandbox is immutable after Create(); Run() may be called
// concurrently from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kevo::sandbox {

// Resource limits for one command. Zero means "no limit" for each field.
struct Limits {
  absl::Duration wall_timeout = absl::Seconds(60);
  // RLIMIT_CPU in seconds (rounded up); the kernel sends SIGXCPU when it is
  // reached (and SIGKILL one second later).
  double cpu_seconds = 0;
  int64_t address_space_bytes = 0;  // RLIMIT_AS
  int64_t file_size_bytes = 0;      // RLIMIT_FSIZE; writing past it raises SIGXFSZ
  int64_t open_files = 256;         // RLIMIT_NOFILE
};

struct Command {
  std::vector<std::string> argv;  // argv[0] is an absolute path or found on PATH
  // The child's whole environment ("KEY=VALUE"); the parent's is not inherited.
  std::vector<std::string> env;
  std::string cwd;  // must exist; empty: the parent's
  // Folders the command may write (bound read-write inside bubblewrap; the rest
  // of the file system is read-only there). `cwd` is not writable unless listed.
  std::vector<std::string> writable_dirs;
  // With bubblewrap: when non-empty, only these paths (read-only; missing ones
  // are skipped), the writable folders, /dev, /proc and a private /tmp are
  // visible, instead of the whole root file system read-only. Paths under
  // /dev/ (e.g. /dev/nvidia0) are bound as usable device nodes. Ignored
  // without bubblewrap.
  std::vector<std::string> visible_paths;
  Limits limits;
  // At most this many bytes of stdout and of stderr are kept; the rest is read
  // and dropped so the child never blocks on a full pipe.
  size_t output_cap_bytes = 64 * 1024;
};

struct Result {
  int exit_code = -1;      // valid when term_signal == 0 and !timed_out
  int term_signal = 0;     // the signal that ended the command, if any
  bool timed_out = false;  // killed by us at the wall-clock timeout
  absl::Duration wall_time;
  int64_t peak_rss_bytes = 0;  // of the largest process of the tree
  std::string stdout_data;
  std::string stderr_data;
  bool output_truncated = false;

  bool Succeeded() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  // "exit 1", "signal 11 (Segmentation fault)", "timed out after 2s".
  std::string Summary() const;
};

struct SandboxOptions {
  enum class Bwrap { kAuto, kAlways, kNever };
  // kAuto: use bubblewrap when a probe run works; kAlways: Create() fails
  // when it does not.
  Bwrap bwrap = Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";
};

class Sandbox {
 public:
  virtual ~Sandbox() = default;

  // Runs `command` to completion (or to its wall-clock timeout, when the whole
  // process group is killed with SIGKILL). A command that crashes, fails or
  // times out is an OK status with the outcome in Result; returns an error
  // only when the command could not be started (InvalidArgument for an empty
  // argv, Internal for pipe/fork failures). Thread-safe.
  virtual absl::StatusOr<Result> Run(const Command& command) const = 0;

  // Which layers are active, e.g. "bwrap+rlimits" or "rlimits".
  virtual std::string Description() const = 0;
  virtual bool UsesBwrap() const = 0;

  // Returns FailedPrecondition when options ask for bubblewrap and it does
  // not work here.
  static absl::StatusOr<std::unique_ptr<Sandbox>> Create(const SandboxOptions& options);
};

// Whether `bwrap_path` can start a container with kevo's arguments on this
// host (probed once per path and remembered). Thread-safe.
bool BwrapWorks(const std::string& bwrap_path);

}  // namespace kevo::sandbox
