// A job read back from the store and figured: what the CLI (`kevo nodes`)
// reads from a stopped coordinator's folder, and the job loop's medians.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"

namespace kevo::jobs {

// Every node of `job_id` in `store` (the durable tree), in key order; none
// for an unknown job. For readers of a stopped coordinator's folder too.
absl::StatusOr<std::vector<v1::Node>> ReadNodes(store::Store& store, const std::string& job_id);
// The job's stored record, its spec joined; NotFound for an unknown job.
absl::StatusOr<v1::Job> ReadJob(store::Store& store, const std::string& job_id);
// A job's record in `batch`: the job less its spec, and the spec under
// keys::JobSpec where `with_spec` (once at submit, again when it changes).
// `job` is left as it was.
void PutJob(store::Batch& batch, v1::Job& job, bool with_spec);
// A record parsed without its spec gets the one stored apart (JoinSpec
// leaves a record that holds its spec inline, as older stores do, alone).
absl::Status JoinSpec(store::Store& store, v1::Job& job);

// The baseline times measured by the timed evaluations among `nodes`
// (unsorted), and their median (0 when none).
std::vector<double> BaselineTimes(const std::vector<const v1::Node*>& nodes);
double Median(std::vector<double> values);
// The median of `sorted` (ascending), 0 when empty: Median without a copy.
double SortedMedian(const std::vector<double>& sorted);

}  // namespace kevo::jobs
