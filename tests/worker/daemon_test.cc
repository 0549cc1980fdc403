// The worker daemon (worker/daemon/daemon.h) against a coordinator of the
// test's own: a real gRPC server in this process that speaks WorkerService
// (Hello -> Welcome, assignments down, events, heartbeats and results up)
// and records what it hears. The backend is a fake whose evaluations the test
// holds and releases, so what the daemon says while one runs can be seen.
#include "worker/daemon/daemon.h"

#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <grpcpp/grpcpp.h>

#include "common/task/task_loader.h"
#include "kevo/v1/worker.grpc.pb.h"
#include "tests/testing/process.h"

namespace kevo::worker {
namespace {

using ::testing::HasSubstr;

// Evaluations wait for Release() (all of them, from then on); a candidate
// whose source is "throw" throws instead.
class HeldBackend final : public Backend {
 public:
  absl::StatusOr<v1::Hello> Describe() override {
    v1::Hello hello;
    hello.set_platform("synth");
    hello.set_device("a test's fake device");
    return hello;
  }
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event) override {
    if (candidate.source() == "throw") throw std::runtime_error("the backend broke");
    v1::StageEvent compiled;
    compiled.set_stage(v1::STAGE_COMPILE);
    compiled.set_ok(true);
    compiled.set_message("compiled");
    on_event(compiled);
    released_.WaitForNotification();
    v1::Evaluation ev;
    ev.set_task_name(task.name());
    ev.set_status(v1::OK);
    ev.set_speedup(2);
    return ev;
  }
  void Release() {
    if (!released_.HasBeenNotified()) released_.Notify();
  }

 private:
  absl::Notification released_;
};

// The coordinator's side of the stream: welcomes each connection (heartbeats
// every second), sends the assignments queued for it, and records every
// message; EndStreams() ends the open streams from the server's side, as a
// restarted coordinator would. With `refuse` set, every stream is refused as
// a bad token would be.
class FakeCoordinator final : public v1::WorkerService::Service {
 public:
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override {
    if (refuse) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid worker token");
    v1::WorkerMessage in;
    if (!stream->Read(&in) || !in.has_hello()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no hello");
    int connection;
    {
      absl::MutexLock l(&mu_);
      hellos_.push_back(in.hello());
      connection = static_cast<int>(hellos_.size());
    }
    v1::CoordinatorMessage welcome;
    welcome.mutable_welcome()->set_worker_id("w-test");
    welcome.mutable_welcome()->set_lease_seconds(30);
    welcome.mutable_welcome()->set_heartbeat_seconds(1);
    stream->Write(welcome);
    // Reads on a thread of its own; this one sends assignments until the
    // stream is ended.
    std::thread reader([&] {
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        absl::MutexLock l(&mu_);
        heard_.push_back({connection, m});
      }
      absl::MutexLock l(&mu_);
      ++readers_done_;
    });
    while (true) {
      std::optional<v1::Assignment> next;
      {
        absl::MutexLock l(&mu_);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !to_send_.empty() || end_streams_ > 0 || context->IsCancelled();
        };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
        if (end_streams_ > 0 || context->IsCancelled()) break;
        if (!to_send_.empty()) {
          next = to_send_.front();
          to_send_.pop_front();
        }
      }
      if (next) {
        v1::CoordinatorMessage m;
        *m.mutable_assignment() = *next;
        stream->Write(m);
      }
    }
    context->TryCancel();
    reader.join();
    return grpc::Status::OK;
  }

  void Assign(const v1::Assignment& a) {
    absl::MutexLock l(&mu_);
    to_send_.push_back(a);
  }
  void EndStreams() {
    absl::MutexLock l(&mu_);
    ++end_streams_;
  }
  void AcceptStreams() {
    absl::MutexLock l(&mu_);
    end_streams_ = 0;
  }
  int connections() {
    absl::MutexLock l(&mu_);
    return static_cast<int>(hellos_.size());
  }
  v1::Hello hello(int i) {
    absl::MutexLock l(&mu_);
    return hellos_.at(i);
  }

