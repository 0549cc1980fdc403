// Reference for jagged_truncate: walk the sequences in order keeping both
// running offsets, copy the first min(length, L) values of each, then zero
// the unused tail of the output.
#include <cstdint>

extern "C" void jagged_truncate(const int64_t* lengths, const float* values, int64_t* out_lengths, float* out_values,
                                int64_t B, int64_t L) {
  int64_t in_off = 0, out_off = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t keep = lengths[b] < L ? lengths[b] : L;
    for (int64_t j = 0; j < keep; ++j) out_values[out_off + j] = values[in_off + j];
    out_lengths[b] = keep;
    in_off += lengths[b];
    out_off += keep;
  }
  for (int64_t t = out_off; t < B * L; ++t) out_values[t] = 0.0f;
}
