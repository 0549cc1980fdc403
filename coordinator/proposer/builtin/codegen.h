// Helpers the built-in recipes share to read a task's hints and to write
// candidate source: tensor and symbol lookup, the exported function's
// definition line, and genome checks. Internal to kevo_builtin_proposer.
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

// The hint `key`, or `fallback` when the task does not set it.
std::string Hint(const v1::Task& task, std::string_view key, std::string_view fallback = "");

const v1::TensorSpec* FindInput(const v1::Task& task, std::string_view name);
const v1::TensorSpec* FindOutput(const v1::Task& task, std::string_view name);
// True when `name` is a parameter of the task's signature that is a shape
// symbol (neither an input nor an output tensor).
bool IsSymbolParam(const v1::Task& task, std::string_view name);
// True when `name` is a parameter of the task's signature.
bool IsSignatureParam(const v1::Task& task, std::string_view name);

// The definition line of the exported function, without the body, e.g.
//   extern "C" void f(const float* __restrict x, float* __restrict y, int64_t n)
// (every pointer parameter __restrict when `restrict_pointers`). Returns
// InvalidArgument like RenderSignature for a bad signature.
absl::StatusOr<std::string> DefinitionLine(const v1::Task& task, bool restrict_pointers = true);

// A C expression of type int64_t computing the product of `spec`'s shape
// (symbols are the function's int64_t parameters). Uses kevo_min/kevo_max/
// kevo_ceil_div, which kPrelude defines.
std::string ElementCountExpr(const v1::TensorSpec& spec);

// Includes and helpers every generated source starts with.
extern const char kPrelude[];

// OK when `genome` names `recipe` and lies in its space; InvalidArgument
// otherwise. FailedPrecondition when the recipe does not apply to `task` on
// the CPU.
absl::Status CheckGenerate(const Recipe& recipe, const v1::Task& task, const Genome& genome,
                           std::string_view platform = "cpu");

// The integer value of `key` in `genome` (callers have checked the genome).
int64_t IntParam(const Genome& genome, const std::string& key);
const std::string& StrParam(const Genome& genome, const std::string& key);

// Replaces every whole-word occurrence of `word` in `text` with `with`.
std::string ReplaceWord(const std::string& text, const std::string& word, const std::string& with);

}  // namespace kevo::proposer
