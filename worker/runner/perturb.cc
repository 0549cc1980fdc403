#include "worker/runner/perturb.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#include "worker/runner/protocol.h"
#include "worker/runner/runner_io.h"

namespace kevo::runner {

uint64_t SeedFromOs() {
  uint64_t seed = 0;
  auto* p = reinterpret_cast<unsigned char*>(&seed);
  size_t done = 0;
  while (done < sizeof seed) {
    ssize_t n = getrandom(p + done, sizeof seed - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail(kExitInfra, "error", absl::StrCat("getrandom failed: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return seed;
}

InputPerturber::InputPerturber(const std::vector<const v1::TensorSpec*>& specs,
                               const std::vector<std::vector<int64_t>>& shapes, const SymbolValues& symbols,
                               SecretRng& rng)
    : rng_(rng) {
  constexpr int64_t kPoolSize = 1024;
  for (size_t i = 0; i < specs.size(); ++i) {
    const v1::TensorSpec& spec = *specs[i];
    const int64_t count = NumElements(shapes[i]);
    if (count == 0) continue;
    if (spec.distribution().has_sorted_uniform()) {
      left_alone_.push_back(spec.name());
      continue;
    }
    Source s;
    s.input = static_cast<uint32_t>(i);
    s.elem = static_cast<uint32_t>(DTypeSize(spec.dtype()));
    s.count = count;
    s.pool.resize(static_cast<size_t>(kPoolSize) * s.elem);
    FillTensor(spec, {kPoolSize}, rng_.Next(), s.pool.data(), &symbols);
    bool constant = true;
    for (int64_t k = 1; k < kPoolSize && constant; ++k) {
      constant = std::memcmp(s.pool.data(), s.pool.data() + k * s.elem, s.elem) == 0;
    }
    if (constant) {
      left_alone_.push_back(spec.name());
      continue;
    }
    perturbed_.push_back(spec.name());
    sources_.push_back(std::move(s));
  }
}

std::vector<Poke> InputPerturber::Draw(const std::function<uint64_t(const Poke& p)>& timed_value) {
  std::vector<Poke> pokes;
  for (const Source& s : sources_) {
    const size_t first = pokes.size();
    const int64_t pool_size = static_cast<int64_t>(s.pool.size() / s.elem);
    for (int k = 0; k < kPokesPerInput; ++k) {
      Poke p;
      p.input = s.input;
      p.bytes = s.elem;
      p.index = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(s.count)));
      // One poke per element: undoing them then needs no order, and the
      // value each wrote is what its element must still hold.
      if (std::any_of(pokes.begin() + static_cast<std::ptrdiff_t>(first), pokes.end(),
                      [&](const Poke& q) { return q.index == p.index; })) {
        continue;
      }
      p.original = timed_value(p);
      // A value equal to the one there would perturb nothing.
      bool differs = false;
      for (int attempt = 0; attempt < 4 && !differs; ++attempt) {
        p.written = 0;
        const uint64_t pick = rng_.Below(static_cast<uint64_t>(pool_size));
        std::memcpy(&p.written, s.pool.data() + pick * s.elem, s.elem);
        differs = p.written != p.original;
      }
      if (differs) pokes.push_back(p);
    }
  }
  return pokes;
}

void InputPerturber::Repoke(const PokeAccess& access, const std::function<uint64_t(const Poke& p)>& timed_value,
                            const std::vector<const v1::TensorSpec*>& input_specs, std::vector<Poke>& pokes,
                            std::string* modified) {
  UndoPokes(access, pokes, input_specs, modified);
  pokes = Draw(timed_value);
  ApplyPokes(access, pokes);
}

void ApplyPokes(const PokeAccess& access, const std::vector<Poke>& pokes) {
  for (const Poke& p : pokes) access.write(p, p.written);
}

void UndoPokes(const PokeAccess& access, std::vector<Poke>& pokes,
               const std::vector<const v1::TensorSpec*>& input_specs, std::string* modified) {
  for (const Poke& p : pokes) {
    if (modified != nullptr && modified->empty() && access.read(p) != p.written) {
      *modified = input_specs[p.input]->name();
    }
    access.write(p, p.original);
  }
  pokes.clear();
}

int64_t TimedCheckSlotFor(int64_t sample, SecretRng& rng) {
  const int64_t slot =
      sample < kTimedChecks ? sample : static_cast<int64_t>(rng.Below(static_cast<uint64_t>(sample) + 1));
  return slot < kTimedChecks ? slot : -1;
}

}  // namespace kevo::runner
