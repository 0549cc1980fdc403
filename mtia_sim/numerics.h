// Number formats and the SIMD engine's lookup-table functions for the MTIA
// simulator: fp16/bf16 conversion (round to nearest even) and exp, log,
// reciprocal and friends computed the way a table unit does (a 64-entry table
// with linear interpolation, Newton steps where the hardware would add them),
// so that kernels see realistic, not libm, accuracy. Thread-safe (pure).
#pragma once

#include <cstdint>

#include "mtia_sim/mtia.h"

namespace kevo::mtia::internal {

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t h);

// Reads element `i` of a buffer of `t` as float / writes it with rounding
// (int8 saturates, int32 rounds to nearest).
float LoadAsFloat(const uint8_t* base, DType t, int64_t i);
void StoreFromFloat(uint8_t* base, DType t, int64_t i, float v);

// Lookup-table approximations (relative error about 1e-5 for exp/log/sigmoid/
// tanh, about 1e-8 for recip/rsqrt/sqrt after one Newton step).
float LutExp(float x);
float LutLog(float x);
float LutRecip(float x);
float LutRsqrt(float x);
float ApplyUnary(UnaryOp op, float x);
float ApplyBinary(BinaryOp op, float a, float b);

// SIMD passes a function costs per element (table lookups and Newton steps
// take extra passes).
int UnaryPasses(UnaryOp op);

}  // namespace kevo::mtia::internal
