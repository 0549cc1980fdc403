#include "coordinator/jobs/statistics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "common/status.h"
#include "coordinator/store/keys.h"

namespace kevo::jobs {

absl::StatusOr<std::vector<v1::Node>> ReadNodes(store::Store& store, const std::string& job_id) {
  std::vector<v1::Node> nodes;
  KEVO_RETURN_IF_ERROR(
      store.Scan(store::Family::kNodes, store::keys::NodePrefix(job_id), [&](std::string_view, std::string_view value) {
        v1::Node n;
        if (n.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          nodes.push_back(std::move(n));
        }
        return true;
      }));
  return nodes;
}

absl::StatusOr<v1::Job> ReadJob(store::Store& store, const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(std::optional<std::string> value, store.Get(store::Family::kJobs, store::keys::Job(job_id)));
  v1::Job job;
  if (!value.has_value()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  if (!job.ParseFromString(*value)) return absl::DataLossError(absl::StrCat("job ", job_id, ": garbled record"));
  KEVO_RETURN_IF_ERROR(JoinSpec(store, job));
  return job;
}

void PutJob(store::Batch& batch, v1::Job& job, bool with_spec) {
  if (with_spec) batch.Put(store::Family::kJobs, store::keys::JobSpec(job.job_id()), job.spec().SerializeAsString());
  v1::JobSpec* spec = job.has_spec() ? job.release_spec() : nullptr;
  batch.Put(store::Family::kJobs, store::keys::Job(job.job_id()), job.SerializeAsString());
  if (spec != nullptr) job.set_allocated_spec(spec);
}

absl::Status JoinSpec(store::Store& store, v1::Job& job) {
  if (job.has_spec()) return absl::OkStatus();
  KEVO_ASSIGN_OR_RETURN(std::optional<std::string> value,
                        store.Get(store::Family::kJobs, store::keys::JobSpec(job.job_id())));
  if (!value.has_value()) return absl::DataLossError(absl::StrCat("job ", job.job_id(), ": its spec is not stored"));
  if (!job.mutable_spec()->ParseFromString(*value)) {
    return absl::DataLossError(absl::StrCat("job ", job.job_id(), ": garbled spec"));
  }
  return absl::OkStatus();
}

std::vector<double> BaselineTimes(const std::vector<const v1::Node*>& nodes) {
  std::vector<double> out;
  for (const v1::Node* n : nodes) {
    if (n->state() == v1::NODE_DONE && !n->static_fitness() && n->baseline_time_s() > 0) {
      out.push_back(n->baseline_time_s());
    }
  }
  return out;
}

double SortedMedian(const std::vector<double>& sorted) {
  if (sorted.empty()) return 0;
  const size_t half = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + half, values.end());
  if (values.size() % 2 == 1) return values[half];
  return (*std::max_element(values.begin(), values.begin() + half) + values[half]) / 2;
}

}  // namespace kevo::jobs
