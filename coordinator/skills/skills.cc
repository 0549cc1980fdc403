#include "coordinator/skills/skills.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/log.h"
#include "common/status.h"
#include "coordinator/proposer/proposer.h"
#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"

namespace kevo::skills {
namespace {

// A step must beat its parent by this factor to count: smaller gains are
// within the timing noise of a shared host.
constexpr double kMinGain = 1.03;
// Evidence node ids kept per skill (most recent first).
constexpr size_t kMaxNodeIds = 8;
// Evidence beyond this many steps no longer raises a prior.
constexpr int kMaxPriorEvidence = 4;
constexpr double kMaxPrior = 8;
// A skill steers new jobs only with evidence from this many distinct jobs, or
// this many improving steps: one job's one step is too often its luck (a weak
// seed that anything beats, a noisy timing).
constexpr int kMinPriorJobs = 2;
constexpr int kMinPriorSteps = 3;
// Each job a skill's seed misled halves its prior.
constexpr double kMissFactor = 0.5;

// Keys in the skills column family.
std::string SkillPrefix(const std::string& platform, const std::string& family) {
  std::string out = "s/";
  if (platform.empty()) return out;
  absl::StrAppend(&out, platform, "/");
  if (family.empty()) return out;
  absl::StrAppend(&out, family, "/");
  return out;
}
std::string DistilledKey(const std::string& job_id) { return absl::StrCat("d/", job_id); }

// One skill as stored: gains are kept as sums of logs so that merging is
// exact.
struct Record {
  int count = 0;
  double sum_log_gain = 0;
  std::vector<std::string> node_ids;
  int jobs = 0;
  // The evidence nodes' speedups over the production baseline, where measured.
  int production_count = 0;
  double sum_log_production = 0;
  int hits = 0;
  int misses = 0;

  std::string Serialize() const {
    return nlohmann::json{{"count", count},
                          {"sum_log_gain", sum_log_gain},
                          {"node_ids", node_ids},
                          {"jobs", jobs},
                          {"production_count", production_count},
                          {"sum_log_production", sum_log_production},
                          {"hits", hits},
                          {"misses", misses}}
        .dump();
  }
  static Record Parse(std::string_view text) {
    Record r;
    try {
      auto j = nlohmann::json::parse(text);
      r.count = j.value("count", 0);
      r.sum_log_gain = j.value("sum_log_gain", 0.0);
      r.node_ids = j.value("node_ids", std::vector<std::string>{});
      if (j.contains("jobs")) {
        r.jobs = j.value("jobs", 0);
      } else {
        // Written before records counted jobs: the distinct jobs among the
        // evidence kept (at most kMaxNodeIds, so a lower bound).
        std::set<std::string_view> ids;
        for (const std::string& id : r.node_ids) {
          ids.insert(std::string_view(id).substr(0, id.find('/')));
        }
        r.jobs = static_cast<int>(ids.size());
      }
      r.production_count = j.value("production_count", 0);
      r.sum_log_production = j.value("sum_log_production", 0.0);
      r.hits = j.value("hits", 0);
      r.misses = j.value("misses", 0);
    } catch (const nlohmann::json::exception& e) {
      LogWarning("skills: unreadable skill record ignored: ", e.what());
    }
    return r;
  }
  // One improving step; `vs_production` is its node's speedup over the
  // production baseline, 0 when not measured.
  void Add(double gain, double vs_production, const std::string& evidence) {
    ++count;
    sum_log_gain += std::log(gain);
    if (vs_production > 0) {
      ++production_count;
      sum_log_production += std::log(vs_production);
    }
    node_ids.insert(node_ids.begin(), evidence);
    if (node_ids.size() > kMaxNodeIds) node_ids.resize(kMaxNodeIds);
  }
};

// One piece of evidence for a transformation.
struct Step {
  double gain;
  double vs_production;  // 0: not measured
  std::string evidence;  // "job_id/node_id"
};

// The weight a skill's record gives before the evidence checks.
double RawWeight(const Skill& s) {
  const int n = std::min(s.evidence_count, kMaxPriorEvidence);
  return std::clamp(std::pow(s.mean_gain, n), 1.0, kMaxPrior) * std::pow(kMissFactor, s.misses);
}

std::string Plural(int n, const char* one, const char* many) { return absl::StrCat(n, " ", n == 1 ? one : many); }

std::string SeedingNote(const Skill& s) {
  std::string out;
  if (s.hits + s.misses > 0) {
    out = absl::StrCat("; it seeded ", Plural(s.hits + s.misses, "job", "jobs"), ", ", s.hits, " helped");
  }
  const std::string why = WhyNoPrior(s);
  if (why.empty()) {
    return absl::StrCat(out, absl::StrFormat("; seeds new jobs (weight %.2f)", PriorWeight(s)));
  }
  return absl::StrCat(out, "; does not seed new jobs: ", why);
}

std::string Summary(const Skill& s) {
  const std::string gain = absl::StrFormat("%.2fx", s.mean_gain);
  const std::string& t = s.transformation;
  std::string what;
  if (t.starts_with("recipe:")) {
    what = absl::StrCat("switching to recipe ", t.substr(7));
  } else if (t.starts_with("param:")) {
    what = absl::StrCat("setting ", t.substr(6));
  } else if (t.starts_with("genome:")) {
    return absl::StrCat("on ", s.platform, " ", s.family, " tasks the best kernel was ", t.substr(7), ", ", gain,
                        " over the first seed (", s.evidence_count, s.evidence_count == 1 ? " job)" : " jobs)",
                        SeedingNote(s));
  } else {
    what = absl::StrCat("'", t, "'");
  }
  return absl::StrCat("on ", s.platform, " ", s.family, " tasks ", what, " raised fitness ", gain, " on average over ",
                      s.evidence_count, s.evidence_count == 1 ? " step" : " steps", " in ",
                      Plural(s.jobs, "job", "jobs"), SeedingNote(s));
}

class RocksSkillStore final : public SkillStore {
 public:
  RocksSkillStore(store::Store* store, prometheus::Registry* registry) : store_(store) {
    if (registry == nullptr) return;
    jobs_ = &prometheus::BuildCounter()
                 .Name("kevo_skills_jobs_distilled_total")
                 .Help("Finished jobs distilled into skills")
                 .Register(*registry)
                 .Add({});
    evidence_ = &prometheus::BuildCounter()
                     .Name("kevo_skills_evidence_total")
                     .Help("Improving steps recorded as skill evidence")
                     .Register(*registry)
                     .Add({});
    auto& judged = prometheus::BuildCounter()
                       .Name("kevo_skills_judged_total")
                       .Help("Skills judged by a job they seeded, by outcome")
                       .Register(*registry);
    hits_ = &judged.Add({{"outcome", "hit"}});
    misses_ = &judged.Add({{"outcome", "miss"}});
  }

