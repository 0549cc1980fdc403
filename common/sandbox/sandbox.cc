#include "common/sandbox/sandbox.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "common/log.h"

namespace kevo::sandbox {
namespace {

// bubblewrap reports a command killed by signal N as exit status 128+N.
constexpr int kBwrapSignalBase = 128;

std::string ErrnoText(int err) { return std::string(strerrordesc_np(err) ? strerrordesc_np(err) : "?"); }

// Finds `name` on PATH (taken from `env`, else the parent's) when it has no
// slash. Returns it unchanged when nothing is found, so exec reports ENOENT.
std::string ResolveProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

struct Pipe {
  int fds[2] = {-1, -1};
  ~Pipe() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Reads what is available from `fd` into `out` up to `cap` bytes, dropping
// the rest. Returns false at EOF or on error.
bool Drain(int fd, std::string& out, size_t cap, bool& truncated) {
  char buf[16384];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  size_t keep = out.size() < cap ? std::min(cap - out.size(), static_cast<size_t>(n)) : 0;
  out.append(buf, keep);
  if (keep < static_cast<size_t>(n)) truncated = true;
  return true;
}

class ProcessSandbox final : public Sandbox {
 public:
  ProcessSandbox(bool use_bwrap, std::string bwrap_path) : use_bwrap_(use_bwrap), bwrap_path_(std::move(bwrap_path)) {}

  absl::StatusOr<Result> Run(const Command& command) const override;
  std::string Description() const override { return use_bwrap_ ? "bwrap+rlimits" : "rlimits"; }
  bool UsesBwrap() const override { return use_bwrap_; }

 private:
  std::vector<std::string> BuildArgv(const Command& command) const;

  const bool use_bwrap_;
  const std::string bwrap_path_;
};

std::vector<std::string> BwrapPrefix(const std::string& bwrap_path, const std::vector<std::string>& writable_dirs,
                                     const std::string& cwd, const std::vector<std::string>& visible_paths = {}) {
  std::vector<std::string> argv = {bwrap_path};
  if (visible_paths.empty()) argv.insert(argv.end(), {"--ro-bind", "/", "/"});
  argv.insert(argv.end(), {"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"});
  // Binds come after --tmpfs /tmp so that folders under /tmp stay visible.
  for (const std::string& path : visible_paths) {
    // Device nodes (/dev/nvidia*, for the GPU runner) keep working: a
    // read-only bind would mount them nodev.
    const bool device = path.rfind("/dev/", 0) == 0;
    argv.insert(argv.end(), {device ? "--dev-bind-try" : "--ro-bind-try", path, path});
  }
  for (const std::string& dir : writable_dirs) {
    argv.insert(argv.end(), {"--bind", dir, dir});
  }
  argv.insert(argv.end(), {"--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"});
  if (!cwd.empty()) argv.insert(argv.end(), {"--chdir", cwd});
  argv.push_back("--");
  return argv;
}

std::vector<std::string> ProcessSandbox::BuildArgv(const Command& command) const {
  std::vector<std::string> argv;
  if (use_bwrap_) {
    std::vector<std::string> dirs;
    for (const std::string& d : command.writable_dirs) {
      std::error_code ec;
      auto canonical = std::filesystem::weakly_canonical(d, ec);
      dirs.push_back(ec ? d : canonical.string());
    }
    std::string cwd = command.cwd;
    if (!cwd.empty()) {
      std::error_code ec;
      auto canonical = std::filesystem::weakly_canonical(cwd, ec);
      if (!ec) cwd = canonical.string();
    }
    std::vector<std::string> visible;
    for (const std::string& p : command.visible_paths) {
      std::error_code ec;
      auto canonical = std::filesystem::weakly_canonical(p, ec);
      // Symlinked roots (/lib -> usr/lib) keep their own name: bwrap binds
      // the target under the link's path.
      visible.push_back(ec || std::filesystem::is_symlink(p, ec) ? p : canonical.string());
    }
    argv = BwrapPrefix(bwrap_path_, dirs, cwd, visible);
  }
  argv.push_back(ResolveProgram(command.argv[0], command.env));
  argv.insert(argv.end(), command.argv.begin() + 1, command.argv.end());
  return argv;
}

absl::StatusOr<Result> ProcessSandbox::Run(const Command& command) const {
  if (command.argv.empty()) return absl::InvalidArgumentError("sandbox: empty argv");

  // Everything the child needs is prepared before fork: after it only
  // async-signal-safe calls are allowed.
  std::vector<std::string> argv_strings = BuildArgv(command);
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = command.env;
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  struct LimitSpec {
    int resource;
    rlimit value;
  };
  std::vector<LimitSpec> limits;
  const Limits& l = command.limits;
  if (l.cpu_seconds > 0) {
    rlim_t secs = static_cast<rlim_t>(std::ceil(l.cpu_seconds));
    limits.push_back({RLIMIT_CPU, {secs, secs + 1}});
  }
  if (l.address_space_bytes > 0) {
    rlim_t v = static_cast<rlim_t>(l.address_space_bytes);
    limits.push_back({RLIMIT_AS, {v, v}});
  }
  if (l.file_size_bytes > 0) {
    rlim_t v = static_cast<rlim_t>(l.file_size_bytes);
    limits.push_back({RLIMIT_FSIZE, {v, v}});
  }
  if (l.open_files > 0) {
    rlim_t v = static_cast<rlim_t>(l.open_files);
    limits.push_back({RLIMIT_NOFILE, {v, v}});
  }
  limits.push_back({RLIMIT_CORE, {0, 0}});

  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) return absl::InternalError(absl::StrCat("sandbox: open /dev/null: ", ErrnoText(errno)));
  Pipe out_pipe, err_pipe, exec_pipe;
  if (pipe2(out_pipe.fds, O_CLOEXEC) != 0 || pipe2(err_pipe.fds, O_CLOEXEC) != 0 ||
      pipe2(exec_pipe.fds, O_CLOEXEC) != 0) {
    close(devnull);
    return absl::InternalError(absl::StrCat("sandbox: pipe: ", ErrnoText(errno)));
  }
  const char* cwd = command.cwd.empty() ? nullptr : command.cwd.c_str();

