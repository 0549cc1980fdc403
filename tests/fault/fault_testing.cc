#include "tests/fault/fault_testing.h"

#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/status.h"
#include "common/task/task_loader.h"
#include "coordinator/jobs/statistics.h"
#include "coordinator/store/keys.h"
#include "coordinator/store/store.h"

namespace kevo::testing {

v1::Task SlowStagesTask() {
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  EXPECT_TRUE(task.ok()) << task.status();
  if (!task.ok()) return v1::Task();
  v1::Binding* big = task->add_validate();
  big->set_name("big");
  (*big->mutable_values())["n"] = int64_t{4} << 20;
  // Timing 16 Mi elements takes tens of seconds on a busy 2-core host; 1 Mi
  // still takes seconds.
  (*task->mutable_time()->mutable_values())["n"] = int64_t{1} << 20;
  // GCC stops a constexpr loop at 262144 iterations: four calls of fewer.
  absl::StrAppend(task->mutable_reference()->mutable_source(), R"(
// The fault tests' slow compile: about a second of constant evaluation.
constexpr unsigned KevoFaultSpin(unsigned n) {
  unsigned x = 1;
  for (unsigned i = 0; i < n; ++i) x = x * 1664525u + 1013904223u;
  return x;
}
static_assert(KevoFaultSpin(250000) != 0 && KevoFaultSpin(250001) != 0 && KevoFaultSpin(250002) != 0 &&
                  KevoFaultSpin(250003) != 0, "");
)");
  return *task;
}

v1::EvaluateRequest VectorAddRequest() {
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  EXPECT_TRUE(task.ok()) << task.status();
  v1::EvaluateRequest req;
  if (task.ok()) *req.mutable_task() = *task;
  req.mutable_candidate()->set_language("c++");
  req.mutable_candidate()->set_source(ReadTextFile(SourceDir() + "/tasks/vector_add/examples/fast.cc"));
  req.set_platform("cpu");
  return req;
}

EvaluationStream::EvaluationStream(Cluster& cluster, const v1::EvaluateRequest& request) {
  ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(8));
  reader_ = cluster.stub()->EvaluateCandidate(&ctx_, request);
  thread_ = std::thread([this] {
    v1::EvaluateEvent ev;
    while (reader_->Read(&ev)) {
      if (ev.has_accepted_eval_id()) heard_.eval_id = ev.accepted_eval_id();
      if (ev.has_stage() && ev.stage().stage() == v1::STAGE_QUEUED) heard_.requeues.push_back(ev.stage().message());
      if (ev.has_final()) heard_.final = ev.final();
    }
    status_ = reader_->Finish();
  });
}

EvaluationStream::~EvaluationStream() {
  ctx_.TryCancel();
  if (thread_.joinable()) thread_.join();
}

EvaluationStream::Heard EvaluationStream::Wait() {
  if (thread_.joinable()) thread_.join();
  EXPECT_TRUE(status_.ok()) << status_.error_message();
  return heard_;
}

std::string EvaluationOutcome(const v1::Evaluation& evaluation, const std::string& other_worker) {
  return absl::StrCat(v1::EvalStatus_Name(evaluation.status()), " at attempt ", evaluation.attempt(), " from ",
                      evaluation.worker_id() == other_worker ? "the other worker" : evaluation.worker_id());
}

absl::StatusOr<v1::Evaluation> GetEvaluation(Cluster& cluster, const std::string& eval_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetEvaluationRequest req;
  req.set_eval_id(eval_id);
  v1::Evaluation evaluation;
  grpc::Status st = cluster.stub()->GetEvaluation(&ctx, req, &evaluation);
  if (!st.ok()) return absl::UnavailableError(absl::StrCat("GetEvaluation ", eval_id, ": ", st.error_message()));
  return evaluation;
}

