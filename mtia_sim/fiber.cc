#include "mtia_sim/fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(KEVO_TSAN_FIBERS)
#include <sanitizer/tsan_interface.h>
#endif

namespace kevo::mtia::internal {
namespace {

// AddressSanitizer must be told of every stack switch, or it takes the
// fiber's stack for a wild part of the caller's (an exception thrown on a
// fiber was reported as a stack-use-after-scope). SwitchStart goes before a
// swapcontext to the stack [bottom, bottom + size), with where to keep the
// leaving side's fake stack (null: the leaving fiber is done); SwitchDone
// right after arriving, with that side's saved fake stack, and learns the
// stack it came from. Both are nothing in other builds.
inline void SwitchStart(void** fake, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}
inline void SwitchDone(void* fake, const void** from_bottom, size_t* from_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake, from_bottom, from_size);
#else
  (void)fake, (void)from_bottom, (void)from_size;
#endif
}

// ThreadSanitizer keeps a context per fiber: it must be told of each switch
// just before the swapcontext, or it takes one thread's stack for another's.
// Nothing in other builds.
inline void* TsanNewFiber() {
#if defined(KEVO_TSAN_FIBERS)
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}
inline void TsanDeleteFiber(void* fiber) {
#if defined(KEVO_TSAN_FIBERS)
  if (fiber != nullptr) __tsan_destroy_fiber(fiber);
#else
  (void)fiber;
#endif
}
inline void* TsanCurrent() {
#if defined(KEVO_TSAN_FIBERS)
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}
inline void TsanSwitchTo(void* fiber) {
#if defined(KEVO_TSAN_FIBERS)
  __tsan_switch_to_fiber(fiber, 0);
#else
  (void)fiber;
#endif
}

}  // namespace

struct FiberPool::Fiber {
  ucontext_t ctx{};
  void* stack = nullptr;
  void* fake = nullptr;  // its fake stack (AddressSanitizer) while it is switched out
  void* tsan = nullptr;  // its ThreadSanitizer context
  bool started = false;
  bool done = false;
  std::function<bool()> can_resume;
};

FiberPool::FiberPool(int count, size_t stack_bytes) : stack_bytes_(stack_bytes) {
  for (int i = 0; i < count; ++i) {
    auto f = std::make_unique<Fiber>();
    // MAP_NORESERVE: only the pages a kernel touches cost memory.
    f->stack = mmap(nullptr, stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f->stack == MAP_FAILED) std::abort();  // out of address space: nothing sensible to do
    f->tsan = TsanNewFiber();
    fibers_.push_back(std::move(f));
  }
}

FiberPool::~FiberPool() {
  for (auto& f : fibers_) {
    munmap(f->stack, stack_bytes_);
    TsanDeleteFiber(f->tsan);
  }
}

void FiberPool::Trampoline(unsigned lo, unsigned hi) {
  auto* pool = reinterpret_cast<FiberPool*>((static_cast<uintptr_t>(hi) << 32) | static_cast<uintptr_t>(lo));
  SwitchDone(nullptr, &pool->main_bottom_, &pool->main_size_);
  int i = pool->current_;
  (*pool->body_)(i);  // the body catches everything: nothing may unwind past here
  pool->fibers_[i]->done = true;
  SwitchStart(nullptr, pool->main_bottom_, pool->main_size_);
  TsanSwitchTo(pool->main_tsan_);
  swapcontext(&pool->fibers_[i]->ctx, &pool->main_);
}

void FiberPool::Resume(int i) {
  Fiber& f = *fibers_[i];
  current_ = i;
  if (!f.started) {
    f.started = true;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = stack_bytes_;
    f.ctx.uc_link = &main_;
    auto p = reinterpret_cast<uintptr_t>(this);
    makecontext(&f.ctx, reinterpret_cast<void (*)()>(&FiberPool::Trampoline), 2, static_cast<unsigned>(p & 0xFFFFFFFFu),
                static_cast<unsigned>(p >> 32));
  }
  f.can_resume = nullptr;
  SwitchStart(&main_fake_, f.stack, stack_bytes_);
  main_tsan_ = TsanCurrent();
  TsanSwitchTo(f.tsan);
  swapcontext(&main_, &f.ctx);
  SwitchDone(main_fake_, nullptr, nullptr);
  current_ = -1;
}

bool FiberPool::Run(const std::function<void(int)>& body, std::vector<int>* stuck) {
  body_ = &body;
  aborting_ = false;
  for (auto& f : fibers_) {
    f->started = false;
    f->done = false;
    f->can_resume = nullptr;
  }
  // First pass in index order, then sweep the blocked ones until all finish.
  for (int i = 0; i < static_cast<int>(fibers_.size()); ++i) Resume(i);
  while (true) {
    bool all_done = true, progress = false;
    for (int i = 0; i < static_cast<int>(fibers_.size()); ++i) {
      Fiber& f = *fibers_[i];
      if (f.done) continue;
      all_done = false;
      if (f.can_resume && f.can_resume()) {
        Resume(i);
        progress = true;
      }
    }
    if (all_done) return true;
    if (!progress) {
      stuck->clear();
      for (int i = 0; i < static_cast<int>(fibers_.size()); ++i) {
        if (!fibers_[i]->done) stuck->push_back(i);
      }
      return false;
    }
  }
}

void FiberPool::Abort() {
  aborting_ = true;
  for (int i = 0; i < static_cast<int>(fibers_.size()); ++i) {
    if (fibers_[i]->started && !fibers_[i]->done) Resume(i);
  }
}

void FiberPool::Block(std::function<bool()> can_resume) {
  if (aborting_ || can_resume()) return;
  int i = current_;
  fibers_[i]->can_resume = std::move(can_resume);
  SwitchStart(&fibers_[i]->fake, main_bottom_, main_size_);
  TsanSwitchTo(main_tsan_);
  swapcontext(&fibers_[i]->ctx, &main_);
  SwitchDone(fibers_[i]->fake, &main_bottom_, &main_size_);
  current_ = i;
}

}  // namespace kevo::mtia::internal
