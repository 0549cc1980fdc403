#include "worker/runner/runner_io.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cerrno>
#include <cfenv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "worker/runner/protocol.h"

namespace kevo::runner {
namespace {

int g_report_fd = 2;
const char* g_runner_name = "kevo-runner";

}  // namespace

int ReportFd() { return g_report_fd; }

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void ReportLine(absl::string_view key, absl::string_view value) {
  std::string line = absl::StrCat(key, " ", value);
  std::replace(line.begin(), line.end(), '\n', ' ');
  line.push_back('\n');
  WriteAll(g_report_fd, line.data(), line.size());
}

void Fail(int code, absl::string_view key, absl::string_view message) {
  ReportLine(key, message);
  if (g_report_fd != 2) {
    std::string line = absl::StrCat(g_runner_name, ": ", message, "\n");
    WriteAll(2, line.data(), line.size());
  }
  _exit(code);
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

uint64_t HashBytes(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xBF58476D1CE4E5B9ULL)) * 0x94D049BB133111EBULL;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h;
}

std::string CommandLine::Get(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? "" : it->second;
}

CommandLine ParseCommandLine(int argc, char** argv, const char* runner_name) {
  g_runner_name = runner_name;
  CommandLine cl;
  cl.mode = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Fail(kExitInfra, "error", absl::StrCat("unexpected argument ", arg));
    size_t eq = arg.find('=');
    cl.flags[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : arg.substr(eq + 1);
  }
  if (cl.Has("report")) {
    const std::string path = cl.Get("report");
    g_report_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_report_fd < 0) {
      g_report_fd = 2;
      Fail(kExitInfra, "error", absl::StrCat("cannot open report ", path));
    }
  }
  return cl;
}

void Require(const CommandLine& cl, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (!cl.Has(name)) Fail(kExitInfra, "error", absl::StrCat("missing --", name));
  }
}

v1::Task ReadTaskFile(const std::string& path) {
  v1::Task task;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot open task ", path));
  if (!task.ParseFromFileDescriptor(fd)) Fail(kExitInfra, "error", "task file does not parse");
  close(fd);
  return task;
}

int OpenOut(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  return fd;
}

int OpenIn(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(kExitInfra, "error", absl::StrCat("cannot open ", path));
  return fd;
}

std::vector<uint64_t> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    uint64_t seed;
    if (!absl::SimpleAtoi(s, &seed)) Fail(kExitInfra, "error", "bad --seeds");
    seeds.push_back(seed);
  }
  if (seeds.empty()) Fail(kExitInfra, "error", "missing --seeds");
  return seeds;
}

std::string AbsoluteKernelPath(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) Fail(kExitInfra, "error", absl::StrCat("no kernel at ", path));
  std::string out = resolved;
  free(resolved);
  return out;
}

namespace {

uint16_t X87ControlWord() {
  uint16_t cw = 0;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  return cw;
}

struct FpEnvironment {
  fenv_t env;
  unsigned mxcsr;
  uint16_t x87;
};

const FpEnvironment& StartingFpEnvironment() {
  static const FpEnvironment start = [] {
    FpEnvironment e;
    fegetenv(&e.env);
    e.mxcsr = _mm_getcsr();
    e.x87 = X87ControlWord();
    return e;
  }();
  return start;
}

}  // namespace

void RestoreFpEnvironment() {
  const FpEnvironment& start = StartingFpEnvironment();
  if (_mm_getcsr() != start.mxcsr || X87ControlWord() != start.x87) fesetenv(&start.env);
}

void* OpenKernelLibrary(const std::string& path) {
  StartingFpEnvironment();  // read before any kernel is loaded
  // A kernel linked with -ffast-math carries GCC's crtfastmath, whose
  // constructor turns on flush-to-zero and denormals-are-zero in the loading
  // thread (MXCSR 0x1f80 -> 0x9fc0), and every thread started later inherits
  // it: the reference and the baselines timed in this process would compute
  // in that mode. Put back the environment the runner had before the load.
  fenv_t before;
  fegetenv(&before);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  fesetenv(&before);
  if (handle == nullptr) {
    const char* err = dlerror();
    Fail(kExitLoadFailed, "load_error", err ? err : path);
  }
  return handle;
}

}  // namespace kevo::runner
