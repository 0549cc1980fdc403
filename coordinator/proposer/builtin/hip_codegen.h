// What the HIP recipes (hip_*.cc, platform "amd") share: the prelude every
// generated source starts with and the candidate wrapper (language "hip").
// Internal to kevo_builtin_proposer; pure, thread-safe.
#pragma once

#include <string>

#include "kevo/v1/evaluation.pb.h"

namespace kevo::proposer {

// The platform name HIP recipes apply to.
inline constexpr char kHipPlatform[] = "amd";

// Includes, the wavefront width (kWave = 64 on CDNA) and the kevo_min /
// kevo_max / kevo_ceil_div helpers that ElementCountExpr uses, for host and
// device code; kevo_grid_blocks(per_cu) for grid-stride launches.
extern const char kHipPrelude[];

// A candidate of language "hip" with `source`.
v1::Candidate HipCandidate(std::string source);

}  // namespace kevo::proposer
