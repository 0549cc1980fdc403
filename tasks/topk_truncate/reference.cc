// Reference for topk_truncate: per row, an insertion into the output row kept
// sorted (score descending, then column ascending). Columns are visited in
// increasing order, so a new candidate goes after every kept one with an
// equal score, and displaces the last one only with a strictly higher score.
#include <cstdint>

extern "C" void topk_truncate(const int64_t* ids, const float* scores, int64_t* top_ids, float* top_scores,
                              int64_t rows, int64_t cols, int64_t k) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* id = ids + r * cols;
    const float* sc = scores + r * cols;
    int64_t* out_id = top_ids + r * k;
    float* out_sc = top_scores + r * k;
    int64_t count = 0;  // kept so far, at most k
    for (int64_t c = 0; c < cols; ++c) {
      const float s = sc[c];
      if (count == k && !(s > out_sc[k - 1])) continue;
      int64_t j = count < k ? count : k - 1;  // the slot freed for it
      while (j > 0 && out_sc[j - 1] < s) {
        out_sc[j] = out_sc[j - 1];
        out_id[j] = out_id[j - 1];
        --j;
      }
      out_sc[j] = s;
      out_id[j] = id[c];
      if (count < k) ++count;
    }
  }
}
