#include "cli/embedded.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

#include "common/status.h"

namespace kevo::cli {

std::string SelfDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return ".";
  return exe.parent_path().string();
}

namespace {

// The last lines of a log file, for error messages.
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > 15) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Embedded>> Embedded::Start(const EmbeddedOptions& options) {
  std::unique_ptr<Embedded> e(new Embedded());
  if (options.db_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kevo-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    }
    e->db_dir_ = tmpl;
    e->remove_db_ = true;
  } else {
    e->db_dir_ = options.db_dir;
  }
  std::string worker = SelfDir() + "/kevo-worker";
  if (access(worker.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("kevo-worker not found beside kevo (", worker, "); build it with `make build`"));
  }
  coordinator::CoordinatorOptions co;
  co.listen = "127.0.0.1:0";
  co.db_dir = e->db_dir_ + "/db";
  co.llm_config = options.llm_config;
  co.scheduler.lease = options.lease;
  KEVO_ASSIGN_OR_RETURN(e->coordinator_, coordinator::Coordinator::Start(co));

  std::vector<std::string> platforms = options.platforms;
  if (platforms.empty()) platforms.push_back(options.platform);
  std::vector<std::pair<std::string, std::string>> logs;  // platform, log file
  for (const std::string& platform : platforms) {
    std::string log = !options.worker_log.empty() && platforms.size() == 1 ? options.worker_log
                      : platforms.size() == 1                              ? e->db_dir_ + "/worker.log"
                                              : absl::StrCat(e->db_dir_, "/worker-", platform, ".log");
    std::vector<std::string> args = {worker,
                                     "--coordinator",
                                     e->coordinator_->address(),
                                     "--platform",
                                     platform,
                                     "--work-dir",
                                     absl::StrCat(e->db_dir_, "/work", platforms.size() == 1 ? "" : "-" + platform)};
    if (options.slots > 0) {
      args.push_back("--slots");
      args.push_back(std::to_string(options.slots));
    }
    for (const auto& f : options.worker_flags) args.push_back(f);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return absl::InternalError(absl::StrCat("open ", log, ": ", std::strerror(errno)));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      dup2(log_fd, STDERR_FILENO);
      dup2(log_fd, STDOUT_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(log_fd);
    e->worker_pids_.push_back(pid);
    logs.emplace_back(platform, log);
  }

  // Wait until every worker has said Hello (each measures its host first).
  absl::Time deadline = absl::Now() + absl::Seconds(90);
  absl::Time next_note = absl::Now() + absl::Seconds(3);
  while (e->coordinator_->scheduler()->ListWorkers().size() < platforms.size()) {
    for (size_t i = 0; i < e->worker_pids_.size(); ++i) {
      int status = 0;
      if (e->worker_pids_[i] > 0 && waitpid(e->worker_pids_[i], &status, WNOHANG) == e->worker_pids_[i]) {
        e->worker_pids_[i] = -1;
        return absl::UnavailableError(absl::StrCat("the ", logs[i].first,
                                                   " kevo-worker exited before connecting; its log (", logs[i].second,
                                                   ") ends:\n", LogTail(logs[i].second)));
      }
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("kevo-worker did not connect within 90s; see its log ",
                                                      logs.size() == 1 ? logs[0].second : e->db_dir_));
    }
    if (absl::Now() > next_note) {
      std::fprintf(stderr, "waiting for the local %s worker%s to calibrate and connect...\n",
                   absl::StrJoin(platforms, " and ").c_str(), platforms.size() > 1 ? "s" : "");
      next_note = absl::Now() + absl::Seconds(10);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return e;
}

Embedded::~Embedded() {
  for (int pid : worker_pids_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  for (int pid : worker_pids_) {
    if (pid <= 0) continue;
    absl::Time deadline = absl::Now() + absl::Seconds(5);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  if (coordinator_) coordinator_->Shutdown();
  coordinator_.reset();
  if (remove_db_) {
    std::error_code ec;
    std::filesystem::remove_all(db_dir_, ec);
  }
}

}  // namespace kevo::cli
