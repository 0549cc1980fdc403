// Campaigns as a platform owner runs them: `kevo campaign submit FILE` to a
// real coordinator with a cpu and an mtia-sim worker; kill -9 of the
// coordinator twice midway; the campaign resumes and ends with every task x
// platform searched by exactly one job, a failing job not stopping it, and
// the model throughput gains computed; a malformed campaign file is a clear
// error naming its line.
#include <signal.h>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coordinator/jobs/statistics.h"
#include "coordinator/store/store.h"
#include "kevo/v1/campaign.grpc.pb.h"
#include "kevo/v1/store.pb.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }

absl::StatusOr<v1::Campaign> GetCampaign(const std::string& address, const std::string& id) {
  auto stub = v1::CampaignService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetCampaignRequest req;
  req.set_campaign_id(id);
  v1::Campaign c;
  grpc::Status st = stub->GetCampaign(&ctx, req, &c);
  if (!st.ok()) return absl::UnavailableError(st.error_message());
  return c;
}

// Copies the campaign's tasks into `dir`, each timed at a smaller shape:
// crash safety is what the test is about, and the cpu worker's evaluations,
// production baselines included, are its bottleneck. False when a task file
// changed (no longer holds the timed shape replaced here).
bool CopyCampaignTasks(const std::string& dir) {
  const std::vector<std::vector<std::string>> shapes = {
      {"vector_add", "value: 16777216", "value: 1048576"},
      {"relu", "value: 8388608", "value: 1048576"},
      {"silu", "value: 4194304", "value: 1048576"},
      {"elu", "value: 4194304", "value: 1048576"},
      {"softmax", R"({ key: "rows" value: 4096 })", R"({ key: "rows" value: 1024 })"}};
  for (const auto& s : shapes) {
    if (!CopyTaskReplacing(s[0], dir, s[1], s[2])) return false;
  }
  return true;
}

// Four tasks under `tasks` with an MTIA reference and one without (elu:
// every mtia-sim evaluation of it fails), on cpu and mtia-sim.
std::string CampaignFile(const std::string& tasks, int budget) {
  return absl::StrCat(R"(name: "resume-test"
tasks: ")",
                      tasks, R"(/{vector_add,relu,silu,softmax}"
tasks: ")",
                      tasks, R"(/elu"
platforms: "cpu"
platforms: "mtia-sim"
budget { max_evaluations: )",
                      budget, R"( }
max_parallel_jobs: 3
priority: 2
model {
  name: "ranker"
  platform: "cpu"
  operator { task: "softmax" share: 0.3 }
  operator { task: "silu" share: 0.2 }
  operator { task: "relu" share: 0.1 }
}
model {
  name: "ranker"
  platform: "mtia-sim"
  operator { task: "softmax" share: 0.4 }
  operator { task: "elu" share: 0.1 }
}
)");
}

