// The coordinator's key schema: every key of the store's column families
// (store.h's Family) is made here, so that the coordinator, the CLI reading
// a stopped coordinator's folder, and the tests that inspect one agree.
// docs/architecture.md, "Storage", lists them.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace kevo::store::keys {

// Family::kJobs: a job's record, its spec (stored apart: most of a job's
// bytes are its task, and a result does not change it; records written
// before that hold the spec inline), and the index of each finished job's
// best node by (task, platform) that warm starts read.
inline constexpr char kJobPrefix[] = "job/";
inline std::string Job(const std::string& job_id) { return absl::StrCat(kJobPrefix, job_id); }
inline std::string JobSpec(const std::string& job_id) { return absl::StrCat("spec/", job_id); }
inline std::string BestPrefix(const std::string& task_hash, const std::string& platform) {
  return absl::StrCat("best/", task_hash, "/", platform, "/");
}
inline std::string Best(const std::string& task_hash, const std::string& platform, const std::string& job_id) {
  return absl::StrCat(BestPrefix(task_hash, platform), job_id);
}

// Family::kNodes: a job's search-tree nodes.
inline std::string NodePrefix(const std::string& job_id) { return absl::StrCat(job_id, "/n/"); }
inline std::string Node(const std::string& job_id, const std::string& node_id) {
  return absl::StrCat(NodePrefix(job_id), node_id);
}

// Family::kEvals: the scheduler's evaluation records.
inline constexpr char kEvalPrefix[] = "eval/";
inline std::string Eval(const std::string& eval_id) { return absl::StrCat(kEvalPrefix, eval_id); }

}  // namespace kevo::store::keys
