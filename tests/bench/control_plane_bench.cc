// control_plane_bench: how many evaluations one coordinator can hand out and
// record when the workers are not the bottleneck.
//
// Starts a real kevo-coordinator (its own process, RocksDB on disk under
// --dir, kept; without it a folder under /var/tmp, removed after a run that
// recorded evaluations), opens --workers real gRPC worker streams to it (one connection
// each, as a fleet has), submits --jobs search jobs of one task through
// JobService (each of --budget evaluations; one that ends is replaced by a
// new one, so that --jobs run all along; each stream heartbeats every 2 s), and answers every assignment at once with a
// synthetic OK result (a speedup drawn from the candidate's hash, so the search moves). After
// --warmup seconds it measures for --seconds:
//   - assignments received and results recorded per second (the latter from
//     the coordinator's own kevo_coordinator_evaluations_total on /metrics);
//   - dispatch latency: from a worker's result leaving it to its next
//     assignment arriving, p50 and p99, while evaluations were queued;
//   - the coordinator's CPU (cores busy), resident memory and the bytes its
//     process wrote to disk per recorded evaluation (/proc/PID/io);
//   - the load generator's own CPU, since both share the host.
// Prints one table row per run (docs/benchmarks.md, "Control plane").
//
// Usage: control_plane_bench [--workers 1000] [--jobs 200] [--seconds 20]
//            [--warmup 5] [--task tasks/vector_add] [--max-in-flight 8] [--budget 100]
//            [--dir DIR] [--coordinator PATH] [--coordinator-flags "..."]
// --coordinator runs another build's kevo-coordinator (a before-and-after
// comparison in one sitting).
//
// --floor measures the transport alone: in place of the coordinator, a
// process of this program (--serve-floor) that serves the same WorkerService
// over the same gRPC callback API and answers each result at once with the
// next assignment (the task whole on a stream's first, its hash after, and
// the task's example kernel as the candidate), with no job, scheduler or
// store behind it. What it reaches on a host is the most any coordinator
// could record there through these streams.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <grpcpp/grpcpp.h>

#include "common/task/task_loader.h"
#include "kevo/v1/job.grpc.pb.h"
#include "kevo/v1/worker.grpc.pb.h"
#include "tests/testing/process.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int workers = 1000;
  int jobs = 200;
  double seconds = 20;
  double warmup = 5;
  int max_in_flight = 8;
  int budget = 100;
  std::string task = "tasks/vector_add";
  std::string dir;
  std::string coordinator_flags;
  std::string coordinator;  // the kevo-coordinator binary; default: beside this one
  bool floor = false;       // the transport floor (--serve-floor) in place of the coordinator
};

// What every stream records; the measuring window is [start, end).
struct Shared {
  std::atomic<bool> measuring{false};
  std::atomic<int64_t> assignments{0};
  std::atomic<int64_t> answered{0};  // results sent, all along
  std::atomic<int64_t> connected{0};
  std::atomic<int64_t> ended{0};
  std::mutex mu;
  std::vector<double> latencies_us;  // result sent -> next assignment, while measuring
};

// One synthetic worker: Hello, then each assignment answered at once.
class Worker : public grpc::ClientBidiReactor<kevo::v1::WorkerMessage, kevo::v1::CoordinatorMessage> {
 public:
  Worker(kevo::v1::WorkerService::Stub* stub, int index, Shared* shared) : shared_(shared) {
    stub->async()->Connect(&ctx_, this);
    kevo::v1::WorkerMessage hello;
    kevo::v1::Hello* h = hello.mutable_hello();
    h->set_worker_id(absl::StrCat("loadgen-", index));
    h->set_platform("cpu");
    h->set_device("synthetic (control_plane_bench)");
    h->set_slots(1);
    h->set_holds_tasks(true);  // as kevo-worker does: each task sent whole once
    h->set_mem_bandwidth_gbs(100);
    h->set_fp32_peak_gflops(1000);
    h->mutable_fingerprint()->set_host("loadgen");
    h->mutable_fingerprint()->set_cpu_model("synthetic");
    h->mutable_fingerprint()->set_compiler("none");
    Send(std::move(hello));
    StartRead(&in_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (in_.has_welcome()) shared_->connected.fetch_add(1);
    if (in_.has_assignment()) Answer(in_.assignment());
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!ok) {
      pending_.clear();
      writing_ = false;
      return;
    }
    if (pending_.front().has_result()) result_sent_ = Clock::now();
    pending_.pop_front();
    writing_ = !pending_.empty();
    if (writing_) StartWrite(&pending_.front());
  }

