#include "mtia_sim/numerics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace kevo::mtia::internal {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr int kTableBits = 6;  // 64 intervals
constexpr int kTableSize = 1 << kTableBits;

// 2^(k/64), k = 0..64.
const std::array<float, kTableSize + 1>& Exp2Table() {
  static const auto t = [] {
    std::array<float, kTableSize + 1> a{};
    for (int k = 0; k <= kTableSize; ++k) a[k] = static_cast<float>(std::exp2(k / double{kTableSize}));
    return a;
  }();
  return t;
}
// log2(1 + k/64), k = 0..64.
const std::array<float, kTableSize + 1>& Log2Table() {
  static const auto t = [] {
    std::array<float, kTableSize + 1> a{};
    for (int k = 0; k <= kTableSize; ++k) a[k] = static_cast<float>(std::log2(1.0 + k / double{kTableSize}));
    return a;
  }();
  return t;
}
// 1 / (1 + k/64) and 1 / sqrt(1 + k/64) (and of 2 + 2k/64 for odd exponents).
const std::array<float, kTableSize + 1>& RecipTable() {
  static const auto t = [] {
    std::array<float, kTableSize + 1> a{};
    for (int k = 0; k <= kTableSize; ++k) a[k] = static_cast<float>(1.0 / (1.0 + k / double{kTableSize}));
    return a;
  }();
  return t;
}
const std::array<float, 2 * kTableSize + 1>& RsqrtTable() {
  static const auto t = [] {
    std::array<float, 2 * kTableSize + 1> a{};  // over [1, 4)
    for (int k = 0; k <= 2 * kTableSize; ++k) {
      a[k] = static_cast<float>(1.0 / std::sqrt(1.0 + 3.0 * k / (2.0 * kTableSize)));
    }
    return a;
  }();
  return t;
}

float Interp(const float* table, float pos) {
  int j = static_cast<int>(pos);
  float frac = pos - static_cast<float>(j);
  return table[j] + (table[j + 1] - table[j]) * frac;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x = Bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x007FFFFFu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF);
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x00800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return FromBits(sign);
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1F) return FromBits(sign | 0x7F800000u | (mant << 13));
  return FromBits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToBf16(float f) {
  uint32_t x = Bits(f);
  if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7FFFu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

float LoadAsFloat(const uint8_t* base, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, base + 4 * i, 4);
      return v;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return HalfToFloat(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return Bf16ToFloat(h);
    }
    case DType::kI8:
      return static_cast<float>(static_cast<int8_t>(base[i]));
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, base + 4 * i, 4);
      return static_cast<float>(v);
    }
  }
  return 0;
}

void StoreFromFloat(uint8_t* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32:
      std::memcpy(base + 4 * i, &v, 4);
      return;
    case DType::kF16: {
      uint16_t h = FloatToHalf(v);
      std::memcpy(base + 2 * i, &h, 2);
      return;
    }
    case DType::kBF16: {
      uint16_t h = FloatToBf16(v);
      std::memcpy(base + 2 * i, &h, 2);
      return;
    }
    case DType::kI8: {
      float r = std::isnan(v) ? 0.f : std::nearbyint(std::clamp(v, -128.f, 127.f));
      base[i] = static_cast<uint8_t>(static_cast<int8_t>(r));
      return;
    }
    case DType::kI32: {
      double r = std::isnan(v) ? 0.0 : std::nearbyint(std::clamp<double>(v, -2147483648.0, 2147483647.0));
      int32_t x = static_cast<int32_t>(r);
      std::memcpy(base + 4 * i, &x, 4);
      return;
    }
  }
}

float LutExp(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.72f) return std::numeric_limits<float>::infinity();
  if (x < -87.3f) return 0.f;  // the unit flushes denormal results
  float t = x * 1.44269504088896341f;
  float i = std::floor(t);
  float f = t - i;
  return std::ldexp(Interp(Exp2Table().data(), f * kTableSize), static_cast<int>(i));
}

float LutLog(float x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return x;
  int e;
  float m = std::frexp(x, &e);  // [0.5, 1)
  m *= 2.f;
  --e;
  float l2 = static_cast<float>(e) + Interp(Log2Table().data(), (m - 1.f) * kTableSize);
  return l2 * 0.693147180559945309f;
}

float LutRecip(float x) {
  if (std::isnan(x)) return x;
  if (x == 0) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (std::isinf(x)) return std::copysign(0.f, x);
  int e;
  float m = std::frexp(std::fabs(x), &e);  // [0.5, 1)
  m *= 2.f;
  --e;
  float y = Interp(RecipTable().data(), (m - 1.f) * kTableSize);
  y = y * (2.f - m * y);  // one Newton step
  y = std::ldexp(y, -e);
  return x < 0 ? -y : y;
}

float LutRsqrt(float x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0) return std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return 0.f;
  int e;
  float m = std::frexp(x, &e);  // [0.5, 1)
  m *= 2.f;
  --e;
  if (e & 1) {  // bring m into [1, 4) with an even exponent
    m *= 2.f;
    --e;
  }
  float y = Interp(RsqrtTable().data(), (m - 1.f) * (2.f * kTableSize / 3.f));
  y = y * (1.5f - 0.5f * m * y * y);  // one Newton step
  return std::ldexp(y, -e / 2);
}

float ApplyUnary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kCopy:
      return x;
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return std::fabs(x);
    case UnaryOp::kRelu:
      return x > 0 ? x : 0.f;
    case UnaryOp::kExp:
      return LutExp(x);
    case UnaryOp::kLog:
      return LutLog(x);
    case UnaryOp::kRecip:
      return LutRecip(x);
    case UnaryOp::kRsqrt:
      return LutRsqrt(x);
    case UnaryOp::kSqrt:
      return x == 0 ? 0.f : x * LutRsqrt(x);
    case UnaryOp::kSigmoid:
      return LutRecip(1.f + LutExp(-x));
    case UnaryOp::kTanh: {
      if (x > 10.f) return 1.f;
      if (x < -10.f) return -1.f;
      return 2.f * LutRecip(1.f + LutExp(-2.f * x)) - 1.f;
    }
  }
  return x;
}

float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a * LutRecip(b);
    case BinaryOp::kMax:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, b);
    case BinaryOp::kMin:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::min(a, b);
    case BinaryOp::kLe:
      return a <= b ? 1.f : 0.f;
    case BinaryOp::kLt:
      return a < b ? 1.f : 0.f;
    case BinaryOp::kGe:
      return a >= b ? 1.f : 0.f;
    case BinaryOp::kGt:
      return a > b ? 1.f : 0.f;
  }
  return a;
}

int UnaryPasses(UnaryOp op) {
  switch (op) {
    case UnaryOp::kCopy:
    case UnaryOp::kNeg:
    case UnaryOp::kAbs:
    case UnaryOp::kRelu:
      return 1;
    case UnaryOp::kExp:
    case UnaryOp::kLog:
    case UnaryOp::kRecip:
    case UnaryOp::kRsqrt:
    case UnaryOp::kSqrt:
      return 2;
    case UnaryOp::kSigmoid:
    case UnaryOp::kTanh:
      return 4;
  }
  return 1;
}

}  // namespace kevo::mtia::internal