absl::Status WaitForReconnect(Cluster& cluster, const std::string& id, int64_t since_unix_micros,
                              absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end; absl::SleepFor(absl::Milliseconds(200))) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListWorkersResponse workers;
    if (!cluster.stub()->ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok()) continue;
    for (const v1::WorkerInfo& w : workers.workers()) {
      if (w.worker_id() == id && w.connected_unix_micros() > since_unix_micros) return absl::OkStatus();
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("worker ", id, " did not connect again under its own id"));
}

bool WaitForText(const std::string& path, const std::string& text, absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout;; absl::SleepFor(absl::Milliseconds(200))) {
    if (absl::StrContains(ReadTextFile(path), text)) return true;
    if (absl::Now() >= end) return false;
  }
}

absl::StatusOr<std::string> SubmitJob(Cluster& cluster, const v1::Task& task, int budget, uint64_t seed) {
  v1::SubmitJobRequest req;
  *req.mutable_spec()->mutable_task() = task;
  req.mutable_spec()->set_platform("cpu");
  req.mutable_spec()->mutable_budget()->set_max_evaluations(budget);
  req.mutable_spec()->set_seed(seed);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::SubmitJobResponse resp;
  grpc::Status st = cluster.stub()->SubmitJob(&ctx, req, &resp);
  if (!st.ok()) return absl::UnavailableError(absl::StrCat("SubmitJob: ", st.error_message()));
  return resp.job_id();
}

v1::Job WaitForJobEnd(Cluster& cluster, const std::string& job_id, absl::Duration timeout) {
  v1::Job last;
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end; absl::SleepFor(absl::Milliseconds(200))) {
    auto job = cluster.GetJob(job_id);
    if (!job.ok()) continue;
    last = *job;
    if (last.state() != v1::JOB_RUNNING) break;
  }
  return last;
}

absl::StatusOr<StoredJob> ReadStoredJob(const std::string& db_dir, const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> db, store::Store::Open(db_dir));
  StoredJob stored;
  KEVO_ASSIGN_OR_RETURN(std::optional<std::string> job, db->Get(store::Family::kJobs, store::keys::Job(job_id)));
  if (!job.has_value() || !stored.job.ParseFromString(*job)) {
    return absl::NotFoundError(absl::StrCat("no job ", job_id, " in ", db_dir));
  }
  KEVO_RETURN_IF_ERROR(jobs::JoinSpec(*db, stored.job));  // the spec is stored apart (keys::JobSpec)
  KEVO_RETURN_IF_ERROR(
      db->Scan(store::Family::kNodes, store::keys::NodePrefix(job_id), [&](std::string_view, std::string_view v) {
        v1::Node n;
        if (n.ParseFromArray(v.data(), static_cast<int>(v.size()))) stored.nodes[n.node_id()] = n;
        return true;
      }));
  KEVO_RETURN_IF_ERROR(
      db->Scan(store::Family::kEvals, store::keys::kEvalPrefix, [&](std::string_view, std::string_view v) {
        v1::EvalRecord r;
        if (r.ParseFromArray(v.data(), static_cast<int>(v.size())) && r.job_id() == job_id)
          stored.evals[r.eval_id()] = r;
        return true;
      }));
  return stored;
}