  void OnDone(const grpc::Status&) override {
    shared_->ended.fetch_add(1);
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    done_cv_.notify_all();
  }

  // What a worker daemon sends every heartbeat period (the coordinator's
  // default is 2 s): none running, its slot free (answers are at once).
  void Heartbeat() {
    kevo::v1::WorkerMessage m;
    m.mutable_heartbeat()->set_free_slots(1);
    Send(std::move(m));
  }

  void Stop() {
    ctx_.TryCancel();
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return done_; });
  }

 private:
  void Answer(const kevo::v1::Assignment& a) {
    const Clock::time_point now = Clock::now();
    if (shared_->measuring.load()) {
      shared_->assignments.fetch_add(1);
      std::lock_guard<std::mutex> l(mu_);
      if (result_sent_ != Clock::time_point{}) {
        const double us = std::chrono::duration<double, std::micro>(now - result_sent_).count();
        std::lock_guard<std::mutex> s(shared_->mu);
        shared_->latencies_us.push_back(us);
      }
    }
    // A speedup the candidate keeps however often it is evaluated: from its
    // source's hash, 0.5x to 3x over a 1 ms baseline.
    const size_t h = std::hash<std::string>()(a.candidate().source());
    const double speedup = 0.5 + static_cast<double>(h % 2501) / 1000.0;
    kevo::v1::WorkerMessage m;
    kevo::v1::EvalResult* r = m.mutable_result();
    r->set_eval_id(a.eval_id());
    r->set_attempt(a.attempt());
    kevo::v1::Evaluation* e = r->mutable_evaluation();
    e->set_eval_id(a.eval_id());
    e->set_task_name(a.task().name());
    e->set_attempt(a.attempt());
    e->set_status(kevo::v1::OK);
    e->set_platform("cpu");
    e->mutable_timing()->set_median_s(1e-3 / speedup);
    e->mutable_baseline()->set_median_s(1e-3);
    e->set_speedup(speedup);
    e->set_roofline_fraction(0.1 * speedup);
    e->mutable_fingerprint()->set_host("loadgen");
    shared_->answered.fetch_add(1);
    Send(std::move(m));
  }

  void Send(kevo::v1::WorkerMessage m) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      StartWrite(&pending_.front());
    }
  }

  Shared* shared_;
  grpc::ClientContext ctx_;
  kevo::v1::CoordinatorMessage in_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<kevo::v1::WorkerMessage> pending_;  // front() is being written while writing_
  bool writing_ = false;
  bool done_ = false;
  Clock::time_point result_sent_{};
};

// --serve-floor's side of one worker stream: a Welcome for the Hello, then
// an assignment for the Hello and one for each result, written in order.
class FloorStream : public grpc::ServerBidiReactor<kevo::v1::WorkerMessage, kevo::v1::CoordinatorMessage> {
 public:
  FloorStream(const kevo::v1::Task* task, const std::string* task_hash, const kevo::v1::Candidate* candidate,
              std::atomic<int64_t>* next_id)
      : task_(task), task_hash_(task_hash), candidate_(candidate), next_id_(next_id) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::lock_guard<std::mutex> l(mu_);
      reading_ = false;
      if (!writing_) Finish(grpc::Status::OK);
      return;
    }
    if (in_.has_hello()) {
      kevo::v1::CoordinatorMessage w;
      w.mutable_welcome()->set_worker_id(in_.hello().worker_id());
      w.mutable_welcome()->set_heartbeat_seconds(2);
      Send(std::move(w));
      Assign();
    } else if (in_.has_result()) {
      Assign();
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    if (ok) pending_.pop_front();
    if (!ok) pending_.clear();
    writing_ = !pending_.empty();
    if (writing_) {
      StartWrite(&pending_.front());
    } else if (!reading_) {
      Finish(grpc::Status::OK);
    }
  }

  void OnDone() override { delete this; }

 private:
  void Assign() {
    kevo::v1::CoordinatorMessage m;
    kevo::v1::Assignment* a = m.mutable_assignment();
    a->set_eval_id(absl::StrCat("floor-", next_id_->fetch_add(1)));
    a->set_attempt(1);
    if (!sent_task_) *a->mutable_task() = *task_;
    sent_task_ = true;
    a->set_task_hash(*task_hash_);
    *a->mutable_candidate() = *candidate_;
    Send(std::move(m));
  }

  void Send(kevo::v1::CoordinatorMessage m) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      StartWrite(&pending_.front());
    }
  }

  const kevo::v1::Task* task_;
  const std::string* task_hash_;
  const kevo::v1::Candidate* candidate_;
  std::atomic<int64_t>* next_id_;
  kevo::v1::WorkerMessage in_;
  std::mutex mu_;
  std::deque<kevo::v1::CoordinatorMessage> pending_;  // front() is being written while writing_
  bool writing_ = false;
  bool reading_ = true;
  bool sent_task_ = false;
};

