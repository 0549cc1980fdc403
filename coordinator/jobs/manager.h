// Search jobs: each job is a tree of candidate kernels in RocksDB, grown by a
// selection policy (coordinator/search) and a proposer
// (coordinator/proposer), evaluated through the scheduler on matching
// workers, as many at a time as those workers have slots.
//
// Each job's state changes happen on one job-loop thread, its shard's (jobs
// are spread over kJobLoops loops by id): evaluation results (from the
// scheduler's completion hook), submissions and cancellations are queued to
// it. Jobs on different loops write to RocksDB at the same time, so their
// synced writes share fsyncs (RocksDB's group commit). A node and its evaluation record are written in one atomic
// batch, and a node's result and the job's counters in another, so a
// coordinator killed at any moment resumes every job with no node lost and
// none evaluated twice.
//
// Public methods are thread-safe and never block on evaluations.
//
// The code: manager.cc (submission, recovery, the loops, readers),
// propose.cc (the loop sending work out), results.cc (the loop taking
// results in, re-timings, a job's end), warm_start.cc; best.h (the rules
// that figure a result and choose the best, pure functions), statistics.h
// (a stored job read back, medians), job_metrics.h and running.h (internal).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "coordinator/jobs/statistics.h"
#include "coordinator/proposer/proposer.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/search/policy.h"
#include "coordinator/search/tree.h"
#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"

namespace prometheus {
class Registry;
}

namespace kevo::jobs {

// Creates the proposer a job names ("builtin", "llm"). InvalidArgument for
// an unknown or unconfigured one.
using ProposerFactory = std::function<absl::StatusOr<std::unique_ptr<proposer::Proposer>>(const v1::JobSpec&)>;

// Receives a job's events; OnEnd is the last call. Called on the job loop
// thread with the manager's lock held: must be quick (e.g. queue a gRPC
// write) and must not call back into the manager.
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  virtual void OnEvent(const v1::JobEvent& event) = 0;
  virtual void OnEnd(const v1::Job& job) = 0;
};

// Skill memory's two connections to the job loop (coordinator/skills); both
// optional. Called on the job loop thread: they may do store I/O but must not
// call back into the manager.
struct LearningHooks {
  // The proposer priors (ProposeRequest::priors) for a job as it starts or
  // is recovered; not called for a job whose spec says no_skills.
  std::function<std::map<std::string, double>(const v1::JobSpec&)> priors;
  // Once when a job ends (done or cancelled), with every node of its tree.
  std::function<void(const v1::Job&, const std::vector<v1::Node>&)> on_end;
};

class JobManager {
 public:
  // Job loops (threads) the running jobs are spread over.
  static constexpr int kJobLoops = 8;

  JobManager(store::Store* store, scheduler::Scheduler* scheduler, ProposerFactory proposers,
             std::shared_ptr<prometheus::Registry> registry);
  ~JobManager();

  // Loads running jobs and their trees, applies results recorded while the
  // job loop was down, and installs the scheduler's completion hook. Call
  // once before Start(). Returns the store's error.
  absl::Status Recover();
  // Installs skill memory's hooks; call before Recover().
  void SetLearningHooks(LearningHooks hooks) { learning_ = std::move(hooks); }
  // The clock that stamps jobs and nodes and measures wall-time budgets and
  // device use (tests: a fake one; the loops still tick on real time). Call
  // before Recover().
  void SetClock(std::function<absl::Time()> now) { now_ = std::move(now); }
  void Start();
  void Stop();

  // Validates and stores a new job; returns its id. InvalidArgument for a bad
  // spec (no task, unknown policy or proposer, negative budget). With
  // `job_id` the job gets that id (a campaign's, so that a launch repeated
  // after a crash finds its job instead of starting another): AlreadyExists
  // when a job has it.
  absl::StatusOr<std::string> Submit(v1::JobSpec spec, const std::string& job_id = "");
  // What Submit would refuse in `spec` apart from its task (a campaign's jobs
  // share every other field): unknown policy or proposer, negative budget.
  absl::Status Validate(v1::JobSpec spec);
  absl::StatusOr<v1::Job> Get(const std::string& job_id);
  std::vector<v1::Job> List();
  // Stops proposing; evaluations no worker has taken end as CANCELLED
  // (Scheduler::WithdrawQueued), those running finish and are recorded.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  absl::StatusOr<v1::GetBestResponse> GetBest(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Node>> Nodes(const std::string& job_id);

  // Registers a watcher; it first gets the job's current state. A job that
  // has ended gets OnEnd at once. NotFound for an unknown job.
  absl::Status Watch(const std::string& job_id, JobWatcher* watcher);
  // After this returns the watcher is never called again.
  void Unwatch(const std::string& job_id, JobWatcher* watcher);

 private:
  struct Running;
  using Work = std::function<void()>;

