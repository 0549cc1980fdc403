// The test folders' clean-up (test_dir.h): this binary runs itself as a
// child test process that makes a folder (a log and a cache file in it) and
// passes or fails, then looks at what the child's exit left.
#include "tests/testing/test_dir.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

namespace fs = std::filesystem;

// Runs only in the child (KEVO_TEST_DIR_CHILD set): prints its folder's path
// and fails when told to.
TEST(TestDirChild, MakesAFolder) {
  const char* mode = std::getenv("KEVO_TEST_DIR_CHILD");
  if (mode == nullptr) GTEST_SKIP() << "the child half of TestDirTest";
  const std::string dir = MakeTempDir("kevo-test-dir-child");
  fs::create_directories(dir + "/cache/inputs");
  WriteTextFile(dir + "/cache/worker.log", "a log line\n");
  WriteTextFile(dir + "/cache/inputs/cache.bin", "inputs");
  std::printf("DIR %s\n", dir.c_str());
  if (std::string(mode) == "fail") ADD_FAILURE() << "failing on purpose";
}

// The child's folder after it exits with `mode` (pass or fail), and `keep`
// as KEVO_KEEP_TEST_DIRS.
std::string ChildFolder(const std::string& mode, const std::string& keep) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  CommandResult r = RunCommand({"/usr/bin/env", "KEVO_TEST_DIR_CHILD=" + mode, "KEVO_KEEP_TEST_DIRS=" + keep, self,
                                "--gtest_filter=TestDirChild.*"},
                               absl::Seconds(60));
  EXPECT_EQ(r.exit_code, mode == "fail" ? 1 : 0) << r.out << r.err;
  const size_t at = r.out.find("DIR ");
  if (at == std::string::npos) return "";
  return r.out.substr(at + 4, r.out.find('\n', at) - at - 4);
}

TEST(TestDirTest, APassingTestsFolderIsRemoved) {
  const std::string dir = ChildFolder("pass", "");
  ASSERT_FALSE(dir.empty());
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST(TestDirTest, AFailingTestKeepsOnlyItsLogs) {
  const std::string dir = ChildFolder("fail", "");
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(dir + "/cache/worker.log")) << dir;
  EXPECT_FALSE(fs::exists(dir + "/cache/inputs")) << dir;
  fs::remove_all(dir);
}

TEST(TestDirTest, KeepTestDirsKeepsEverything) {
  const std::string dir = ChildFolder("pass", "1");
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(dir + "/cache/inputs/cache.bin")) << dir;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kevo::testing