  // Waits up to 20 s for a message that `pred` accepts, heard on the
  // `min_connection`th connection or a later one, at index `from` or later
  // of heard(), and returns it.
  template <typename Pred>
  std::optional<v1::WorkerMessage> WaitFor(Pred pred, int min_connection = 1, size_t from = 0) {
    absl::MutexLock l(&mu_);
    std::optional<v1::WorkerMessage> found;
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (size_t i = from; i < heard_.size(); ++i) {
        const auto& [c, m] = heard_[i];
        if (c >= min_connection && pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(20));
    return found;
  }
  // The messages heard so far, in order.
  std::vector<v1::WorkerMessage> heard() {
    absl::MutexLock l(&mu_);
    std::vector<v1::WorkerMessage> out;
    for (const auto& [c, m] : heard_) out.push_back(m);
    return out;
  }

  bool refuse = false;

 private:
  absl::Mutex mu_;
  std::vector<v1::Hello> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, v1::WorkerMessage>> heard_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Assignment> to_send_ ABSL_GUARDED_BY(mu_);
  int end_streams_ ABSL_GUARDED_BY(mu_) = 0;
  int readers_done_ ABSL_GUARDED_BY(mu_) = 0;
};

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (backend_ != nullptr) backend_->Release();
    if (daemon_ != nullptr) daemon_->Stop();
    if (run_.joinable()) run_.join();
    daemon_.reset();
    coordinator_.EndStreams();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // Starts a daemon with `slots` slots on the held backend.
  void StartDaemon(int slots = 1) {
    auto backend = std::make_unique<HeldBackend>();
    backend_ = backend.get();
    DaemonOptions options;
    options.coordinator = address_;
    options.slots = slots;
    options.max_backoff = absl::Milliseconds(200);
    daemon_ = std::make_unique<Daemon>(options, std::move(backend));
    run_ = std::thread([this] { run_status_ = daemon_->Run(); });
  }

  static v1::Assignment VectorAdd(const std::string& eval_id, const std::string& source) {
    auto task = task::LoadTaskDir(::kevo::testing::SourceDir() + "/tasks/vector_add");
    EXPECT_TRUE(task.ok()) << task.status();
    v1::Assignment a;
    a.set_eval_id(eval_id);
    a.set_attempt(1);
    if (task.ok()) *a.mutable_task() = *task;
    a.mutable_candidate()->set_language("c++");
    a.mutable_candidate()->set_source(source);
    return a;
  }

  static auto ResultFor(const std::string& eval_id) {
    return [eval_id](const v1::WorkerMessage& m) { return m.has_result() && m.result().eval_id() == eval_id; };
  }

  FakeCoordinator coordinator_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  HeldBackend* backend_ = nullptr;
  std::unique_ptr<Daemon> daemon_;
  std::thread run_;
  absl::Status run_status_;
};

