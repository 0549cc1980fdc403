// Reference for map_id: a plain lower_bound binary search per id, clamp the
// position to the table, gather the key and value there, and keep the value
// only when the key matches.
#include <cstdint>

extern "C" void map_id(const int64_t* ids, const int64_t* keys, const int64_t* values, int64_t* out, int64_t n,
                       int64_t nk) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    int64_t lo = 0, hi = nk;  // first position with keys[pos] >= id lies in [lo, hi]
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t pos = lo < nk - 1 ? lo : nk - 1;
    out[i] = keys[pos] == id ? values[pos] : 0;
  }
}
