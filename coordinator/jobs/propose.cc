// The job loop's half that sends work out: the policy selects parents, the
// proposer answers, new kernels become nodes submitted to the scheduler with
// the job's best timed beside them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

#include "common/log.h"
#include "common/status.h"
#include "coordinator/jobs/best.h"
#include "coordinator/jobs/job_metrics.h"
#include "coordinator/jobs/running.h"
#include "coordinator/jobs/statistics.h"
#include "coordinator/store/keys.h"

namespace kevo::jobs {
namespace {

constexpr int kMaxEmptyRounds = 40;  // proposals that were all duplicates
constexpr int kMaxOverask = 64;      // at most this many times the free slots
constexpr int kMaxProposerErrors = 20;
constexpr size_t kMaxChildren = 8;  // children of a parent shown to the proposer

}  // namespace

std::vector<proposer::ParentInfo> JobManager::ParentsFor(const Running& r, const std::vector<std::string>& ids) {
  std::vector<proposer::ParentInfo> parents;
  const bool details = r.proposer->NeedsParentDetails();
  for (const std::string& id : ids) {
    const v1::Node* n = r.tree.Get(id);
    if (n == nullptr) continue;
    proposer::ParentInfo p;
    p.node_id = id;
    p.fitness = n->fitness();
    if (!n->genome().empty()) {
      auto g = proposer::Genome::FromString(n->genome());
      if (g.ok()) p.genome = *g;
    }
    if (!details) {
      parents.push_back(std::move(p));
      continue;
    }
    auto record = scheduler_->GetRecord(n->eval_id());
    if (record.ok()) {
      p.evaluation = record->evaluation();
      if (std::optional<v1::Candidate> c = CandidateOf(*record); c.has_value()) p.candidate = *std::move(c);
    }
    // What was already tried from this parent (the next proposals' siblings).
    const std::vector<std::string>& kids = r.tree.Children(id);
    for (size_t i = kids.size() > kMaxChildren ? kids.size() - kMaxChildren : 0; i < kids.size(); ++i) {
      const v1::Node* child = r.tree.Get(kids[i]);
      if (child == nullptr) continue;
      proposer::ChildInfo c;
      c.node_id = child->node_id();
      c.proposer = child->proposer();
      c.mutation = child->mutation();
      c.status = child->status();
      c.fitness = child->fitness();
      if (child->state() == v1::NODE_DONE) {
        auto child_record = scheduler_->GetRecord(child->eval_id());
        if (child_record.ok()) c.message = child_record->evaluation().diagnostics().message();
      }
      p.children.push_back(std::move(c));
    }
    parents.push_back(std::move(p));
  }
  return parents;
}

void JobManager::Pump(Running& r) {
  if (!r.unstored.empty()) {
    std::vector<v1::EvalRecord> retry;
    retry.swap(r.unstored);
    for (const v1::EvalRecord& record : retry) {
      if (!Apply(r, record)) r.unstored.push_back(record);
    }
    if (!r.unstored.empty()) return;  // still not stored: propose nothing, finish nothing
    LogInfo("job ", r.job.job_id(), ": the results that waited for the disk are stored");
    r.said_unstored = false;
  }
  if (!r.stopping) {
    std::string reason = StopReason(r);
    if (!reason.empty()) {
      r.stopping = true;
      r.job.set_stop_reason(reason);
    }
  }
  const v1::JobSpec& spec = r.job.spec();
  int target = spec.max_in_flight() > 0 ? spec.max_in_flight()
                                        : std::max(1, scheduler_->SlotsFor(spec.platform(), spec.require_timing()));
  for (int round = 0; !r.stopping && round < 16 && r.in_flight < target; ++round) {
    int budget_left = spec.budget().max_evaluations() - r.job.evaluations_done() - r.in_flight;
    if (budget_left <= 0) break;
    search::Selection sel = r.policy->Select(r.tree, r.rng);
    if (r.tree.Exhausted(sel.parents)) {
      // The policy has nothing left that could bring a new source.
      r.stopping = true;
      r.job.set_stop_reason("search space exhausted (every proposal was already evaluated)");
      break;
    }
    proposer::ProposeRequest req;
    req.task = &spec.task();
    req.platform = spec.platform();
    req.parents = ParentsFor(r, sel.parents);
    req.count = std::min(budget_left, target - r.in_flight) * r.overask;
    req.seed = r.rng();
    req.priors = r.priors;
    req.use_skills = !spec.no_skills();
    req.job_id = r.job.job_id();
    auto proposals = r.proposer->Propose(req);
    if (!proposals.ok()) {
      LogWarning("job ", r.job.job_id(), ": proposer ", r.proposer->name(), ": ", proposals.status().ToString());
      if (++r.proposer_errors >= kMaxProposerErrors) {
        r.stopping = true;
        r.job.set_stop_reason(absl::StrCat("proposer failed: ", proposals.status().message()));
      }
      continue;
    }
    // A proposer working in the background has nothing yet: ask again on
    // the next tick.
    if (proposals->empty() && r.proposer->Pending()) break;
    bool any = false;
    for (proposer::Proposal& p : *proposals) {
      if (r.in_flight >= target || budget_left <= 0) break;
      std::string hash = CandidateHash(p.candidate);
      if (r.sources.contains(hash)) {
        if (metrics_->duplicates) metrics_->duplicates->Increment();
        continue;
      }
      v1::Node node;
      for (const auto& pid : p.parent_ids) node.add_parent_ids(pid);
      node.set_proposer(p.proposer.empty() ? r.proposer->name() : p.proposer);
      node.set_mutation(p.mutation);
      node.set_genome(p.genome.recipe.empty() ? "" : p.genome.ToString());
      int depth = 0;
      if (!p.parent_ids.empty()) {
        const v1::Node* parent = r.tree.Get(p.parent_ids.front());
        if (parent != nullptr) depth = parent->depth() + 1;
      }
      node.set_depth(depth);
      absl::Status submitted = SubmitNode(r, node, p.candidate, hash);
      if (!submitted.ok()) {
        LogError("job ", r.job.job_id(), ": submit: ", submitted.ToString());
        if (submitted.code() == absl::StatusCode::kFailedPrecondition ||
            submitted.code() == absl::StatusCode::kResourceExhausted) {
          // Timing required but only compile-only workers remain, or the
          // team's evaluation quota is spent: the job ends with its best so far.
          r.stopping = true;
          r.job.set_stop_reason(std::string(submitted.message()));
        }
        break;
      }
      --budget_left;
      any = true;
      r.proposer->Observe(node, nullptr);
    }
    if (any) {
      r.empty_rounds = 0;
      r.overask = 1;
    } else if (r.overask >= kMaxOverask) {
      // Asked for the most and still nothing new: the policies pass this
      // selection over from now on.
      r.tree.MarkExhausted(sel.parents);
      r.overask = 1;
      r.empty_rounds = 0;
      LogInfo("job ", r.job.job_id(), ": ",
              sel.parents.empty() ? std::string("seed generation")
                                  : absl::StrCat("expanding ", absl::StrJoin(sel.parents, " x ")),
              " exhausted (", kMaxOverask, "x over-asked, all proposals already evaluated)");
    } else {
      r.overask = std::min(2 * r.overask, kMaxOverask);
      if (++r.empty_rounds >= kMaxEmptyRounds) {
        r.stopping = true;
        r.job.set_stop_reason("search space exhausted (every proposal was already evaluated)");
      }
    }
  }
  MaybeFinish(r);
}

absl::Status JobManager::SubmitNode(Running& r, v1::Node& node, const v1::Candidate& candidate,
                                    const std::string& source_hash) {
  const int seq = static_cast<int>(r.tree.size());
  node.set_node_id(absl::StrFormat("n%05d", seq));
  node.set_job_id(r.job.job_id());
  node.set_source_hash(source_hash);
  node.set_state(v1::NODE_EVALUATING);
  node.set_created_unix_micros(absl::ToUnixMicros(now_()));
  node.set_sequence(seq);
  scheduler::Scheduler::SubmitOptions so;
  so.job_id = r.job.job_id();
  so.eval_id = scheduler::Scheduler::NewEvalId();
  so.require_timing = r.job.spec().require_timing();
  so.team = r.job.spec().team();
  so.priority = r.job.spec().priority();
  node.set_eval_id(so.eval_id);
  // The job's best so far is timed beside the candidate, so that which of the
  // two the job keeps is decided by one side-by-side loop.
  if (std::optional<v1::Candidate> best = BestCandidate(r); best.has_value()) {
    so.rival = *std::move(best);
    so.rival_stored = true;  // BestCandidate read it from the store
    node.set_rival_node_id(r.job.best_node_id());
  }
  // Durable at the job loop's next Sync(), before anyone is shown the node
  // (Publish waits for it).
  so.sync = false;
  so.extra.Put(store::Family::kNodes, store::keys::Node(r.job.job_id(), node.node_id()), node.SerializeAsString());
  KEVO_RETURN_IF_ERROR(
      scheduler_->Submit(r.job.spec().task(), candidate, r.job.spec().platform(), std::move(so)).status());
  r.tree.Upsert(node);
  r.sources.insert(source_hash);
  r.node_by_eval[node.eval_id()] = node.node_id();
  ++r.in_flight;
  r.job.set_nodes(static_cast<int32_t>(r.tree.size()));
  r.job.set_evaluations_in_flight(r.in_flight);
  if (metrics_->nodes) metrics_->nodes->Increment();
  Publish(r, &node);
  return absl::OkStatus();
}

std::optional<v1::Candidate> JobManager::CandidateOf(const v1::EvalRecord& record) {
  auto blob = store_->Get(store::Family::kBlobs, record.candidate_hash());
  v1::Candidate c;
  if (!blob.ok() || !blob->has_value() || !c.ParseFromString(**blob)) return std::nullopt;
  return c;
}

std::optional<v1::Candidate> JobManager::BestCandidate(Running& r) {
  const v1::Job& job = r.job;
  if (job.best_node_id().empty() || job.best_speedup() <= 0) return std::nullopt;  // nothing measured
  if (r.best_candidate_node == job.best_node_id()) return r.best_candidate;
  r.best_candidate_node = job.best_node_id();
  r.best_candidate.reset();
  if (const v1::Node* best = r.tree.Get(job.best_node_id()); best != nullptr) {
    if (auto record = scheduler_->GetRecord(best->eval_id()); record.ok()) r.best_candidate = CandidateOf(*record);
  }
  if (!r.best_candidate.has_value()) {
    LogWarning("job ", job.job_id(), ": the best node ", job.best_node_id(),
               "'s kernel cannot be read; candidates are timed without a rival");
  }
  return r.best_candidate;
}

std::string JobManager::BestToolchain(Running& r) {
  const v1::Job& job = r.job;
  if (job.best_node_id().empty()) return "";
  if (r.best_toolchain_node == job.best_node_id()) return r.best_toolchain;
  r.best_toolchain_node = job.best_node_id();
  r.best_toolchain.clear();
  if (const v1::Node* best = r.tree.Get(job.best_node_id()); best != nullptr) {
    if (auto record = scheduler_->GetRecord(best->eval_id()); record.ok())
      r.best_toolchain = ToolchainOf(record->evaluation());
  }
  return r.best_toolchain;
}

}  // namespace kevo::jobs
