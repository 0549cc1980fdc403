#include "tests/testing/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "tests/testing/test_dir.h"

namespace kevo::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::vector<std::string>& argv,
                                                                  const std::string& log_path) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return absl::InternalError(absl::StrCat("open ", log_path));
  }
  std::vector<std::string> copy = argv;
  std::vector<char*> cargv;
  for (auto& a : copy) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);
    dup2(pipefd[1], STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(pipefd[1]);
  if (log_fd >= 0) close(log_fd);
  auto child = std::make_unique<ChildProcess>();
  child->pid_ = pid;
  child->out_fd_ = pipefd[0];
  return child;
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t nl;
    while ((nl = buffer_.find('\n')) != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no line starting with '", prefix, "'"));
    }
    pollfd p{out_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) return absl::UnavailableError("child closed stdout");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::Kill(int signal) {
  if (!reaped_) kill(pid_, signal);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError("child still running");
    absl::SleepFor(absl::Milliseconds(10));
  }
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  CommandResult result;
  std::string dir = MakeTempDir("kevo-cmd");
  std::string out_path = dir + "/out", err_path = dir + "/err";
  std::vector<std::string> copy = argv;
  std::vector<char*> cargv;
  for (auto& a : copy) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

std::string BinDir() {
  const char* d = std::getenv("KEVO_BIN_DIR");
  return d ? d : "build/bin";
}

std::string SourceDir() {
  const char* d = std::getenv("KEVO_SOURCE_DIR");
  return d ? d : ".";
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) std::abort();
  RemoveAtExit(tmpl);
  return tmpl;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool CopyTaskReplacing(const std::string& name, const std::string& dir, const std::string& from,
                       const std::string& to) {
  std::filesystem::copy(SourceDir() + "/tasks/" + name, dir + "/" + name, std::filesystem::copy_options::recursive);
  const std::string path = dir + "/" + name + "/task.textproto";
  std::string text = ReadTextFile(path);
  const size_t at = text.find(from);
  if (at == std::string::npos) return false;
  WriteTextFile(path, text.replace(at, from.size(), to));
  return true;
}

}  // namespace kevo::testing

namespace kevo::testing {

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port));
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  auto body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::InternalError("malformed HTTP reply");
  }
  if (resp.find(" 200 ") > resp.find("\r\n")) {
    // The status line and the start of the body, which says why (Prometheus'
    // query API answers a bad expression 400 with the parse error).
    return absl::InternalError(absl::StrCat(resp.substr(0, resp.find("\r\n")), ": ", resp.substr(body + 4, 1000)));
  }
  return resp.substr(body + 4);
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace kevo::testing
