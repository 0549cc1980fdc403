#include "coordinator/proposer/builtin/codegen.h"

#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

#include "common/tensor.h"

namespace kevo::proposer {

const char kPrelude[] = R"(#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static inline int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t kevo_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
)";

const char kScratch[] = R"(
// Scratch kept by the calling thread between calls (grown, never shrunk):
// blocks this size are mmap'ed fresh by malloc, so allocating them per call
// page-faults every page again. Null if memory runs out.
struct kevo_scratch {
  float* p = nullptr;
  size_t floats = 0;
  float* get(size_t n) {
    if (n > floats) {
      free(p);
      p = (float*)aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
      floats = p != nullptr ? n : 0;
    }
    return p;
  }
};
)";

std::string Hint(const v1::Task& task, std::string_view key, std::string_view fallback) {
  auto it = task.hints().find(std::string(key));
  if (it == task.hints().end()) return std::string(fallback);
  return it->second;
}

const v1::TensorSpec* FindInput(const v1::Task& task, std::string_view name) {
  for (const auto& t : task.inputs()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

const v1::TensorSpec* FindOutput(const v1::Task& task, std::string_view name) {
  for (const auto& t : task.outputs()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

bool IsSignatureParam(const v1::Task& task, std::string_view name) {
  for (const auto& p : task.signature().params()) {
    if (p == name) return true;
  }
  return false;
}

bool IsSymbolParam(const v1::Task& task, std::string_view name) {
  return !name.empty() && IsSignatureParam(task, name) && FindInput(task, name) == nullptr &&
         FindOutput(task, name) == nullptr;
}

absl::StatusOr<std::string> DefinitionLine(const v1::Task& task, bool restrict_pointers) {
  // Validates the signature the same way the worker will.
  absl::StatusOr<std::string> declaration = RenderSignature(task);
  if (!declaration.ok()) return declaration.status();
  std::vector<std::string> params;
  for (const std::string& p : task.signature().params()) {
    const v1::TensorSpec* in = FindInput(task, p);
    const v1::TensorSpec* out = in == nullptr ? FindOutput(task, p) : nullptr;
    const char* restrict_kw = restrict_pointers ? " __restrict" : "";
    if (in != nullptr) {
      params.push_back(absl::StrCat("const ", std::string(CTypeName(in->dtype())), "*", restrict_kw, " ", p));
    } else if (out != nullptr) {
      params.push_back(absl::StrCat(std::string(CTypeName(out->dtype())), "*", restrict_kw, " ", p));
    } else {
      params.push_back(absl::StrCat("int64_t ", p));
    }
  }
  return absl::StrCat("extern \"C\" void ", task.signature().function(), "(", absl::StrJoin(params, ", "), ")");
}

std::string ElementCountExpr(const v1::TensorSpec& spec) {
  if (spec.shape().empty()) return "(int64_t)1";
  std::vector<std::string> dims;
  for (const std::string& d : spec.shape()) {
    std::string e = ReplaceWord(d, "min", "kevo_min");
    e = ReplaceWord(e, "max", "kevo_max");
    e = ReplaceWord(e, "ceil_div", "kevo_ceil_div");
    dims.push_back(absl::StrCat("(int64_t)(", e, ")"));
  }
  return absl::StrCat("(", absl::StrJoin(dims, " * "), ")");
}

absl::Status CheckGenerate(const Recipe& recipe, const v1::Task& task, const Genome& genome,
                           std::string_view platform) {
  if (genome.recipe != recipe.name()) {
    return absl::InvalidArgumentError(
        absl::StrCat("genome '", genome.ToString(), "' is not for recipe ", recipe.name()));
  }
  absl::Status in_space = recipe.space().Check(genome.params);
  if (!in_space.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("genome '", genome.ToString(), "': ", std::string(in_space.message())));
  }
  if (!recipe.Applies(task, platform)) {
    return absl::FailedPreconditionError(
        absl::StrCat("recipe ", recipe.name(), " does not apply to task ", task.name(), " on ", std::string(platform)));
  }
  return absl::OkStatus();
}

int64_t IntParam(const Genome& genome, const std::string& key) { return std::stoll(genome.params.at(key)); }

const std::string& StrParam(const Genome& genome, const std::string& key) { return genome.params.at(key); }

std::string ReplaceWord(const std::string& text, const std::string& word, const std::string& with) {
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, word.size(), word) == 0 && (i == 0 || !is_ident(text[i - 1])) &&
        (i + word.size() >= text.size() || !is_ident(text[i + word.size()]))) {
      out += with;
      i += word.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool IsSumMaxOrMean(std::string_view op) { return op == "sum" || op == "max" || op == "mean"; }

// Whether `name` is a float32 signature tensor (input or output) of shape `shape`.
bool IsF32Tensor(const v1::Task& task, const std::string& name, const std::vector<std::string>& shape, bool output) {
  const v1::TensorSpec* t = output ? FindOutput(task, name) : FindInput(task, name);
  if (t == nullptr || t->dtype() != v1::F32 || !IsSignatureParam(task, name) ||
      t->shape_size() != static_cast<int>(shape.size())) {
    return false;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (t->shape(static_cast<int>(i)) != shape[i] || !IsSymbolParam(task, shape[i])) return false;
  }
  return true;
}

bool BindRowReduce(const v1::Task& task, RowBinding* b) {
  return Hint(task, "pattern") == "row_reduce" && IsSumMaxOrMean(Hint(task, "op")) &&
         BindRows(task, /*reduction=*/true, b);
}

std::string StreamingStore(const std::string& type, const std::string& vector_type) {
  return absl::StrCat("// p is aligned to 64 bytes.\nstatic inline void kevo_stream(", type, "* p, ", vector_type,
                      R"( v) {
#if defined(__AVX512F__)
  if (sizeof(v) % 64 == 0) {
    for (unsigned k = 0; k < sizeof(v) / 64; ++k) {
      __m512i w;
      __builtin_memcpy(&w, (const char*)&v + 64 * k, 64);
      _mm512_stream_si512((__m512i*)((char*)p + 64 * k), w);
    }
    return;
  }
#endif
#if defined(__AVX__)
  if (sizeof(v) % 32 == 0) {
    for (unsigned k = 0; k < sizeof(v) / 32; ++k) {
      __m256i w;
      __builtin_memcpy(&w, (const char*)&v + 32 * k, 32);
      _mm256_stream_si256((__m256i*)((char*)p + 32 * k), w);
    }
    return;
  }
#endif
  kevo_store(p, v);
}
)");
}

std::string Repeat(int64_t count, const std::string& text) {
  std::string out;
  for (int64_t a = 0; a < count; ++a) {
    std::string line = text;
    for (size_t p; (p = line.find('#')) != std::string::npos;) line.replace(p, 1, std::to_string(a));
    out += line;
  }
  return out;
}

v1::Candidate SourceCandidate(std::string_view language, std::string source) {
  v1::Candidate candidate;
  candidate.set_language(std::string(language));
  candidate.set_source(std::move(source));
  return candidate;
}

bool BindEmbeddingBag(const v1::Task& task, EmbeddingBagShapes* b) {
  const std::string mode = Hint(task, "mode");
  if (Hint(task, "pattern") != "embedding_bag" || (mode != "sum" && mode != "mean")) return false;
  b->table = Hint(task, "table", "table");
  b->indices = Hint(task, "indices", "indices");
  b->lengths = Hint(task, "lengths", "lengths");
  b->out = Hint(task, "out", "out");
  b->d = Hint(task, "d", "D");
  b->bags = Hint(task, "bags", "B");
  b->mean = mode == "mean";
  const v1::TensorSpec* tt = FindInput(task, b->table);
  const v1::TensorSpec* ti = FindInput(task, b->indices);
  const v1::TensorSpec* tl = FindInput(task, b->lengths);
  const v1::TensorSpec* to = FindOutput(task, b->out);
  if (tt == nullptr || ti == nullptr || tl == nullptr || to == nullptr) return false;
  if (tt->dtype() != v1::F32 || ti->dtype() != v1::I64 || tl->dtype() != v1::I64 || to->dtype() != v1::F32) {
    return false;
  }
  for (const std::string& name : {b->table, b->indices, b->lengths, b->out}) {
    if (!IsSignatureParam(task, name)) return false;
  }
  return tt->shape_size() == 2 && tt->shape(1) == b->d && tl->shape_size() == 1 && tl->shape(0) == b->bags &&
         to->shape_size() == 2 && to->shape(0) == b->bags && to->shape(1) == b->d && ti->shape_size() == 1 &&
         IsSymbolParam(task, b->d) && IsSymbolParam(task, b->bags);
}

}  // namespace kevo::proposer
