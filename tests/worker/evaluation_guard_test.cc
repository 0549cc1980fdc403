// The worker's evaluation boundary (worker/daemon/evaluation_guard.h): a
// task that overflows or asks for more memory than the worker has, and a
// backend that throws, each become an INFRA_ERROR evaluation saying why;
// nothing escapes to end the worker process. A fake backend records whether
// it was called and throws what the test tells it to.
#include "worker/daemon/evaluation_guard.h"

#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/hash.h"
#include "common/task/task_loader.h"

namespace kevo::worker {
namespace {

using ::testing::HasSubstr;

class FakeBackend final : public Backend {
 public:
  absl::StatusOr<v1::Hello> Describe() override { return v1::Hello(); }
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate&, const EventSink&) override {
    ++calls;
    if (behaviour) behaviour();
    v1::Evaluation ev;
    ev.set_status(v1::OK);
    ev.set_task_name(task.name());
    return ev;
  }
  int calls = 0;
  std::function<void()> behaviour;  // may throw
};

// The shipped vector_add task (three f32 vectors of n), as a worker gets it.
v1::Assignment VectorAdd() {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  auto task = task::LoadTaskDir(absl::StrCat(dir != nullptr ? dir : ".", "/tasks/vector_add"));
  EXPECT_TRUE(task.ok()) << task.status();
  v1::Assignment a;
  a.set_eval_id("e-1");
  if (task.ok()) *a.mutable_task() = *task;
  a.mutable_candidate()->set_language("c++");
  a.mutable_candidate()->set_source("// kernel");
  return a;
}

constexpr int64_t kPlenty = int64_t{64} << 30;

TEST(EvaluationGuardTest, AnOrdinaryEvaluationReachesTheBackend) {
  FakeBackend backend;
  v1::Evaluation ev = GuardedEvaluate(backend, VectorAdd(), "cpu", kPlenty, nullptr);
  EXPECT_EQ(backend.calls, 1);
  EXPECT_EQ(ev.status(), v1::OK);
}

// The task: 10^12 elements at the timed binding. The coordinator
// refuses it by default, but one that lets it through (or predates the
// check) must not take the worker down: it is refused before the backend
// allocates anything, naming the binding and the size, with a stage event
// for whoever watches.
TEST(EvaluationGuardTest, ATaskLargerThanTheWorkersMemoryIsRefusedNamingTheBindingAndSize) {
  FakeBackend backend;
  v1::Assignment a = VectorAdd();
  (*a.mutable_task()->mutable_time()->mutable_values())["n"] = 1000000000000;
  std::vector<v1::StageEvent> events;
  v1::Evaluation ev =
      GuardedEvaluate(backend, a, "cpu", kPlenty, [&](const v1::StageEvent& e) { events.push_back(e); });
  EXPECT_EQ(backend.calls, 0);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(),
              HasSubstr("the task's timed binding 'timed' needs 10.9 TiB (12000000000000 bytes) for its inputs and "
                        "outputs; this worker has 64 GiB of memory available"));
  EXPECT_EQ(ev.task_name(), "vector_add");
  EXPECT_EQ(ev.candidate_hash(), CandidateHash(a.candidate()));  // the hash the coordinator stores it under
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].ok());
  EXPECT_EQ(events[0].message(), ev.diagnostics().message());
}

TEST(EvaluationGuardTest, ThePlatformsOwnTimedBindingIsTheOneMeasured) {
  v1::Assignment a = VectorAdd();  // n = 2^24 timed, 2^26 on nvidia: 192 MiB and 768 MiB
  EXPECT_TRUE(CheckTaskFitsMemory(a.task(), "cpu", int64_t{256} << 20).ok());
  absl::Status nvidia = CheckTaskFitsMemory(a.task(), "nvidia", int64_t{256} << 20);
  EXPECT_EQ(nvidia.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(nvidia.message(), HasSubstr("timed binding 'timed_gpu' needs 768 MiB"));
  // Validation bindings count too.
  absl::Status validate = CheckTaskFitsMemory(a.task(), "cpu", 1 << 20);
  EXPECT_EQ(validate.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(validate.message(), HasSubstr("validate binding 'odd' needs 1.1 MiB"));
}

// A shape that wraps int64 (2^32 x 2^32 wrapped to 0 once) never reaches the
// backend as a size, whatever limits the coordinator had.
TEST(EvaluationGuardTest, ATaskWhoseSizesOverflowIsRefused) {
  FakeBackend backend;
  v1::Assignment a = VectorAdd();
  a.mutable_task()->mutable_inputs(0)->set_shape(0, "n*n*n");
  (*a.mutable_task()->mutable_time()->mutable_values())["n"] = int64_t{1} << 32;
  v1::Evaluation ev = GuardedEvaluate(backend, a, "cpu", kPlenty, nullptr);
  EXPECT_EQ(backend.calls, 0);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("the worker refused the task: task: time binding: tensor 'x'"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("overflows int64"));
}

// An assignment that names its task by a hash the stream never sent whole
// (Hello.holds_tasks) is refused with an error that says so, not run on an
// empty task.
TEST(EvaluationGuardTest, ATaskNamedByAHashNeverSentIsRefused) {
  FakeBackend backend;
  v1::Assignment a = VectorAdd();
  a.clear_task();
  a.set_task_hash("5eed");
  v1::Evaluation ev = GuardedEvaluate(backend, a, "cpu", kPlenty, nullptr);
  EXPECT_EQ(backend.calls, 0);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(),
              HasSubstr("names task 5eed by its hash, and this worker was not sent it on this stream"));
}

TEST(EvaluationGuardTest, ABadAllocFromTheBackendIsAnInfraErrorNotACrash) {
  FakeBackend backend;
  backend.behaviour = [] { throw std::bad_alloc(); };
  v1::Evaluation ev = GuardedEvaluate(backend, VectorAdd(), "cpu", kPlenty, nullptr);
  EXPECT_EQ(backend.calls, 1);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(),
              HasSubstr("the worker ran out of memory while evaluating it (std::bad_alloc)"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("64 GiB available"));
}

TEST(EvaluationGuardTest, AnyOtherExceptionIsAnInfraErrorNamingIt) {
  FakeBackend backend;
  backend.behaviour = [] { throw std::length_error("basic_string::_M_create"); };
  v1::Evaluation ev = GuardedEvaluate(backend, VectorAdd(), "cpu", kPlenty, nullptr);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("an exception escaped the cpu backend: basic_string::_M_create"));
  backend.behaviour = [] { throw 42; };
  ev = GuardedEvaluate(backend, VectorAdd(), "cpu", kPlenty, nullptr);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("an exception of unknown type"));
}

TEST(EvaluationGuardTest, AvailableMemoryIsPositiveHere) {
  const int64_t available = AvailableMemoryBytes();
  EXPECT_GT(available, 0);
  EXPECT_LT(available, INT64_MAX) << "neither /proc/meminfo nor the cgroup could be read";
}

}  // namespace
}  // namespace kevo::worker
