#include "worker/daemon/daemon.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/log.h"
#include "common/rpc/health_server.h"
#include "kevo/v1/worker.grpc.pb.h"
#include "worker/daemon/evaluation_guard.h"

namespace kevo::worker {

using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>;

namespace {

// For the "finished" log line of a failed evaluation: the stage that failed
// and the first line of its message, so the log says why without a query.
std::string FailureNote(const v1::Evaluation& ev) {
  if (ev.status() == v1::OK) return "";
  for (auto e = ev.events().rbegin(); e != ev.events().rend(); ++e) {
    if (e->ok()) continue;
    std::string_view why = e->message();
    why = why.substr(0, std::min(why.find('\n'), size_t{200}));
    return absl::StrCat(" (", v1::Stage_Name(e->stage()), ": ", std::string(why), ")");
  }
  return "";
}

}  // namespace

struct Daemon::Impl {
  DaemonOptions options;
  std::unique_ptr<Backend> backend;
  v1::Hello hello;

  std::unique_ptr<rpc::HealthServer> health;  // --health-listen only
  void SetHealth(bool serving) {
    if (health != nullptr) health->SetServing(serving);
  }

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  prometheus::Family<prometheus::Counter>* evaluations = nullptr;
  prometheus::Family<prometheus::Counter>* cache_lookups = nullptr;
  prometheus::Family<prometheus::Histogram>* stage_seconds = nullptr;
  prometheus::Gauge* busy_gauge = nullptr;
  prometheus::Counter* reconnects = nullptr;
  // The backend's own gauges (Backend::Gauges), registered after Describe.
  std::map<std::string, prometheus::Gauge*> backend_gauges;

  void UpdateBackendGauges() {
    for (const auto& [name, value] : backend->Gauges()) {
      auto it = backend_gauges.find(name);
      if (it != backend_gauges.end()) it->second->Set(value);
    }
  }

  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // Set when the coordinator refused our credentials; Run returns it.
  absl::Status refused ABSL_GUARDED_BY(mu);
  std::deque<v1::Assignment> queue ABSL_GUARDED_BY(mu);
  std::vector<v1::RunningEvaluation> running ABSL_GUARDED_BY(mu);  // the leases held, for heartbeats
  // The live stream and its context; null while disconnected.
  Stream* stream ABSL_GUARDED_BY(mu) = nullptr;
  grpc::ClientContext* context ABSL_GUARDED_BY(mu) = nullptr;
  absl::Mutex write_mu;  // one Write at a time on the stream
  // Results that could not be sent; delivered after the next Hello (the
  // coordinator keeps their leases for a while after it restarts).
  std::vector<v1::WorkerMessage> undelivered ABSL_GUARDED_BY(write_mu);
  // The last results sent. A coordinator killed after our Write but before
  // its sync would lose them, so they are sent again on every new connection;
  // the coordinator drops the ones it already recorded.
  std::deque<v1::WorkerMessage> recent ABSL_GUARDED_BY(write_mu);
  static constexpr size_t kRecentResults = 64;
  // The tasks a stream keeps (Hello.holds_tasks): more than the 64 the
  // coordinator names by hash.
  static constexpr size_t kHeldTasks = 256;

  // Sends on the current stream. Events are dropped when disconnected;
  // results are kept for the next connection.
  void Send(const v1::WorkerMessage& m) {
    absl::MutexLock w(&write_mu);
    Stream* s;
    {
      absl::MutexLock l(&mu);
      s = stream;
    }
    if (s == nullptr || !s->Write(m)) {
      if (m.has_result()) {
        LogWarning("result for ", m.result().eval_id(), " kept: no connection");
        undelivered.push_back(m);
      }
      return;
    }
    if (m.has_result()) {
      recent.push_back(m);
      if (recent.size() > kRecentResults) recent.pop_front();
    }
  }

