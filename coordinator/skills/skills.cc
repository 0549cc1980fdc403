#include "coordinator/skills/skills.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
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

// One skill as stored: gains are kept as a sum of logs so that merging is
// exact.
struct Record {
  int count = 0;
  double sum_log_gain = 0;
  std::vector<std::string> node_ids;

  std::string Serialize() const {
    return nlohmann::json{{"count", count}, {"sum_log_gain", sum_log_gain}, {"node_ids", node_ids}}
        .dump();
  }
  static Record Parse(std::string_view text) {
    Record r;
    try {
      auto j = nlohmann::json::parse(text);
      r.count = j.value("count", 0);
      r.sum_log_gain = j.value("sum_log_gain", 0.0);
      r.node_ids = j.value("node_ids", std::vector<std::string>{});
    } catch (const nlohmann::json::exception& e) {
      LogWarning("skills: unreadable skill record ignored: ", e.what());
    }
    return r;
  }
  void Add(double gain, const std::string& evidence) {
    ++count;
    sum_log_gain += std::log(gain);
    node_ids.insert(node_ids.begin(), evidence);
    if (node_ids.size() > kMaxNodeIds) node_ids.resize(kMaxNodeIds);
  }
};

std::string Summary(const Skill& s) {
  const std::string gain = absl::StrFormat("%.2fx", s.mean_gain);
  const std::string& t = s.transformation;
  std::string what;
  if (t.starts_with("recipe:")) {
    what = absl::StrCat("switching to recipe ", t.substr(7));
  } else if (t.starts_with("param:")) {
    what = absl::StrCat("setting ", t.substr(6));
  } else if (t.starts_with("genome:")) {
    return absl::StrCat("on ", s.platform, " ", s.family, " tasks the best kernel was ",
                        t.substr(7), ", ", gain, " over the first seed (", s.evidence_count,
                        s.evidence_count == 1 ? " job)" : " jobs)");
  } else {
    what = absl::StrCat("'", t, "'");
  }
  return absl::StrCat("on ", s.platform, " ", s.family, " tasks ", what, " raised fitness ", gain,
                      " on average over ", s.evidence_count,
                      s.evidence_count == 1 ? " step" : " steps");
}

class RocksSkillStore final : public SkillStore {
 public:
  RocksSkillStore(store::Store* store, prometheus::Registry* registry) : store_(store) {
    if (registry == nullptr) return;
    jobs_ = &prometheus::BuildCounter().Name("kevo_skills_jobs_distilled_total")
                 .Help("Finished jobs distilled into skills").Register(*registry).Add({});
    evidence_ = &prometheus::BuildCounter().Name("kevo_skills_evidence_total")
                     .Help("Improving steps recorded as skill evidence").Register(*registry).Add({});
  }

  absl::Status Distil(const v1::Job& job, const std::vector<v1::Node>& nodes) override {
    absl::MutexLock l(&mu_);
    KEVO_ASSIGN_OR_RETURN(auto done, store_->Get(store::Family::kSkills, DistilledKey(job.job_id())));
    if (done.has_value()) return absl::OkStatus();

    std::map<std::string, const v1::Node*> by_id;
    const v1::Node* first_seed = nullptr;
    for (const v1::Node& n : nodes) {
      by_id[n.node_id()] = &n;
      if (n.parent_ids_size() == 0 && n.proposer() != "warm-start" &&
          (first_seed == nullptr || n.sequence() < first_seed->sequence())) {
        first_seed = &n;
      }
    }
    auto evaluated = [](const v1::Node* n) {
      return n != nullptr && n->state() == v1::NODE_DONE && !n->static_fitness() && n->fitness() > 0;
    };
    // (transformation -> gains with their evidence) for this job.
    std::map<std::string, std::vector<std::pair<double, std::string>>> found;
    auto credit = [&](const v1::Node& from, const v1::Node& to) {
      const double gain = to.fitness() / from.fitness();
      if (gain < kMinGain) return;
      for (const std::string& t : Transformations(from, to)) {
        found[t].emplace_back(gain, absl::StrCat(job.job_id(), "/", to.node_id()));
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
    if (best != by_id.end() && evaluated(best->second) && !best->second->genome().empty() &&
        evaluated(first_seed)) {
      found[absl::StrCat("genome:", best->second->genome())].emplace_back(
          std::max(1.0, best->second->fitness() / first_seed->fitness()),
          absl::StrCat(job.job_id(), "/", best->second->node_id()));
    }

    const std::string prefix = SkillPrefix(job.spec().platform(), SkillFamily(job.spec().task()));
    store::Batch batch;
    int steps = 0;
    for (const auto& [transformation, gains] : found) {
      const std::string key = prefix + transformation;
      KEVO_ASSIGN_OR_RETURN(auto old, store_->Get(store::Family::kSkills, key));
      Record r = old.has_value() ? Record::Parse(*old) : Record{};
      for (const auto& [gain, evidence] : gains) r.Add(gain, evidence);
      steps += static_cast<int>(gains.size());
      batch.Put(store::Family::kSkills, key, r.Serialize());
    }
    batch.Put(store::Family::kSkills, DistilledKey(job.job_id()), "1");
    KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
    if (jobs_ != nullptr) jobs_->Increment();
    if (evidence_ != nullptr) evidence_->Increment(steps);
    LogInfo("skills: job ", job.job_id(), " distilled: ", found.size(), " transformations from ",
            steps, " improving steps (", prefix, ")");
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Skill>> SkillsFor(const std::string& platform,
                                               const std::string& family,
                                               int limit) const override {
    std::vector<Skill> out;
    // A family without a platform cannot use the key prefix: scan them all.
    const std::string prefix = SkillPrefix(platform, family);
    KEVO_RETURN_IF_ERROR(store_->Scan(
        store::Family::kSkills, prefix, [&](std::string_view key, std::string_view value) {
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
  store::Store* const store_;
  absl::Mutex mu_;  // serialises Distil's read-modify-write of skill records
  prometheus::Counter* jobs_ = nullptr;
  prometheus::Counter* evidence_ = nullptr;
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
    const int n = std::min(s.evidence_count, kMaxPriorEvidence);
    const double w = std::clamp(std::pow(s.mean_gain, n), 1.0, kMaxPrior);
    out[key] = std::max(out[key], w);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SkillStore>> SkillStore::Create(store::Store* store,
                                                               prometheus::Registry* registry) {
  if (store == nullptr) return absl::InvalidArgumentError("SkillStore::Create: store is null");
  return std::unique_ptr<SkillStore>(new RocksSkillStore(store, registry));
}

}  // namespace kevo::skills
