// The scheduler hands evaluations to connected workers and keeps them
// durable: every evaluation is an EvalRecord in RocksDB before it is queued;
// a worker takes it under a lease that heartbeats renew; a lease that lapses,
// or a worker that disconnects, returns the evaluation to the queue with a new
// attempt. Only the worker holding an evaluation's current lease may answer
// it; a result from any other (a lapsed lease, one never leased, a
// duplicate) is counted and refused, so each evaluation is recorded exactly
// once, from the worker it was given to.
//
// Quarantine: an evaluation whose lease holder is lost mid-evaluation (its
// stream ends, or after a coordinator restart it never comes back) counts
// that loss in EvalRecord.workers_lost, durably. At max_worker_losses it is
// not requeued but recorded as QUARANTINED, like any result, so that one
// evaluation that ends its workers cannot go on to end the fleet's.
//
// A worker that sends nothing at all (no heartbeat, event or result) for a
// whole lease, or for one and a half heartbeats once a lease of its lapsed,
// is taken to be cut off or stopped: its leases return to the queue (not
// counted toward quarantine: the evaluation did nothing wrong), it is leased
// nothing more, and its stream is ended from the coordinator's side so that
// it reconnects when it can. A result it sends later is refused or dropped
// like any from a lapsed lease.
//
// Nothing waits for the disk under the scheduler's lock: a change to an
// evaluation's record is queued under the lock and written after it, in the
// order made, by whichever caller gets there first (FlushWrites, one batch
// for all that are waiting). A requeue and a final result reach the
// evaluation's listeners only once its record is written (synced).
//
// Thread-safe. Listener and send callbacks are called with the scheduler's
// lock held: they must be quick and must not call back into the scheduler.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"
#include "kevo/v1/store.pb.h"
#include "kevo/v1/worker.pb.h"

namespace prometheus {
class Registry;
}

namespace kevo::scheduler {

struct SchedulerOptions {
  absl::Duration lease = absl::Seconds(30);
  absl::Duration heartbeat = absl::Seconds(2);
  absl::Duration tick = absl::Milliseconds(200);
  // A lease whose worker sends heartbeats but no stage event of the
  // evaluation for this long lapses anyway (a worker that claims to be busy
  // forever must not hold it); zero: heartbeats alone keep a lease.
  absl::Duration max_silence = absl::Minutes(20);
  // An evaluation still queued this long after its submission, while no
  // worker of its platform is connected, is recorded as INFRA_ERROR saying
  // so; zero: it waits for one forever.
  absl::Duration queue_timeout = absl::Minutes(30);
  // An evaluation whose lease holder was lost this many times is recorded as
  // QUARANTINED instead of being requeued; 0: requeued however often.
  int max_worker_losses = 2;
};

// Receives the stage events of one evaluation and, last, its final result.
class EvalListener {
 public:
  virtual ~EvalListener() = default;
  virtual void OnStage(const v1::StageEvent& event) = 0;
  virtual void OnFinal(const v1::Evaluation& evaluation) = 0;
};

class Scheduler {
 public:
  // How many of the tasks last sent whole to a worker that holds tasks
  // (Hello.holds_tasks) its assignments name by hash alone.
  static constexpr size_t kTasksNamed = 64;

  using SendFn = std::function<void(v1::CoordinatorMessage)>;
  using CompletionHook = std::function<void(const v1::EvalRecord&)>;

  // `store` must outlive the scheduler. `registry` may be null.
  Scheduler(store::Store* store, SchedulerOptions options, std::shared_ptr<prometheus::Registry> registry);
  ~Scheduler();

  // Reloads queued and leased evaluations from the store; leased ones return
  // to the queue. Call once, before Start(). Returns the store's error.
  absl::Status Recover();
  // Starts the lease-expiry thread.
  void Start();
  void Stop();

  // A worker stream said Hello. Returns the worker id (hello.worker_id when
  // set and free, else a new one); `send` pushes messages on its stream and
  // `drop`, when set, ends that stream (a worker gone silent). Both are called
  // with the scheduler's lock held and must not block.
  std::string AddWorker(const v1::Hello& hello, SendFn send, std::function<void()> drop = nullptr);
  // The worker's stream ended: its leased evaluations return to the queue.
  // With `lost` (the worker vanished mid-evaluation, rather than being revoked
  // or cut off by the coordinator's own shutdown) each counts the loss, and
  // one that reaches max_worker_losses is quarantined instead.
  void RemoveWorker(const std::string& worker_id, bool lost = true);
  // The coordinator is shutting down: streams that end from now on were ended
  // by it, so their workers are not counted as lost. Thread-safe.
  void PrepareShutdown();
  void OnWorkerMessage(const std::string& worker_id, const v1::WorkerMessage& message);