  void FlushUndelivered() {
    std::vector<v1::WorkerMessage> pending;
    {
      absl::MutexLock w(&write_mu);
      pending.assign(recent.begin(), recent.end());
      recent.clear();
      pending.insert(pending.end(), undelivered.begin(), undelivered.end());
      undelivered.clear();
    }
    for (const auto& m : pending) {
      LogDebug("re-sending result for ", m.result().eval_id());
      Send(m);
    }
  }

  void SlotLoop(int slot) {
    while (true) {
      v1::Assignment a;
      {
        absl::MutexLock l(&mu);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || !queue.empty(); };
        mu.Await(absl::Condition(&ready));
        if (stopping) return;
        a = std::move(queue.front());
        queue.pop_front();
        v1::RunningEvaluation& held = running.emplace_back();
        held.set_eval_id(a.eval_id());
        held.set_attempt(a.attempt());
        busy_gauge->Set(static_cast<double>(running.size()));
      }
      // Every line logged while it runs names the evaluation (the stages'
      // "compile started" lines among them).
      ScopedLogContext context(absl::StrCat(a.eval_id(), "/", a.attempt()));
      LogInfo("slot ", slot, " evaluating ", a.eval_id(), " attempt=", a.attempt(), " task=", a.task().name());
      absl::Time start = absl::Now();
      auto on_event = [&](const v1::StageEvent& e) {
        stage_seconds
            ->Add({{"stage", v1::Stage_Name(e.stage())}},
                  prometheus::Histogram::BucketBoundaries{0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60})
            .Observe(e.seconds());
        v1::WorkerMessage m;
        m.mutable_event()->set_eval_id(a.eval_id());
        m.mutable_event()->set_attempt(a.attempt());
        *m.mutable_event()->mutable_event() = e;
        Send(m);
      };
      // Never throws, whatever the task or the candidate asks for: one
      // evaluation must not end the process and every other slot's with it.
      v1::Evaluation ev = GuardedEvaluate(*backend, a, hello.platform(), AvailableMemoryBytes(), on_event);
      evaluations->Add({{"status", v1::EvalStatus_Name(ev.status())}}).Increment();
      if (auto hit = ev.profile().find("build_cache_hit"); hit != ev.profile().end()) {
        cache_lookups->Add({{"result", hit->second > 0 ? "hit" : "miss"}}).Increment();
      }
      LogInfo("slot ", slot, " finished ", a.eval_id(), " status=", v1::EvalStatus_Name(ev.status()),
              " speedup=", ev.speedup(), " in ", absl::FormatDuration(absl::Now() - start), FailureNote(ev));
      v1::WorkerMessage m;
      m.mutable_result()->set_eval_id(a.eval_id());
      m.mutable_result()->set_attempt(a.attempt());
      *m.mutable_result()->mutable_evaluation() = std::move(ev);
      {
        absl::MutexLock l(&mu);
        std::erase_if(running, [&](const v1::RunningEvaluation& r) {
          return r.eval_id() == a.eval_id() && r.attempt() == a.attempt();
        });
        busy_gauge->Set(static_cast<double>(running.size()));
      }
      UpdateBackendGauges();
      Send(m);
    }
  }

