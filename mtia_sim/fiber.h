// Cooperative fibers for the MTIA simulator's functional run: each PE's
// kernel runs on its own stack (ucontext), and the scheduler resumes them in
// a fixed order, so a kernel may block on a barrier or a neighbour's data
// and the run stays deterministic. Not thread-safe: one host thread drives a
// FiberPool.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kevo::mtia::internal {

class FiberPool {
 public:
  // `count` fibers with `stack_bytes` of stack each (mapped once, reused).
  FiberPool(int count, size_t stack_bytes);
  ~FiberPool();
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  // Runs body(i) for every fiber i. A fiber blocks with Block(can_resume); it
  // is resumed, in index order, once can_resume() is true. Returns false (and
  // leaves the blocked fibers' indices in `stuck`) if all unfinished fibers are
  // blocked; the caller must then call Abort(), which resumes each stuck fiber
  // with aborting() true so that it can unwind.
  bool Run(const std::function<void(int)>& body, std::vector<int>* stuck);
  void Abort();

  // From inside a fiber: blocks until can_resume() (returns at once if true).
  void Block(std::function<bool()> can_resume);
  bool aborting() const { return aborting_; }
  int current() const { return current_; }

 private:
  struct Fiber;
  static void Trampoline(unsigned lo, unsigned hi);
  void Resume(int i);

  std::vector<std::unique_ptr<Fiber>> fibers_;
  size_t stack_bytes_;
  ucontext_t main_{};
  // AddressSanitizer's view of the switches (fiber.cc, SwitchStart/SwitchDone):
  // the caller's stack, and its fake stack while a fiber runs.
  const void* main_bottom_ = nullptr;
  size_t main_size_ = 0;
  void* main_fake_ = nullptr;
  void* main_tsan_ = nullptr;  // ThreadSanitizer's context of the caller
  const std::function<void(int)>* body_ = nullptr;
  int current_ = -1;
  bool aborting_ = false;
};

}  // namespace kevo::mtia::internal
