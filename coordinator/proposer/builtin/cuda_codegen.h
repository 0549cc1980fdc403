// What the CUDA recipes (cuda_*.cc) share: the prelude every generated .cu
// starts with, and the candidate wrapper (language "cuda", for the nvidia
// platform's workers). Internal to kevo_builtin_proposer; pure, thread-safe.
#pragma once

#include <string>

#include "kevo/v1/evaluation.pb.h"

namespace kevo::proposer {

// The platform name CUDA recipes apply to.
inline constexpr char kCudaPlatform[] = "nvidia";

// Includes and the kevo_min / kevo_max / kevo_ceil_div helpers that
// ElementCountExpr uses, usable from host and device code.
extern const char kCudaPrelude[];

// A candidate of language "cuda" with `source`.
v1::Candidate CudaCandidate(std::string source);

}  // namespace kevo::proposer
