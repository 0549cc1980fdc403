// Tests for kevo::sandbox: exit status and output capture, wall-clock kill of
// the whole process group, rlimits, the output cap, and the bubblewrap layer.
#include "common/sandbox/sandbox.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo::sandbox {
namespace {

using ::testing::HasSubstr;

std::string MakeTempDir() {
  char dir[] = "/tmp/kevo-sandbox-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

Command Shell(const std::string& script) {
  Command c;
  c.argv = {"/bin/sh", "-c", script};
  c.env = {"PATH=/usr/bin:/bin"};
  c.limits.wall_timeout = absl::Seconds(20);
  return c;
}

std::unique_ptr<Sandbox> Plain() {
  auto sb = Sandbox::Create({SandboxOptions::Bwrap::kNever});
  EXPECT_TRUE(sb.ok());
  return std::move(*sb);
}

TEST(SandboxTest, ReportsExitCodeAndCapturesBothStreams) {
  auto sb = Plain();
  auto r = sb->Run(Shell("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_FALSE(r->Succeeded());
}

TEST(SandboxTest, PassesOnlyTheGivenEnvironment) {
  setenv("KEVO_SANDBOX_TEST_SECRET", "leak", 1);
  auto sb = Plain();
  Command c = Shell("echo \"[$KEVO_SANDBOX_TEST_SECRET][$ONLY]\"");
  c.env.push_back("ONLY=this");
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "[][this]\n");
}

TEST(SandboxTest, ReportsTheSignalThatKilledTheCommand) {
  auto sb = Plain();
  auto r = sb->Run(Shell("kill -SEGV $$"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGSEGV);
  EXPECT_THAT(r->Summary(), HasSubstr("signal 11"));
}

TEST(SandboxTest, WallTimeoutKillsTheWholeProcessGroup) {
  auto sb = Plain();
  std::string dir = MakeTempDir();
  // The background sleep is a grandchild: only a process-group kill reaches it.
  Command c = Shell(absl::StrCat("sleep 30 & echo $! > ", dir, "/bg.pid; sleep 30"));
  c.limits.wall_timeout = absl::Milliseconds(500);
  absl::Time start = absl::Now();
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  std::ifstream in(dir + "/bg.pid");
  pid_t bg = 0;
  in >> bg;
  ASSERT_GT(bg, 0);
  // Dead means gone or a zombie waiting for init to reap it.
  auto dead = [](pid_t pid) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) return true;
    size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
  };
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = dead(bg);
    if (!gone) usleep(20000);
  }
  EXPECT_TRUE(gone) << "background child " << bg << " survived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(SandboxTest, CpuLimitRaisesSigxcpu) {
  auto sb = Plain();
  Command c = Shell("while :; do :; done");
  c.limits.cpu_seconds = 1;
  c.limits.wall_timeout = absl::Seconds(30);
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGXCPU);
}

TEST(SandboxTest, FileSizeLimitRaisesSigxfsz) {
  auto sb = Plain();
  std::string dir = MakeTempDir();
  Command c = Shell("exec head -c 4000000 /dev/zero > big.bin");
  c.cwd = dir;
  c.writable_dirs = {dir};
  c.limits.file_size_bytes = 1 << 20;
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGXFSZ);
  std::filesystem::remove_all(dir);
}

TEST(SandboxTest, AddressSpaceLimitMakesAllocationFail) {
  auto sb = Plain();
  // sh cannot build a 200 MB string under a 64 MiB address-space limit.
  Command c = Shell("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}");
  c.limits.address_space_bytes = 64 << 20;
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->Succeeded() && r->stdout_data == "200000000\n");
}

TEST(SandboxTest, MeasuresPeakRss) {
  auto sb = Plain();
  auto r = sb->Run(Shell("x=$(head -c 60000000 /dev/zero | tr '\\0' a); echo ${#x}"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "60000000\n");
  EXPECT_GT(r->peak_rss_bytes, 50'000'000);
}

TEST(SandboxTest, CapsCapturedOutputWithoutBlockingTheChild) {
  auto sb = Plain();
  Command c = Shell("head -c 5000000 /dev/zero; echo done >&2");
  c.output_cap_bytes = 1000;
  auto r = sb->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->Succeeded());
  EXPECT_EQ(r->stdout_data.size(), 1000u);
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->stderr_data, "done\n");
}

TEST(SandboxTest, MissingProgramIsAnError) {
  auto sb = Plain();
  Command c;
  c.argv = {"/nonexistent/kevo-program"};
  auto r = sb->Run(c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("exec"));
  Command empty;
  EXPECT_EQ(sb->Run(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

class BwrapSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BwrapWorks("/usr/bin/bwrap")) GTEST_SKIP() << "bubblewrap does not work on this host";
    auto sb = Sandbox::Create({SandboxOptions::Bwrap::kAlways});
    ASSERT_TRUE(sb.ok()) << sb.status();
    sandbox_ = std::move(*sb);
    writable_ = MakeTempDir();
    readonly_ = MakeTempDir();
  }
  void TearDown() override {
    std::filesystem::remove_all(writable_);
    std::filesystem::remove_all(readonly_);
  }
  std::unique_ptr<Sandbox> sandbox_;
  std::string writable_, readonly_;
};

TEST_F(BwrapSandboxTest, OnlyTheListedFoldersAreWritable) {
  EXPECT_EQ(sandbox_->Description(), "bwrap+rlimits");
  Command c = Shell(absl::StrCat("echo ok > ", writable_, "/a && echo bad > ", readonly_, "/b"));
  c.writable_dirs = {writable_};
  auto r = sandbox_->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(writable_ + "/a"));
  EXPECT_FALSE(std::filesystem::exists(readonly_ + "/b"));
}

TEST_F(BwrapSandboxTest, VisiblePathsHideTheRestOfTheHost) {
  Command c = Shell(absl::StrCat("test -e /etc/passwd && echo seen; ", "test -e /usr/bin/env && echo usr; echo ok > ",
                                 writable_, "/w"));
  c.writable_dirs = {writable_};
  c.visible_paths = {"/usr", "/bin", "/lib", "/lib64"};
  auto r = sandbox_->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "usr\n") << r->stderr_data;
  EXPECT_TRUE(std::filesystem::exists(writable_ + "/w"));
  // Without visible_paths the whole root is visible (read-only).
  c.visible_paths.clear();
  r = sandbox_->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "seen\nusr\n") << r->stderr_data;
}

TEST_F(BwrapSandboxTest, HasNoNetworkAndItsOwnPidNamespace) {
  // A fresh network namespace has one device (loopback), and the shell has a
  // low pid in its own pid namespace.
  auto r = sandbox_->Run(Shell("echo devices=$(tail -n +3 /proc/net/dev | wc -l) pid=$$"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->Succeeded()) << r->stderr_data;
  EXPECT_THAT(r->stdout_data, HasSubstr("devices=1 "));
  size_t pos = r->stdout_data.find("pid=");
  ASSERT_NE(pos, std::string::npos);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r->stdout_data.substr(pos + 4)), &pid));
  EXPECT_LT(pid, 10);
}

TEST_F(BwrapSandboxTest, TranslatesSignalsAndTimesOut) {
  auto r = sandbox_->Run(Shell("kill -SEGV $$"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGSEGV);
  Command c = Shell("sleep 30");
  c.limits.wall_timeout = absl::Milliseconds(300);
  absl::Time start = absl::Now();
  r = sandbox_->Run(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace kevo::sandbox
