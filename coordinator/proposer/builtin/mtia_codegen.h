// Helpers the built-in MTIA recipes (mtia_*.cc, language "mtia-c++", the
// candidate ABI of docs/mtia-simulator.md) share: signature positions, the
// candidate wrapper and the generated source's common head. Internal to
// kevo_builtin_proposer; pure and thread-safe.
#pragma once

#include <string>

#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

inline constexpr char kMtiaPlatform[] = "mtia-sim";

// Position of `name` in the task's signature, or -1.
int ParamIndex(const v1::Task& task, const std::string& name);

// An "mtia-c++" candidate with `source`.
inline v1::Candidate MtiaCandidate(std::string source) { return SourceCandidate("mtia-c++", std::move(source)); }

// The start of a generated MTIA kernel: a comment naming `genome` and
// saying `what`, the includes (std + mtia_sim/mtia.h), `using
// namespace kevo::mtia` and a Round32() helper, ending inside an anonymous
// namespace's closing line so recipes append their constants after it.
std::string MtiaPreamble(const Genome& genome, const std::string& what);

// `const Buffer name = *static_cast<const Buffer*>(args[index]);` (or the
// int64_t form for a symbol), indented for kevo_mtia_launch's body.
std::string MtiaBufferArg(const std::string& name, int index);
std::string MtiaIntArg(const std::string& name, int index);

}  // namespace kevo::proposer
