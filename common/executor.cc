#include "common/executor.h"

#include <algorithm>

namespace kevo {

Executor::Executor(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

Executor::~Executor() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
}

void Executor::Post(std::function<void()> work) {
  absl::MutexLock l(&mu_);
  queue_.push_back(std::move(work));
}

void Executor::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace kevo
