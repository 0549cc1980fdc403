#include "tests/testing/test_dir.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <vector>

#include "gtest/gtest.h"

namespace kevo::testing {
namespace {

namespace fs = std::filesystem;

// Removes everything under `dir` but its *.log files and the folders that
// hold them.
void RemoveAllButLogs(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      RemoveAllButLogs(it->path());
      if (fs::is_empty(it->path(), ec)) doomed.push_back(it->path());
    } else if (it->path().extension() != ".log") {
      doomed.push_back(it->path());
    }
  }
  for (const fs::path& p : doomed) fs::remove_all(p, ec);
}

class Registry {
 public:
  static Registry& Get() {
    // gtest's instance first, so that it is destroyed after this one.
    ::testing::UnitTest::GetInstance();
    static Registry registry;
    return registry;
  }
  void Add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(dir);
  }
  ~Registry() {
    if (::getpid() != owner_) return;
    const char* keep = std::getenv("KEVO_KEEP_TEST_DIRS");
    if (keep != nullptr && *keep != '\0' && std::string(keep) != "0") return;
    const bool failed = ::testing::UnitTest::GetInstance()->Failed();
    std::error_code ec;
    for (const std::string& dir : dirs_) {
      if (!fs::exists(dir, ec)) continue;
      if (!failed) {
        fs::remove_all(dir, ec);
        continue;
      }
      RemoveAllButLogs(dir);
      if (fs::is_empty(dir, ec)) {
        fs::remove(dir, ec);
      } else {
        std::fprintf(stderr, "the failed test's logs are kept in %s\n", dir.c_str());
      }
    }
  }

 private:
  Registry() : owner_(::getpid()) {}
  pid_t owner_;
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

}  // namespace

void RemoveAtExit(const std::string& dir) { Registry::Get().Add(dir); }

std::filesystem::path FreshTestDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kevo-" + prefix + "-" + std::to_string(::getpid()) + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  RemoveAtExit(dir.string());
  return dir;
}

}  // namespace kevo::testing
