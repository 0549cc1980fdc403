// What the runners' profile modes (kevo-runner-cpu and -mtia, and the GPU
// runners of worker/runner/device) share to keep timed calls honest
// (protocol.h): the secret seed and its generator, the choice of the input
// elements a timed sample's inputs hold in place of the timed inputs' values
// ("pokes"), putting them in and taking them out again, and the choice of
// the timed samples whose outputs are checked. Host-side only: each runner
// reaches the elements in its own memory (host buffers, or small copies to
// and from a device) through a PokeAccess.
//
// Nothing here is thread-safe; a runner draws from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "kevo/v1/task.pb.h"

namespace kevo::runner {

// The profile's secret seed, from getrandom(2): nothing the candidate can
// compute from the task, the host or the clock predicts what it chooses. Ends
// the process with kExitInfra when the OS gives none. Call it before any
// kernel is loaded.
uint64_t SeedFromOs();

// splitmix64 from the secret seed.
class SecretRng {
 public:
  explicit SecretRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0 (the modulo bias is negligible for the sizes here).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// One input element that a call's inputs hold in place of its timed-inputs
// value.
struct Poke {
  uint32_t input = 0;     // index among the call's inputs, in signature order
  int64_t index = 0;      // element
  uint32_t bytes = 0;     // the element's size (a dtype is at most 8)
  uint64_t original = 0;  // the element's bytes in the timed inputs
  uint64_t written = 0;   // the bytes written instead
};

// How a runner reaches the elements that pokes name, in its own memory: the
// bytes an element holds now, and writing it.
struct PokeAccess {
  std::function<uint64_t(const Poke& p)> read;
  std::function<void(const Poke& p, uint64_t bytes)> write;
};

// Chooses the pokes of a timed sample: kPokesPerInput elements of each input,
// at positions drawn from the secret seed, take values drawn from that
// input's own distribution (FillTensor with a secret seed, so the dtype, the
// range and a binding-dependent index bound all hold: a perturbed input is one
// the task's generator could have produced). An input sorted along its last
// dimension (bucket boundaries, sorted keys) would not stay sorted, so it is
// left alone, as is one whose distribution is a constant.
class InputPerturber {
 public:
  // The call's inputs in signature order, their shapes at the binding, and
  // the binding's symbols (for bounds that follow it).
  InputPerturber(const std::vector<const v1::TensorSpec*>& specs, const std::vector<std::vector<int64_t>>& shapes,
                 const SymbolValues& symbols, SecretRng& rng);

  const std::vector<std::string>& perturbed() const { return perturbed_; }
  const std::vector<std::string>& left_alone() const { return left_alone_; }

  // Fresh pokes for inputs that hold the timed inputs' values, where
  // `timed_value(p)` returns the bytes of the element p names (its input,
  // index and bytes): each at a distinct element, each writing a value that
  // differs from the one there (a draw that finds none is dropped).
  std::vector<Poke> Draw(const std::function<uint64_t(const Poke& p)>& timed_value);

  // A sample's inputs made afresh: the last sample's `pokes` undone
  // (UndoPokes, checked where `modified` is given), new ones drawn and
  // applied, and recorded in `pokes`.
  void Repoke(const PokeAccess& access, const std::function<uint64_t(const Poke& p)>& timed_value,
              const std::vector<const v1::TensorSpec*>& input_specs, std::vector<Poke>& pokes, std::string* modified);

 private:
  struct Source {
    uint32_t input = 0;
    uint32_t elem = 0;
    int64_t count = 0;
    std::vector<unsigned char> pool;  // values drawn from the input's distribution
  };

  SecretRng& rng_;
  std::vector<Source> sources_;
  std::vector<std::string> perturbed_, left_alone_;
};

// Writes `pokes` in order (the inputs of the sample they were drawn for, on
// inputs holding the timed inputs' values).
void ApplyPokes(const PokeAccess& access, const std::vector<Poke>& pokes);

// Puts the timed inputs' values back and clears `pokes`. Where `modified` is
// given, each element is read first, and the first input (of `input_specs`,
// the call's in signature order) whose poked element no longer holds what
// was written (the candidate wrote into its inputs) is named in it, unless
// it names one already.
void UndoPokes(const PokeAccess& access, std::vector<Poke>& pokes,
               const std::vector<const v1::TensorSpec*>& input_specs, std::string* modified);

// Reservoir sampling (Algorithm R) of kTimedChecks among all the timed
// samples of the candidate, however many there turn out to be: after sample
// `sample` (0-based) was taken, the slot it replaces, or -1 when it is not
// kept. Decided after the call, so nothing a call sees says whether it is
// checked.
int64_t TimedCheckSlotFor(int64_t sample, SecretRng& rng);

}  // namespace kevo::runner