  // One connection: Hello, then read assignments until the stream ends.
  void Session(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::WorkerService::NewStub(channel);
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> s = stub->Connect(&ctx);
    v1::WorkerMessage m;
    *m.mutable_hello() = hello;
    if (!s->Write(m)) {
      // Refused before our Hello went out (a bad token is refused at once):
      // the status says so.
      RefuseIfCredentials(s->Finish());
      return;
    }
    v1::CoordinatorMessage in;
    if (!s->Read(&in) || !in.has_welcome()) {
      grpc::Status st = s->Finish();
      LogWarning("coordinator refused the stream: ", st.error_message());
      RefuseIfCredentials(st);
      return;
    }
    hello.set_worker_id(in.welcome().worker_id());
    int heartbeat_s = std::max(1, in.welcome().heartbeat_seconds());
    LogInfo("connected to ", options.coordinator, " as ", hello.worker_id(), " (lease ", in.welcome().lease_seconds(),
            "s)");
    {
      absl::MutexLock l(&mu);
      stream = s.get();
      context = &ctx;
    }
    FlushUndelivered();
    SetHealth(true);
    // The tasks this stream sent whole, by hash (Hello.holds_tasks), oldest
    // first; a new stream starts with none, as the coordinator's record of
    // what it sent does.
    std::deque<std::pair<std::string, v1::Task>> held_tasks;
    absl::Notification session_over;
    std::thread heartbeat([&] {
      while (!session_over.WaitForNotificationWithTimeout(absl::Seconds(heartbeat_s))) {
        v1::WorkerMessage hb;
        {
          absl::MutexLock l(&mu);
          for (const auto& r : running) *hb.mutable_heartbeat()->add_running_evaluations() = r;
          hb.mutable_heartbeat()->set_free_slots(options.slots - static_cast<int>(running.size()) -
                                                 static_cast<int>(queue.size()));
        }
        Send(hb);
        UpdateBackendGauges();
      }
    });
    while (s->Read(&in)) {
      if (in.has_assignment()) {
        v1::Assignment* a = in.mutable_assignment();
        if (!a->task_hash().empty()) {
          if (a->has_task()) {
            held_tasks.push_back({a->task_hash(), a->task()});
            if (held_tasks.size() > kHeldTasks) held_tasks.pop_front();
          } else {
            // The newest copy: a hash is a task's content.
            auto held = std::find_if(held_tasks.rbegin(), held_tasks.rend(),
                                     [&](const auto& h) { return h.first == a->task_hash(); });
            if (held != held_tasks.rend()) *a->mutable_task() = held->second;
          }
        }
        absl::MutexLock l(&mu);
        queue.push_back(std::move(*a));
      } else if (in.has_cancel()) {
        // The evaluation was recorded from another attempt; drop it if it has
        // not started (a running one finishes and its result is ignored).
        absl::MutexLock l(&mu);
        std::erase_if(queue, [&](const v1::Assignment& a) { return a.eval_id() == in.cancel().eval_id(); });
        LogInfo("cancelled ", in.cancel().eval_id(), " attempt=", in.cancel().attempt());
      }
    }
    session_over.Notify();
    SetHealth(false);
    heartbeat.join();
    {
      absl::MutexLock w(&write_mu);
      absl::MutexLock l(&mu);
      stream = nullptr;
      context = nullptr;
      // Assignments not started yet stay queued: if the coordinator restarted
      // it still holds their leases for us; if it is the same coordinator, it
      // re-queued them and a duplicate result is simply dropped there.
    }
    grpc::Status st = s->Finish();
    LogWarning("disconnected from ", options.coordinator, ": ", st.ok() ? "stream closed" : st.error_message());
    RefuseIfCredentials(st);
  }

  // A refusal of the worker's credentials ends Run: reconnecting with the
  // same token would be refused again.
  void RefuseIfCredentials(const grpc::Status& st) {
    if (st.error_code() != grpc::StatusCode::UNAUTHENTICATED &&
        st.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
      return;
    }
    absl::MutexLock l(&mu);
    refused = absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                           absl::StrCat("the coordinator at ", options.coordinator,
                                        " refused this worker's credentials: ", st.error_message()));
    stopping = true;
  }
};

Daemon::Daemon(DaemonOptions options, std::unique_ptr<Backend> backend) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->backend = std::move(backend);
}

Daemon::~Daemon() { Stop(); }

