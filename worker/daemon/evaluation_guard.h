// The boundary between one evaluation and the worker process: whatever a
// task or a candidate asks for, the worker answers with an Evaluation and
// keeps running. Before the backend sees an assignment, its task is checked
// (no shape overflows int64: task::ValidateReceivedTask without size limits)
// and its bindings are measured against the memory the worker has; a
// backend that throws anyway (std::bad_alloc from an allocation the checks
// did not foresee, anything else) becomes an INFRA_ERROR naming what
// happened instead of an uncaught exception that ends the process and, with
// it, every other evaluation it runs (issue 22: one task asking for 10^12
// elements took three workers down in a row).
//
// All functions are thread-safe (slots call them concurrently).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "kevo/v1/worker.pb.h"
#include "worker/backend.h"

namespace kevo::worker {

// The memory this process may still take, in bytes: MemAvailable from
// /proc/meminfo, or less where the process's cgroup (v2) limit leaves less
// (memory.max - memory.current). INT64_MAX when neither can be read.
int64_t AvailableMemoryBytes();

// OK when every binding of `task` as `platform` runs it (each validate
// binding, and the platform's timed one: task::TimedOn) needs at most
// `memory_bytes` for its inputs and outputs together; else ResourceExhausted
// naming the binding, its size and `memory_bytes`. A KernelBench task (its
// shapes are Python's) is always OK. InvalidArgument when a size does not
// resolve or overflows int64.
absl::Status CheckTaskFitsMemory(const v1::Task& task, const std::string& platform, int64_t memory_bytes);

// Evaluates `assignment` on `backend` (EvaluateBeside when it carries a
// rival) as `platform` with `memory_bytes` to spare, and never throws: a task
// that is invalid or does not fit is INFRA_ERROR without the backend being
// called, and an exception from the backend is INFRA_ERROR saying what it
// was. The evaluation's eval id, attempt and worker id are left to the caller.
v1::Evaluation GuardedEvaluate(Backend& backend, const v1::Assignment& assignment, const std::string& platform,
                               int64_t memory_bytes, const EventSink& on_event);

}  // namespace kevo::worker
