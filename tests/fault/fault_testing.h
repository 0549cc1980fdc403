// What the fault tests share: a task whose stages last long enough to be
// caught in, evaluations and jobs submitted and waited for, what a stopped
// coordinator's RocksDB holds of a job, and what the workers' logs say they
// ran.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <grpcpp/grpcpp.h>

#include "kevo/v1/job.pb.h"
#include "kevo/v1/store.pb.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {

// tasks/vector_add, slowed so that each stage of an evaluation lasts long
// enough for a test to see it start in the worker's log and act inside it:
// the reference spends about a second of the compiler's time (it is built in
// the compile stage, the first time on each worker), and a third validation
// binding of 4 Mi elements takes validation past a second. Profiling (of
// 1 Mi elements, not the task's 16 Mi) takes seconds anyway.
v1::Task SlowStagesTask();

// One evaluation of tasks/vector_add/examples/fast.cc on cpu.
v1::EvaluateRequest VectorAddRequest();

// An EvaluateCandidate stream, read to its end on a thread of its own so
// that the test can act meanwhile; cancelled when destroyed.
class EvaluationStream {
 public:
  // What the stream said.
  struct Heard {
    std::string eval_id;
    std::vector<std::string> requeues;  // the messages of its STAGE_QUEUED events
    std::optional<v1::Evaluation> final;
  };
  EvaluationStream(Cluster& cluster, const v1::EvaluateRequest& request);
  ~EvaluationStream();
  // Waits for the stream's end (expecting it to end OK) and returns what it said.
  Heard Wait();

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::EvaluateEvent>> reader_;
  std::thread thread_;
  Heard heard_;
  grpc::Status status_;
};

// "OK at attempt 2 from the other worker": how an evaluation ended, naming
// `other_worker` so, and any other by its id.
std::string EvaluationOutcome(const v1::Evaluation& evaluation, const std::string& other_worker);
// GetEvaluation over the cluster's stub; the gRPC error as Unavailable.
absl::StatusOr<v1::Evaluation> GetEvaluation(Cluster& cluster, const std::string& eval_id);
// Waits until worker `id` is connected by a stream opened after
// `since_unix_micros`; DeadlineExceeded after `timeout`.
absl::Status WaitForReconnect(Cluster& cluster, const std::string& id, int64_t since_unix_micros,
                              absl::Duration timeout);
// Whether the file at `path` contains `text` within `timeout` (polled).
bool WaitForText(const std::string& path, const std::string& text, absl::Duration timeout);

// Submits a search job of `budget` evaluations of `task` on cpu; its id.
absl::StatusOr<std::string> SubmitJob(Cluster& cluster, const v1::Task& task, int budget, uint64_t seed);
// Polls the job until it has left JOB_RUNNING or `timeout` passed; the last
// state read (empty when none could be).
v1::Job WaitForJobEnd(Cluster& cluster, const std::string& job_id, absl::Duration timeout);

// A job as a stopped coordinator's RocksDB holds it.
struct StoredJob {
  v1::Job job;
  std::map<std::string, v1::Node> nodes;        // by node id
  std::map<std::string, v1::EvalRecord> evals;  // the job's evaluation records, by eval id
};
// Opens the store in `db_dir` (the coordinator must be stopped) and reads
// the job; the store's error, or NotFound.
absl::StatusOr<StoredJob> ReadStoredJob(const std::string& db_dir, const std::string& job_id);
// Checks that the job ended DONE with `budget` evaluations, `budget` nodes of
// distinct sources, each DONE with its one DONE evaluation record and no
// record without a node, and, where `worker_logs` are given, that the workers
// finished each node's evaluation exactly once among them (one run twice, or
// a result dropped as a duplicate, would show twice).
void ExpectEachNodeEvaluatedOnce(const StoredJob& stored, int budget, const std::vector<std::string>& worker_logs);

// How many times the workers' logs say each evaluation finished ("slot N
// finished e-..."), by eval id.
std::map<std::string, int> FinishedRuns(const std::vector<std::string>& worker_logs);
// Waits until the worker log at `log_path` says an evaluation's `stage`
// started ("[e-1a2b/1] validate started"); returns that evaluation's
// "e-1a2b/1". Polls every few milliseconds; DeadlineExceeded after `timeout`.
absl::StatusOr<std::string> WaitForStageStart(const std::string& log_path, const std::string& stage,
                                              absl::Duration timeout);
// The stages the log says evaluation `context` ("e-1a2b/1") started, in
// order, and "finished" when it says it finished.
std::vector<std::string> StagesLogged(const std::string& log_path, const std::string& context);

}  // namespace kevo::testing