  absl::Status Distil(const v1::Job& job, const std::vector<v1::Node>& nodes) override {
    absl::MutexLock l(&mu_);
    KEVO_ASSIGN_OR_RETURN(auto done, store_->Get(store::Family::kSkills, DistilledKey(job.job_id())));
    if (done.has_value()) return absl::OkStatus();

    std::map<std::string, const v1::Node*> by_id;
    // The job's first seed, its own (not a skill's) when it has one: gains
    // are measured against what the proposer does without skills.
    const v1::Node* first_seed = nullptr;
    auto earlier_seed = [&first_seed](const v1::Node& n) {
      if (first_seed == nullptr) return true;
      const bool own = !IsSkillSeed(n), first_own = !IsSkillSeed(*first_seed);
      return own != first_own ? own : n.sequence() < first_seed->sequence();
    };
    for (const v1::Node& n : nodes) {
      by_id[n.node_id()] = &n;
      if (n.parent_ids_size() == 0 && n.proposer() != "warm-start" && earlier_seed(n)) {
        first_seed = &n;
      }
    }
    auto evaluated = [](const v1::Node* n) {
      return n != nullptr && n->state() == v1::NODE_DONE && !n->static_fitness() && n->fitness() > 0;
    };
    // (transformation -> steps) for this job.
    std::map<std::string, std::vector<Step>> found;
    auto credit = [&](const v1::Node& from, const v1::Node& to) {
      const double gain = to.fitness() / from.fitness();
      if (gain < kMinGain) return;
      for (const std::string& t : Transformations(from, to)) {
        found[t].push_back({gain, to.speedup_vs_production(), absl::StrCat(job.job_id(), "/", to.node_id())});
      }
    };
    for (const v1::Node& n : nodes) {
      if (!evaluated(&n)) continue;
      if (n.parent_ids_size() > 0) {
        auto parent = by_id.find(n.parent_ids(0));
        if (parent != by_id.end() && evaluated(parent->second)) credit(*parent->second, n);
      } else if (evaluated(first_seed) && &n != first_seed && n.proposer() != "warm-start") {
        credit(*first_seed, n);
      }
    }
    auto best = by_id.find(job.best_node_id());
    if (best != by_id.end() && evaluated(best->second) && !best->second->genome().empty() && evaluated(first_seed)) {
      found[absl::StrCat("genome:", best->second->genome())].push_back(
          {std::max(1.0, best->second->fitness() / first_seed->fitness()), best->second->speedup_vs_production(),
           absl::StrCat(job.job_id(), "/", best->second->node_id())});
    }
    const std::map<std::string, bool> judged = Judge(job, nodes, by_id);

    const std::string prefix = SkillPrefix(job.spec().platform(), SkillFamily(job.spec().task()));
    std::map<std::string, Record> records;  // by key, as they will be written
    auto record = [&](const std::string& key) -> absl::StatusOr<Record*> {
      auto it = records.find(key);
      if (it != records.end()) return &it->second;
      KEVO_ASSIGN_OR_RETURN(auto old, store_->Get(store::Family::kSkills, key));
      return &(records[key] = old.has_value() ? Record::Parse(*old) : Record{});
    };
    int steps = 0;
    for (const auto& [transformation, gains] : found) {
      KEVO_ASSIGN_OR_RETURN(Record * r, record(prefix + transformation));
      for (const Step& step : gains) r->Add(step.gain, step.vs_production, step.evidence);
      ++r->jobs;
      steps += static_cast<int>(gains.size());
    }
    int hits = 0, misses = 0;
    for (const auto& [transformation, hit] : judged) {
      KEVO_ASSIGN_OR_RETURN(Record * r, record(prefix + transformation));
      if (r->count == 0) continue;  // not a stored skill (any more): nothing to weigh
      ++(hit ? r->hits : r->misses);
      ++(hit ? hits : misses);
    }
    store::Batch batch;
    for (const auto& [key, r] : records) {
      if (r.count > 0) batch.Put(store::Family::kSkills, key, r.Serialize());
    }
    batch.Put(store::Family::kSkills, DistilledKey(job.job_id()), "1");
    KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
    if (jobs_ != nullptr) jobs_->Increment();
    if (evidence_ != nullptr) evidence_->Increment(steps);
    if (hits_ != nullptr) hits_->Increment(hits);
    if (misses_ != nullptr) misses_->Increment(misses);
    LogInfo("skills: job ", job.job_id(), " distilled: ", found.size(), " transformations from ", steps,
            " improving steps (", prefix, "); skills that seeded it: ", hits, " helped, ", misses, " did not");
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Skill>> SkillsFor(const std::string& platform, const std::string& family,
                                               int limit) const override {
    std::vector<Skill> out;
    // A family without a platform cannot use the key prefix: scan them all.
    const std::string prefix = SkillPrefix(platform, family);
    KEVO_RETURN_IF_ERROR(
        store_->Scan(store::Family::kSkills, prefix, [&](std::string_view key, std::string_view value) {
          // s/<platform>/<family>/<transformation>; transformations may hold '/'.
          std::string_view rest = key.substr(2);
          const size_t a = rest.find('/');
          const size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
          if (b == std::string_view::npos) return true;
          Skill s;
          s.platform = std::string(rest.substr(0, a));
          s.family = std::string(rest.substr(a + 1, b - a - 1));
          if (!family.empty() && s.family != family) return true;
          s.transformation = std::string(rest.substr(b + 1));
          Record r = Record::Parse(value);
          if (r.count == 0) return true;
          s.evidence_count = r.count;
          s.mean_gain = std::exp(r.sum_log_gain / r.count);
          s.jobs = r.jobs;
          if (r.production_count > 0) {
            s.vs_production = std::exp(r.sum_log_production / r.production_count);
          }
          s.hits = r.hits;
          s.misses = r.misses;
          s.node_ids = std::move(r.node_ids);
          s.summary = Summary(s);
          out.push_back(std::move(s));
          return true;
        }));
    // Best first: total log gain (gain weighted by evidence), then name.
    std::sort(out.begin(), out.end(), [](const Skill& a, const Skill& b) {
      const double wa = a.evidence_count * std::log(a.mean_gain);
      const double wb = b.evidence_count * std::log(b.mean_gain);
      return wa != wb ? wa > wb : a.transformation < b.transformation;
    });
    if (limit > 0 && static_cast<int>(out.size()) > limit) out.resize(limit);
    return out;
  }

 private:
  static bool IsSkillSeed(const v1::Node& n) { return n.mutation().starts_with("seed:skill"); }

  // For each skill key on the job's skill seeds: true (a hit) when one of its
  // seeds is the job's best or an ancestor of it and was at least as fast as
  // every own seed that finished; false (a miss) when none was; keys whose
  // seeds did not finish, or finished correct with no own seed to weigh them
  // against, are left out. Nothing is judged on static (compile-only)
  // fitness.
  static std::map<std::string, bool> Judge(const v1::Job& job, const std::vector<v1::Node>& nodes,
                                           const std::map<std::string, const v1::Node*>& by_id) {
    std::map<std::string, bool> out;
    double own_best = -1;  // the best own seed's fitness; -1 while none finished
    for (const v1::Node& n : nodes) {
      if (n.static_fitness()) return out;
      if (n.parent_ids_size() == 0 && n.state() == v1::NODE_DONE && !IsSkillSeed(n) && n.proposer() != "warm-start") {
        own_best = std::max(own_best, n.fitness());
      }
    }
    // The job's best and its ancestors.
    std::set<std::string> lineage;
    std::vector<std::string> todo;
    if (!job.best_node_id().empty()) todo.push_back(job.best_node_id());
    while (!todo.empty()) {
      std::string id = std::move(todo.back());
      todo.pop_back();
      if (!lineage.insert(id).second) continue;
      auto it = by_id.find(id);
      if (it == by_id.end()) continue;
      for (const std::string& p : it->second->parent_ids()) todo.push_back(p);
    }
    for (const v1::Node& n : nodes) {
      const std::vector<std::string> keys = proposer::SkillSeedKeys(n.mutation());
      if (keys.empty() || n.state() != v1::NODE_DONE) continue;
      const bool correct = n.fitness() > 0;
      if (correct && own_best < 0) continue;
      const bool hit = correct && n.fitness() >= own_best && lineage.contains(n.node_id());
      for (const std::string& key : keys) out[key] |= hit;
    }
    return out;
  }

  store::Store* const store_;
  absl::Mutex mu_;  // serialises Distil's read-modify-write of skill records
  prometheus::Counter* jobs_ = nullptr;
  prometheus::Counter* evidence_ = nullptr;
  prometheus::Counter* hits_ = nullptr;
  prometheus::Counter* misses_ = nullptr;
};

}  // namespace

std::string SkillFamily(const v1::Task& task) {
  if (!task.op_family().empty()) return task.op_family();
  auto it = task.hints().find("pattern");
  return it != task.hints().end() ? it->second : "generic";
}

std::vector<std::string> Transformations(const v1::Node& parent, const v1::Node& child) {
  std::vector<std::string> out;
  if (!parent.genome().empty() && !child.genome().empty()) {
    auto from = proposer::Genome::FromString(parent.genome());
    auto to = proposer::Genome::FromString(child.genome());
    if (from.ok() && to.ok()) {
      if (from->recipe != to->recipe) out.push_back(absl::StrCat("recipe:", to->recipe));
      for (const auto& [k, v] : to->params) {
        auto it = from->params.find(k);
        if (it != from->params.end() && it->second != v) {
          out.push_back(absl::StrCat("param:", k, "=", v));
        }
      }
      return out;
    }
  }
  if (!child.mutation().empty() && child.mutation() != "seed" && child.mutation() != "crossover") {
    out.push_back(child.mutation());
  }
  return out;
}

std::string WhyNoPrior(const Skill& s) {
  const std::string& t = s.transformation;
  if (!t.starts_with("recipe:") && !t.starts_with("param:") && !t.starts_with("genome:")) {
    return "not a recipe, parameter or genome (an LLM's label, for prompts only)";
  }
  if (s.jobs < kMinPriorJobs && s.evidence_count < kMinPriorSteps) {
    return absl::StrCat("evidence from ", Plural(s.jobs, "job", "jobs"), " and ",
                        Plural(s.evidence_count, "step", "steps"), " (needs ", kMinPriorJobs, " jobs or ",
                        kMinPriorSteps, " steps)");
  }
  if (s.vs_production > 0 && s.vs_production < kMinGain) {
    return absl::StrFormat("its kernels ran %.2fx against the production baseline (needs %.2fx)", s.vs_production,
                           kMinGain);
  }
  if (s.misses > s.hits) {
    return absl::StrCat("it did not help ", s.misses, " of the ", Plural(s.hits + s.misses, "job", "jobs"),
                        " it seeded");
  }
  if (RawWeight(s) <= 1) {
    if (s.misses == 0) return absl::StrFormat("its gain (%.2fx) is no gain", s.mean_gain);
    return absl::StrCat(Plural(s.misses, "miss", "misses"), " brought its weight to 1 or less");
  }
  return "";
}

double PriorWeight(const Skill& s) { return WhyNoPrior(s).empty() ? RawWeight(s) : 0; }

std::map<std::string, double> PriorsFrom(const std::vector<Skill>& skills) {
  std::map<std::string, double> out;
  for (const Skill& s : skills) {
    std::string key;
    if (s.transformation.starts_with("recipe:")) {
      key = s.transformation.substr(7);
    } else if (s.transformation.starts_with("param:") || s.transformation.starts_with("genome:")) {
      key = s.transformation;
    } else {
      continue;
    }
    const double w = PriorWeight(s);
    if (w > 0) out[key] = std::max(out[key], w);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SkillStore>> SkillStore::Create(store::Store* store, prometheus::Registry* registry) {
  if (store == nullptr) return absl::InvalidArgumentError("SkillStore::Create: store is null");
  return std::unique_ptr<SkillStore>(new RocksSkillStore(store, registry));
}

}  // namespace kevo::skills
