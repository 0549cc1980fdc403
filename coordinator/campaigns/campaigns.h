// Campaigns (docs/campaigns.md): a team's batch of search jobs, tasks x
// platforms, kept in RocksDB (family campaigns, key campaign/<id>) and
// launched as ordinary jobs of that team, at most max_parallel_jobs at a
// time, which the scheduler's fair share then serves like any other.
//
// Crash safety: entry i of campaign C is always job "C-000i". A launch
// submits that job and then stores the campaign; a coordinator killed between
// the two finds the job by its id when it resumes and adopts it, so no job is
// lost or run twice. A job that fails does not stop the campaign.
//
// The campaign loop (one thread) refreshes each running campaign's entries
// from the job manager once a second, launches what may start, recomputes
// the model throughput gains (ThroughputGains) and ends the campaign when
// every entry has.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "common/task/task_loader.h"
#include "coordinator/jobs/manager.h"
#include "coordinator/store/store.h"
#include "kevo/v1/campaign.pb.h"

namespace prometheus {
class Registry;
}

namespace kevo::campaigns {

// Whether `team` may start another job now: OK, or the quota's
// RESOURCE_EXHAUSTED (the launch waits and is tried again).
using Admission = std::function<absl::Status(const std::string& team)>;

// The platforms a campaign may name.
bool KnownPlatform(const std::string& platform);

// INVALID_ARGUMENT naming what is wrong with a campaign (docs/campaigns.md):
// no name, tasks or platforms; an unknown or repeated platform; two tasks of
// one name; a task that task::ValidateReceivedTask refuses under
// `task_limits` ("task <path>: ..."); a negative budget or parallelism; a
// model profile naming a platform or task the campaign lacks, a share outside
// (0, 1], shares of one model and platform summing above 1, or a model and
// platform twice.
absl::Status ValidateCampaign(const v1::CampaignSpec& spec, const std::vector<v1::CampaignTask>& tasks,
                              const task::TaskLimits& task_limits = {});

// Each model profile's throughput gain from the entries' best speedups
// (Amdahl; an operator below 1x or without a correct kernel counts as 1x,
// production kept). See ModelGain in campaign.proto.
std::vector<v1::ModelGain> ThroughputGains(const v1::Campaign& campaign);

// "running", "done", "cancelled".
std::string CampaignStateName(v1::CampaignState state);
// An entry's state: "queued" (not launched), "running", "done", "failed",
// "cancelled", or "skipped" (cancelled with its campaign before it launched).
std::string EntryStateName(const v1::CampaignEntry& entry);

// Jobs by state: queued, running, done, failed, cancelled (skipped counts as
// cancelled).
std::map<std::string, int> JobsByState(const v1::Campaign& campaign);

class CampaignManager {
 public:
  // Submit refuses a campaign whose tasks fail task::ValidateReceivedTask
  // under `task_limits`.
  CampaignManager(store::Store* store, jobs::JobManager* jobs, Admission admission,
                  std::shared_ptr<prometheus::Registry> registry, task::TaskLimits task_limits = {});
  ~CampaignManager();

  // Loads every stored campaign; call after the job manager's Recover and
  // before Start.
  absl::Status Recover();
  void Start();
  void Stop();

  // Validates and stores a campaign of `team` (its own whatever spec.team
  // says, unless `team` is empty: then spec.team); returns its id.
  absl::StatusOr<std::string> Submit(v1::CampaignSpec spec, const std::vector<v1::CampaignTask>& tasks,
                                     const std::string& team);
  absl::StatusOr<v1::Campaign> Get(const std::string& campaign_id);
  std::vector<v1::Campaign> List();
  // Cancels the campaign's running jobs and skips the rest.
  absl::StatusOr<v1::Campaign> Cancel(const std::string& campaign_id);

 private:
  void Loop();
  // Copies the state of the campaign's running jobs into its entries; true
  // when one changed.
  bool RefreshRunningLocked(v1::Campaign& campaign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refreshes, launches and maybe ends one running campaign; true when it
  // changed and must be stored.
  bool StepLocked(v1::Campaign& campaign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submits entry `index`'s job (or adopts it when a previous coordinator
  // submitted it before it could store the campaign).
  absl::Status LaunchLocked(v1::Campaign& campaign, int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Persist(const v1::Campaign& campaign);
  void ExportLocked(const v1::Campaign& campaign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  jobs::JobManager* const jobs_;
  Admission admission_;
  std::shared_ptr<prometheus::Registry> registry_;
  const task::TaskLimits task_limits_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;

  absl::Mutex mu_;
  std::map<std::string, v1::Campaign> campaigns_ ABSL_GUARDED_BY(mu_);
  // Why a campaign's launches wait (a quota), logged once per change.
  std::map<std::string, std::string> waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
};

}  // namespace kevo::campaigns
