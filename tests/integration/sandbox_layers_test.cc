// kevo-worker and the layers of its sandbox: where bubblewrap cannot start a
// container (here: --bwrap naming a binary that does not exist), the worker
// refuses to start and says which layers candidates would lose, unless told
// --allow-weaker-sandbox; then it runs, says so in its log, and every
// evaluation's fingerprint names the weaker sandbox.
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kNoBwrap[] = "/nonexistent/bwrap";

std::string Kevo() { return BinDir() + "/kevo"; }
std::string Worker() { return BinDir() + "/kevo-worker"; }

// The tests' own opt-in (make test sets it where bubblewrap does not work)
// must not reach the worker whose refusal is under test.
class SandboxLayersTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("KEVO_ALLOW_WEAKER_SANDBOX"); }
};

TEST_F(SandboxLayersTest, WithoutBubblewrapTheWorkerRefusesToStartAndSaysWhy) {
  // The check comes before any connection: no coordinator is needed.
  auto r = RunCommand({Worker(), "--coordinator", "127.0.0.1:1", "--bwrap", kNoBwrap}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bubblewrap (/nonexistent/bwrap) cannot start a container"));
  EXPECT_THAT(r.err, HasSubstr("without their mount, pid and network namespaces"));
  EXPECT_THAT(r.err, HasSubstr("--allow-weaker-sandbox"));

  auto check = RunCommand({Worker(), "--sandbox-check", "--bwrap", kNoBwrap}, absl::Seconds(30));
  EXPECT_EQ(check.exit_code, 3);
  EXPECT_THAT(check.out, HasSubstr("sandbox: seccomp+rlimits"));
}

TEST_F(SandboxLayersTest, TheSandboxCheckSaysWhatTheHostHas) {
  auto check = RunCommand({Worker(), "--sandbox-check"}, absl::Seconds(30));
  ASSERT_TRUE(check.exit_code == 0 || check.exit_code == 3) << check.err;
  EXPECT_THAT(check.out,
              HasSubstr(check.exit_code == 0 ? "sandbox: bwrap+seccomp+rlimits" : "sandbox: seccomp+rlimits"));
}

TEST_F(SandboxLayersTest, AllowedWeakerTheWorkerRunsAndEveryEvaluationSaysSo) {
  Cluster cluster(MakeTempDir("kevo-sandbox-layers"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  // The sandbox the evaluations name is under test, not their timing: no
  // production baselines, vector_add timed at 1 Mi elements (not 16 Mi).
  ASSERT_TRUE(cluster.StartWorker("weak", {"--bwrap", kNoBwrap, "--allow-weaker-sandbox", "--production", "off"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  const std::string& addr = cluster.address();
  ASSERT_TRUE(CopyTaskReplacing("vector_add", cluster.dir(), "value: 16777216", "value: 1048576"));
  auto submit = RunCommand(
      {Kevo(), "submit", cluster.dir() + "/vector_add", "--platform", "cpu", "--budget", "1", "--coordinator", addr},
      absl::Seconds(30));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job_id = submit.out.substr(0, submit.out.find('\n'));
  auto watch = RunCommand({Kevo(), "watch", job_id, "--coordinator", addr}, absl::Minutes(5));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  auto best = RunCommand({Kevo(), "best", job_id, "--coordinator", addr, "--json"}, absl::Seconds(30));
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const nlohmann::json ev = nlohmann::json::parse(best.out);
  EXPECT_EQ(ev["status"], "OK") << best.out.substr(0, 2000);
  const std::string sandbox = ev["fingerprint"]["sandbox"].get<std::string>();
  EXPECT_THAT(sandbox, ::testing::Not(HasSubstr("bwrap"))) << sandbox;
  EXPECT_THAT(sandbox, HasSubstr("rlimits")) << sandbox;

  std::ifstream log(cluster.dir() + "/worker-weak.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("candidates run under seccomp and rlimits only (--allow-weaker-sandbox)"));
}

}  // namespace
}  // namespace kevo::testing
