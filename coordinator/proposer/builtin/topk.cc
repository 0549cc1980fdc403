// Recipe "topk_rows" for the CPU: per row of float32 scores, the k (id, score)
// pairs with the highest scores, sorted by score descending then column
// ascending; hints {pattern: topk_rows, ids, scores, top_ids, top_scores,
// rows, cols, k} (those names by default; int64 ids and float32 scores
// [rows, cols], int64 top_ids and float32 top_scores [rows, k]).
//
// Rows go over threads. A row's first pass (AVX-512) takes the max of 16 g
// disjoint sets of columns in g accumulators; each lane's r-th largest max
// (r = ceil(k / 16)) over the lanes' least is a floor no k-th best score is
// under. The second pass compares 16 scores at a time with the bar (the
// floor, then the score of the k-th best so far) and appends the few that
// pass, compressed, to a buffer; when it holds `buffer` * k the best k are
// kept, in order: each candidate's rank (the candidates with a higher score,
// or the same at a lower column) is counted for 16 candidates at a time, and
// the candidate scattered to its slot. Only the k winners' ids are read.
// `select: insert` is the reference's insertion into a sorted buffer, the
// skip test 16 scores at a time. Exact: the order is the reference's total
// order; a row with a NaN (whose place only the reference's loop defines)
// goes through the reference's loop, as do columns past int32; k > cols
// fills the first cols slots like the reference; k <= 0 writes nothing.
#include <string>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct TopkBinding {
  std::string ids, scores, top_ids, top_scores, rows, cols, k;
};

bool BindTopk(const v1::Task& task, TopkBinding* b) {
  if (Hint(task, "pattern") != "topk_rows") return false;
  *b = {Hint(task, "ids", "ids"),
        Hint(task, "scores", "scores"),
        Hint(task, "top_ids", "top_ids"),
        Hint(task, "top_scores", "top_scores"),
        Hint(task, "rows", "rows"),
        Hint(task, "cols", "cols"),
        Hint(task, "k", "k")};
  auto is_matrix = [&](const v1::TensorSpec* t, const std::string& name, v1::DType dtype, const std::string& width) {
    return t != nullptr && t->dtype() == dtype && t->shape_size() == 2 && t->shape(0) == b->rows &&
           t->shape(1) == width && IsSignatureParam(task, name);
  };
  return is_matrix(FindInput(task, b->ids), b->ids, v1::I64, b->cols) &&
         is_matrix(FindInput(task, b->scores), b->scores, v1::F32, b->cols) &&
         is_matrix(FindOutput(task, b->top_ids), b->top_ids, v1::I64, b->k) &&
         is_matrix(FindOutput(task, b->top_scores), b->top_scores, v1::F32, b->k) && IsSymbolParam(task, b->rows) &&
         IsSymbolParam(task, b->cols) && IsSymbolParam(task, b->k) && DefinitionLine(task).ok();
}

// The generated kernel's row functions (they read the constants kevo_rank,
// kevo_floor_groups and kevo_buffer).
constexpr char kRowFunctions[] = R"(// The reference's insertion of candidate (s, tag c: its column or id) into
// bs/bc, kept sorted by score descending, column ascending: every kept column
// is lower, so it goes after each kept score >= s; a full buffer drops its last.
template <typename T>
static inline void kevo_insert(float* bs, T* bc, int64_t* count, int64_t k, float s, T c) {
  const int64_t n = *count;
  int64_t j = n < k ? n : k - 1;
  while (j > 0 && bs[j - 1] < s) {
    bs[j] = bs[j - 1];
    bc[j] = bc[j - 1];
    --j;
  }
  bs[j] = s;
  bc[j] = c;
  if (n < k) *count = n + 1;
}

// The reference's loop on one row, for a row holding a NaN (whose place only
// that loop defines) or columns past int32.
static void kevo_row_reference(const int64_t* id, const float* sc, int64_t* out_id, float* out_sc, int64_t cols,
                               int64_t k) {
  int64_t count = 0;
  for (int64_t c = 0; c < cols; ++c) {
    if (count == k && !(sc[c] > out_sc[k - 1])) continue;
    kevo_insert(out_sc, out_id, &count, k, sc[c], id[c]);
  }
}

#if defined(__AVX512F__)
static inline __mmask16 kevo_lanes(int64_t left) {
  return (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1);
}