  // Submit's checks, filling in the spec's defaults.
  absl::Status Complete(v1::JobSpec& spec);
  struct Shard;
  Shard& ShardOf(const std::string& job_id);
  // Queues `work` on the loop of `job_id`'s shard.
  void Post(const std::string& job_id, Work work);
  void Post(Shard& shard, Work work);
  void Loop(Shard& shard);
  // The running job `job_id`, or null; only on that job's loop.
  Running* FindRunning(const std::string& job_id);
  void PumpAll(Shard& shard);                           // its loop
  void OnEvaluationDone(const v1::EvalRecord& record);  // job loop
  // Applies a finished evaluation of `job` with ApplyResult or
  // ApplyRetiming, whichever it is; true when done or nothing to do, false
  // when it must be retried (job loop).
  bool Apply(Running& job, const v1::EvalRecord& record);
  // Records a node's finished evaluation in the job: in RocksDB first, then
  // in memory. A node that would become the job's best is re-timed first
  // (StartRetiming). False, with nothing changed, when the write failed (a
  // full disk): the caller retries later (job loop).
  bool ApplyResult(Running& job, v1::Node node, const v1::Evaluation& evaluation);
  // Submits the re-timing of `node` (its kernel again, beside the job's best,
  // docs/search.md "Re-timing"), written with the node and the job in one
  // batch; fills node.retiming. The scheduler's or the store's error when it
  // cannot be submitted; NotFound when the kernel cannot be read.
  absl::Status StartRetiming(Running& job, v1::Node& node);
  // Records a node's re-timing: the lower of its two figures stands, a large
  // disagreement is recorded, and the best is decided again. False when the
  // write failed, as ApplyResult.
  bool ApplyRetiming(Running& job, v1::Node node, const v1::Evaluation& evaluation);
  // Writes `node` and the job in one batch, durable at the loop's next
  // Sync(); the store's error.
  absl::Status WriteResult(Running& job, const v1::Node& node);
  // Undoes an ApplyResult or ApplyRetiming whose write was refused (`why`):
  // the job (`job_before` is its WithoutSpec copy), its in-flight count and its baselines as they were, said once
  // (`what`, e.g. "node n3: its result is"). Returns false, for the caller
  // to return.
  bool Unstored(Running& job, const v1::Job& job_before, int in_flight_before,
                const std::vector<double>& baselines_before, const std::string& what, const absl::Status& why);
  // Counts `after`'s baseline time in the job's median in place of
  // `before`'s (null: a node not counted yet) (job loop).
  void CountBaseline(Running& job, const v1::Node* before, const v1::Node& after);
  // Stops the job when a budget or target says so (job loop).
  void CheckStop(Running& job);
  void Pump(Running& job);         // job loop: keep the job's slots busy
  void MaybeFinish(Running& job);  // job loop
  std::string StopReason(const Running& job) const;
  // Marks `job` FAILED with `why` as its stop reason, stored and listed.
  void FailJob(const v1::Job& job, const std::string& why);
  absl::Status PersistJob(v1::Job job);
  // Replaces the snapshot of `job` readers see, counting jobs by state.
  void SetSnapshotLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the job's event (its state and `node`, when given) on its loop;
  // PublishSynced shows it, once what the loop wrote is on disk.
  void Publish(const Running& job, const v1::Node* node);
  // Syncs the store and then shows the shard's queued events: the snapshot
  // readers see, the watchers, the best-speedup gauges. With the store
  // refusing, they wait for the loop's next pass (its loop).
  void PublishSynced(Shard& shard);
  void ObserveBest(const v1::Job& job);
  std::vector<proposer::ParentInfo> ParentsFor(const Running& job, const std::vector<std::string>& ids);
  absl::StatusOr<std::unique_ptr<Running>> LoadRunning(const v1::Job& job);
  void WarmStart(Running& job);
  // Numbers, stores and queues `node` (filled in by the caller with its
  // parents and provenance) with `candidate`, the job's best as its rival.
  absl::Status SubmitNode(Running& job, v1::Node& node, const v1::Candidate& candidate, const std::string& source_hash);
  // The job's best kernel, to time beside the next candidates; none while
  // nothing was measured or when its blob cannot be read.
  std::optional<v1::Candidate> BestCandidate(Running& job);
  // The device and compiler that measured the job's best ("device / compiler"
  // of its evaluation's fingerprint); "" while there is none or it cannot be
  // read (job loop).
  std::string BestToolchain(Running& job);
  // The kernel an evaluation ran; none when its blob is missing or garbled.
  std::optional<v1::Candidate> CandidateOf(const v1::EvalRecord& record);

  store::Store* const store_;
  scheduler::Scheduler* const scheduler_;
  ProposerFactory proposers_;
  LearningHooks learning_;
  std::function<absl::Time()> now_ = [] { return absl::Now(); };
  std::shared_ptr<prometheus::Registry> registry_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;

  // A job event queued by Publish: the job's id, the node it is about, and
  // the job itself only once it ended (a running one is read when shown).
  struct Unpublished {
    std::string job_id;
    std::optional<v1::Node> node;
    std::optional<v1::Job> final;
  };
  // A job loop: its queue (under mu_) and the running jobs it owns (touched
  // by its thread only, or before Start()).
  struct Shard {
    std::deque<Work> work;
    std::map<std::string, std::unique_ptr<Running>> running;
    std::vector<Unpublished> unpublished;  // Publish(), not yet synced and shown
    std::thread thread;
  };
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<int> running_count_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Snapshot of every job's summary, for readers on gRPC threads.
  std::map<std::string, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, JobWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kevo::jobs