// Hello names the backend's platform and the slots; while an evaluation runs
// the heartbeats name its lease (typed: eval id and attempt) and count no
// free slot; its stage event comes before its result, which carries the
// lease's eval id and attempt; afterwards the
// heartbeats name nothing and count the slot free again.
TEST_F(DaemonTest, ReportsWhatItRunsTypedAndItsResultOnce) {
  StartDaemon();
  const v1::Assignment a = VectorAdd("e-1", "// kernel");
  coordinator_.Assign(a);
  auto running = coordinator_.WaitFor(
      [](const v1::WorkerMessage& m) { return m.has_heartbeat() && m.heartbeat().running_evaluations_size() == 1; });
  ASSERT_TRUE(running.has_value()) << "no heartbeat named the running evaluation";
  EXPECT_EQ(running->heartbeat().running_evaluations(0).eval_id(), "e-1");
  EXPECT_EQ(running->heartbeat().running_evaluations(0).attempt(), 1);
  EXPECT_EQ(running->heartbeat().free_slots(), 0);
  EXPECT_EQ(coordinator_.hello(0).platform(), "synth");
  EXPECT_EQ(coordinator_.hello(0).slots(), 1);

  backend_->Release();
  auto result = coordinator_.WaitFor(ResultFor("e-1"));
  ASSERT_TRUE(result.has_value()) << "no result";
  EXPECT_EQ(result->result().attempt(), 1);
  EXPECT_EQ(result->result().evaluation().status(), v1::OK);
  const std::vector<v1::WorkerMessage> heard = coordinator_.heard();
  int event_at = -1, result_at = -1, results = 0;
  for (int i = 0; i < static_cast<int>(heard.size()); ++i) {
    if (heard[i].has_event() && heard[i].event().eval_id() == "e-1" && event_at < 0) event_at = i;
    if (heard[i].has_result()) {
      if (result_at < 0) result_at = i;
      ++results;
    }
  }
  EXPECT_GE(event_at, 0) << "no stage event";
  EXPECT_LT(event_at, result_at) << "the stage event came after the result";
  EXPECT_EQ(results, 1);
  auto idle = coordinator_.WaitFor(
      [](const v1::WorkerMessage& m) {
        return m.has_heartbeat() && m.heartbeat().running_evaluations_size() == 0 && m.heartbeat().free_slots() == 1;
      },
      1, heard.size());
  EXPECT_TRUE(idle.has_value()) << "no heartbeat after the result counted the slot free";
}

// A backend that throws costs one evaluation (INFRA_ERROR, saying what was
// thrown), not the worker: the next assignment is evaluated as usual.
TEST_F(DaemonTest, ABackendThatThrowsFailsOneEvaluationAndTheWorkerGoesOn) {
  StartDaemon();
  backend_->Release();
  coordinator_.Assign(VectorAdd("e-throws", "throw"));
  coordinator_.Assign(VectorAdd("e-after", "// kernel"));
  auto thrown = coordinator_.WaitFor(ResultFor("e-throws"));
  ASSERT_TRUE(thrown.has_value());
  EXPECT_EQ(thrown->result().evaluation().status(), v1::INFRA_ERROR);
  EXPECT_THAT(thrown->result().evaluation().diagnostics().message(), HasSubstr("the backend broke"));
  auto after = coordinator_.WaitFor(ResultFor("e-after"));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->result().evaluation().status(), v1::OK);
}

// A coordinator that ends the stream (restarted, say) is dialled again; the
// new connection says Hello again and is sent the last results once more, in
// case the coordinator lost them before it synced (it drops what it has).
TEST_F(DaemonTest, ReconnectsAndSendsItsLastResultsAgain) {
  StartDaemon();
  backend_->Release();
  coordinator_.Assign(VectorAdd("e-1", "// kernel"));
  ASSERT_TRUE(coordinator_.WaitFor(ResultFor("e-1")).has_value());
  ASSERT_EQ(coordinator_.connections(), 1);
  coordinator_.EndStreams();
  absl::SleepFor(absl::Seconds(1));
  coordinator_.AcceptStreams();
  auto again = coordinator_.WaitFor(ResultFor("e-1"), 2);
  ASSERT_TRUE(again.has_value()) << "the result was not sent again on the new connection ("
                                 << coordinator_.connections() << " connections)";
  EXPECT_EQ(coordinator_.hello(1).platform(), "synth");
}

// Credentials the coordinator refuses end Run with that error: dialling
// again with the same token would be refused again.
TEST_F(DaemonTest, RefusedCredentialsEndRunWithTheCoordinatorsWords) {
  coordinator_.refuse = true;
  StartDaemon();
  run_.join();
  EXPECT_EQ(run_status_.code(), absl::StatusCode::kUnauthenticated) << run_status_;
  EXPECT_THAT(run_status_.message(), HasSubstr("invalid worker token"));
}

}  // namespace
}  // namespace kevo::worker