// Keeps the best min(n, k) of the n candidates in bs/bc, in order. A
// candidate's rank is the count of candidates before it (a higher score, or
// the same at a lower column), 16 candidates' ranks at a time; ranks are
// distinct, so scattering each to its rank sorts them (slot k of ts/tc takes
// the rest).
static inline int64_t kevo_keep_best(float* bs, int32_t* bc, int64_t n, int64_t k, float* ts, int32_t* tc) {
  const __m512i one = _mm512_set1_epi32(1), kv = _mm512_set1_epi32((int32_t)k);
  for (int64_t i0 = 0; i0 < n; i0 += 16) {
    const __m512 si = _mm512_loadu_ps(bs + i0);
    const __m512i ci = _mm512_loadu_si512(bc + i0);
    __m512i rank = _mm512_setzero_si512();
    for (int64_t j = 0; j < n; ++j) {
      const __m512 sj = _mm512_set1_ps(bs[j]);
      const __mmask16 before = _mm512_cmp_ps_mask(sj, si, _CMP_GT_OQ) |
                               _mm512_mask_cmplt_epi32_mask(_mm512_cmp_ps_mask(sj, si, _CMP_EQ_OQ),
                                                            _mm512_set1_epi32(bc[j]), ci);
      rank = _mm512_mask_add_epi32(rank, before, rank, one);
    }
    rank = _mm512_mask_min_epi32(kv, kevo_lanes(n - i0), rank, kv);
    _mm512_i32scatter_ps(ts, rank, si, 4);
    _mm512_i32scatter_epi32(tc, rank, ci, 4);
  }
  const int64_t m = n < k ? n : k;
  memcpy(bs, ts, m * sizeof(float));
  memcpy(bc, tc, m * sizeof(int32_t));
  return m;
}

// A floor under the row's k-th best score (-inf if none is found): lane j of
// accumulator g is the max over columns 16 i + j with i % groups == g, so
// 16 groups disjoint sets; each lane's r-th largest max, r = ceil(k / 16),
// has r sets reaching it, and the least over the lanes 16 r >= k sets, so at
// least k scores.
static inline float kevo_floor(const float* sc, int64_t cols, int64_t k) {
  const int64_t r = (k + 15) / 16, full = cols / 16;
  const int64_t groups = kevo_floor_groups == 0 ? 1 : kevo_floor_groups * r < 8 ? kevo_floor_groups * r : 8;
  if (kevo_floor_groups == 0 || k >= cols || r > groups || full < groups) return -INFINITY;
  __m512 acc[8], top[8];
  for (int64_t g = 0; g < groups; ++g) acc[g] = _mm512_loadu_ps(sc + 16 * g);
  for (int64_t i = groups; i < full; ++i) acc[i % groups] = _mm512_max_ps(acc[i % groups], _mm512_loadu_ps(sc + 16 * i));
  __mmask16 un = 0;
  for (int64_t t = 0; t < r; ++t) top[t] = _mm512_set1_ps(-INFINITY);
  for (int64_t g = 0; g < groups; ++g) {
    un |= _mm512_cmp_ps_mask(acc[g], acc[g], _CMP_UNORD_Q);
    __m512 x = acc[g];
    for (int64_t t = 0; t < r; ++t) {
      const __m512 hi = _mm512_max_ps(top[t], x);
      x = _mm512_min_ps(top[t], x);
      top[t] = hi;
    }
  }
  // A NaN sends the row to the reference's loop (below); the floor is moot.
  return un == 0 ? _mm512_reduce_min_ps(top[r - 1]) : -INFINITY;
}
#endif

// One row into bs/bc (room for kevo_buffer * k + 48 each, then as much for
// ts/tc); the count kept, or -1 for a row with a NaN.
static inline int64_t kevo_row(const float* sc, int64_t cols, int64_t k, float* bs, int32_t* bc) {
  int64_t count = 0;
#if defined(__AVX512F__)
  // Only a score >= floor can be among the k best.
  const float floor = kevo_floor(sc, cols, k);
  const __m512 fv = _mm512_set1_ps(floor);
  __mmask16 un = 0;
  if (kevo_rank && k <= 128) {
    // Candidates >= floor are appended, 16 compressed at a time; when the
    // buffer fills, the best k are kept, sorted, and from then on a candidate
    // must beat the k-th's score (a later column with the same ranks after).
    const int64_t cap = kevo_buffer * k > 32 ? kevo_buffer * k : 32;
    float* ts = bs + cap + 16;
    int32_t* tc = bc + cap + 16;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 bar = fv;
    bool kept = false;
    int64_t n = 0;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const __mmask16 lm = kevo_lanes(cols - c0);
      const __m512 v = _mm512_maskz_loadu_ps(lm, sc + c0);
      un |= _mm512_mask_cmp_ps_mask(lm, v, v, _CMP_UNORD_Q);
      const __mmask16 m =
          kept ? _mm512_mask_cmp_ps_mask(lm, v, bar, _CMP_GT_OQ) : _mm512_mask_cmp_ps_mask(lm, v, bar, _CMP_GE_OQ);
      if (m == 0) continue;
      _mm512_storeu_ps(bs + n, _mm512_maskz_compress_ps(m, v));
      _mm512_storeu_si512(bc + n, _mm512_maskz_compress_epi32(m, _mm512_add_epi32(iota, _mm512_set1_epi32((int32_t)c0))));
      n += __builtin_popcount(m);
      if (n >= cap) {
        n = kevo_keep_best(bs, bc, n, k, ts, tc);
        bar = _mm512_set1_ps(bs[k - 1]);
        kept = true;
      }
    }
    if (un != 0) return -1;
    return kevo_keep_best(bs, bc, n, k, ts, tc);
  }
  // Insertion, the skip test 16 scores at a time: before the buffer is full a
  // candidate needs >= floor, after it > the k-th's score.
  __m512 bar = fv;
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 lm = kevo_lanes(cols - c0);
    const __m512 v = _mm512_maskz_loadu_ps(lm, sc + c0);
    un |= _mm512_mask_cmp_ps_mask(lm, v, v, _CMP_UNORD_Q);
    __mmask16 m =
        count < k ? _mm512_mask_cmp_ps_mask(lm, v, fv, _CMP_GE_OQ) : _mm512_mask_cmp_ps_mask(lm, v, bar, _CMP_GT_OQ);
    while (m) {
      const int j = __builtin_ctz(m);
      m &= m - 1;
      const float s = sc[c0 + j];
      if (count == k && !(s > bs[k - 1])) continue;
      kevo_insert(bs, bc, &count, k, s, (int32_t)(c0 + j));
      if (count == k) bar = _mm512_set1_ps(bs[k - 1]);
    }
  }
  return un != 0 ? -1 : count;
