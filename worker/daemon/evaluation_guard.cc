#include "worker/daemon/evaluation_guard.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <fstream>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

#include "common/hash.h"
#include "common/log.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"

namespace kevo::worker {
namespace {

// The first line of `path` that starts with `key`, without the key; "" when
// there is none or the file cannot be read.
std::string LineAfter(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

// A number of bytes in a cgroup file ("max" or unreadable: none).
std::optional<int64_t> CgroupBytes(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  int64_t v = 0;
  if (!(in >> text) || !absl::SimpleAtoi(text, &v)) return std::nullopt;
  return v;
}

int64_t UnixMicros() { return absl::ToUnixMicros(absl::Now()); }

// An evaluation the guard ends itself, with `status` and `message`: what the
// backend would have filled in had it run, so reports show it as any other.
v1::Evaluation FailedEvaluation(const v1::Assignment& a, const std::string& platform, v1::EvalStatus status,
                                const std::string& message, const EventSink& on_event, bool emit_stage) {
  v1::Evaluation ev;
  ev.set_task_name(a.task().name());
  ev.set_platform(platform);
  ev.set_created_unix_micros(UnixMicros());
  ev.set_candidate_hash(CandidateHash(a.candidate()));
  ev.set_status(status);
  ev.mutable_diagnostics()->set_message(message);
  if (emit_stage) {
    // Refused before the first stage: reported as that stage failing, as a
    // backend reports a task it cannot build.
    v1::StageEvent* e = ev.add_events();
    e->set_stage(v1::STAGE_COMPILE);
    e->set_ok(false);
    e->set_message(message);
    e->set_unix_micros(ev.created_unix_micros());
    if (on_event) on_event(*e);
  }
  ev.set_finished_unix_micros(UnixMicros());
  return ev;
}

}  // namespace

int64_t AvailableMemoryBytes() {
  int64_t available = INT64_MAX;
  int64_t kib = 0;
  const std::string line = LineAfter("/proc/meminfo", "MemAvailable:");  // "    123456 kB"
  absl::string_view mem = absl::StripAsciiWhitespace(line);
  if (absl::ConsumeSuffix(&mem, " kB") && absl::SimpleAtoi(mem, &kib)) available = kib * 1024;
  // cgroup v2: "0::/system.slice/kevo-worker@cpu.service" (a container's is "0::/").
  std::string group = LineAfter("/proc/self/cgroup", "0::");
  if (!group.empty()) {
    const std::string dir = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
    // Against the group's anonymous memory, not memory.current: the page
    // cache it also counts is reclaimed when the group needs the room.
    std::optional<int64_t> max = CgroupBytes(dir + "/memory.max");
    int64_t anon = 0;
    if (max.has_value() && absl::SimpleAtoi(LineAfter(dir + "/memory.stat", "anon "), &anon)) {
      available = std::min(available, std::max<int64_t>(0, *max - anon));
    }
  }
  return available;
}

absl::Status CheckTaskFitsMemory(const v1::Task& task, const std::string& platform, int64_t memory_bytes) {
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) return absl::OkStatus();
  const v1::Task timed = task::TimedOn(task, platform);
  std::vector<std::pair<std::string, const v1::Binding*>> bindings;
  for (const v1::Binding& b : task.validate()) {
    bindings.emplace_back(absl::StrCat("validate binding '", b.name(), "'"), &b);
  }
  bindings.emplace_back(absl::StrCat("timed binding '", timed.time().name(), "'"), &timed.time());
  for (const auto& [label, binding] : bindings) {
    const SymbolValues values = BindingValues(*binding);
    int64_t total = 0;
    for (const auto* tensors : {&task.inputs(), &task.outputs()}) {
      for (const v1::TensorSpec& t : *tensors) {
        absl::StatusOr<int64_t> bytes = TensorBytes(t, values);
        if (!bytes.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(label, ": ", bytes.status().message()));
        }
        if (__builtin_add_overflow(total, *bytes, &total)) {
          return absl::InvalidArgumentError(absl::StrCat(label, ": its tensors are more bytes than int64 holds"));
        }
      }
    }
    if (total > memory_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the task's ", label, " needs ", FormatBytes(total), " (", total,
                                                       " bytes) for its inputs and outputs; "
                                                       "this worker has ",
                                                       FormatBytes(memory_bytes),
                                                       " of memory available, so it does not run it"));
    }
  }
  return absl::OkStatus();
}

v1::Evaluation GuardedEvaluate(Backend& backend, const v1::Assignment& a, const std::string& platform,
                               int64_t memory_bytes, const EventSink& on_event) {
  const std::string who = absl::StrCat("evaluation ", a.eval_id(), " (task ", a.task().name(), ")");
  if (!a.has_task() && !a.task_hash().empty()) {
    LogError(who, " refused: its task ", a.task_hash(), " was named by hash and never sent whole on this stream");
    return FailedEvaluation(a, platform, v1::INFRA_ERROR,
                            absl::StrCat("the assignment names task ", a.task_hash(),
                                         " by its hash, and this worker was not sent it on this stream (a "
                                         "coordinator that lost track of what it sent): evaluate it again"),
                            on_event, /*emit_stage=*/true);
  }
  // Only what would break the worker itself is checked here; the size limits
  // are the coordinator's to set (docs/task-format.md, "Size limits").
  if (absl::Status valid = task::ValidateReceivedTask(a.task(), task::TaskLimits{INT64_MAX, INT64_MAX}); !valid.ok()) {
    LogWarning(who, " refused: ", valid.message());
    return FailedEvaluation(a, platform, v1::INFRA_ERROR,
                            absl::StrCat("the worker refused the task: ", valid.message()), on_event,
                            /*emit_stage=*/true);
  }
  if (absl::Status fits = CheckTaskFitsMemory(a.task(), platform, memory_bytes); !fits.ok()) {
    LogWarning(who, " refused: ", fits.message());
    return FailedEvaluation(a, platform, v1::INFRA_ERROR, std::string(fits.message()), on_event,
                            /*emit_stage=*/true);
  }
  std::string what;
  try {
    return a.has_rival() ? backend.EvaluateBeside(a.task(), a.candidate(), a.rival(), on_event)
                         : backend.Evaluate(a.task(), a.candidate(), on_event);
  } catch (const std::bad_alloc& e) {
    what = absl::StrCat("the worker ran out of memory while evaluating it (", e.what(),
                        "); the task's or the candidate's allocations exceed what this worker has (",
                        FormatBytes(memory_bytes), " available before it started)");
  } catch (const std::exception& e) {
    what = absl::StrCat("the worker failed while evaluating it: an exception escaped the ", platform,
                        " backend: ", e.what());
  } catch (...) {
    what = absl::StrCat("the worker failed while evaluating it: an exception of unknown type escaped the ", platform,
                        " backend");
  }
  LogError(who, ": ", what, "; the worker carries on");
  return FailedEvaluation(a, platform, v1::INFRA_ERROR, what, on_event, /*emit_stage=*/false);
}

}  // namespace kevo::worker
