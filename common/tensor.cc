#include "common/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kevo {

size_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::F64:
    case v1::I64:
      return 8;
    case v1::F32:
    case v1::I32:
      return 4;
    case v1::F16:
    case v1::BF16:
      return 2;
    case v1::U8:
    case v1::I8:
      return 1;
    default:
      return 0;
  }
}

bool IsFloat(v1::DType dtype) { return dtype == v1::F32 || dtype == v1::F64 || dtype == v1::F16 || dtype == v1::BF16; }

std::string_view CTypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::F32:
      return "float";
    case v1::F64:
      return "double";
    case v1::F16:
      return "_Float16";
    case v1::BF16:
      return "uint16_t";
    case v1::I32:
      return "int32_t";
    case v1::I64:
      return "int64_t";
    case v1::U8:
      return "uint8_t";
    case v1::I8:
      return "int8_t";
    default:
      return "void";
  }
}

std::string_view DTypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::F32:
      return "f32";
    case v1::F64:
      return "f64";
    case v1::F16:
      return "f16";
    case v1::BF16:
      return "bf16";
    case v1::I32:
      return "i32";
    case v1::I64:
      return "i64";
    case v1::U8:
      return "u8";
    case v1::I8:
      return "i8";
    default:
      return "unspecified";
  }
}

SymbolValues BindingValues(const v1::Binding& binding) {
  SymbolValues values;
  for (const auto& [k, v] : binding.values()) values[k] = v;
  return values;
}

std::pair<double, double> WorkAtTimedBinding(const v1::Task& task) {
  const SymbolValues timed = BindingValues(task.time());
  double bytes = 0, flops = 0;
  if (!task.bytes_moved().empty()) {
    if (auto v = EvalExpr(task.bytes_moved(), timed); v.ok()) bytes = static_cast<double>(*v);
  }
  if (!task.flops().empty()) {
    if (auto v = EvalExpr(task.flops(), timed); v.ok()) flops = static_cast<double>(*v);
  }
  return {bytes, flops};
}

absl::StatusOr<std::vector<int64_t>> ResolveShape(const v1::TensorSpec& spec, const SymbolValues& symbols) {
  std::vector<int64_t> shape;
  for (const std::string& dim : spec.shape()) {
    auto v = EvalExpr(dim, symbols);
    if (!v.ok()) {
      return absl::Status(v.status().code(), absl::StrCat("tensor '", spec.name(), "': ", v.status().message()));
    }
    if (*v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", spec.name(), "': dimension \"", dim, "\" is negative (", *v, ")"));
    }
    shape.push_back(*v);
  }
  return shape;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<int64_t> CheckedNumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(shape, " x "), "] has more elements than int64 holds"));
    }
  }
  return n;
}

absl::StatusOr<int64_t> TensorBytes(const v1::TensorSpec& spec, const SymbolValues& symbols) {
  absl::StatusOr<std::vector<int64_t>> shape = ResolveShape(spec, symbols);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<int64_t> elements = CheckedNumElements(*shape);
  if (!elements.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(), "': ", elements.status().message()));
  }
  int64_t bytes;
  if (__builtin_mul_overflow(*elements, static_cast<int64_t>(DTypeSize(spec.dtype())), &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(), "': ", *elements, " elements of ",
                                                   std::string(DTypeName(spec.dtype())),
                                                   " are more bytes than int64 holds"));
  }
  return bytes;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  // One decimal ("1.5 KiB", "15.6 KiB"), none where it is whole ("16 GiB").
  const double rounded = std::round(v * 10) / 10;
  if (rounded == std::floor(rounded)) return absl::StrCat(static_cast<int64_t>(rounded), " ", kUnits[unit]);
  return absl::StrFormat("%.1f %s", rounded, kUnits[unit]);
}

uint64_t RngBits(uint64_t seed, uint64_t stream, uint64_t index) {
  // Two rounds of the splitmix64 finaliser over a mixed counter: a pure
  // function of its arguments, identical on every host.
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL ^ (stream + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL;
  z += (index + 1) * 0x94D049BB133111EBULL;
  for (int round = 0; round < 2; ++round) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
  }
  return z;
}

