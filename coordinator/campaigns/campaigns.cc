#include "coordinator/campaigns/campaigns.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/kernelbench.h"

namespace kevo::campaigns {
namespace {

constexpr int kDefaultParallelJobs = 4;

std::string CampaignKey(const std::string& id) { return absl::StrCat("campaign/", id); }

std::string NewCampaignId() {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = new std::mt19937_64(std::random_device{}());
  absl::MutexLock l(&mu);
  return absl::StrFormat("c-%x-%04x", absl::ToUnixSeconds(absl::Now()), static_cast<uint32_t>((*rng)() & 0xFFFF));
}

std::string EntryJobId(const std::string& campaign_id, int index) {
  return absl::StrFormat("%s-%04d", campaign_id, index);
}

bool Launched(const v1::CampaignEntry& e) { return e.job_state() != v1::JOB_STATE_UNSPECIFIED; }
bool Ended(const v1::CampaignEntry& e) { return e.skipped() || (Launched(e) && e.job_state() != v1::JOB_RUNNING); }

// Copies what the campaign shows of a job into its entry; true if it changed.
bool Refresh(v1::CampaignEntry& e, const v1::Job& job) {
  v1::CampaignEntry before = e;
  e.set_job_state(job.state());
  e.set_evaluations_done(job.evaluations_done());
  e.set_best_speedup_vs_production(job.best_speedup_vs_production());
  e.set_best_speedup_vs_reference(job.best_speedup_vs_reference());
  e.set_best_production_yardstick(job.best_production_yardstick());
  e.set_best_time_s(job.best_time_s());
  e.set_best_production_time_s(job.best_production_time_s());
  e.set_stop_reason(job.stop_reason());
  e.set_best_node_id(job.best_node_id());
  return e.SerializeAsString() != before.SerializeAsString();
}

}  // namespace

bool KnownPlatform(const std::string& platform) {
  return platform == "cpu" || platform == "nvidia" || platform == "amd" || platform == "mtia-sim";
}

absl::Status ValidateCampaign(const v1::CampaignSpec& spec, const std::vector<v1::CampaignTask>& tasks,
                              const task::TaskLimits& task_limits) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (spec.name().empty()) return bad("the campaign has no name");
  if (spec.platforms().empty()) return bad("the campaign names no platforms");
  if (tasks.empty()) return bad("the campaign has no tasks");
  std::set<std::string> platforms;
  for (const std::string& p : spec.platforms()) {
    if (!KnownPlatform(p)) return bad("unknown platform \"", p, "\" (cpu, nvidia, amd or mtia-sim)");
    if (!platforms.insert(p).second) return bad("platform ", p, " is named twice");
  }
  std::map<std::string, std::string> paths;  // task name -> path
  for (const v1::CampaignTask& t : tasks) {
    if (t.task().name().empty()) return bad("task ", t.path(), " has no name");
    auto [it, fresh] = paths.emplace(t.task().name(), t.path());
    if (!fresh) return bad("tasks ", it->second, " and ", t.path(), " are both named ", t.task().name());
    // Each task as EvaluateCandidate checks it: a campaign's launches must
    // never hand a worker a task that overflows or does not fit.
    if (absl::Status s = task::ValidateReceivedTask(t.task(), task_limits); !s.ok()) {
      std::string why(s.message());
      if (why.rfind("task: ", 0) == 0) why.erase(0, 6);
      return bad("task ", t.path(), ": ", why);
    }
  }
  const v1::Budget& b = spec.budget();
  if (b.max_evaluations() < 0 || b.max_wall_seconds() < 0 || b.stall_evaluations() < 0) {
    return bad("budget limits must not be negative");
  }
  if (spec.max_parallel_jobs() < 0) return bad("max_parallel_jobs must not be negative");
  std::set<std::pair<std::string, std::string>> profiles;
  for (const v1::ModelProfile& m : spec.model()) {
    if (m.name().empty()) return bad("a model profile has no name");
    const std::string where = absl::StrCat("model ", m.name(), " on ", m.platform());
    if (!platforms.contains(m.platform())) {
      return bad(where, ": the campaign does not run on platform \"", m.platform(), "\"");
    }
    if (!profiles.emplace(m.name(), m.platform()).second) return bad(where, " is profiled twice");
    if (m.operator_().empty()) return bad(where, " lists no operators");
    double sum = 0;
    std::set<std::string> seen;
    for (const v1::OperatorShare& op : m.operator_()) {
      if (!paths.contains(op.task())) {
        return bad(where, ": operator ", op.task(), " is not one of the campaign's tasks");
      }
      if (!seen.insert(op.task()).second) return bad(where, ": operator ", op.task(), " is listed twice");
      if (!(op.share() > 0 && op.share() <= 1)) {
        return bad(where, ": operator ", op.task(), " has share ", op.share(), ", outside (0, 1]");
      }
      sum += op.share();
    }
    if (sum > 1 + 1e-9) return bad(where, ": the operators' shares sum to ", sum, ", above 1");
  }
  return absl::OkStatus();
}

