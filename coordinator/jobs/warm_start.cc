// Warm start: a new job's first nodes are the best kernels of the latest
// jobs on the same task and platform.
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

void JobManager::WarmStart(Running& r) {
  std::vector<std::pair<std::string, std::string>> earlier;  // job id, node id
  absl::Status s =
      store_->Scan(store::Family::kJobs, store::keys::BestPrefix(r.job.task_hash(), r.job.spec().platform()),
                   [&](std::string_view key, std::string_view value) {
                     std::string k(key);
                     earlier.emplace_back(k.substr(k.rfind('/') + 1), std::string(value));
                     return true;
                   });
  if (!s.ok()) return;
  // The most recent three jobs' best nodes.
  std::reverse(earlier.begin(), earlier.end());
  if (earlier.size() > 3) earlier.resize(3);
  for (const auto& [job_id, node_id] : earlier) {
    auto value = store_->Get(store::Family::kNodes, store::keys::Node(job_id, node_id));
    if (!value.ok() || !value->has_value()) continue;
    v1::Node old;
    if (!old.ParseFromString(**value)) continue;
    auto record = scheduler_->GetRecord(old.eval_id());
    if (!record.ok()) continue;
    std::optional<v1::Candidate> c = CandidateOf(*record);
    if (!c.has_value()) continue;
    std::string hash = CandidateHash(*c);
    if (r.sources.contains(hash)) continue;
    v1::Node node;
    node.set_proposer("warm-start");
    node.set_mutation(absl::StrCat("best of job ", job_id, " (", node_id, ")"));
    node.set_genome(old.genome());
    if (!SubmitNode(r, node, *c, hash).ok()) continue;
    LogInfo("job ", r.job.job_id(), " warm-starts from job ", job_id, " node ", node_id);
  }
}

}  // namespace kevo::jobs