  struct SubmitOptions {
    std::string job_id;   // the job the evaluation belongs to, if any
    std::string eval_id;  // preassigned id (NewEvalId()); empty: a new one
    // Written in the same atomic batch as the evaluation record (e.g. the
    // job's tree node), so that neither exists without the other.
    store::Batch extra;
    // Never lease it to a compile-only worker (see EvaluateRequest).
    bool require_timing = false;
    // Timed side by side with the candidate (Assignment.rival); stored with
    // the evaluation, so a recovered one keeps it.
    std::optional<v1::Candidate> rival;
    // The rival's bytes are in the store already (a job's best, read from
    // it): not written again.
    bool rival_stored = false;
    // Hashes the caller has already computed, not computed again:
    // CandidateHash(candidate), the stored rival's CandidateHash (with
    // rival_stored), and Sha256Hex(DeterministicBytes(task)). Empty: computed
    // here. A caller that passes one vouches for it.
    std::string candidate_hash;
    std::string rival_hash;
    std::string task_hash;
    // The team that asked for it (EvalRecord.team); empty without --auth.
    std::string team;
    // Higher is leased first among the team's evaluations (EvalRecord.priority).
    int32_t priority = 0;
    // Submit returns once the evaluation is on disk. Without: once it is
    // written (it survives the process, not the host's power) and queued; a
    // caller that tells nobody of it until its own Store::Sync() (the job
    // loops) saves an fsync per evaluation. Such an evaluation, lost with the
    // power, is unknown after the restart and its result is dropped.
    bool sync = true;
  };
  // Stores and queues one evaluation; returns its id. With no worker of
  // `platform` connected the evaluation simply waits for one. Returns the
  // store's error if it cannot persist, and FailedPrecondition for an
  // evaluation that requires timing while every connected worker of
  // `platform` is compile-only.
  absl::StatusOr<std::string> Submit(const v1::Task& task, const v1::Candidate& candidate, const std::string& platform,
                                     SubmitOptions options);
  // Ends the evaluations of `job_id` that no worker has taken yet as
  // CANCELLED (their listeners and the completion hook see them as any
  // result); leased ones run to the end. Returns how many.
  int WithdrawQueued(const std::string& job_id);
  static std::string NewEvalId();
  const SchedulerOptions& options() const { return options_; }
  // Number of slots of connected workers serving `platform` (only those that
  // can measure time when `timing_only`).
  int SlotsFor(const std::string& platform, bool timing_only = false);
  // OK unless evaluations on `platform` that require timing cannot run:
  // FailedPrecondition when workers of `platform` are connected and every
  // one is compile-only (the message says so). With none connected they
  // wait, like any evaluation.
  absl::Status CheckTimingAvailable(const std::string& platform);

  // Registers `listener` for `eval_id`. If the evaluation is already done,
  // OnFinal is called at once. NotFound for an unknown id.
  absl::Status Subscribe(const std::string& eval_id, EvalListener* listener);
  // After this returns, `listener` is never called again.
  void Unsubscribe(const std::string& eval_id, EvalListener* listener);

  // The stored record of an evaluation. NotFound for an unknown id.
  absl::StatusOr<v1::EvalRecord> GetRecord(const std::string& eval_id);
  std::vector<v1::WorkerInfo> ListWorkers();

  // Called (with the lock held) whenever an evaluation is recorded as done.
  void SetCompletionHook(CompletionHook hook);
  // The weight of a team's fair share of worker slots (EvalRecord.team;
  // called with the lock held, so it must be quick). Without it, or for a
  // weight <= 0, every team weighs 1. Under contention each platform's slots
  // go to the team with the fewest leases per unit of weight, oldest
  // evaluation first: max-min fairness by progressive filling.
  void SetTeamWeights(std::function<double(const std::string&)> weight);
  // Asked (with the lock held) before each evaluation is stored, with its
  // team: an error (a quota's ResourceExhausted) refuses it and Submit
  // returns that error.
  void SetAdmission(std::function<absl::Status(const std::string&)> admission);

