// Embedded mode for the CLI: a coordinator in this process (RocksDB in a
// temporary or given folder) and a kevo-worker child process dialling it, so
// `kevo eval` and `kevo run` work with no daemons started by hand.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "coordinator/server/coordinator.h"

namespace kevo::cli {

struct EmbeddedOptions {
  std::string db_dir;  // empty: a temporary folder, removed at exit
  std::string platform = "cpu";
  // One worker for each of these platforms instead of `platform` alone (a
  // campaign's); each logs to <db>/worker-<platform>.log.
  std::vector<std::string> platforms;
  int slots = 1;                          // 0: the worker's default for the platform
  std::string worker_log;                 // where the worker's log lines go; empty: <db>/worker.log
  std::vector<std::string> worker_flags;  // extra kevo-worker flags
  std::string llm_config;                 // LLM endpoints file for the llm proposers; empty: none
  // The coordinator's lease: also how long a db reopened after a crash waits
  // for the dead run's worker before its evaluations go back to the queue.
  absl::Duration lease = absl::Seconds(120);
};

class Embedded {
 public:
  // Starts the coordinator and the worker(s), and waits (up to 90 s, with
  // progress lines on stderr) until every worker has connected. Returns
  // NotFound when kevo-worker is not beside this binary, Unavailable when the
  // worker exits before connecting (its log is named in the message).
  static absl::StatusOr<std::unique_ptr<Embedded>> Start(const EmbeddedOptions& options);
  ~Embedded();  // stops the worker (SIGTERM, then SIGKILL) and the coordinator

  std::string address() const { return coordinator_->address(); }
  coordinator::Coordinator* coordinator() { return coordinator_.get(); }
  const std::string& db_dir() const { return db_dir_; }

 private:
  Embedded() = default;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
  std::string db_dir_;
  bool remove_db_ = false;
  std::vector<int> worker_pids_;
};

// The folder holding this executable (to find kevo-worker and the runners).
std::string SelfDir();

}  // namespace kevo::cli
