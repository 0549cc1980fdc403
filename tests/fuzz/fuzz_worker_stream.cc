// Fuzz target: what a worker sends on its stream, handled by the
// coordinator's scheduler over a real RocksDB store. Each input is one
// connection: Hello (the first message, else a default one), then the
// messages of the input (text-format WorkerMessages separated by lines of
// "---"), with eval id "E" standing for the evaluation queued for it, so
// that events and results for the lease it holds (and for ones it does not)
// are exercised; the stream then ends as a lost worker's does. A worker that
// lies or sends garbage must never take the coordinator down.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"

#include "coordinator/scheduler/scheduler.h"
#include "coordinator/store/store.h"
#include "kevo/v1/worker.pb.h"
#include "tests/fuzz/quiet_errors.h"

namespace {

struct Coordinator {
  Coordinator() {
    dir = std::filesystem::temp_directory_path() / ("kevo-fuzz-worker-stream-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    store = std::move(*kevo::store::Store::Open(dir.string()));
    scheduler = std::make_unique<kevo::scheduler::Scheduler>(store.get(), kevo::scheduler::SchedulerOptions{}, nullptr);
  }
  ~Coordinator() {
    scheduler.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  std::unique_ptr<kevo::store::Store> store;
  std::unique_ptr<kevo::scheduler::Scheduler> scheduler;
};

void Substitute(kevo::v1::WorkerMessage* m, const std::string& eval_id) {
  if (m->has_event() && m->event().eval_id() == "E") m->mutable_event()->set_eval_id(eval_id);
  if (m->has_result() && m->result().eval_id() == "E") m->mutable_result()->set_eval_id(eval_id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One store for the whole run, removed at exit.
  static Coordinator coordinator;
  Coordinator* c = &coordinator;
  static kevo::fuzz::QuietErrors quiet;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<kevo::v1::WorkerMessage> messages;
  for (size_t at = 0; at <= input.size() && messages.size() < 64;) {
    const size_t end = std::min(input.find("\n---\n", at), input.size());
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&quiet);
    kevo::v1::WorkerMessage m;
    if (parser.ParseFromString(input.substr(at, end - at), &m)) messages.push_back(std::move(m));
    at = end + 5;
  }
  kevo::v1::Hello hello;
  hello.set_platform("cpu");
  hello.set_slots(1);
  if (!messages.empty() && messages.front().has_hello()) hello = messages.front().hello();
  std::vector<std::string> assigned;
  const std::string worker = c->scheduler->AddWorker(hello, [&assigned](kevo::v1::CoordinatorMessage m) {
    if (m.has_assignment()) assigned.push_back(m.assignment().eval_id());
  });
  kevo::v1::Task task;
  task.set_name("fuzz");
  kevo::v1::Candidate candidate;
  candidate.set_language("cpp");
  candidate.set_source("// fuzz");
  auto eval_id = c->scheduler->Submit(task, candidate, hello.platform(), {});
  for (kevo::v1::WorkerMessage& m : messages) {
    Substitute(&m, eval_id.ok() ? *eval_id : std::string("none"));
    c->scheduler->OnWorkerMessage(worker, m);
  }
  c->scheduler->RemoveWorker(worker);
  if (eval_id.ok()) {  // what the stream left queued goes, so the queue stays small
    (void)c->scheduler->WithdrawQueued("");
  }
  return 0;
}
