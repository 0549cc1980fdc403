// The amd platform as CI runs it, with hipcc but no GPU: `kevo run
// tasks/softmax --platform amd` against the embedded compile-only worker
// completes and labels its best as a static score, never a speedup; a daemon
// started with --platform amd shows up in `kevo workers` as compile-only with
// its targets; and a submitted job records, for every candidate, the compile
// status and the resource analysis, with "static" wherever a number is not a
// measurement. Skipped where hipcc is absent.
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/task/task_loader.h"
#include "tests/integration/cluster.h"
#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }

bool HaveHipcc() { return access("/usr/bin/hipcc", X_OK) == 0; }

TEST(AmdTest, RunSoftmaxOnACompileOnlyWorkerRanksStaticallyAndSaysSo) {
  if (!HaveHipcc()) GTEST_SKIP() << "hipcc not found";
  const std::string dir = MakeTempDir("kevo-amd-run");
  auto r = RunCommand({Kevo(), "run", SourceDir() + "/tasks/softmax", "--platform", "amd", "--budget", "3", "--slots",
                       "2", "--json", "--db", dir + "/db", "--out", dir + "/best.hip"},
                      absl::Minutes(10));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "OK") << r.out;
  EXPECT_EQ(j["platform"], "amd");
  EXPECT_EQ(j["score_kind"], "static");
  EXPECT_TRUE(j["speedup"].is_null()) << r.out;  // nothing was measured
  EXPECT_GT(j["static_score"].get<double>(), 0.0);
  EXPECT_EQ(j["best_time_s"].get<double>(), 0.0);
  EXPECT_EQ(j["best_genome"].get<std::string>().rfind("hip_softmax{", 0), 0u) << r.out;
  const auto& ev = j["best_evaluation"];
  EXPECT_EQ(ev["status"], "OK");
  EXPECT_EQ(ev["compile_only"], true);
  EXPECT_EQ(ev["score_kind"], "static");
  EXPECT_TRUE(ev["speedup"].is_null());
  EXPECT_GT(ev["profile"]["gfx90a_vgprs"].get<double>(), 0.0);
  EXPECT_GT(ev["profile"]["gfx940_occupancy_waves"].get<double>(), 0.0);
  // The progress lines on stderr say "static score", never "x" speedups.
  EXPECT_NE(r.err.find("best static score"), std::string::npos) << r.err;
}

TEST(AmdTest, WorkersListsTheCompileOnlyWorkerAndEveryCandidateHasItsAnalysis) {
  if (!HaveHipcc()) GTEST_SKIP() << "hipcc not found";
  Cluster cluster(MakeTempDir("kevo-amd-cluster"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(
      cluster.StartWorker("amd-a", {"--platform", "amd", "--offload-arch", "gfx90a,gfx940", "--slots", "2"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());

  auto text = RunCommand({Kevo(), "workers", "--coordinator", cluster.address()}, absl::Seconds(30));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::vector<std::string> lines = absl::StrSplit(text.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << text.out;
  std::vector<std::string> cols = absl::StrSplit(lines[1], ' ', absl::SkipEmpty());
  ASSERT_GE(cols.size(), 6u) << lines[1];
  EXPECT_EQ(cols[0], "amd-a");
  EXPECT_EQ(cols[1], "amd");
  EXPECT_EQ(cols[4], "compile-only");
  EXPECT_EQ(cols[5], "gfx90a,gfx940");

  auto json = RunCommand({Kevo(), "workers", "--coordinator", cluster.address(), "--json"}, absl::Seconds(30));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto w = nlohmann::json::parse(json.out);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0]["platform"], "amd");
  EXPECT_EQ(w[0]["compile_only"], true);
  EXPECT_EQ(w[0]["targets"], nlohmann::json::array({"gfx90a", "gfx940"}));

  // A job: every candidate gets a compile status and, when it compiled, the
  // resource analysis and a static score; none has a time or a speedup.
  auto submit = RunCommand({Kevo(), "submit", SourceDir() + "/tasks/softmax", "--platform", "amd", "--budget", "3",
                            "--coordinator", cluster.address()},
                           absl::Seconds(60));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job_id(absl::StripAsciiWhitespace(submit.out));
  auto watch = RunCommand({Kevo(), "watch", job_id, "--coordinator", cluster.address()}, absl::Minutes(10));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_NE(watch.out.find("static score"), std::string::npos) << watch.out;

  grpc::ClientContext ctx;
  v1::ListNodesRequest req;
  req.set_job_id(job_id);
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(cluster.stub()->ListNodes(&ctx, req, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 3);
  for (const v1::Node& n : nodes.nodes()) {
    SCOPED_TRACE(n.node_id() + " " + n.genome());
    grpc::ClientContext ectx;
    v1::GetEvaluationRequest ereq;
    ereq.set_eval_id(n.eval_id());
    v1::Evaluation ev;
    ASSERT_TRUE(cluster.stub()->GetEvaluation(&ectx, ereq, &ev).ok());
    ASSERT_GE(ev.events_size(), 1);
    EXPECT_EQ(ev.events(0).stage(), v1::STAGE_COMPILE);
    EXPECT_TRUE(ev.compile_only());
    EXPECT_EQ(ev.timing().median_s(), 0);
    EXPECT_EQ(ev.speedup(), 0);
    if (ev.status() == v1::OK) {
      EXPECT_TRUE(n.static_fitness());
      EXPECT_DOUBLE_EQ(n.fitness(), ev.static_score());
      EXPECT_GT(ev.profile().at("gfx90a_vgprs"), 0);
      EXPECT_GT(ev.profile().at("gfx940_vgprs"), 0);
      EXPECT_TRUE(ev.profile().contains("gfx90a_occupancy_waves"));
      EXPECT_TRUE(ev.profile().contains("gfx940_lds_bytes"));
      EXPECT_NE(ev.events(ev.events_size() - 1).message().find("static score"), std::string::npos);
    }
  }
  grpc::ClientContext jctx;
  v1::GetJobRequest jreq;
  jreq.set_job_id(job_id);
  v1::Job job;
  ASSERT_TRUE(cluster.stub()->GetJob(&jctx, jreq, &job).ok());
  EXPECT_EQ(job.best_speedup(), 0);
  EXPECT_GT(job.best_static_score(), 0);

  // A one-off evaluation that asks for measured timing is refused honestly.
  grpc::ClientContext tctx;
  v1::EvaluateRequest treq;
  treq.set_platform("amd");
  treq.set_require_timing(true);
  // A real task: the coordinator checks every task it receives first.
  auto softmax = task::LoadTaskDir(SourceDir() + "/tasks/softmax");
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  *treq.mutable_task() = *softmax;
  treq.mutable_candidate()->set_language("hip");
  treq.mutable_candidate()->set_source("// any");
  auto reader = cluster.stub()->EvaluateCandidate(&tctx, treq);
  v1::EvaluateEvent event;
  while (reader->Read(&event)) {
  }
  grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("compile-only"), std::string::npos) << st.error_message();
}

}  // namespace
}  // namespace kevo::testing
