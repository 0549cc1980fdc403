// The interface every worker platform implements (cpu, nvidia, amd,
// mtia-sim): describe the host once, then evaluate candidates. The daemon
// (worker/daemon) owns the gRPC stream and calls a Backend from its slots.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "kevo/v1/worker.pb.h"

namespace kevo::worker {

// Called once as each stage (compile, validate, profile) finishes. Must be
// cheap and thread-safe: it is called from the evaluating slot's thread.
using EventSink = std::function<void(const v1::StageEvent&)>;

class Backend {
 public:
  virtual ~Backend() = default;

  // What this worker is, for its Hello: platform, device, toolchains,
  // languages, fingerprint, and ceilings measured once at start-up (memory
  // bandwidth, FP32 peak). The daemon fills worker_id and slots. Returns an
  // error when the platform cannot work on this host (no compiler, ...).
  virtual absl::StatusOr<v1::Hello> Describe() = 0;

  // Evaluates one candidate for `task`: compile, validate, profile, calling
  // `on_event` as each stage ends. Candidate faults are reported in the
  // returned Evaluation's status and diagnostics; the worker's own failures
  // as INFRA_ERROR. Never throws. Thread-safe: slots call it concurrently.
  virtual v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event) = 0;

  // As Evaluate, and where the backend times production baselines, also
  // times `rival` (the job's best so far) in that same loop, on the same
  // inputs: Evaluation.rival and speedup_vs_rival, or rival_error. The
  // default, for backends without that stage, evaluates alone and says so.
  virtual v1::Evaluation EvaluateBeside(const v1::Task& task, const v1::Candidate& candidate,
                                        const v1::Candidate& rival, const EventSink& on_event) {
    (void)rival;
    v1::Evaluation ev = Evaluate(task, candidate, on_event);
    ev.set_rival_error("this platform times no production baselines, so no rival beside them");
    return ev;
  }

  // Platform gauges the daemon exports on /metrics (full metric name ->
  // value), e.g. kevo_worker_gpu_timing_utilisation. The set of names must
  // not change after Describe(). Thread-safe. Default: none.
  virtual std::map<std::string, double> Gauges() const { return {}; }
};

}  // namespace kevo::worker