#else
  for (int64_t c = 0; c < cols; ++c) {
    const float s = sc[c];
    if (s != s) return -1;
    if (count == k && !(s > bs[k - 1])) continue;
    kevo_insert(bs, bc, &count, k, s, (int32_t)c);
  }
  return count;
#endif
}
)";

class TopkRowsRecipe final : public BoundRecipe<TopkBinding> {
 public:
  TopkRowsRecipe()
      : BoundRecipe({"topk_rows", "topk_rows", "cpu",
                     "per-row top k: a floor from disjoint sets' maxima, an AVX-512 filter against the k-th best "
                     "so far compressing the few that pass, ranks counted 16 at a time; rows over threads"},
                    SearchSpace({
                        {"select",
                         {"insert", "rank"},
                         "rank",
                         "buffer of candidates kept best-k by counted ranks, or the reference's sorted insertion"},
                        {"floor_sets",
                         {"0", "1", "2", "4"},
                         "4",
                         "disjoint column sets per needed one for the first pass's floor (0: no floor)"},
                        {"buffer", {"2", "3", "4"}, "2", "candidates (times k) appended before keeping the best k"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, TopkBinding* b) const override { return BindTopk(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const TopkBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    std::string s = absl::StrCat(
        kPrelude, "#include <omp.h>\n\n// Generated by kevo builtin recipe ", genome.ToString(),
        "\nenum : int64_t { kevo_rank = ", StrParam(genome, "select") == "rank" ? 1 : 0,
        ", kevo_floor_groups = ", IntParam(genome, "floor_sets"), ", kevo_buffer = ", IntParam(genome, "buffer"),
        " };\n", kRowFunctions, "\n", definition, " {\n  const int64_t* kevo_ids = ", b.ids,
        ";\n  const float* kevo_scores = ", b.scores, ";\n  int64_t* kevo_top_ids = ", b.top_ids,
        ";\n  float* kevo_top_scores = ", b.top_scores, ";\n  const int64_t kevo_rows = ", b.rows,
        ", kevo_cols = ", b.cols, ", kevo_k = ", b.k, ";\n",
        R"(  if (kevo_rows <= 0 || kevo_cols <= 0 || kevo_k <= 0) return;
  // k > cols: the reference fills the first cols slots of a row and leaves
  // the rest as they were; so does this.
  const int64_t kk = kevo_k < kevo_cols ? kevo_k : kevo_cols;
  const int64_t len = 2 * (kevo_buffer * kk + 48);
)",
        StrParam(genome, "threads") == "all" ? "#pragma omp parallel\n" : "#pragma omp parallel num_threads(1)\n",
        R"(  {
    float* bs = (float*)malloc(len * sizeof(float));
    int32_t* bc = (int32_t*)malloc(len * sizeof(int32_t));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < kevo_rows; ++r) {
      const int64_t* id = kevo_ids + r * kevo_cols;
      const float* sc = kevo_scores + r * kevo_cols;
      int64_t* out_id = kevo_top_ids + r * kevo_k;
      float* out_sc = kevo_top_scores + r * kevo_k;
      const int64_t m = bs == nullptr || bc == nullptr || kevo_cols > INT32_MAX ? -1 : kevo_row(sc, kevo_cols, kk, bs, bc);
      if (m < 0) {
        kevo_row_reference(id, sc, out_id, out_sc, kevo_cols, kk);
        continue;
      }
      for (int64_t j = 0; j < m; ++j) {
        out_sc[j] = bs[j];
        out_id[j] = id[bc[j]];
      }
    }
    free(bs);
    free(bc);
  }
}
)");
    return CppCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewTopkRowsRecipe() { return std::make_unique<TopkRowsRecipe>(); }

}  // namespace kevo::proposer