class FloorService final : public kevo::v1::WorkerService::CallbackService {
 public:
  FloorService(kevo::v1::Task task, kevo::v1::Candidate candidate)
      : task_(std::move(task)), candidate_(std::move(candidate)) {}
  grpc::ServerBidiReactor<kevo::v1::WorkerMessage, kevo::v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext*) override {
    return new FloorStream(&task_, &task_hash_, &candidate_, &next_id_);
  }

 private:
  const kevo::v1::Task task_;
  const std::string task_hash_ = "floor-task";
  const kevo::v1::Candidate candidate_;
  std::atomic<int64_t> next_id_{0};
};

// The transport floor's server (--serve-floor TASK_DIR): until killed.
int ServeFloor(const std::string& task_dir) {
  auto task = kevo::task::LoadTaskDir(task_dir);
  if (!task.ok()) {
    std::cerr << task.status() << "\n";
    return 1;
  }
  // The task's example kernel, else its reference: a candidate of a real size.
  kevo::v1::Candidate candidate;
  candidate.set_language("c++");
  for (const char* file : {"/examples/fast.cc", "/reference.cc"}) {
    std::ifstream in(task_dir + file);
    if (!in) continue;
    candidate.set_source(std::string(std::istreambuf_iterator<char>(in), {}));
    break;
  }
  FloorService service(*std::move(task), std::move(candidate));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);  // as the coordinator's server
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "the floor server did not start\n";
    return 1;
  }
  std::printf("listening 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  server->Wait();
  return 0;
}

// CPU seconds (user + system) of process `pid` ("self" for this one).
double CpuSeconds(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  std::getline(f, line);
  // Fields after the command name (which may hold spaces) in parentheses.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest), {}};
  if (fields.size() < 13) return 0;
  return (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A "Key: value kB" line of /proc/PID/status, in MiB.
double StatusMiB(const std::string& pid, const std::string& key) {
  std::ifstream f("/proc/" + pid + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with(key + ":")) {
      double kb = 0;
      std::istringstream(line.substr(key.size() + 1)) >> kb;
      return kb / 1024.0;
    }
  }
  return 0;
}

// write_bytes of /proc/PID/io: what the process sent to storage.
int64_t WrittenBytes(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/io");
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with("write_bytes:")) return std::stoll(line.substr(12));
  }
  return 0;
}