TEST(CampaignTest, SurvivesKillNineOfTheCoordinatorWithNoJobLostOrRunTwice) {
  // Two evaluations a job prove what three did (every entry searched by
  // one job, each with one node per evaluation) at two thirds of the cpu
  // worker's time, the test's bottleneck: each of its evaluations times the
  // production baselines, which the gains need.
  constexpr int kBudget = 2;
  constexpr int kEntries = 10;  // 5 tasks x 2 platforms
  Cluster cluster(MakeTempDir("kevo-campaign"));
  const std::vector<std::string> flags = {"--lease-seconds", "10"};
  ASSERT_TRUE(cluster.StartCoordinator(flags).ok());
  ASSERT_TRUE(cluster.StartWorker("cpu-a", {"--slots", "2"}).ok());
  ASSERT_TRUE(cluster.StartWorker("mtia-a", {"--platform", "mtia-sim", "--slots", "2"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());

  const std::string file = cluster.dir() + "/campaign.textproto";
  const std::string tasks = cluster.dir() + "/tasks";
  std::filesystem::create_directories(tasks);
  ASSERT_TRUE(CopyCampaignTasks(tasks));
  WriteTextFile(file, CampaignFile(tasks, kBudget));
  CommandResult submit =
      RunCommand({Kevo(), "campaign", "submit", file, "--coordinator", cluster.address()}, absl::Seconds(60));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = submit.out.substr(0, submit.out.find('\n'));
  ASSERT_EQ(id.rfind("c-", 0), 0u) << submit.out;

  // Kill the coordinator twice: once with the first jobs running, once later.
  int kills = 0;
  v1::Campaign c;
  absl::Time deadline = absl::Now() + absl::Minutes(12);
  while (absl::Now() < deadline) {
    auto got = GetCampaign(cluster.address(), id);
    if (got.ok()) {
      c = *got;
      if (c.state() != v1::CAMPAIGN_RUNNING) break;
      const int done = c.jobs_by_state().at("done") + c.jobs_by_state().at("failed");
      if ((kills == 0 && c.jobs_by_state().at("running") > 0) || (kills == 1 && done >= 4)) {
        cluster.StopCoordinator(SIGKILL);
        ++kills;
        ASSERT_TRUE(cluster.StartCoordinator(flags).ok());
      }
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_EQ(kills, 2);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_DONE) << c.stop_reason();
  ASSERT_EQ(c.entries_size(), kEntries);
  std::set<std::string> job_ids;
  for (int i = 0; i < c.entries_size(); ++i) {
    const v1::CampaignEntry& e = c.entries(i);
    SCOPED_TRACE(absl::StrCat(e.task_name(), " on ", e.platform()));
    EXPECT_EQ(e.job_id(), absl::StrFormat("%s-%04d", id, i));
    job_ids.insert(e.job_id());
    EXPECT_EQ(e.job_state(), v1::JOB_DONE) << e.stop_reason();
    EXPECT_EQ(e.evaluations_done(), kBudget);
    if (e.task_name() == "elu" && e.platform() == "mtia-sim") {
      EXPECT_EQ(e.best_speedup_vs_reference(), 0) << "elu has no MTIA reference: nothing can be correct";
    } else {
      EXPECT_GT(e.best_speedup_vs_reference(), 0);
    }
    // mtia-sim has no production kernels; the cpu worker times PyTorch.
    if (e.platform() == "mtia-sim") {
      EXPECT_EQ(e.best_speedup_vs_production(), 0);
    } else {
      EXPECT_GT(e.best_speedup_vs_production(), 0);
    }
  }
  EXPECT_EQ(c.jobs_by_state().at("done"), kEntries);

  // Gains: one per profile, cpu against production, mtia-sim against the
  // reference; the failed elu counts at 1x.
  ASSERT_EQ(c.gains_size(), 2);
  EXPECT_EQ(c.gains(0).platform(), "cpu");
  EXPECT_EQ(c.gains(0).baseline(), "production");
  EXPECT_NEAR(c.gains(0).covered_share(), 0.6, 1e-9);
  EXPECT_EQ(c.gains(1).baseline(), "reference");
  EXPECT_GT(c.gains(1).throughput_gain(), 0);
  EXPECT_EQ(c.gains(1).operators(1).baseline(), "none");

  // The status command shows them; it also runs against the restarted coordinator.
  CommandResult status =
      RunCommand({Kevo(), "campaign", "status", id, "--coordinator", cluster.address()}, absl::Seconds(30));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("10 jobs: 10 done"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("ranker on mtia-sim"), std::string::npos) << status.out;

  // The ship list: a kernel and manifest for every correct entry.
  const std::string ship = cluster.dir() + "/ship";
  CommandResult exported =
      RunCommand({Kevo(), "campaign", "export", id, ship, "--coordinator", cluster.address()}, absl::Seconds(60));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  nlohmann::json list = nlohmann::json::parse(ReadTextFile(ship + "/shiplist.json"));
  ASSERT_EQ(list["entries"].size(), static_cast<size_t>(kEntries));
  for (const auto& item : list["entries"]) {
    if (item["task"] == "elu" && item["platform"] == "mtia-sim") {
      EXPECT_EQ(item["use"], "production");
      continue;
    }
    ASSERT_TRUE(item["kernel"].is_string()) << item.dump();
    EXPECT_FALSE(ReadTextFile(ship + "/" + item["kernel"].get<std::string>()).empty());
    nlohmann::json m = nlohmann::json::parse(ReadTextFile(ship + "/" + item["manifest"].get<std::string>()));
    EXPECT_GE(m["shapes"].size(), 3u) << m.dump();  // two validated bindings and the timed one
    EXPECT_EQ(m["loses_to_production"], item["use"] == "production") << m.dump();
  }

  // In the store: exactly one job per entry carries the campaign's id, each
  // with one node per evaluation.
  cluster.StopCoordinator(SIGTERM);
  auto store = store::Store::Open(cluster.dir() + "/db");
  ASSERT_TRUE(store.ok()) << store.status();
  std::map<std::string, v1::Job> jobs;
  ASSERT_TRUE((*store)
                  ->Scan(store::Family::kJobs, "job/",
                         [&](std::string_view, std::string_view v) {
                           v1::Job j;
                           j.ParseFromArray(v.data(), static_cast<int>(v.size()));
                           jobs[j.job_id()] = j;
                           return true;
                         })
                  .ok());
  for (auto it = jobs.begin(); it != jobs.end();) {  // each spec is stored apart from its record
    ASSERT_TRUE(jobs::JoinSpec(**store, it->second).ok()) << it->first;
    it = it->second.spec().campaign_id() == id ? std::next(it) : jobs.erase(it);
  }
  EXPECT_EQ(jobs.size(), static_cast<size_t>(kEntries)) << "a campaign job was lost or started twice";
  for (const auto& [job_id, j] : jobs) {
    EXPECT_TRUE(job_ids.contains(job_id)) << job_id;
    EXPECT_EQ(j.spec().priority(), 2);
    int nodes = 0;
    ASSERT_TRUE((*store)
                    ->Scan(store::Family::kNodes, job_id + "/n/",
                           [&](std::string_view, std::string_view) {
                             ++nodes;
                             return true;
                           })
                    .ok());
    EXPECT_EQ(nodes, kBudget) << job_id;
  }
}

TEST(CampaignTest, AMalformedCampaignIsAClearErrorAndNothingIsStored) {
  Cluster cluster(MakeTempDir("kevo-campaign-bad"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  const std::string dir = cluster.dir();
  auto submit = [&](const std::string& text) {
    WriteTextFile(dir + "/c.textproto", text);
    return RunCommand({Kevo(), "campaign", "submit", dir + "/c.textproto", "--coordinator", cluster.address()},
                      absl::Seconds(30));
  };
  CommandResult syntax = submit("name: \"x\"\nplatforms: cpu\n");
  EXPECT_EQ(syntax.exit_code, 2);
  EXPECT_NE(syntax.err.find("c.textproto:2:"), std::string::npos) << syntax.err;

  CommandResult glob =
      submit(absl::StrCat("name: \"x\"\ntasks: \"", SourceDir(), "/tasks/nope*\"\nplatforms: \"cpu\"\n"));
  EXPECT_EQ(glob.exit_code, 2);
  EXPECT_NE(glob.err.find("matches nothing"), std::string::npos) << glob.err;

  // Refused by the coordinator: a profile naming a task the campaign lacks.
  CommandResult profile = submit(absl::StrCat("name: \"x\"\ntasks: \"", SourceDir(), "/tasks/relu\"\n",
                                              "platforms: \"cpu\"\nmodel { name: \"m\" platform: \"cpu\" ",
                                              "operator { task: \"softmax\" share: 0.5 } }\n"));
  EXPECT_EQ(profile.exit_code, 2);
  EXPECT_NE(profile.err.find("operator softmax is not one of the campaign's tasks"), std::string::npos) << profile.err;

  CommandResult list =
      RunCommand({Kevo(), "campaign", "list", "--json", "--coordinator", cluster.address()}, absl::Seconds(30));
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 0u) << list.out;

  CommandResult unknown =
      RunCommand({Kevo(), "campaign", "status", "c-nope", "--coordinator", cluster.address()}, absl::Seconds(30));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no campaign c-nope"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace kevo::testing