 private:
  struct Worker {
    v1::Hello hello;
    SendFn send;
    std::function<void()> drop;  // ends its stream; may be empty
    std::set<std::string> busy;  // eval ids leased to this worker
    int64_t connected_unix_micros = 0;
    int64_t last_heard_ms = 0;  // its Hello or latest message
    // Said nothing for a whole lease: leased nothing more until its stream
    // ends and it connects again.
    bool silent = false;
    // To a worker that holds tasks (Hello.holds_tasks): the hashes of the
    // last kTasksNamed tasks sent to it whole, oldest first, which its later
    // assignments name instead of carrying.
    std::deque<std::string> tasks_sent;
  };
  struct Active {
    v1::EvalRecord record;
    // Shared by every evaluation of the same task (a job's), never copied
    // per evaluation (InternTaskLocked).
    std::shared_ptr<const v1::Task> task;
    v1::Candidate candidate;
    std::optional<v1::Candidate> rival;
    int64_t last_progress_ms = 0;  // the lease, or its holder's last stage event
    int64_t queued_ms = 0;         // when it last entered the queue (the wait-time metric)
  };

  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  class LeaseCounts;
  // Leases worker `w` what it can take from its platform's queue `q`.
  void DispatchToLocked(const std::string& worker_id, Worker& w, std::map<int64_t, std::string>& q, LeaseCounts& leased)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `ev` as the evaluation's final result (from `worker_id`, empty
  // when the coordinator decided it), tells its listeners and erases it.
  void RecordLocked(std::map<std::string, Active>::iterator a, v1::Evaluation ev, int attempt,
                    const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while a worker of `platform` is connected.
  bool ServedLocked(const std::string& platform) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queue entry worker `w` should take next under the fair share, or
  // queue.end() when it can answer none; an entry that is no longer queued
  // is returned as is, for the caller to drop.
  // Leases held now by team on one platform, the fair share's state: counted
  // over the active evaluations on first use in a dispatch pass, which only
  // a queue holding several teams' evaluations needs.
  class LeaseCounts {
   public:
    LeaseCounts(const Scheduler& s, const std::string& platform) : scheduler_(s), platform_(platform) {}
    const std::map<std::string, int>& ByTeam() ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu_);
    void Add(const std::string& team) {
      if (counted_) ++by_team_[team];
    }

   private:
    const Scheduler& scheduler_;
    const std::string& platform_;
    bool counted_ = false;
    std::map<std::string, int> by_team_;
  };
  std::map<int64_t, std::string>::iterator PickLocked(std::map<int64_t, std::string>& queue, const Worker& w,
                                                      LeaseCounts& leased) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts worker `id` in free_ or takes it out, as its slots, silence and
  // presence in workers_ now say; call after each change of those.
  void SyncFreeLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double TeamWeightLocked(const std::string& team) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckTimingAvailableLocked(const std::string& platform) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueLocked(Active& active, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `w` said nothing for too long: requeues its leases (not counted as
  // losses), leases it nothing more and ends its stream.
  void SilenceLocked(const std::string& worker_id, Worker& w, int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The evaluation's lease holder was lost (`why`, e.g. "worker w-1
  // disconnected mid-evaluation"): counts it, then requeues
  // the evaluation, or records it as QUARANTINED at max_worker_losses.
  void LostLocked(std::map<std::string, Active>::iterator a, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnResultLocked(const std::string& worker_id, const v1::EvalResult& result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `record` to be written by FlushWrites; with `sync`, that write is
  // synced (one without survives the coordinator's process, kill -9, but not
  // the host's power).
  void PersistLocked(const v1::EvalRecord& record, bool sync) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the queued records, in the order queued, as one batch, then
  // tells the listeners of final results among them; returns at once when
  // another caller is writing (it writes these too). Call without mu_ after
  // anything that may have queued one.
  void FlushWrites() ABSL_LOCKS_EXCLUDED(mu_, writer_mu_);
  // Calls FlushWrites when it goes out of scope: declared before a lock of
  // mu_, it runs once the lock is released.
  struct FlushOnExit {
    Scheduler* scheduler;
    ~FlushOnExit() { scheduler->FlushWrites(); }
  };
  // The latest record of `eval_id` queued and not yet written; null if none.
  const v1::EvalRecord* PendingRecordLocked(const std::string& eval_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpiryLoop();

  store::Store* const store_;
  const SchedulerOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;

  // Held while queued records are written (FlushWrites), and by readers of
  // records no longer in memory, so that they never read one older than
  // what was queued. Taken before mu_.
  absl::Mutex writer_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  struct PendingWrite {
    v1::EvalRecord record;
    bool sync = false;
    // What its listeners are told once it is written: a requeue's stage
    // event, a final result.
    std::optional<v1::StageEvent> stage;
    std::optional<v1::Evaluation> final;
  };
  std::vector<PendingWrite> pending_writes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  // Workers with a free slot that are not silent, by platform (SyncFreeLocked):
  // a dispatch pass visits these instead of every connected worker.
  std::map<std::string, std::set<std::string>> free_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Active> active_ ABSL_GUARDED_BY(mu_);
  // Queued eval ids by platform, ordered by sequence.
  std::map<std::string, std::map<int64_t, std::string>> queue_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, EvalListener*> listeners_ ABSL_GUARDED_BY(mu_);
  // Task hashes whose bytes this process has stored (Submit).
  std::set<std::string> tasks_stored_ ABSL_GUARDED_BY(mu_);
  // The tasks of active evaluations by hash, so that a job's evaluations
  // share one copy; an entry expires with the last evaluation holding it.
  std::map<std::string, std::weak_ptr<const v1::Task>> tasks_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Task> InternTaskLocked(const std::string& hash, const v1::Task& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CompletionHook completion_hook_ ABSL_GUARDED_BY(mu_);
  std::function<double(const std::string&)> team_weight_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(const std::string&)> admission_ ABSL_GUARDED_BY(mu_);
  int64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;  // PrepareShutdown()
  std::thread expiry_thread_;
};

}  // namespace kevo::scheduler
