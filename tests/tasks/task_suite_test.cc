// The native operator suite under tasks/, checked through the real CPU
// evaluation pipeline (worker/backends/cpu: sandboxed compile, symbol policy,
// kevo-runner-cpu validation on every binding and seed, determinism and
// input checks, profile):
//   - TaskSuiteTest: every task loads, has at least two validation bindings
//     (one odd-sized), positive bytes_moved/flops under every binding, and its
//     reference, evaluated as a candidate, passes every validation case;
//   - FastExampleTest: every examples/fast.cc written for the suite passes and
//     is faster than the reference.
// (Whether a task's hints give correct recipe kernels is checked by
// tests/coordinator/builtin_proposer_test.cc, RecipeCorrectnessTest.)
// Test names are the task folders. KEVO_SOURCE_DIR and KEVO_BIN_DIR (set by
// kevo_cc_test) locate the tasks and kevo-runner-cpu.
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "common/expr.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::task {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string TasksDir() {
  const char* source = std::getenv("KEVO_SOURCE_DIR");
  if (source != nullptr && *source != '\0') return absl::StrCat(source, "/tasks");
  return KEVO_TASKS_DIR;
}

std::string BinDir() {
  return Env("KEVO_BIN_DIR", (fs::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string());
}

// The task folder names under tasks/, sorted.
std::vector<std::string> AllTasks() {
  std::vector<std::string> names;
  absl::StatusOr<std::vector<std::string>> dirs = FindTaskDirs(TasksDir());
  if (!dirs.ok()) return names;
  for (const std::string& d : *dirs) names.push_back(fs::path(d).filename().string());
  return names;
}

// The starter tasks' fast examples are covered by cpu_backend_test; the suite
// checks the ones written with it.
bool IsStarter(const std::string& name) {
  return name == "vector_add" || name == "softmax" || name == "row_sum" || name == "matmul" || name == "bucketize";
}

std::vector<std::string> TasksWithFastExample() {
  std::vector<std::string> names;
  for (const std::string& name : AllTasks()) {
    if (!IsStarter(name) && fs::exists(absl::StrCat(TasksDir(), "/", name, "/examples/fast.cc"))) {
      names.push_back(name);
    }
  }
  return names;
}

std::string Describe(const v1::Evaluation& ev) {
  std::string s = absl::StrCat(v1::EvalStatus_Name(ev.status()), ": ", ev.diagnostics().message());
  if (!ev.diagnostics().violation().empty()) absl::StrAppend(&s, " | violation=", ev.diagnostics().violation());
  if (!ev.diagnostics().compiler_output().empty()) {
    absl::StrAppend(&s, " | compiler=", ev.diagnostics().compiler_output().substr(0, 800));
  }
  for (const v1::CaseResult& c : ev.validation()) {
    if (c.status() != v1::OK) {
      absl::StrAppend(&s, " | case ", c.binding(), "/seed ", c.seed(), ": ", v1::EvalStatus_Name(c.status()), " ",
                      c.output(), " ", c.detail());
      break;
    }
  }
  return s;
}

// One CPU backend per test process (ctest runs each test in its own process),
// working in a fresh folder that is removed afterwards. The folder is under
// /var/tmp, not /tmp: the sandbox (bubblewrap) mounts a private /tmp, where
// the runner would not find the compiled kernels.
class SuiteBackend {
 public:
  static worker::Backend* Get(double profile_cap_s) {
    static SuiteBackend* instance = new SuiteBackend();
    auto& slot = instance->backends_[profile_cap_s];
    if (slot == nullptr) {
      worker::CpuBackendOptions o;
      o.work_dir = absl::StrCat(instance->root_, "/cap-", profile_cap_s);
      o.runner_path = BinDir() + "/kevo-runner-cpu";
      o.run_timeout = absl::Seconds(60);
      o.memory_limit_bytes = int64_t{4} << 30;
      o.profile_time_cap_s = profile_cap_s;
      o.calibrate = false;
      absl::StatusOr<std::unique_ptr<worker::Backend>> b = worker::CreateCpuBackend(o);
      if (!b.ok()) {
        ADD_FAILURE() << b.status();
        return nullptr;
      }
      slot = std::move(*b);
    }
    return slot.get();
  }
  static void Cleanup() {
    static bool done = false;
    if (done) return;
    done = true;
    std::error_code ec;
    // Only the folder this process created.
    if (Root() != nullptr) fs::remove_all(*Root(), ec);
  }

 private:
  SuiteBackend() {
    std::string pattern = Env("KEVO_TASK_SUITE_TMP", "/var/tmp") + "/kevo-task-suite-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    const char* made = mkdtemp(buf.data());
    root_ = made != nullptr ? made : Env("KEVO_BIN_DIR", ".") + "/../tests/task_suite_test.work";
    *Root() = root_;
  }
  static std::string* Root() {
    static std::string* r = new std::string();
    return r;
  }
  std::string root_;
  std::map<double, std::unique_ptr<worker::Backend>> backends_;
};

class CleanupEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SuiteBackend::Cleanup(); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new CleanupEnvironment);

absl::StatusOr<v1::Task> Load(const std::string& name) { return LoadTaskDir(absl::StrCat(TasksDir(), "/", name)); }

