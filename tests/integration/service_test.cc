// kevo as a service, the way a team runs it: a coordinator and a worker as
// daemons, jobs through `kevo submit` / `kevo watch` / `kevo best` /
// `kevo jobs` / `kevo workers`, the LLM proposer's calls, the knowledge base
// and skill memory through `kevo llm-log` / `kevo kb search` / `kevo skills`,
// and a real Prometheus server scraping both.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

std::string Answer(const std::string& label, const std::string& code) {
  return absl::StrCat("Transformation: ", label, "\n```cpp\n", code, "```\n");
}

// The LLM calls of `job_id` the coordinator has stored, straight from
// ListLlmCalls (with their text), `page_size` at a time.
std::vector<nlohmann::json> LlmCalls(Cluster& cluster, const std::string& job_id, int page_size = 0) {
  v1::ListLlmCallsRequest req;
  req.set_job_id(job_id);
  req.set_include_text(true);
  req.set_page_size(page_size);
  std::vector<nlohmann::json> out;
  for (int page = 0; page < 100; ++page) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListLlmCallsResponse resp;
    grpc::Status st = cluster.stub()->ListLlmCalls(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) break;
    EXPECT_LE(resp.calls_size(), page_size == 0 ? 50 : page_size);
    for (const auto& c : resp.calls()) out.push_back(nlohmann::json::parse(c.record_json()));
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  return out;
}

grpc::StatusCode ListLlmCallsCode(Cluster& cluster, const v1::ListLlmCallsRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListLlmCallsResponse resp;
  return cluster.stub()->ListLlmCalls(&ctx, req, &resp).error_code();
}

// Polls until `job_id` has stored an LLM call (or 60 s pass); returns the first.
nlohmann::json FirstLlmCall(Cluster& cluster, const std::string& job_id) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    auto calls = LlmCalls(cluster, job_id);
    if (!calls.empty()) return calls.front();
    absl::SleepFor(absl::Milliseconds(100));
  }
  ADD_FAILURE() << "job " << job_id << " stored no LLM call within 60 s";
  return nlohmann::json::object();
}

