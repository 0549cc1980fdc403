#include "coordinator/llm/prompt.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "common/expr.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"

namespace kevo::llm {
namespace {

// Drop ranks: kind * kKindStride + position within the kind.
constexpr int kKindStride = 1000;
constexpr size_t kMaxDocBytes = 6000;  // one knowledge-base document
constexpr size_t kMaxReferenceBytes = 16000;
constexpr int kMaxCompilerRestLines = 200;
constexpr int kMaxFailingCases = 3;

int KindRank(const std::string& kind) {
  const auto& order = TrimOrder();
  auto it = std::find(order.begin(), order.end(), kind);
  return static_cast<int>(it - order.begin()) + 1;
}

int DropRank(const std::string& kind, int position) {
  return KindRank(kind) * kKindStride + std::clamp(position, 0, kKindStride - 1);
}

struct PlatformInfo {
  std::string description;  // for the role line
  std::string language;     // Candidate::language
  std::string fence;        // the fence the answer must use
  std::string instructions;
};

const std::map<std::string, PlatformInfo>& Platforms() {
  static const auto* platforms = new std::map<std::string, PlatformInfo>{
      {"cpu",
       {"x86-64 CPUs", "c++", "cpp",
        "Platform: cpu. Language: C++20, compiled as a shared object with `g++ -O3 -march=native "
        "-fopenmp -fPIC -shared`. Use SIMD (GCC vector extensions, or <immintrin.h> intrinsics "
        "guarded by the macros -march=native defines, e.g. __AVX2__, __AVX512F__), cache "
        "blocking, unrolling and `#pragma omp parallel for` over independent work (the worker "
        "has several cores; OpenMP is the only threading allowed). The kernel runs in a "
        "sandbox that allows only math, memory, OpenMP and C++ runtime imports: no I/O, no "
        "system calls, no std::thread. Shapes are runtime values: handle tails."}},
      {"nvidia",
       {"NVIDIA GPUs", "cuda", "cuda",
        "Platform: nvidia. Language: CUDA C++ (`nvcc -O3` for the GPU's architecture, "
        "`--cudart shared`). The exported function is a host function whose pointers are "
        "device pointers; it launches your own __global__ kernels (any stream) and need not "
        "synchronise: the runner synchronises the device after every call. Shapes are runtime "
        "values: guard tails. Coalesce global accesses, tile through shared memory, reduce with "
        "warp shuffles, use vector loads (float4) when aligned, and size blocks for occupancy. "
        "No cuBLAS, cuDNN, CUTLASS, CUB or Thrust calls."}},
      {"mtia-sim",
       {"Meta's MTIA accelerator (kevo's cycle-level simulator of MTIA 2i)", "mtia-c++", "cpp",
        "Platform: mtia-sim. Language: mtia-c++: C++20 that includes only "
        "\"mtia_sim/mtia.h\" (namespace kevo::mtia), compiled with `g++ -std=c++20 -O2 "
        "-shared -fPIC`. The kernel exports `extern \"C\" void kevo_mtia_launch(kevo::mtia::Grid& "
        "grid, void** args);` instead of the C signature: args[i] follows the signature's "
        "parameter order, a tensor parameter points to a kevo::mtia::Buffer in simulated DRAM "
        "and an integer parameter to an int64_t. Call grid.Launch([=](Pe& pe) { ... }) one or "
        "more times; every PE (pe.id() from 0 to grid.config().num_pes() - 1) runs the lambda. "
        "Data is touched only through the units: pe.Alloc(bytes) gives local SRAM, "
        "pe.Copy(dst, src) / pe.Copy2D(...) start DMA and return a Token (pe.Wait(token)), "
        "Tile::Of(buffer, DType::kF32, rows, cols) views a buffer, pe.Unary / Binary / "
        "BinaryRow / BinaryCol / BinaryScalar run on the SIMD engine, pe.ReduceRows / "
        "ReduceCols on the reduction engine, pe.MatMul on the DPE (fp16/bf16/int8), "
        "pe.Barrier() synchronises PEs. Time is the simulator's cycle model: spread the work "
        "over all PEs, overlap DMA with compute (double buffering), keep transfers large and "
        "aligned. The task's naive MTIA baseline below shows the API in use."}},
      {"amd",
       {"AMD GPUs (CDNA)", "hip", "hip",
        "Platform: amd. Language: HIP C++ (`hipcc -O3 --offload-arch=gfx90a` or gfx942). The "
        "exported function is a host function whose pointers are device pointers; it launches "
        "your own __global__ kernels (hipLaunchKernelGGL or <<<>>>) and need not synchronise. "
        "Wavefronts are 64 lanes; LDS is 64 KiB per CU; avoid VGPR spills, which cost "
        "occupancy. Compile-only workers report VGPR/SGPR/LDS use and occupancy instead of a "
        "time. No rocBLAS, hipBLAS, MIOpen or rocPRIM calls."}},
  };
  return *platforms;
}

std::string Fenced(const std::string& fence, const std::string& code) {
  std::string body = code;
  if (body.empty() || body.back() != '\n') body += '\n';
  return absl::StrCat("```", fence, "\n", body, "```\n");
}

std::string Clip(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return absl::StrCat(text.substr(0, max_bytes), "\n[... ", text.size() - max_bytes, " more bytes cut]\n");
}

std::string BindingText(const v1::Binding& b) {
  std::vector<std::string> values;
  for (const auto& [k, v] : BindingValues(b)) values.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(b.name(), " {", absl::StrJoin(values, ", "), "}");
}

std::string TensorText(const v1::TensorSpec& t) {
  return absl::StrCat(t.name(), ": ", std::string(DTypeName(t.dtype())), "[", absl::StrJoin(t.shape(), ", "), "]");
}

std::string FormatTime(double seconds) {
  if (seconds <= 0) return "-";
  if (seconds < 1e-3) return absl::StrFormat("%.2f us", seconds * 1e6);
  if (seconds < 1) return absl::StrFormat("%.3f ms", seconds * 1e3);
  return absl::StrFormat("%.3f s", seconds);
}

std::string TaskText(const v1::Task& task, const std::string& signature) {
  std::string out = absl::StrCat("## Task: ", task.name(), " (op family ", task.op_family(), ")\n", task.description(),
                                 "\n\nSignature: ", signature, "\n");
  std::vector<std::string> ins, outs, validate;
  for (const auto& t : task.inputs()) ins.push_back(TensorText(t));
  for (const auto& t : task.outputs()) outs.push_back(TensorText(t));
  for (const auto& b : task.validate()) validate.push_back(BindingText(b));
  absl::StrAppend(&out, "Inputs (read-only): ", absl::StrJoin(ins, "; "), "\n");
  absl::StrAppend(&out, "Outputs: ", absl::StrJoin(outs, "; "), "\n");
  absl::StrAppend(&out, "Validated on: ", absl::StrJoin(validate, "; "), " (several seeds each)\n");
  absl::StrAppend(&out, "Timed on: ", BindingText(task.time()), "\n");
  std::vector<std::string> tolerances;
  for (const auto& t : task.tolerances()) {
    tolerances.push_back(absl::StrFormat("%s atol %g rtol %g", std::string(DTypeName(t.dtype())), t.atol(), t.rtol()));
  }
  if (!tolerances.empty()) absl::StrAppend(&out, "Tolerances: ", absl::StrJoin(tolerances, "; "), "\n");
  auto [bytes, flops] = WorkAtTimedBinding(task);
  if (bytes > 0 || flops > 0) {
    absl::StrAppend(&out, absl::StrFormat("Work per call at the timed shape: %.0f bytes moved (%s), %.0f flops (%s)\n",
                                          bytes, task.bytes_moved(), flops, task.flops()));
  }
  return out;
}

// The platform's own baseline source (reference_mtia.cc, reference.cu), if
// the task carries one.
const v1::Reference* PlatformReference(const v1::Task& task, const std::string& language) {
  for (const auto& r : task.extra_references()) {
    if (r.language() == language && !r.source().empty()) return &r;
  }
  return nullptr;
}

std::string CaseText(const v1::CaseResult& c) {
  std::string out = absl::StrCat("- ", c.binding(), " seed ", c.seed(), ": ", v1::EvalStatus_Name(c.status()));
  if (!c.output().empty()) absl::StrAppend(&out, ", output ", c.output());
  absl::StrAppend(&out, absl::StrFormat(", max abs error %g, max rel error %g", c.max_abs_err(), c.max_rel_err()));
  if (c.first_bad_index() >= 0) absl::StrAppend(&out, ", first bad index ", c.first_bad_index());
  if (!c.detail().empty()) absl::StrAppend(&out, " (", c.detail(), ")");
  return out + "\n";
}

// Splits the compiler output: the first `lines` lines, and the rest (capped).
std::pair<std::string, std::string> SplitCompilerOutput(const std::string& text, int lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  const size_t head_n = std::min(all.size(), static_cast<size_t>(std::max(0, lines)));
  std::vector<std::string> head(all.begin(), all.begin() + static_cast<long>(head_n));
  std::vector<std::string> rest(all.begin() + static_cast<long>(head_n), all.end());
  std::string rest_text;
  if (rest.size() > static_cast<size_t>(kMaxCompilerRestLines)) {
    const size_t cut = rest.size() - kMaxCompilerRestLines;
    rest.resize(kMaxCompilerRestLines);
    rest_text = absl::StrCat(absl::StrJoin(rest, "\n"), "\n[... ", cut, " more lines cut]\n");
  } else if (!rest.empty()) {
    rest_text = absl::StrCat(absl::StrJoin(rest, "\n"), "\n");
  }
  return {head.empty() ? "" : absl::StrCat(absl::StrJoin(head, "\n"), "\n"), rest_text};
}

std::string FeedbackText(const v1::Task& task, const proposer::ParentInfo& parent, const std::string& compiler_head,
                         bool compiler_cut) {
  const v1::Evaluation& e = parent.evaluation;
  std::string out = absl::StrCat("## What its evaluation said\nStatus: ", v1::EvalStatus_Name(e.status()), "\n");
  if (!e.diagnostics().message().empty()) {
    absl::StrAppend(&out, "Message: ", e.diagnostics().message(), "\n");
  }
  if (!e.diagnostics().violation().empty()) {
    absl::StrAppend(&out, "Forbidden symbol or system call: ", e.diagnostics().violation(), "\n");
  }
  if (!compiler_head.empty()) {
    absl::StrAppend(&out, "Compiler output", compiler_cut ? " (first lines)" : "", ":\n```\n", compiler_head, "```\n");
  }
  int failing = 0, total_failing = 0;
  std::string cases;
  for (const auto& c : e.validation()) {
    if (c.status() == v1::OK) continue;
    ++total_failing;
    if (failing++ < kMaxFailingCases) cases += CaseText(c);
  }
  if (total_failing > 0) {
    absl::StrAppend(&out, "Failing validation cases (", total_failing, " of ", e.validation_size(), "):\n", cases);
  }
  if (e.status() == v1::OK) {
    absl::StrAppend(&out, "Time: ", FormatTime(e.timing().median_s()), " median (spread ",
                    absl::StrFormat("%.1f%%", 100 * e.timing().spread()), "); baseline ",
                    FormatTime(e.baseline().median_s()), "; speedup ", absl::StrFormat("%.2fx", e.speedup()), "; ",
                    absl::StrFormat("%.1f%%", 100 * e.roofline_fraction()),
                    " of the roofline (bytes over bandwidth, flops over peak)\n");
  }
  const std::string label = BottleneckLabel(task, e);
  if (!label.empty()) absl::StrAppend(&out, "Bottleneck: ", label, "\n");
  return out;
}

std::string ProfileText(const v1::Evaluation& e) {
  std::map<std::string, double> sorted(e.profile().begin(), e.profile().end());
  std::vector<std::string> items;
  for (const auto& [k, v] : sorted) items.push_back(absl::StrFormat("%s=%g", k, v));
  return absl::StrCat("Profile counters: ", absl::StrJoin(items, ", "), "\n");
}

std::string SiblingText(const proposer::ChildInfo& c) {
  std::string out = absl::StrCat("- ", c.node_id, " (", c.proposer.empty() ? "?" : c.proposer,
                                 c.mutation.empty() ? "" : absl::StrCat(", ", c.mutation), "): ");
  if (c.status == v1::EVAL_STATUS_UNSPECIFIED) {
    absl::StrAppend(&out, "still being evaluated");
  } else if (c.status == v1::OK) {
    absl::StrAppend(&out, absl::StrFormat("OK, %.2fx", c.fitness));
  } else {
    absl::StrAppend(&out, v1::EvalStatus_Name(c.status));
  }
  if (!c.message.empty()) absl::StrAppend(&out, " - ", Clip(c.message, 300));
  return out + "\n";
}

std::string SkillText(const skills::Skill& s) {
  std::string out =
      absl::StrFormat("- %s (%s, %s): x%.2f mean gain over %d improving step%s", s.transformation, s.platform, s.family,
                      s.mean_gain, s.evidence_count, s.evidence_count == 1 ? "" : "s");
  if (!s.summary.empty()) absl::StrAppend(&out, " - ", s.summary);
  return out + "\n";
}

int64_t EstimateTokens(size_t bytes) { return static_cast<int64_t>((bytes + 3) / 4); }

// A part and the section header printed before the first included part of
// its section.
struct Piece {
  PromptPart part;
  std::string section;  // "" for none
  bool included = true;
};

std::string Assemble(const std::vector<Piece>& pieces) {
  std::string out;
  std::string last_section;
  for (const Piece& p : pieces) {
    if (!p.included) continue;
    if (!p.section.empty() && p.section != last_section) absl::StrAppend(&out, p.section);
    last_section = p.section;
    absl::StrAppend(&out, p.part.text, "\n");
  }
  return out;
}

}  // namespace

const std::vector<std::string>& TrimOrder() {
  static const auto* order =
      new std::vector<std::string>{"profile", "kb", "skills", "siblings", "reference", "compiler_rest"};
  return *order;
}

absl::StatusOr<std::string> CandidateLanguage(const std::string& platform) {
  auto it = Platforms().find(platform);
  if (it == Platforms().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the LLM proposer knows no platform '", platform, "' (known: cpu, nvidia, mtia-sim, amd)"));
  }
  return it->second.language;
}

std::vector<std::string> AnswerLanguages(const std::string& platform) {
  if (platform == "nvidia") return {"cuda", "cpp"};
  if (platform == "amd") return {"hip", "cpp"};
  return {"cpp", "c"};
}

std::string BottleneckLabel(const v1::Task& task, const v1::Evaluation& e) {
  switch (e.status()) {
    case v1::COMPILE_ERROR:
    case v1::COMPILE_TIMEOUT:
      return "compile";
    case v1::WRONG_ANSWER:
    case v1::INPUT_MODIFIED:
    case v1::NONDETERMINISTIC:
    case v1::SUSPICIOUS:  // faster than the device: it does not do the work it should
      return "wrong-answer";
    case v1::NONFINITE:
      return "nan";
    case v1::RUNTIME_ERROR:
    case v1::SANDBOX_VIOLATION:
    case v1::RESOURCE_EXHAUSTED:
    case v1::QUARANTINED:  // it ended the workers it ran on
      return "crash";
    case v1::RUN_TIMEOUT:
      return "timeout";
    case v1::OK:
      break;
    default:
      return "";
  }
  // The simulator measures its units: the busier of DRAM and the PEs limits.
  auto dram = e.profile().find("dram_utilization");
  auto pe = e.profile().find("pe_utilization");
  if (dram != e.profile().end() && pe != e.profile().end()) {
    if (dram->second < 0.2 && pe->second < 0.2) return "latency";
    return dram->second >= pe->second ? "memory" : "compute";
  }
  // Elsewhere: a short call far from the roofline is dominated by fixed
  // costs; otherwise the arithmetic intensity against a typical machine
  // balance (about 8 flops per byte on CPUs and GPUs alike) decides.
  if (e.timing().median_s() > 0 && e.timing().median_s() < 20e-6 && e.roofline_fraction() < 0.1) {
    return "latency";
  }
  auto [bytes, flops] = WorkAtTimedBinding(task);
  if (bytes <= 0 && flops <= 0) return "";
  return flops < 8 * bytes ? "memory" : "compute";
}

kb::KbQuery KnowledgeQuery(const v1::Task& task, const std::string& platform, const std::string& bottleneck,
                           const std::string& diagnostics, int limit) {
  kb::KbQuery q;
  q.text = absl::StrCat(task.name(), " ", task.op_family(), " ", bottleneck);
  if (!diagnostics.empty()) absl::StrAppend(&q.text, " ", diagnostics);
  q.context = task.description();
  q.platform = platform;
  q.family = task.op_family();
  q.bottleneck = bottleneck;
  q.limit = limit;
  return q;
}

absl::StatusOr<Prompt> BuildPrompt(const PromptInputs& in, const PromptOptions& options) {
  if (in.task == nullptr) return absl::InvalidArgumentError("BuildPrompt: no task");
  auto platform_it = Platforms().find(in.platform);
  if (platform_it == Platforms().end()) return CandidateLanguage(in.platform).status();
  const PlatformInfo& platform = platform_it->second;
  const v1::Task task = kevo::task::TimedOn(*in.task, in.platform);  // timed as this platform times it
  auto rendered = RenderSignature(task);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task.name(), ": cannot render its signature: ", rendered.status().message()));
  }
  const std::string signature = *rendered;
  const bool mtia = in.platform == "mtia-sim";
  const int candidates = std::max(1, in.candidates);

  // ---- The system message: never trimmed.
  std::string system =
      absl::StrCat("You are an expert performance engineer who writes compute kernels for ", platform.description,
                   ". You improve one kernel for one task. kevo compiles every candidate you write, validates "
                   "it against the reference on several shapes (odd sizes included) and seeds, with outputs "
                   "pre-filled with NaN and inputs hashed before and after the call, times the correct ones "
                   "against the baseline, and keeps the fastest.\n\n"
                   "Constraints (a candidate that breaks one is rejected):\n");
  if (mtia) {
    absl::StrAppend(&system,
                    "1. Export exactly `extern \"C\" void kevo_mtia_launch(kevo::mtia::Grid& grid, "
                    "void** args);`; args follow this C signature's parameter order: ",
                    signature, "\n");
  } else {
    absl::StrAppend(&system, "1. Export exactly this function, with C linkage: ", signature, "\n");
  }
  absl::StrAppend(
      &system,
      "2. No vendor-library calls inside the kernel (no BLAS, cuBLAS, cuDNN, MKL, oneDNN, rocBLAS, "
      "Eigen, PyTorch): write the computation yourself.\n"
      "3. Never modify the inputs, keep no state between calls, do no I/O and no system calls.\n"
      "4. Outputs must match the reference within the task's tolerances on every validated shape.\n",
      absl::StrFormat("5. Answer format: %d candidate%s, each a line `Transformation: <a few words on what you "
                      "changed>` followed by one fenced block ```%s holding the complete source file "
                      "(includes and all). No other code blocks; keep the prose short.\n\n",
                      candidates, candidates == 1 ? "" : "s", platform.fence),
      platform.instructions, "\n");

  // ---- The user message: parts, some optional.
  std::vector<Piece> pieces;
  auto add = [&pieces](std::string name, std::string text, int drop_rank, std::string section = "") {
    pieces.push_back(Piece{PromptPart{std::move(name), std::move(text), drop_rank}, std::move(section)});
  };
  add("task", TaskText(task, signature), 0);

  const proposer::ParentInfo* parent = in.parent;
  const bool has_parent = parent != nullptr && !parent->candidate.source().empty();
  const v1::Reference* platform_ref = PlatformReference(task, platform.language);
  // Without a parent, the kernel to improve is the platform's baseline (or
  // the reference): mandatory.
  const int reference_rank = has_parent ? DropRank("reference", 0) : 0;
  add("reference",
      absl::StrCat("## Reference (", task.reference().language(), ", defines correctness)\n",
                   Fenced("cpp", Clip(task.reference().source(), kMaxReferenceBytes))),
      platform_ref != nullptr ? DropRank("reference", 1) : reference_rank);
  if (platform_ref != nullptr) {
    add("platform_reference",
        absl::StrCat("## The platform's naive baseline (", platform_ref->language(),
                     has_parent ? "" : "; improve this one", ")\n",
                     Fenced(platform.fence, Clip(platform_ref->source(), kMaxReferenceBytes))),
        reference_rank);
  }

  if (has_parent) {
    std::string head = absl::StrCat("## The kernel to improve (node ", parent->node_id);
    if (parent->fitness > 0) absl::StrAppend(&head, absl::StrFormat(", %.2fx over the baseline", parent->fitness));
    if (!parent->genome.recipe.empty()) absl::StrAppend(&head, ", built-in recipe ", parent->genome.ToString());
    absl::StrAppend(&head, ")\n", Fenced(platform.fence, parent->candidate.source()));
    if (parent->candidate.extra_flags_size() > 0) {
      absl::StrAppend(&head, "Extra compiler flags: ", absl::StrJoin(parent->candidate.extra_flags(), " "), "\n");
    }
    add("parent", head, 0);
    if (parent->evaluation.status() != v1::EVAL_STATUS_UNSPECIFIED) {
      auto [compiler_head, compiler_rest] =
          SplitCompilerOutput(parent->evaluation.diagnostics().compiler_output(), options.compiler_lines);
      add("feedback", FeedbackText(task, *parent, compiler_head, !compiler_rest.empty()), 0);
      if (!compiler_rest.empty()) {
        add("compiler_rest", absl::StrCat("Compiler output, continued:\n```\n", compiler_rest, "```\n"),
            DropRank("compiler_rest", 0));
      }
      if (!parent->evaluation.profile().empty()) {
        add("profile", ProfileText(parent->evaluation), DropRank("profile", 0));
      }
    }
    const int n = static_cast<int>(parent->children.size());
    for (int i = 0; i < n; ++i) {  // oldest first, dropped first
      add(absl::StrCat("sibling:", parent->children[i].node_id), SiblingText(parent->children[i]),
          DropRank("siblings", i), "## Already tried from this kernel (do not repeat these)\n");
    }
  }

  const int docs = static_cast<int>(in.documents.size());
  for (int i = 0; i < docs; ++i) {  // best first; the weakest is dropped first
    const kb::KbDoc& d = in.documents[i];
    add(absl::StrCat("kb:", d.id),
        absl::StrCat("### ", d.title.empty() ? d.id : d.title, " (", d.id, ")\n", Clip(d.text, kMaxDocBytes)),
        DropRank("kb", docs - 1 - i), "## Hardware and optimisation notes (knowledge base)\n");
  }
  const int skill_n = static_cast<int>(in.skills.size());
  for (int i = 0; i < skill_n; ++i) {
    add(absl::StrCat("skill:", in.skills[i].transformation), SkillText(in.skills[i]),
        DropRank("skills", skill_n - 1 - i), "## What raised fitness in earlier jobs (skills)\n");
  }
  add("request",
      absl::StrFormat("## Your answer\nWrite %d improved candidate%s for the %s platform, as the "
                      "answer format says. %s",
                      candidates, candidates == 1 ? "" : "s", in.platform,
                      has_parent && parent->evaluation.status() != v1::OK &&
                              parent->evaluation.status() != v1::EVAL_STATUS_UNSPECIFIED
                          ? "First make the kernel correct: fix what the evaluation reported."
                          : "Make them faster than the kernel above while staying correct."),
      0);

  // ---- Fit the budget: drop optional parts, lowest rank first.
  auto estimate = [&] { return EstimateTokens(system.size() + Assemble(pieces).size()); };
  Prompt prompt;
  int64_t tokens = estimate();
  while (tokens > options.token_budget) {
    Piece* victim = nullptr;
    for (Piece& p : pieces) {
      if (!p.included || p.part.drop_rank == 0) continue;
      if (victim == nullptr || p.part.drop_rank < victim->part.drop_rank) victim = &p;
    }
    if (victim == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("task %s: the prompt's mandatory parts need about %d tokens, over the budget of %d "
                          "(raise the prompt token budget)",
                          task.name(), tokens, options.token_budget));
    }
    victim->included = false;
    prompt.dropped.push_back(victim->part.name);
    tokens = estimate();
  }
  for (const Piece& p : pieces) {
    if (p.included) prompt.included.push_back(p.part.name);
  }
  prompt.messages.push_back(ChatMessage{"system", system});
  prompt.messages.push_back(ChatMessage{"user", Assemble(pieces)});
  prompt.estimated_tokens = tokens;
  return prompt;
}

}  // namespace kevo::llm