// A short profile: the point here is correctness; timing only needs to show
// the binding runs and, for fast examples, which side is faster.
constexpr double kReferenceProfileCapS = 0.05;
constexpr double kFastProfileCapS = 0.2;

class TaskSuiteTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TaskSuiteTest, ReferencePassesItsOwnValidationOnCpu) {
  absl::StatusOr<v1::Task> task = Load(GetParam());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->name(), GetParam());

  // At least two validation bindings, one with an odd symbol value.
  ASSERT_GE(task->validate_size(), 2);
  bool odd = false;
  for (const v1::Binding& b : task->validate()) {
    for (const auto& [key, value] : b.values()) odd = odd || value % 2 != 0;
  }
  EXPECT_TRUE(odd) << "no odd-sized validation binding";

  // The roofline formulas are positive under every binding.
  std::vector<v1::Binding> bindings(task->validate().begin(), task->validate().end());
  bindings.push_back(task->time());
  for (const v1::Binding& b : bindings) {
    for (const std::string& formula : {task->bytes_moved(), task->flops()}) {
      absl::StatusOr<int64_t> v = EvalExpr(formula, BindingValues(b));
      ASSERT_TRUE(v.ok()) << formula << ": " << v.status();
      EXPECT_GT(*v, 0) << formula << " under binding " << b.name();
    }
  }

  // Profiling the real time binding costs seconds per task (generating
  // 10^7 inputs, a dozen calls of a 5-100 ms reference), so by default the
  // reference is timed on its first validation binding; set
  // KEVO_TASK_SUITE_REAL_TIME_BINDING=1 to profile the real one (and see its
  // time in the log when sizing a task).
  const bool real_time_binding = Env("KEVO_TASK_SUITE_REAL_TIME_BINDING", "0") == "1";
  if (!real_time_binding) {
    v1::Binding timed = task->validate(0);
    timed.set_name("timed");
    *task->mutable_time() = timed;
  }
  worker::Backend* backend = SuiteBackend::Get(kReferenceProfileCapS);
  ASSERT_NE(backend, nullptr);
  v1::Candidate candidate;
  candidate.set_language("c++");
  candidate.set_source(task->reference().source());
  const v1::Evaluation ev = backend->Evaluate(*task, candidate, nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << Describe(ev);
  ASSERT_EQ(ev.validation_size(), task->validate_size() * task->seeds());
  for (const v1::CaseResult& c : ev.validation()) {
    EXPECT_EQ(c.status(), v1::OK) << c.binding() << " seed " << c.seed() << ": " << c.detail();
  }
  // The timed binding must stay quick to profile (tasks aim at 5-100 ms for
  // the -O2 reference); a generous bound, since the host may be busy.
  if (real_time_binding) {
    EXPECT_LT(ev.baseline().median_s(), 1.0) << "reference too slow at the time binding";
  }
  std::cout << "[ reference ] " << GetParam() << ": " << ev.baseline().median_s() * 1e3 << " ms at binding "
            << task->time().name() << "; stages";
  for (const v1::StageEvent& e : ev.events())
    std::cout << " " << v1::Stage_Name(e.stage()) << "=" << e.seconds() << "s";
  std::cout << "\n";
}

INSTANTIATE_TEST_SUITE_P(TaskSuite, TaskSuiteTest, ::testing::ValuesIn(AllTasks()),
                         [](const auto& info) { return info.param; });

class FastExampleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FastExampleTest, PassesAndBeatsTheReference) {
  absl::StatusOr<v1::Task> task = Load(GetParam());
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string path = absl::StrCat(TasksDir(), "/", GetParam(), "/examples/fast.cc");
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream source;
  source << in.rdbuf();

  worker::Backend* backend = SuiteBackend::Get(kFastProfileCapS);
  ASSERT_NE(backend, nullptr);
  v1::Candidate candidate;
  candidate.set_language("c++");
  candidate.set_source(source.str());
  // Most fast examples are threaded: when ctest runs another test beside this
  // one on a small host, a team of threads that loses a core to it can time
  // slower than the single-threaded reference (CI once saw one_hot at 0.61x).
  // So up to three evaluations, each printed; a kernel that is really slower
  // loses all three.
  constexpr int kAttempts = 3;
  double best = 0;
  for (int attempt = 1; attempt <= kAttempts && best <= 1.0; ++attempt) {
    const v1::Evaluation ev = backend->Evaluate(*task, candidate, nullptr);
    ASSERT_EQ(ev.status(), v1::OK) << Describe(ev);
    best = std::max(best, ev.speedup());
    std::cout << "[ fast ] " << GetParam() << " (evaluation " << attempt << "): speedup " << ev.speedup() << " ("
              << ev.baseline().median_s() * 1e3 << " ms -> " << ev.timing().median_s() * 1e3 << " ms); stages";
    for (const v1::StageEvent& e : ev.events())
      std::cout << " " << v1::Stage_Name(e.stage()) << "=" << e.seconds() << "s";
    std::cout << "\n";
  }
  EXPECT_GT(best, 1.0) << "the fast example was slower than the reference in " << kAttempts << " evaluations";
}

INSTANTIATE_TEST_SUITE_P(TaskSuite, FastExampleTest, ::testing::ValuesIn(TasksWithFastExample()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FastExampleTest);

}  // namespace
}  // namespace kevo::task