absl::Status Daemon::Run() {
  Impl& d = *impl_;
  if (d.options.coordinator.empty()) return absl::InvalidArgumentError("--coordinator is required");
  if (d.options.slots < 1) return absl::InvalidArgumentError("--slots must be at least 1");
  d.evaluations = &prometheus::BuildCounter()
                       .Name("kevo_worker_evaluations_total")
                       .Help("Evaluations finished by this worker, by status")
                       .Register(*d.registry);
  d.cache_lookups = &prometheus::BuildCounter()
                         .Name("kevo_worker_build_cache_lookups_total")
                         .Help("Candidate builds looked up in the worker's build cache, by result (hit, miss)")
                         .Register(*d.registry);
  for (const char* result : {"hit", "miss"}) d.cache_lookups->Add({{"result", result}});
  d.stage_seconds = &prometheus::BuildHistogram()
                         .Name("kevo_worker_stage_seconds")
                         .Help("Time spent per evaluation stage")
                         .Register(*d.registry);
  d.busy_gauge = &prometheus::BuildGauge()
                      .Name("kevo_worker_busy_slots")
                      .Help("Slots running an evaluation")
                      .Register(*d.registry)
                      .Add({});
  prometheus::BuildGauge()
      .Name("kevo_worker_slots")
      .Help("Evaluation slots this worker runs (busy ones: kevo_worker_busy_slots)")
      .Register(*d.registry)
      .Add({})
      .Set(d.options.slots);
  d.reconnects = &prometheus::BuildCounter()
                      .Name("kevo_worker_reconnects_total")
                      .Help("Connections to the coordinator opened")
                      .Register(*d.registry)
                      .Add({});
  if (!d.options.metrics_listen.empty()) {
    try {
      d.exposer = std::make_unique<prometheus::Exposer>(d.options.metrics_listen);
      d.exposer->RegisterCollectable(d.registry);
      auto ports = d.exposer->GetListeningPorts();
      if (!ports.empty()) {
        // Machine-readable, like the coordinator's "listening" line.
        std::printf("metrics %d\n", static_cast<int>(ports.front()));
        std::fflush(stdout);
        LogInfo("metrics on port ", ports.front());
      }
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", d.options.metrics_listen, ": ", e.what()));
    }
  }
  if (!d.options.health_listen.empty()) {
    auto health = rpc::HealthServer::Start(d.options.health_listen);
    if (!health.ok()) return health.status();
    d.health = *std::move(health);
    std::printf("health %d\n", d.health->port());
    std::fflush(stdout);
    LogInfo("grpc health on port ", d.health->port(), " (SERVING while connected to the coordinator)");
  }
  auto hello = d.backend->Describe();
  if (!hello.ok()) return hello.status();
  d.hello = *hello;
  for (const auto& [name, value] : d.backend->Gauges()) {
    d.backend_gauges[name] =
        &prometheus::BuildGauge().Name(name).Help("Reported by the platform backend").Register(*d.registry).Add({});
    d.backend_gauges[name]->Set(value);
  }
  d.hello.set_worker_id(d.options.worker_id);
  d.hello.set_slots(d.options.slots);
  d.hello.set_holds_tasks(true);
  LogInfo("worker platform=", d.hello.platform(), " device=\"", d.hello.device(), "\" slots=", d.options.slots,
          " bandwidth=", d.hello.mem_bandwidth_gbs(), "GB/s fp32_peak=", d.hello.fp32_peak_gflops(), "GFLOP/s");

  std::vector<std::thread> slots;
  for (int i = 0; i < d.options.slots; ++i) slots.emplace_back([&d, i] { d.SlotLoop(i); });

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    {
      absl::MutexLock l(&d.mu);
      if (d.stopping) break;
    }
    auto channel = rpc::ClientChannel(d.options.coordinator, d.options.credentials, args);
    if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(2))) {
      d.reconnects->Increment();
      d.Session(channel);
      backoff = absl::Milliseconds(100);
    } else {
      LogInfo("coordinator ", d.options.coordinator, " not reachable; retrying in ", absl::FormatDuration(backoff));
    }
    absl::MutexLock l(&d.mu);
    auto stop = [&d]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) { return d.stopping; };
    d.mu.AwaitWithTimeout(absl::Condition(&stop), backoff);
    backoff = std::min(backoff * 2, d.options.max_backoff);
  }
  for (auto& t : slots) t.join();
  d.health.reset();
  absl::MutexLock l(&d.mu);
  return d.refused;
}

void Daemon::Stop() {
  absl::MutexLock l(&impl_->mu);
  impl_->stopping = true;
  if (impl_->context != nullptr) impl_->context->TryCancel();
}

}  // namespace kevo::worker
