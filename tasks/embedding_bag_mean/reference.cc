// Reference for embedding_bag_mean: walk the bags in order with a running
// offset; each output row is the float32 sum of its bag's table rows, added
// in index order, divided by the bag's length (0 for an empty bag).
#include <cstdint>

extern "C" void embedding_bag_mean(const float* table, const int64_t* indices, const int64_t* lengths, float* out,
                                   int64_t V, int64_t D, int64_t B) {
  (void)V;  // the number of table rows: every index is below it
  int64_t off = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0.0f;
      for (int64_t j = 0; j < lengths[b]; ++j) sum += table[indices[off + j] * D + d];
      out[b * D + d] = lengths[b] > 0 ? sum / static_cast<float>(lengths[b]) : 0.0f;
    }
    off += lengths[b];
  }
}