uint64_t TensorStream(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FF;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xFF;
  uint32_t mant = x & 0x7FFFFF;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into exp: correct
  return static_cast<uint16_t>(half);
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

namespace {

// Uniform double in [0, 1) with 53 random bits.
double Unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

void Store(v1::DType dtype, void* data, int64_t i, double v) {
  switch (dtype) {
    case v1::F32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      break;
    case v1::F64:
      static_cast<double*>(data)[i] = v;
      break;
    case v1::F16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case v1::BF16:
      static_cast<uint16_t*>(data)[i] = FloatToBf16(static_cast<float>(v));
      break;
    case v1::I32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
      break;
    case v1::I64:
      static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v);
      break;
    case v1::U8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
      break;
    case v1::I8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
      break;
    default:
      break;
  }
}

// Element i of an array of T that may not be aligned for T: an outputs file
// packs its tensors back to back, so an int64 output after an odd number of
// int32 values sits on a 4-byte boundary (UBSan's "misaligned address").
template <typename T>
T LoadAt(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

}  // namespace

double ElementAsDouble(v1::DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case v1::F32:
      return LoadAt<float>(data, i);
    case v1::F64:
      return LoadAt<double>(data, i);
    case v1::F16:
      return HalfToFloat(LoadAt<uint16_t>(data, i));
    case v1::BF16:
      return Bf16ToFloat(LoadAt<uint16_t>(data, i));
    case v1::I32:
      return LoadAt<int32_t>(data, i);
    case v1::I64:
      return static_cast<double>(LoadAt<int64_t>(data, i));
    case v1::U8:
      return LoadAt<uint8_t>(data, i);
    case v1::I8:
      return LoadAt<int8_t>(data, i);
    default:
      return 0;
  }
}

void FillTensor(const v1::TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed, void* data,
                const SymbolValues* symbols) {
  const int64_t n = NumElements(shape);
  const uint64_t stream = TensorStream(spec.name());
  const v1::Distribution& d = spec.distribution();
  const v1::DType dtype = spec.dtype();
  if (d.has_int_range() || (!IsFloat(dtype) && d.kind_case() == v1::Distribution::KIND_NOT_SET)) {
    int64_t lo = d.has_int_range() ? d.int_range().low() : 0;
    int64_t hi = d.has_int_range() ? d.int_range().high() : 100;
    if (symbols != nullptr && !d.int_range().low_expr().empty()) {
      if (auto v = EvalExpr(d.int_range().low_expr(), *symbols); v.ok()) lo = *v;
    }
    if (symbols != nullptr && !d.int_range().high_expr().empty()) {
      if (auto v = EvalExpr(d.int_range().high_expr(), *symbols); v.ok()) hi = *v;
    }
    if (hi < lo) hi = lo;
    // In unsigned arithmetic: hi - lo overflows int64 for a range wider than
    // 2^63 (feature_hash's [-2^62, 2^62]); a span of 0 is all 2^64 values.
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t bits = RngBits(seed, stream, i);
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(lo) + (span == 0 ? bits : bits % span));
      if (dtype == v1::I64)
        static_cast<int64_t*>(data)[i] = v;
      else
        Store(dtype, data, i, static_cast<double>(v));
    }
    return;
  }
  if (d.has_normal()) {
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 0; k < 12; ++k) sum += Unit(RngBits(seed, stream, static_cast<uint64_t>(i) * 12 + k));
      Store(dtype, data, i, d.normal().mean() + d.normal().stddev() * (sum - 6.0));
    }
    return;
  }
  double lo = -1, hi = 1;
  if (d.has_uniform()) lo = d.uniform().low(), hi = d.uniform().high();
  if (d.has_sorted_uniform()) lo = d.sorted_uniform().low(), hi = d.sorted_uniform().high();
  for (int64_t i = 0; i < n; ++i) Store(dtype, data, i, lo + (hi - lo) * Unit(RngBits(seed, stream, i)));
  if (d.has_sorted_uniform() && n > 0) {
    int64_t last = shape.empty() ? 1 : shape.back();
    if (last <= 0) return;
    for (int64_t row = 0; row < n / last; ++row) {
      std::vector<double> v(last);
      for (int64_t j = 0; j < last; ++j) v[j] = ElementAsDouble(dtype, data, row * last + j);
      std::sort(v.begin(), v.end());
      for (int64_t j = 0; j < last; ++j) Store(dtype, data, row * last + j, v[j]);
    }
  }
}