void ExpectEachNodeEvaluatedOnce(const StoredJob& stored, int budget, const std::vector<std::string>& worker_logs) {
  EXPECT_EQ(stored.job.state(), v1::JOB_DONE) << stored.job.stop_reason();
  EXPECT_EQ(stored.job.evaluations_done(), budget);
  int by_status = 0;
  for (const auto& [status, n] : stored.job.by_status()) by_status += n;
  EXPECT_EQ(by_status, budget);
  EXPECT_EQ(static_cast<int>(stored.nodes.size()), budget) << "a node was lost or made twice";
  std::set<std::string> sources, evals;
  for (const auto& [id, node] : stored.nodes) {
    sources.insert(node.source_hash());
    evals.insert(node.eval_id());
    EXPECT_EQ(node.state(), v1::NODE_DONE) << id;
    auto record = stored.evals.find(node.eval_id());
    if (record == stored.evals.end()) {
      ADD_FAILURE() << id << "'s evaluation " << node.eval_id() << " has no record";
      continue;
    }
    EXPECT_EQ(record->second.state(), v1::EVAL_DONE) << node.eval_id();
    EXPECT_EQ(record->second.evaluation().status(), node.status()) << id;
    // A node that was to become the best was evaluated once more (its
    // re-timing, docs/search.md): that evaluation is the node's too.
    if (const std::string& retiming = node.retiming().eval_id(); !retiming.empty()) {
      evals.insert(retiming);
      auto again = stored.evals.find(retiming);
      if (again == stored.evals.end()) {
        ADD_FAILURE() << id << "'s re-timing " << retiming << " has no record";
      } else {
        EXPECT_EQ(again->second.state(), v1::EVAL_DONE) << retiming;
        EXPECT_TRUE(node.retiming().done()) << id;
      }
    }
  }
  EXPECT_EQ(sources.size(), stored.nodes.size()) << "a source was evaluated twice in one job";
  for (const auto& [id, record] : stored.evals) {
    EXPECT_TRUE(evals.contains(id)) << "evaluation " << id << " belongs to no node";
  }
  if (worker_logs.empty()) return;
  std::map<std::string, int> runs = FinishedRuns(worker_logs);
  for (const auto& [id, node] : stored.nodes) {
    EXPECT_EQ(runs[node.eval_id()], 1) << node.eval_id() << " (" << id << ") finished on the workers that often";
    if (const std::string& retiming = node.retiming().eval_id(); !retiming.empty()) {
      EXPECT_EQ(runs[retiming], 1) << retiming << " (" << id << "'s re-timing) finished on the workers that often";
    }
  }
}

namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

}  // namespace

std::map<std::string, int> FinishedRuns(const std::vector<std::string>& worker_logs) {
  std::map<std::string, int> runs;
  for (const std::string& log : worker_logs) {
    for (const std::string& line : Lines(log)) {
      const size_t at = line.find(" finished e-");
      if (at == std::string::npos) continue;
      const size_t from = at + std::string(" finished ").size();
      ++runs[line.substr(from, line.find(' ', from) - from)];
    }
  }
  return runs;
}

absl::StatusOr<std::string> WaitForStageStart(const std::string& log_path, const std::string& stage,
                                              absl::Duration timeout) {
  const std::string marker = absl::StrCat("] ", stage, " started");
  std::ifstream in;
  std::string partial;
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    if (!in.is_open()) in.open(log_path);
    // Reads on from where the last poll stopped; a line without its newline
    // yet waits for the next poll.
    std::string chunk;
    char buf[4096];
    while (in.is_open() && in.read(buf, sizeof buf).gcount() > 0) chunk.append(buf, in.gcount());
    in.clear();
    partial += chunk;
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
      const std::string line = partial.substr(0, nl);
      const size_t at = line.find(marker);
      const size_t open = at == std::string::npos ? at : line.rfind('[', at);
      if (open != std::string::npos) return line.substr(open + 1, at - open - 1);
    }
    absl::SleepFor(absl::Milliseconds(3));
  }
  return absl::DeadlineExceededError(absl::StrCat(log_path, " never said '", marker, "'"));
}

std::vector<std::string> StagesLogged(const std::string& log_path, const std::string& context) {
  const std::string prefix = absl::StrCat("[", context, "] ");
  std::vector<std::string> stages;
  for (const std::string& line : Lines(log_path)) {
    const size_t at = line.find(prefix);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + prefix.size());
    if (absl::EndsWith(rest, " started")) stages.push_back(rest.substr(0, rest.size() - 8));
    if (absl::StrContains(rest, " finished e-")) stages.push_back("finished");
  }
  return stages;
}

}  // namespace kevo::testing