// The sum of every sample of the Prometheus counter `name` on the metrics
// page at `port` whose labels contain `labels`; -1 when the page cannot be
// read.
double CounterSum(int port, const std::string& name, const std::string& labels = "") {
  auto page = kevo::testing::HttpGet(port, "/metrics");
  if (!page.ok()) return -1;
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(*page, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size() ||
        (line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    if (!labels.empty() && !absl::StrContains(line.substr(0, line.rfind(' ')), labels)) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// The folder of this program, where kevo-coordinator is built beside it.
std::string BinDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  const std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/'));
}

int Usage(const std::string& why) {
  std::cerr << "control_plane_bench: " << why << "\n"
            << "usage: control_plane_bench [--workers N] [--jobs N] [--seconds S] [--warmup S]\n"
            << "           [--task DIR] [--max-in-flight N] [--budget N] [--dir DIR]\n"
            << "           [--coordinator PATH] [--coordinator-flags \"...\"] [--floor]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--serve-floor") return ServeFloor(argv[2]);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--floor") {
      o.floor = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(absl::StrCat(a, " needs a value"));
    const std::string v = argv[++i];
    bool ok = true;
    if (a == "--workers")
      ok = absl::SimpleAtoi(v, &o.workers) && o.workers > 0;
    else if (a == "--jobs")
      ok = absl::SimpleAtoi(v, &o.jobs) && o.jobs > 0;
    else if (a == "--seconds")
      ok = absl::SimpleAtod(v, &o.seconds) && o.seconds > 0;
    else if (a == "--warmup")
      ok = absl::SimpleAtod(v, &o.warmup) && o.warmup >= 0;
    else if (a == "--budget")
      ok = absl::SimpleAtoi(v, &o.budget) && o.budget > 0;
    else if (a == "--max-in-flight")
      ok = absl::SimpleAtoi(v, &o.max_in_flight) && o.max_in_flight >= 0;
    else if (a == "--task")
      o.task = v;
    else if (a == "--dir")
      o.dir = v;
    else if (a == "--coordinator-flags")
      o.coordinator_flags = v;
    else if (a == "--coordinator")
      o.coordinator = v;
    else
      return Usage("unknown flag " + a);
    if (!ok) return Usage(absl::StrCat("bad value for ", a, ": ", v));
  }
  const bool made_dir = o.dir.empty();
  if (made_dir) {
    char tmpl[] = "/var/tmp/kevo-control-plane-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Usage("cannot make a temporary folder");
    o.dir = tmpl;
  }
  std::filesystem::create_directories(o.dir);
  // One connection per worker and the coordinator's side of each: raise the
  // file limit (inherited by the coordinator) as far as the hard limit goes.
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);
  if (nofile.rlim_cur < static_cast<rlim_t>(2 * o.workers + 256)) {
    return Usage(absl::StrCat("the file limit (", nofile.rlim_cur, ") is too low for ", o.workers, " workers"));
  }

  auto task = kevo::task::LoadTaskDir(o.task);
  if (!task.ok()) return Usage(std::string(task.status().message()));

  const int metrics = kevo::testing::FreePort();
  if (o.coordinator.empty()) o.coordinator = BinDir() + "/kevo-coordinator";
  std::vector<std::string> cargv = {o.coordinator,
                                    "--listen",
                                    "127.0.0.1:0",
                                    "--db",
                                    o.dir + "/db",
                                    "--metrics",
                                    absl::StrCat("127.0.0.1:", metrics)};
  for (absl::string_view f : absl::StrSplit(o.coordinator_flags, ' ', absl::SkipEmpty())) cargv.emplace_back(f);
  if (o.floor) cargv = {BinDir() + "/control_plane_bench", "--serve-floor", o.task};
  auto coordinator = kevo::testing::ChildProcess::Start(cargv, o.dir + "/coordinator.log");
  if (!coordinator.ok()) return Usage(std::string(coordinator.status().message()));
  auto address = (*coordinator)->WaitForLine("listening ", absl::Seconds(30));
  if (!address.ok()) return Usage("the coordinator did not start: see " + o.dir + "/coordinator.log");
  const std::string pid = std::to_string((*coordinator)->pid());

  Shared shared;
  std::vector<std::unique_ptr<kevo::v1::WorkerService::Stub>> stubs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < o.workers; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetInt("kevo.bench.worker", i);
    stubs.push_back(kevo::v1::WorkerService::NewStub(
        grpc::CreateCustomChannel(*address, grpc::InsecureChannelCredentials(), args)));
    workers.push_back(std::make_unique<Worker>(stubs.back().get(), i, &shared));
  }
  for (int i = 0; i < 600 && shared.connected.load() < o.workers; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (shared.connected.load() < o.workers) {
    std::cerr << "only " << shared.connected.load() << " of " << o.workers << " workers connected\n";
    return 1;
  }

  auto jobs = kevo::v1::JobService::NewStub(grpc::CreateChannel(*address, grpc::InsecureChannelCredentials()));
  int submitted = 0;
  auto submit = [&]() -> std::optional<std::string> {
    kevo::v1::SubmitJobRequest req;
    kevo::v1::JobSpec* spec = req.mutable_spec();
    *spec->mutable_task() = *task;
    spec->set_platform("cpu");
    spec->mutable_budget()->set_max_evaluations(o.budget);
    spec->set_max_in_flight(o.max_in_flight);
    spec->set_seed(static_cast<uint64_t>(++submitted));
    spec->set_no_skills(true);
    kevo::v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = jobs->SubmitJob(&ctx, req, &resp);
    if (!st.ok()) {
      std::cerr << "SubmitJob: " << st.error_message() << "\n";
      return std::nullopt;
    }
    return resp.job_id();
  };
  std::vector<std::string> running;
  for (int j = 0; j < o.jobs && !o.floor; ++j) {
    auto id = submit();
    if (!id) return 1;
    running.push_back(*id);
  }
  // Heartbeats every 2 s, as worker daemons send them.
  std::atomic<bool> stop_beating{false};
  std::thread beats([&] {
    while (!stop_beating.load()) {
      for (auto& w : workers) w->Heartbeat();
      for (int i = 0; i < 20 && !stop_beating.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Replaces each job that ended, twice a second, until told to stop.
  std::atomic<bool> stop_topping_up{false};
  std::thread top_up([&] {
    while (!stop_topping_up.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      for (std::string& id : running) {
        kevo::v1::GetJobRequest req;
        req.set_job_id(id);
        kevo::v1::Job job;
        grpc::ClientContext ctx;
        if (!jobs->GetJob(&ctx, req, &job).ok() || job.state() == kevo::v1::JOB_RUNNING) continue;
        if (auto next = submit()) id = *next;
      }
    }
  });

  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const std::string kWrites = "kevo_coordinator_db_write_seconds";
  // The floor records nothing: every assignment answered counts.
  auto recorded_so_far = [&] {
    return o.floor ? static_cast<double>(shared.answered.load())
                   : CounterSum(metrics, "kevo_coordinator_evaluations_total");
  };
  const double recorded0 = recorded_so_far();
  const double synced0 = CounterSum(metrics, kWrites + "_count", "sync=\"true\"");
  const double synced_s0 = CounterSum(metrics, kWrites + "_sum", "sync=\"true\"");
  const double cpu0 = CpuSeconds(pid), self0 = CpuSeconds("self");
  const int64_t written0 = WrittenBytes(pid);
  const Clock::time_point t0 = Clock::now();
  shared.measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  shared.measuring = false;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double recorded = recorded_so_far() - recorded0;
  const double queued = CounterSum(metrics, "kevo_coordinator_queue_depth");
  const double synced = CounterSum(metrics, kWrites + "_count", "sync=\"true\"") - synced0;
  const double synced_s = CounterSum(metrics, kWrites + "_sum", "sync=\"true\"") - synced_s0;
  const double cpu = CpuSeconds(pid) - cpu0, self = CpuSeconds("self") - self0;
  const int64_t written = WrittenBytes(pid) - written0;
  const double rss = StatusMiB(pid, "VmRSS"), hwm = StatusMiB(pid, "VmHWM");
  std::vector<double> lat;
  {
    std::lock_guard<std::mutex> l(shared.mu);
    lat = shared.latencies_us;
  }

  stop_topping_up = true;
  top_up.join();
  stop_beating = true;
  beats.join();
  for (auto& w : workers) w->Stop();
  (*coordinator)->Kill(SIGTERM);
  (void)(*coordinator)->Wait(absl::Seconds(30));

  std::printf(
      "| workers | jobs | max in flight | dispatched/s | recorded/s | dispatch p50 | dispatch p99 |"
      " coordinator CPU | coordinator RSS (peak) | bytes written / eval | load generator CPU |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf(
      "| %d | %d | %d | %.0f | %.0f | %.2f ms | %.2f ms | %.2f cores | %.0f MiB (%.0f MiB) | %.0f | %.2f cores |\n",
      o.workers, o.jobs, o.max_in_flight, static_cast<double>(shared.assignments.load()) / wall, recorded / wall,
      Percentile(lat, 0.5) / 1e3, Percentile(lat, 0.99) / 1e3, cpu / wall, rss, hwm,
      recorded > 0 ? static_cast<double>(written) / recorded : 0.0, self / wall);
  if (o.floor) {
    std::printf(
        "the transport floor: this program's --serve-floor in the coordinator's place, each result answered at once "
        "with the next assignment (no job, scheduler or store; \"recorded\" counts the results the streams sent)\n");
  } else {
    std::printf("evaluations queued at the end: %.0f (0: the jobs proposed no faster than the workers answered)\n",
                queued);
    std::printf("synced writes: %.2f per recorded evaluation, %.3f ms each on average (%.0f%% of the window)\n",
                recorded > 0 ? synced / recorded : 0.0, synced > 0 ? 1e3 * synced_s / synced : 0.0,
                100 * synced_s / wall);
  }
  std::printf(
      "(%.1f s measured after %.1f s warm-up; %zu latency samples; task %s, jobs of %d evaluations, "
      "%d submitted in all; %s %s)\n",
      wall, o.warmup, lat.size(), task->name().c_str(), o.budget, submitted,
      made_dir && recorded > 0 ? "its state and log were removed from" : "state and log in", o.dir.c_str());
  // A folder of its own goes once the run is measured (the coordinator's
  // database grows by the bytes above per evaluation); --dir keeps it.
  if (made_dir && recorded > 0) std::filesystem::remove_all(o.dir);
  return recorded > 0 ? 0 : 1;
}
