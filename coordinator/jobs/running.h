// A running job as its job loop holds it, internal to coordinator/jobs: the
// tree, the policy and proposer, what is in flight and what waits for the
// disk. Touched only on the job's loop.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/time/clock.h"

#include "common/hash.h"
#include "coordinator/jobs/manager.h"

namespace kevo::jobs {

struct JobManager::Running {
  v1::Job job;
  search::Tree tree;
  std::unique_ptr<search::Policy> policy;
  std::unique_ptr<proposer::Proposer> proposer;
  std::set<std::string> sources;
  // The genomes of the tree's built-in nodes (ProposeRequest::tried).
  std::unordered_set<std::string> genomes;
  std::map<std::string, std::string> node_by_eval;
  std::mt19937_64 rng;
  std::map<std::string, double> priors;  // from skill memory
  int in_flight = 0;
  bool stopping = false;
  bool cancelled = false;
  int empty_rounds = 0;
  // Proposals to ask for beyond the free slots: doubled after a round whose
  // proposals were all duplicates (a deterministic proposer asked for one
  // seed returns the same first seed each time), back to 1 after a new one.
  int overask = 1;
  int proposer_errors = 0;
  absl::Time started;             // the job's creation, on the manager's clock
  std::set<std::string> devices;  // host/GPU pairs that timed this job's candidates
  // The best node's kernel (BestCandidate), read once per best, and its
  // CandidateHash (the stored record's).
  std::string best_candidate_node;
  std::optional<v1::Candidate> best_candidate;
  std::string best_candidate_hash;
  // The task as its evaluations carry it (without a KernelBench Model's
  // graph) and its hash (EvalRecord.task_hash), made at the first submission.
  std::optional<v1::Task> submitted_task;
  std::string submitted_task_hash;
  // The toolchain that measured the best node (BestToolchain), read once per best.
  std::string best_toolchain_node;
  std::string best_toolchain;
  // Results that could not be stored yet (the store refused the write: a
  // full disk), retried every tick; the job proposes nothing meanwhile, so
  // what it reports never runs ahead of what is on disk.
  std::vector<v1::EvalRecord> unstored;
  bool said_unstored = false;  // logged once while results wait, not every retry
  // The spec changed (a KernelBench job adopted its Model's graph) and goes
  // with the job's next write (PutJob); the other writes leave it out.
  bool spec_unstored = false;
  // BaselineTimes() of the tree's nodes, sorted, kept as results are applied
  // (the job's median baseline without a pass over the tree per result).
  std::vector<double> baselines;
};

}  // namespace kevo::jobs