  absl::Time start = absl::Now();
  pid_t pid = fork();
  if (pid < 0) {
    close(devnull);
    return absl::InternalError(absl::StrCat("sandbox: fork: ", ErrnoText(errno)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only. Failures are reported to the
    // parent through exec_pipe (closed by a successful exec).
    auto fail = [&](int stage) {
      int report[2] = {stage, errno};
      (void)!write(exec_pipe.fds[1], report, sizeof(report));
      _exit(127);
    };
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
    if (dup2(devnull, 0) < 0 || dup2(out_pipe.fds[1], 1) < 0 || dup2(err_pipe.fds[1], 2) < 0) fail(1);
    for (const LimitSpec& spec : limits) {
      if (setrlimit(spec.resource, &spec.value) != 0) fail(2);
    }
    if (cwd != nullptr && chdir(cwd) != 0) fail(3);
    // Only 0-2 survive exec (the exec report pipe is close-on-exec already).
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 4096; ++fd) {
        if (fd != exec_pipe.fds[1]) close(fd);
      }
    }
    execve(argv[0], argv.data(), envp.data());
    fail(4);
  }

  // Parent.
  setpgid(pid, pid);  // also done by the child; whoever runs first wins the race
  close(devnull);
  CloseFd(out_pipe.fds[1]);
  CloseFd(err_pipe.fds[1]);
  CloseFd(exec_pipe.fds[1]);