void PoisonTensor(v1::DType dtype, int64_t count, void* data) {
  if (!IsFloat(dtype)) {
    std::memset(data, 0x5A, count * DTypeSize(dtype));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case v1::F32:
        static_cast<float*>(data)[i] = std::numeric_limits<float>::quiet_NaN();
        break;
      case v1::F64:
        static_cast<double*>(data)[i] = std::numeric_limits<double>::quiet_NaN();
        break;
      default:
        static_cast<uint16_t*>(data)[i] = dtype == v1::F16 ? 0x7E00 : 0x7FC0;
        break;
    }
  }
}

Tolerances ToleranceFor(const v1::Task& task, v1::DType dtype) {
  for (const auto& t : task.tolerances()) {
    if (t.dtype() == dtype) return {t.atol(), t.rtol()};
  }
  switch (dtype) {
    case v1::F32:
      return {1e-4, 1e-4};
    case v1::F64:
      return {1e-9, 1e-9};
    case v1::F16:
    case v1::BF16:
      return {1e-2, 1e-2};
    default:
      return {0, 0};
  }
}

CompareResult CompareTensors(v1::DType dtype, const void* got, const void* want, int64_t count, Tolerances tol) {
  CompareResult r;
  const bool is_float = IsFloat(dtype);
  for (int64_t i = 0; i < count; ++i) {
    bool bad = false;
    if (!is_float) {
      if (dtype == v1::I64) {
        const int64_t g = LoadAt<int64_t>(got, i), w = LoadAt<int64_t>(want, i);
        bad = g != w;
        if (bad) r.max_abs_err = std::max(r.max_abs_err, std::fabs(static_cast<double>(g) - static_cast<double>(w)));
      } else {
        double g = ElementAsDouble(dtype, got, i), w = ElementAsDouble(dtype, want, i);
        bad = g != w;
        if (bad) r.max_abs_err = std::max(r.max_abs_err, std::fabs(g - w));
      }
    } else {
      double g = ElementAsDouble(dtype, got, i), w = ElementAsDouble(dtype, want, i);
      if (!std::isfinite(w)) {
        bad = !(std::isnan(w) ? std::isnan(g) : g == w);
      } else if (!std::isfinite(g)) {
        bad = true;
        r.nonfinite = true;
      } else {
        double abs_err = std::fabs(g - w);
        double rel_err = abs_err / std::max(std::fabs(w), 1e-30);
        r.max_abs_err = std::max(r.max_abs_err, abs_err);
        if (abs_err > tol.atol) r.max_rel_err = std::max(r.max_rel_err, rel_err);
        bad = abs_err > tol.atol + tol.rtol * std::fabs(w);
      }
    }
    if (bad) {
      if (r.first_bad_index < 0) r.first_bad_index = i;
      ++r.bad_count;
      r.ok = false;
    }
  }
  return r;
}

absl::StatusOr<std::string> RenderSignature(const v1::Task& task) {
  std::vector<std::string> params;
  for (const std::string& p : task.signature().params()) {
    const v1::TensorSpec* found = nullptr;
    bool is_input = false;
    for (const auto& t : task.inputs()) {
      if (t.name() == p) found = &t, is_input = true;
    }
    for (const auto& t : task.outputs()) {
      if (t.name() == p) found = &t;
    }
    if (found != nullptr) {
      params.push_back(absl::StrCat(is_input ? "const " : "", std::string(CTypeName(found->dtype())), "* ", p));
      continue;
    }
    bool is_symbol = false;
    auto check = [&](const v1::TensorSpec& t) {
      for (const std::string& dim : t.shape()) {
        auto syms = ExprSymbols(dim);
        if (syms.ok() && std::find(syms->begin(), syms->end(), p) != syms->end()) is_symbol = true;
      }
    };
    for (const auto& t : task.inputs()) check(t);
    for (const auto& t : task.outputs()) check(t);
    for (const auto& b : task.validate()) is_symbol |= b.values().contains(p);
    if (!is_symbol) {
      return absl::InvalidArgumentError(
          absl::StrCat("signature parameter '", p, "' names no input, output or shape symbol"));
    }
    params.push_back(absl::StrCat("int64_t ", p));
  }
  return absl::StrCat("extern \"C\" void ", task.signature().function(), "(", absl::StrJoin(params, ", "), ");");
}

}  // namespace kevo
