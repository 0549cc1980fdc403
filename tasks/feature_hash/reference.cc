// Reference for feature_hash: MurmurHash3's fmix64 of each id, then the
// remainder modulo the bucket count.
#include <cstdint>

namespace {
constexpr uint64_t kNumBuckets = 1000003;
}  // namespace

extern "C" void feature_hash(const int64_t* ids, int64_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = static_cast<uint64_t>(ids[i]);
    z ^= z >> 33;
    z *= 0xff51afd7ed558ccdULL;
    z ^= z >> 33;
    z *= 0xc4ceb9fe1a85ec53ULL;
    z ^= z >> 33;
    out[i] = static_cast<int64_t>(z % kNumBuckets);
  }
}