std::vector<v1::ModelGain> ThroughputGains(const v1::Campaign& campaign) {
  std::vector<v1::ModelGain> gains;
  for (const v1::ModelProfile& m : campaign.spec().model()) {
    v1::ModelGain g;
    g.set_model(m.name());
    g.set_platform(m.platform());
    double covered = 0, time = 0;
    std::set<std::string> baselines;
    for (const v1::OperatorShare& op : m.operator_()) {
      v1::OperatorGain* o = g.add_operators();
      o->set_task(op.task());
      o->set_share(op.share());
      o->set_baseline("none");
      for (const v1::CampaignEntry& e : campaign.entries()) {
        if (e.task_name() != op.task() || e.platform() != m.platform()) continue;
        if (e.best_speedup_vs_production() > 0) {
          o->set_measured_speedup(e.best_speedup_vs_production());
          o->set_baseline("production");
          o->set_yardstick(e.best_production_yardstick());
        } else if (e.best_speedup_vs_reference() > 0) {
          o->set_measured_speedup(e.best_speedup_vs_reference());
          o->set_baseline("reference");
        }
      }
      if (o->baseline() != "none") baselines.insert(o->baseline());
      o->set_kept_production(o->measured_speedup() > 0 && o->measured_speedup() < 1);
      o->set_speedup(std::max(1.0, o->measured_speedup()));
      covered += op.share();
      time += op.share() / o->speedup();
    }
    g.set_covered_share(covered);
    g.set_throughput_gain(1.0 / (time + std::max(0.0, 1.0 - covered)) - 1.0);
    g.set_baseline(baselines.empty() ? "none" : baselines.size() > 1 ? "mixed" : *baselines.begin());
    gains.push_back(std::move(g));
  }
  return gains;
}

