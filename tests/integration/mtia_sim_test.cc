// The mtia-sim platform as a user runs it: `kevo run --platform mtia-sim`
// starts an embedded coordinator and an mtia-sim worker, the built-in MTIA
// recipes search the softmax task, and the best kernel is correct and at
// least 3x faster than the task's naive single-PE reference_mtia.cc in
// simulated time; and a daemon worker started with --platform mtia-sim shows
// up in `kevo workers` as the simulated chip.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/cluster.h"
#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }

TEST(MtiaSimTest, RunSoftmaxFindsACorrectKernelAtLeast3xFasterThanTheNaiveBaseline) {
  const std::string dir = MakeTempDir("kevo-mtia-run");
  auto r = RunCommand({Kevo(), "run", SourceDir() + "/tasks/softmax", "--platform", "mtia-sim", "--budget", "8",
                       "--json", "--db", dir + "/db", "--out", dir + "/best.cc"},
                      absl::Minutes(10));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "OK") << r.out;
  EXPECT_EQ(j["platform"], "mtia-sim");
  EXPECT_GE(j["speedup"].get<double>(), 3.0) << r.out;
  EXPECT_GT(j["roofline_fraction"].get<double>(), 0.0);
  EXPECT_EQ(j["best_genome"].get<std::string>().rfind("mtia_softmax{", 0), 0u) << r.out;
  const auto& ev = j["best_evaluation"];
  EXPECT_EQ(ev["status"], "OK");
  for (const auto& v : ev["validation"]) EXPECT_EQ(v["status"], "OK");
}

TEST(MtiaSimTest, WorkerReportsTheSimulatedChipToKevoWorkers) {
  Cluster cluster(MakeTempDir("kevo-mtia-workers"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("mtia-a", {"--platform", "mtia-sim", "--mtia-config", "2i"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  auto r = RunCommand({Kevo(), "workers", "--coordinator", cluster.address(), "--json"}, absl::Seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u) << r.out;
  EXPECT_EQ(j[0]["worker_id"], "mtia-a");
  EXPECT_EQ(j[0]["platform"], "mtia-sim");
  EXPECT_EQ(j[0]["device"], "MTIA 2i (simulated)");
  EXPECT_NEAR(j[0]["mem_bandwidth_gbs"].get<double>(), 205.2, 0.1);
}

}  // namespace
}  // namespace kevo::testing