// The LLM proposer, the knowledge base and skill memory of a running
// coordinator, the way a team looks at them: `kevo llm-log`, `kevo kb search`
// and `kevo skills` with --coordinator (JobService ListLlmCalls,
// SearchKnowledge, ListSkills), and `kevo submit --no-skills` reaching the job.
// The fake LLM server demands an API key and echoes it into its first
// answer, an error; the key never comes back through llm-log.
TEST(ServiceTest, LlmLogKbSearchAndSkillsAskTheRunningCoordinator) {
  Cluster cluster(MakeTempDir("kevo-service-llm"));
  const std::string dir = cluster.dir();
  const std::string softmax = SourceDir() + "/tasks/softmax";
  constexpr char kKey[] = "sk-kevo-service-test-51f0c2aa-SECRET";
  WriteTextFile(dir + "/key", kKey);
  // After the error, one answer: the reference, then the fast kernel. The
  // first becomes the job's first seed and the second beats it: a skill.
  WriteTextFile(dir + "/both.md",
            absl::StrCat(Answer("the reference, plainly", ReadTextFile(softmax + "/reference.cc")),
                         Answer("online softmax with SIMD", ReadTextFile(softmax + "/examples/fast.cc"))));
  WriteTextFile(dir + "/fast.md", Answer("online softmax with SIMD", ReadTextFile(softmax + "/examples/fast.cc")));
  auto server = ChildProcess::Start(
      {BinDir() + "/fake-llm-server", "--api-key-file", dir + "/key", "--script", "400:echo",
       "--answers", dir + "/both.md", "--content-file", dir + "/fast.md"},
      dir + "/fake-llm-server.log");
  ASSERT_TRUE(server.ok()) << server.status();
  auto llm_address = (*server)->WaitForLine("listening ", absl::Seconds(30));
  ASSERT_TRUE(llm_address.ok()) << llm_address.status();
  WriteTextFile(dir + "/llm.conf", absl::StrCat("[endpoint fake]\nbase_url = http://", *llm_address,
                                            "/v1\nmodel = fake-coder\napi_key_file = key\n"
                                            "max_retries = 1\n"));
  ASSERT_TRUE(cluster.StartCoordinator({"--llm-config", dir + "/llm.conf", "--metrics", "127.0.0.1:0"}).ok());
  auto metrics_port = cluster.coordinator()->WaitForLine("metrics ", absl::Seconds(10));
  ASSERT_TRUE(metrics_port.ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  const std::string& addr = cluster.address();

  auto submit = RunCommand({Kevo(), "submit", softmax, "--platform", "cpu", "--proposer", "llm",
                            "--budget", "2", "--coordinator", addr},
                           absl::Seconds(30));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job_id = submit.out.substr(0, submit.out.find('\n'));
  auto watch = RunCommand({Kevo(), "watch", job_id, "--coordinator", addr}, absl::Minutes(5));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  ASSERT_NE(watch.out.find("JOB_DONE"), std::string::npos) << watch.out;

  // llm-log over gRPC: both calls, the error redacted, the nodes the answer
  // made, the prompt with the retrieved documents; never the key.
  auto log = RunCommand({Kevo(), "llm-log", job_id, "--coordinator", addr, "--json"}, absl::Seconds(30));
  ASSERT_EQ(log.exit_code, 0) << log.err;
  EXPECT_EQ(log.out.find(kKey), std::string::npos) << "llm-log returned the API key";
  auto calls = nlohmann::json::parse(log.out);
  ASSERT_EQ(calls.size(), 2u) << log.out.substr(0, 2000);
  EXPECT_EQ(calls[0]["outcome"], "error:invalid_argument");
  EXPECT_THAT(calls[0]["error"].get<std::string>(), ::testing::HasSubstr("[redacted]"));
  EXPECT_EQ(calls[1]["outcome"], "ok");
  ASSERT_EQ(calls[1]["nodes"].size(), 2u);
  EXPECT_EQ(calls[1]["nodes"][0]["status"], "OK");
  EXPECT_EQ(calls[1]["nodes"][1]["status"], "OK");
  EXPECT_THAT(calls[1]["prompt"][1]["content"].get<std::string>(),
              ::testing::HasSubstr("## Hardware and optimisation notes (knowledge base)"));
  auto full = RunCommand({Kevo(), "llm-log", job_id, "--coordinator", addr, "--full"}, absl::Seconds(30));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(full.out.find(kKey), std::string::npos) << "llm-log --full returned the API key";
  EXPECT_THAT(full.out, ::testing::HasSubstr(calls[1]["call_id"].get<std::string>()));
  EXPECT_THAT(full.out, ::testing::HasSubstr("online softmax with SIMD"));  // the answer
  auto table = RunCommand({Kevo(), "llm-log", job_id, "--coordinator", addr}, absl::Seconds(30));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::HasSubstr("error:invalid_argument"));
  EXPECT_THAT(table.out, ::testing::Not(::testing::HasSubstr("Transformation:")));  // no answers
  auto unknown = RunCommand({Kevo(), "llm-log", "j-nope", "--coordinator", addr}, absl::Seconds(30));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, ::testing::HasSubstr("no job j-nope"));
  // Page by page, the same calls in the same order; bad pages are refused.
  auto paged = LlmCalls(cluster, job_id, /*page_size=*/1);
  ASSERT_EQ(paged.size(), 2u);
  EXPECT_EQ(paged[0]["call_id"], calls[0]["call_id"]);
  EXPECT_EQ(paged[1]["call_id"], calls[1]["call_id"]);
  v1::ListLlmCallsRequest bad;
  bad.set_job_id(job_id);
  bad.set_page_size(501);
  EXPECT_EQ(ListLlmCallsCode(cluster, bad), grpc::StatusCode::INVALID_ARGUMENT);
  bad.set_page_size(0);
  bad.set_page_token("c0/../x");
  EXPECT_EQ(ListLlmCallsCode(cluster, bad), grpc::StatusCode::INVALID_ARGUMENT);

  // kb search over gRPC: the coordinator's imported docs/kb.
  auto kb = RunCommand({Kevo(), "kb", "search", "softmax NaN exp overflow", "--platform", "cpu",
                        "--family", "softmax", "--bottleneck", "nan", "--coordinator", addr, "--json"},
                       absl::Seconds(30));
  ASSERT_EQ(kb.exit_code, 0) << kb.err;
  auto docs = nlohmann::json::parse(kb.out);
  ASSERT_FALSE(docs.empty());
  EXPECT_EQ(docs[0]["path"], "guidance/nans.md") << kb.out;
  auto typo = RunCommand({Kevo(), "kb", "search", "tiles", "--platform", "cuda", "--coordinator", addr},
                         absl::Seconds(30));
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, ::testing::HasSubstr("unknown platform 'cuda'"));

  // skills over gRPC: what the job taught, with its evidence.
  auto skills = RunCommand({Kevo(), "skills", "--platform", "cpu", "--family", "softmax",
                            "--coordinator", addr, "--json"},
                           absl::Seconds(30));
  ASSERT_EQ(skills.exit_code, 0) << skills.err;
  auto learnt = nlohmann::json::parse(skills.out);
  ASSERT_EQ(learnt.size(), 1u) << skills.out;
  EXPECT_EQ(learnt[0]["transformation"], "llm: online softmax with SIMD");
  EXPECT_GT(learnt[0]["mean_gain"].get<double>(), 1.0);
  EXPECT_EQ(learnt[0]["node_ids"][0], absl::StrCat(job_id, "/", calls[1]["nodes"][1]["node_id"].get<std::string>()));
  auto bad_limit = RunCommand({Kevo(), "skills", "--limit", "-1", "--coordinator", addr}, absl::Seconds(30));
  EXPECT_EQ(bad_limit.exit_code, 2);
  EXPECT_THAT(bad_limit.err, ::testing::HasSubstr("ListSkillsRequest.limit"));

  // --no-skills reaches the job: its spec says so, and its prompt goes
  // without the skill the first job taught, which a job without the flag gets.
  std::string ids[2];
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {Kevo(), "submit", softmax, "--platform", "cpu", "--proposer",
                                     "llm", "--budget", "1", "--coordinator", addr};
    if (i == 0) argv.push_back("--no-skills");
    auto r = RunCommand(argv, absl::Seconds(30));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ids[i] = r.out.substr(0, r.out.find('\n'));
  }
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetJobRequest req;
    req.set_job_id(ids[i]);
    v1::Job job;
    ASSERT_TRUE(cluster.stub()->GetJob(&ctx, req, &job).ok());
    EXPECT_EQ(job.spec().no_skills(), i == 0) << ids[i];
  }
  const nlohmann::json without = FirstLlmCall(cluster, ids[0]);
  const nlohmann::json with = FirstLlmCall(cluster, ids[1]);
  EXPECT_EQ(without["skills"], nlohmann::json::array()) << without.dump().substr(0, 500);
  EXPECT_EQ(with["skills"], nlohmann::json::array({"llm: online softmax with SIMD"}))
      << with.dump().substr(0, 500);

  // Each knowledge RPC is counted by method and status code.
  auto metrics = HttpGet(std::stoi(*metrics_port), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  bool counted_not_found = false;
  for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
    counted_not_found |= absl::StartsWith(line, "kevo_coordinator_rpcs_total{") &&
                         absl::StrContains(line, "method=\"ListLlmCalls\"") &&
                         absl::StrContains(line, "code=\"NOT_FOUND\"") && absl::EndsWith(line, " 1");
  }
  EXPECT_TRUE(counted_not_found) << *metrics;
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
    // The alert rules kevo ships (deploy/prometheus/alerts.yml), evaluated every second.
    out << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files: ['" << SourceDir() << "/deploy/prometheus/alerts.yml']\nscrape_configs:\n"
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

  // Every shipped alert rule evaluates without error against these live
  // metrics, and names only metrics kevo exports.
  nlohmann::json rules;
  deadline = absl::Now() + absl::Seconds(30);
  bool all_evaluated = false;
  while (!all_evaluated && absl::Now() < deadline) {
    auto body = HttpGet(port, "/api/v1/rules");
    ASSERT_TRUE(body.ok()) << body.status();
    rules = nlohmann::json::parse(*body);
    all_evaluated = !rules["data"]["groups"].empty();
    for (const auto& g : rules["data"]["groups"]) {
      for (const auto& r : g["rules"]) all_evaluated &= r.value("lastEvaluation", "").rfind("0001-", 0) != 0;
    }
    if (!all_evaluated) absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_TRUE(all_evaluated) << rules.dump();
  int n_rules = 0;
  for (const auto& g : rules["data"]["groups"]) {
    for (const auto& r : g["rules"]) {
      ++n_rules;
      EXPECT_EQ(r["health"], "ok") << r["name"] << ": " << r.value("lastError", "");
    }
  }
  EXPECT_GE(n_rules, 5);
  auto names = HttpGet(port, "/api/v1/label/__name__/values");
  ASSERT_TRUE(names.ok());
  std::set<std::string> exported;
  const nlohmann::json name_list = nlohmann::json::parse(*names);
  for (const auto& n : name_list["data"]) exported.insert(n.get<std::string>());
  const std::string text = ReadTextFile(SourceDir() + "/deploy/prometheus/alerts.yml");
  std::set<std::string> named;
  for (size_t i = text.find("kevo_"); i != std::string::npos; i = text.find("kevo_", i + 1)) {
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')) continue;
    size_t j = i;
    while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
    named.insert(text.substr(i, j - i));
  }
  EXPECT_GE(named.size(), 4u);
  for (const std::string& m : named) {
    EXPECT_TRUE(exported.count(m)) << "alerts.yml names " << m << ", which kevo does not export";
  }
}

}  // namespace
}  // namespace kevo::testing