std::string CampaignStateName(v1::CampaignState state) {
  switch (state) {
    case v1::CAMPAIGN_RUNNING:
      return "running";
    case v1::CAMPAIGN_DONE:
      return "done";
    case v1::CAMPAIGN_CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

std::string EntryStateName(const v1::CampaignEntry& entry) {
  if (entry.skipped()) return "skipped";
  switch (entry.job_state()) {
    case v1::JOB_RUNNING:
      return "running";
    case v1::JOB_DONE:
      return "done";
    case v1::JOB_FAILED:
      return "failed";
    case v1::JOB_CANCELLED:
      return "cancelled";
    default:
      return "queued";
  }
}

std::map<std::string, int> JobsByState(const v1::Campaign& campaign) {
  std::map<std::string, int> n = {{"queued", 0}, {"running", 0}, {"done", 0}, {"failed", 0}, {"cancelled", 0}};
  for (const v1::CampaignEntry& e : campaign.entries()) {
    const std::string state = EntryStateName(e);
    ++n[state == "skipped" ? "cancelled" : state];
  }
  return n;
}

struct CampaignManager::Metrics {
  prometheus::Family<prometheus::Gauge>* gain = nullptr;
  prometheus::Family<prometheus::Gauge>* jobs = nullptr;
  prometheus::Family<prometheus::Gauge>* campaigns = nullptr;

  explicit Metrics(prometheus::Registry* r) {
    if (r == nullptr) return;
    gain = &prometheus::BuildGauge()
                .Name("kevo_coordinator_campaign_throughput_gain_ratio")
                .Help(
                    "A campaign's model throughput gain (0.25: +25%) on a platform from its "
                    "operators' best speedups, by campaign name, model and platform")
                .Register(*r);
    jobs = &prometheus::BuildGauge()
                .Name("kevo_coordinator_campaign_jobs")
                .Help(
                    "A campaign's jobs by state (queued, running, done, failed, cancelled), by "
                    "campaign name")
                .Register(*r);
    campaigns = &prometheus::BuildGauge()
                     .Name("kevo_coordinator_campaigns")
                     .Help("Campaigns by state (running, done, cancelled)")
                     .Register(*r);
  }
};

CampaignManager::CampaignManager(store::Store* store, jobs::JobManager* jobs, Admission admission,
                                 std::shared_ptr<prometheus::Registry> registry, task::TaskLimits task_limits)
    : store_(store),
      jobs_(jobs),
      admission_(std::move(admission)),
      registry_(std::move(registry)),
      task_limits_(task_limits),
      metrics_(std::make_unique<Metrics>(registry_.get())) {}

CampaignManager::~CampaignManager() { Stop(); }

absl::Status CampaignManager::Recover() {
  std::vector<v1::Campaign> loaded;
  KEVO_RETURN_IF_ERROR(
      store_->Scan(store::Family::kCampaigns, "campaign/", [&](std::string_view key, std::string_view value) {
        v1::Campaign c;
        if (c.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          loaded.push_back(std::move(c));
        } else {
          LogError("campaign record ", std::string(key), " is unreadable; skipped");
        }
        return true;
      }));
  absl::MutexLock l(&mu_);
  for (v1::Campaign& c : loaded) {
    if (c.state() == v1::CAMPAIGN_RUNNING) {
      LogInfo("recovered campaign ", c.campaign_id(), " (", c.spec().name(), "): ", JobsByState(c)["done"], " of ",
              c.entries_size(), " jobs done");
    }
    ExportLocked(c);
    campaigns_[c.campaign_id()] = std::move(c);
  }
  return absl::OkStatus();
}

void CampaignManager::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void CampaignManager::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
}

absl::Status CampaignManager::Persist(const v1::Campaign& campaign) {
  return store_->Put(store::Family::kCampaigns, CampaignKey(campaign.campaign_id()), campaign.SerializeAsString(),
                     /*sync=*/true);
}

absl::StatusOr<std::string> CampaignManager::Submit(v1::CampaignSpec spec, const std::vector<v1::CampaignTask>& tasks,
                                                    const std::string& team) {
  KEVO_RETURN_IF_ERROR(ValidateCampaign(spec, tasks, task_limits_));
  if (!team.empty()) spec.set_team(team);
  v1::JobSpec probe;
  *probe.mutable_budget() = spec.budget();
  probe.set_policy(spec.policy());
  probe.set_proposer(spec.proposer());
  for (const std::string& p : spec.platforms()) {
    probe.set_platform(p);
    KEVO_RETURN_IF_ERROR(jobs_->Validate(probe));
  }
  v1::Campaign c;
  c.set_campaign_id(NewCampaignId());
  *c.mutable_spec() = spec;
  c.set_state(v1::CAMPAIGN_RUNNING);
  c.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  store::Batch batch;
  // Task-major order: every platform of the first task first.
  for (const v1::CampaignTask& t : tasks) {
    const std::string bytes = DeterministicBytes(t.task());
    const std::string hash = Sha256Hex(bytes);
    batch.Put(store::Family::kTasks, hash, bytes);
    for (const std::string& p : spec.platforms()) {
      v1::CampaignEntry* e = c.add_entries();
      e->set_task_path(t.path());
      e->set_task_name(t.task().name());
      e->set_task_hash(hash);
      e->set_platform(p);
    }
  }
  for (const auto& [state, n] : JobsByState(c)) (*c.mutable_jobs_by_state())[state] = n;
  batch.Put(store::Family::kCampaigns, CampaignKey(c.campaign_id()), c.SerializeAsString());
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  LogInfo("campaign ", c.campaign_id(), " submitted: name=", spec.name(), " team=", spec.team(),
          " tasks=", tasks.size(), " platforms=", absl::StrJoin(spec.platforms(), ","), " jobs=", c.entries_size(),
          " priority=", spec.priority());
  absl::MutexLock l(&mu_);
  ExportLocked(c);
  campaigns_[c.campaign_id()] = c;
  return c.campaign_id();
}

absl::StatusOr<v1::Campaign> CampaignManager::Get(const std::string& campaign_id) {
  absl::MutexLock l(&mu_);
  auto it = campaigns_.find(campaign_id);
  if (it == campaigns_.end()) return absl::NotFoundError(absl::StrCat("no campaign ", campaign_id));
  return it->second;
}

std::vector<v1::Campaign> CampaignManager::List() {
  absl::MutexLock l(&mu_);
  std::vector<v1::Campaign> out;
  for (const auto& [id, c] : campaigns_) out.push_back(c);
  return out;
}

absl::StatusOr<v1::Campaign> CampaignManager::Cancel(const std::string& campaign_id) {
  absl::MutexLock l(&mu_);
  auto it = campaigns_.find(campaign_id);
  if (it == campaigns_.end()) return absl::NotFoundError(absl::StrCat("no campaign ", campaign_id));
  v1::Campaign& c = it->second;
  if (c.state() != v1::CAMPAIGN_RUNNING) return c;
  for (v1::CampaignEntry& e : *c.mutable_entries()) {
    if (!Launched(e)) {
      e.set_skipped(true);
    } else if (e.job_state() == v1::JOB_RUNNING) {
      auto job = jobs_->Cancel(e.job_id());
      if (job.ok()) Refresh(e, *job);
    }
  }
  c.set_state(v1::CAMPAIGN_CANCELLED);
  c.set_stop_reason("cancelled");
  c.set_finished_unix_micros(absl::ToUnixMicros(absl::Now()));
  for (const auto& [state, n] : JobsByState(c)) (*c.mutable_jobs_by_state())[state] = n;
  KEVO_RETURN_IF_ERROR(Persist(c));
  LogInfo("campaign ", campaign_id, " cancelled");
  ExportLocked(c);
  return c;
}

absl::Status CampaignManager::LaunchLocked(v1::Campaign& c, int index) {
  v1::CampaignEntry& e = *c.mutable_entries(index);
  const std::string job_id = EntryJobId(c.campaign_id(), index);
  e.set_job_id(job_id);
  // A previous coordinator may have submitted it and died before storing the
  // campaign: adopt that job rather than run the entry twice.
  if (auto existing = jobs_->Get(job_id); existing.ok()) {
    LogInfo("campaign ", c.campaign_id(), ": adopting job ", job_id, " submitted before a restart");
    Refresh(e, *existing);
    return absl::OkStatus();
  }
  auto task = store_->Get(store::Family::kTasks, e.task_hash());
  if (!task.ok()) return task.status();
  v1::JobSpec spec;
  if (!task->has_value() || !spec.mutable_task()->ParseFromString(**task)) {
    e.set_job_state(v1::JOB_FAILED);
    e.set_stop_reason(absl::StrCat("the campaign's copy of task ", e.task_name(), " is missing from the store"));
    return absl::OkStatus();
  }
  const v1::CampaignSpec& s = c.spec();
  spec.set_platform(e.platform());
  *spec.mutable_budget() = s.budget();
  spec.set_policy(s.policy());
  spec.set_proposer(s.proposer());
  spec.set_seed(s.seed());
  spec.set_team(s.team());
  spec.set_no_skills(s.no_skills());
  spec.set_campaign_id(c.campaign_id());
  spec.set_priority(s.priority());
  auto submitted = jobs_->Submit(spec, job_id);
  if (!submitted.ok()) {
    // The job could not start (its spec was refused): the entry fails alone.
    e.set_job_state(v1::JOB_FAILED);
    e.set_stop_reason(absl::StrCat("not started: ", submitted.status().message()));
    LogWarning("campaign ", c.campaign_id(), ": ", e.task_name(), " on ", e.platform(), ": ", e.stop_reason());
    return absl::OkStatus();
  }
  e.set_job_state(v1::JOB_RUNNING);
  LogInfo("campaign ", c.campaign_id(), ": launched job ", job_id, " (", e.task_name(), " on ", e.platform(), ")");
  return absl::OkStatus();
}

bool CampaignManager::RefreshRunningLocked(v1::Campaign& c) {
  bool changed = false;
  for (v1::CampaignEntry& e : *c.mutable_entries()) {
    if (e.job_state() != v1::JOB_RUNNING) continue;
    if (auto job = jobs_->Get(e.job_id()); job.ok()) changed |= Refresh(e, *job);
  }
  return changed;
}

bool CampaignManager::StepLocked(v1::Campaign& c) {
  bool changed = RefreshRunningLocked(c);
  int running = static_cast<int>(std::count_if(c.entries().begin(), c.entries().end(),
                                               [](const auto& e) { return e.job_state() == v1::JOB_RUNNING; }));
  const int parallel = c.spec().max_parallel_jobs() > 0 ? c.spec().max_parallel_jobs() : kDefaultParallelJobs;
  for (int i = 0; i < c.entries_size() && running < parallel; ++i) {
    if (Launched(c.entries(i)) || c.entries(i).skipped()) continue;
    if (admission_) {
      absl::Status allowed = admission_(c.spec().team());
      std::string& waiting = waiting_[c.campaign_id()];
      if (!allowed.ok()) {
        if (waiting != allowed.message()) {
          LogInfo("campaign ", c.campaign_id(), " waits to launch more jobs: ", allowed.message());
          waiting = std::string(allowed.message());
        }
        break;
      }
      waiting.clear();
    }
    absl::Status s = LaunchLocked(c, i);
    if (!s.ok()) {
      LogError("campaign ", c.campaign_id(), ": launching entry ", i, ": ", s.ToString());
      c.mutable_entries(i)->set_job_state(v1::JOB_STATE_UNSPECIFIED);  // try again next time
      break;
    }
    changed = true;
    // Store each launch at once: a crash now adopts the job rather than lose it.
    if (absl::Status p = Persist(c); !p.ok()) LogError("campaign ", c.campaign_id(), ": ", p.ToString());
    if (c.entries(i).job_state() == v1::JOB_RUNNING) ++running;
  }
  if (changed) {
    c.clear_gains();
    for (v1::ModelGain& g : ThroughputGains(c)) *c.add_gains() = std::move(g);
    for (const auto& [state, n] : JobsByState(c)) (*c.mutable_jobs_by_state())[state] = n;
  }
  if (std::all_of(c.entries().begin(), c.entries().end(), Ended)) {
    c.set_state(v1::CAMPAIGN_DONE);
    c.set_finished_unix_micros(absl::ToUnixMicros(absl::Now()));
    const auto n = JobsByState(c);
    c.set_stop_reason(
        absl::StrCat(n.at("done"), " jobs done, ", n.at("failed"), " failed, ", n.at("cancelled"), " cancelled"));
    std::vector<std::string> gains;
    for (const v1::ModelGain& g : c.gains()) {
      gains.push_back(absl::StrFormat("%s on %s %+.1f%% (vs %s)", g.model(), g.platform(), 100 * g.throughput_gain(),
                                      g.baseline()));
    }
    LogInfo("campaign ", c.campaign_id(), " done: ", c.stop_reason(), gains.empty() ? "" : "; throughput ",
            absl::StrJoin(gains, ", "));
    changed = true;
  }
  return changed;
}

void CampaignManager::ExportLocked(const v1::Campaign& c) {
  if (metrics_->gain == nullptr) return;
  const std::string& name = c.spec().name();
  for (const v1::ModelGain& g : c.gains()) {
    metrics_->gain->Add({{"campaign", name}, {"model", g.model()}, {"platform", g.platform()}})
        .Set(g.throughput_gain());
  }
  for (const auto& [state, n] : JobsByState(c)) {
    metrics_->jobs->Add({{"campaign", name}, {"state", state}}).Set(n);
  }
  std::map<std::string, int> states = {{"running", 0}, {"done", 0}, {"cancelled", 0}};
  for (const auto& [id, other] : campaigns_)
    ++states[CampaignStateName(id == c.campaign_id() ? c.state() : other.state())];
  if (!campaigns_.contains(c.campaign_id())) ++states[CampaignStateName(c.state())];
  for (const auto& [state, n] : states) metrics_->campaigns->Add({{"state", state}}).Set(n);
}

void CampaignManager::Loop() {
  while (true) {
    absl::MutexLock l(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(1));
    if (stopping_) return;
    for (auto& [id, c] : campaigns_) {
      bool changed = false;
      if (c.state() == v1::CAMPAIGN_RUNNING) {
        changed = StepLocked(c);
      } else {
        // A cancelled campaign's jobs finish their evaluations in flight.
        changed = RefreshRunningLocked(c);
        if (changed) {
          for (const auto& [state, n] : JobsByState(c)) (*c.mutable_jobs_by_state())[state] = n;
        }
      }
      if (!changed) continue;
      if (absl::Status s = Persist(c); !s.ok()) LogError("campaign ", id, ": ", s.ToString());
      ExportLocked(c);
    }
  }
}

}  // namespace kevo::campaigns