  Result result;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  const absl::Time deadline = start + command.limits.wall_timeout;
  bool exited = false;
  int status = 0;
  rusage usage{};
  bool out_open = true, err_open = true;
  while (true) {
    if (!exited) {
      pid_t r = wait4(pid, &status, WNOHANG, &usage);
      if (r == pid) {
        exited = true;
        // Stragglers (daemonised grandchildren) must not outlive the command
        // nor keep our pipes open.
        kill(-pid, SIGKILL);
      }
    }
    if (exited && !out_open && !err_open) break;
    absl::Time now = absl::Now();
    if (!exited && now >= deadline && command.limits.wall_timeout > absl::ZeroDuration()) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      exited = true;
      continue;  // drain what is left
    }
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {out_pipe.fds[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe.fds[0], POLLIN, 0};
    if (!exited && pidfd >= 0) fds[n++] = {pidfd, POLLIN, 0};
    int timeout_ms = 50;  // without a pidfd we poll for the child's exit
    if (!exited && pidfd >= 0) {
      timeout_ms = command.limits.wall_timeout > absl::ZeroDuration()
                       ? static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(deadline - now) + 1, 60000))
                       : 60000;
    }
    if (exited) timeout_ms = 200;  // output left in the pipes after exit
    int ready = poll(fds, n, timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready == 0 && exited) break;  // pipes held open by something we could not kill
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == out_pipe.fds[0]) {
        out_open = Drain(out_pipe.fds[0], result.stdout_data, command.output_cap_bytes, result.output_truncated);
      } else if (fds[i].fd == err_pipe.fds[0]) {
        err_open = Drain(err_pipe.fds[0], result.stderr_data, command.output_cap_bytes, result.output_truncated);
      }
    }
  }
  if (pidfd >= 0) close(pidfd);
  result.wall_time = absl::Now() - start;
  result.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;

  int report[2] = {0, 0};
  if (read(exec_pipe.fds[0], report, sizeof(report)) == sizeof(report)) {
    static constexpr const char* kStages[] = {"", "redirect", "setrlimit", "chdir", "exec"};
    return absl::InternalError(absl::StrCat("sandbox: cannot start ", argv_strings[0], ": ",
                                            report[0] >= 1 && report[0] <= 4 ? kStages[report[0]] : "?", ": ",
                                            ErrnoText(report[1])));
  }
  if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (use_bwrap_ && result.exit_code > kBwrapSignalBase && result.exit_code < kBwrapSignalBase + 65) {
      result.term_signal = result.exit_code - kBwrapSignalBase;
      result.exit_code = -1;
    }
  }
  return result;
}

}  // namespace

std::string Result::Summary() const {
  if (timed_out) return absl::StrCat("timed out after ", absl::FormatDuration(wall_time));
  if (term_signal != 0) {
    const char* name = sigdescr_np(term_signal);
    return absl::StrCat("signal ", term_signal, " (", name ? name : "?", ")");
  }
  return absl::StrCat("exit ", exit_code);
}

bool BwrapWorks(const std::string& bwrap_path) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* probed = new std::map<std::string, bool>();
  absl::MutexLock lock(&mu);
  auto it = probed->find(bwrap_path);
  if (it != probed->end()) return it->second;
  bool works = false;
  char dir_template[] = "/tmp/kevo-bwrap-probe-XXXXXX";
  if (access(bwrap_path.c_str(), X_OK) == 0 && mkdtemp(dir_template) != nullptr) {
    ProcessSandbox plain(/*use_bwrap=*/false, "");
    Command probe;
    probe.argv = BwrapPrefix(bwrap_path, {dir_template}, dir_template);
    probe.argv.push_back("/bin/true");
    probe.limits.wall_timeout = absl::Seconds(20);
    auto r = plain.Run(probe);
    works = r.ok() && r->Succeeded();
    if (!works) {
      LogWarning("bubblewrap at ", bwrap_path, " does not work here (",
                 r.ok() ? r->Summary() + ": " + r->stderr_data : std::string(r.status().message()),
                 "); sandboxing with rlimits and seccomp only");
    }
    rmdir(dir_template);
  }
  (*probed)[bwrap_path] = works;
  return works;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options) {
  bool use_bwrap = false;
  switch (options.bwrap) {
    case SandboxOptions::Bwrap::kNever:
      break;
    case SandboxOptions::Bwrap::kAuto:
      use_bwrap = BwrapWorks(options.bwrap_path);
      break;
    case SandboxOptions::Bwrap::kAlways:
      if (!BwrapWorks(options.bwrap_path)) {
        return absl::FailedPreconditionError(
            absl::StrCat("bubblewrap (", options.bwrap_path,
                         ") cannot start a container on this host; install it or allow user namespaces"));
      }
      use_bwrap = true;
      break;
  }
  return std::make_unique<ProcessSandbox>(use_bwrap, options.bwrap_path);
}

}  // namespace kevo::sandbox
