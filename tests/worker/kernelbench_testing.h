// What the cpu worker's end-to-end KernelBench tests share: the backend they
// judge with (the real CPU backend, its runner and sandbox, a short time
// cap for tiny problems) and how an evaluation reads in a failure message.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

#include "common/task/kernelbench.h"
#include "tests/testing/process.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::worker::kb_testing {

// tests/data/kernelbench: the problems, with candidates/ and adversarial/.
inline std::string KernelBenchDataDir() { return ::kevo::testing::SourceDir() + "/tests/data/kernelbench"; }

// Options for a CPU backend working in tests/<work_name>.work under the
// build folder.
inline CpuBackendOptions KernelBenchBackendOptions(const std::string& work_name) {
  CpuBackendOptions o;
  o.work_dir = ::kevo::testing::BinDir() + "/../tests/" + work_name + ".work";
  o.runner_path = ::kevo::testing::BinDir() + "/kevo-runner-cpu";
  o.compile_timeout = absl::Seconds(60);
  // Importing torch is not part of it; the candidates here are tiny.
  o.run_timeout = absl::Seconds(8);
  o.memory_limit_bytes = int64_t{8} << 30;
  o.profile_time_cap_s = 0.3;
  o.calibrate = false;
  return o;
}

// The status, the diagnostics' message and every stage's event.
inline std::string ExplainKernelBench(const v1::Evaluation& ev) {
  std::string events;
  for (const auto& e : ev.events()) absl::StrAppend(&events, "\n  ", v1::Stage_Name(e.stage()), " ", e.message());
  return absl::StrCat(v1::EvalStatus_Name(ev.status()), ": ", ev.diagnostics().message(), events);
}

// A suite's backend (KernelBenchBackendOptions(work_name)), owned by the
// suite: its SetUpTestSuite sets it, its TearDownTestSuite deletes it. Null
// (and a failure) when it cannot be made.
inline Backend* NewKernelBenchBackend(const std::string& work_name) {
  auto backend = CreateCpuBackend(KernelBenchBackendOptions(work_name));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? backend->release() : nullptr;
}

// The problem tests/data/kernelbench/`name` as a task (empty, and a failure,
// when it does not load).
inline v1::Task LoadProblem(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskPath(KernelBenchDataDir() + "/" + name);
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

}  // namespace kevo::worker::kb_testing
