// A fixed pool of threads that runs posted closures in order: where a gRPC
// reaction hands work it must not do on its own thread (RocksDB scans, index
// searches) and finishes the call from there.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kevo {

class Executor {
 public:
  // Starts `threads` (at least 1) threads.
  explicit Executor(int threads);
  // Runs what is still queued, then joins the threads.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `work` for a pool thread. Thread-safe; never blocks on the work.
  void Post(std::function<void()> work);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kevo
