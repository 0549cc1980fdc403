// kevo as a service, the way a team runs it: a coordinator and a worker as
// daemons, jobs through `kevo submit` / `kevo watch` / `kevo best` /
// `kevo jobs` / `kevo workers`, and a real Prometheus server scraping both.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }

TEST(ServiceTest, SubmitWatchBestJobsAndWorkers) {
  Cluster cluster(MakeTempDir("kevo-service"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  const std::string& addr = cluster.address();

  auto workers = RunCommand({Kevo(), "workers", "--coordinator", addr}, absl::Seconds(30));
  ASSERT_EQ(workers.exit_code, 0) << workers.err;
  EXPECT_NE(workers.out.find("worker-a"), std::string::npos) << workers.out;
  EXPECT_NE(workers.out.find("cpu"), std::string::npos);
  // Its languages: C++ kernels (and Python where it found PyTorch).
  EXPECT_NE(workers.out.find("c++"), std::string::npos) << workers.out;

  auto submit = RunCommand({Kevo(), "submit", SourceDir() + "/tasks/vector_add", "--platform",
                            "cpu", "--budget", "4", "--coordinator", addr},
                           absl::Seconds(30));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string job_id = submit.out.substr(0, submit.out.find('\n'));
  ASSERT_EQ(job_id.rfind("j-", 0), 0u) << submit.out;

  // watch streams progress (plain lines: stderr is not a terminal here)
  // until the job ends.
  auto watch = RunCommand({Kevo(), "watch", job_id, "--coordinator", addr}, absl::Minutes(5));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_NE(watch.err.find("1/4 evaluated"), std::string::npos) << watch.err;
  EXPECT_NE(watch.err.find("4/4 evaluated"), std::string::npos) << watch.err;
  EXPECT_NE(watch.err.find("best "), std::string::npos);
  EXPECT_NE(watch.out.find("JOB_DONE"), std::string::npos) << watch.out;

  std::string best_file = cluster.dir() + "/best.cc";
  auto best = RunCommand({Kevo(), "best", job_id, "-o", best_file, "--coordinator", addr},
                         absl::Seconds(30));
  ASSERT_EQ(best.exit_code, 0) << best.err;
  std::ifstream in(best_file);
  std::stringstream src;
  src << in.rdbuf();
  EXPECT_NE(src.str().find("vector_add"), std::string::npos) << "the best kernel exports the task's function";

  auto jobs = RunCommand({Kevo(), "jobs", "--coordinator", addr}, absl::Seconds(30));
  ASSERT_EQ(jobs.exit_code, 0);
  EXPECT_NE(jobs.out.find(job_id), std::string::npos);
  EXPECT_NE(jobs.out.find("JOB_DONE"), std::string::npos);

  // A finished job cannot be cancelled; an unknown one is not found.
  auto cancel = RunCommand({Kevo(), "cancel", job_id, "--coordinator", addr}, absl::Seconds(30));
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_NE(cancel.err.find("already"), std::string::npos) << cancel.err;
  auto unknown = RunCommand({Kevo(), "watch", "j-nope", "--coordinator", addr}, absl::Seconds(30));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no job"), std::string::npos) << unknown.err;
}

// Reads one sample's value from Prometheus' query API.
absl::StatusOr<double> QueryPrometheus(int port, const std::string& query) {
  auto body = HttpGet(port, "/api/v1/query?query=" + query);
  if (!body.ok()) return body.status();
  auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || j["status"] != "success") return absl::InternalError(*body);
  double total = 0;
  if (j["data"]["result"].empty()) return absl::NotFoundError(*body);
  for (const auto& r : j["data"]["result"]) {
    double v = 0;
    if (!absl::SimpleAtod(r["value"][1].get<std::string>(), &v)) return absl::InternalError(*body);
    total += v;
  }
  return total;
}

TEST(ServiceTest, PrometheusScrapesCoordinatorAndWorkerMetrics) {
  const char* prometheus = "/usr/bin/prometheus";
  if (access(prometheus, X_OK) != 0) GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh installs it)";
  Cluster cluster(MakeTempDir("kevo-metrics"));
  ASSERT_TRUE(cluster.StartCoordinator({"--metrics", "127.0.0.1:0"}).ok());
  auto coord_metrics = cluster.coordinator()->WaitForLine("metrics ", absl::Seconds(10));
  ASSERT_TRUE(coord_metrics.ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a", {"--metrics", "127.0.0.1:0"}).ok());
  auto worker_metrics = cluster.worker("worker-a")->WaitForLine("metrics ", absl::Seconds(60));
  ASSERT_TRUE(worker_metrics.ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());

  auto eval = RunCommand({Kevo(), "eval", SourceDir() + "/tasks/vector_add",
                          SourceDir() + "/tasks/vector_add/examples/fast.cc", "--coordinator",
                          cluster.address()},
                         absl::Minutes(3));
  ASSERT_EQ(eval.exit_code, 0) << eval.err;

  std::string config = cluster.dir() + "/prometheus.yml";
  {
    std::ofstream out(config);
    out << "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        << "  - job_name: kevo-coordinator\n    static_configs:\n      - targets: ['127.0.0.1:"
        << *coord_metrics << "']\n"
        << "  - job_name: kevo-worker\n    static_configs:\n      - targets: ['127.0.0.1:"
        << *worker_metrics << "']\n";
  }
  int port = FreePort();
  auto prom = ChildProcess::Start(
      {prometheus, "--config.file=" + config, "--storage.tsdb.path=" + cluster.dir() + "/tsdb",
       absl::StrCat("--web.listen-address=127.0.0.1:", port)},
      cluster.dir() + "/prometheus.log");
  ASSERT_TRUE(prom.ok());

  absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<double> coordinator_ok = absl::UnknownError("not queried");
  absl::StatusOr<double> worker_ok = absl::UnknownError("not queried");
  while (absl::Now() < deadline) {
    coordinator_ok = QueryPrometheus(port, "kevo_coordinator_evaluations_total%7Bstatus%3D%22OK%22%7D");
    worker_ok = QueryPrometheus(port, "kevo_worker_evaluations_total%7Bstatus%3D%22OK%22%7D");
    if (coordinator_ok.ok() && worker_ok.ok()) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_TRUE(coordinator_ok.ok()) << coordinator_ok.status();
  ASSERT_TRUE(worker_ok.ok()) << worker_ok.status();
  EXPECT_EQ(*coordinator_ok, 1.0);
  EXPECT_EQ(*worker_ok, 1.0);
  auto workers = QueryPrometheus(port, "kevo_coordinator_workers_connected");
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_EQ(*workers, 1.0);
}

}  // namespace
}  // namespace kevo::testing
