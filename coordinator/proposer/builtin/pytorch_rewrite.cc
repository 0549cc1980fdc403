// Recipe "pytorch_rewrite": for KernelBench-format tasks on the cpu and nvidia
// workers (on a GPU the threads parameter changes only the host side).
// The candidate is the problem's own source followed by a ModelNew that wraps
// its Model (built first in ModelNew.__init__, so it draws the same seeded
// parameters as the reference) and changes only how PyTorch runs it:
//   mode           eager | jit_trace (torch.jit.trace) | jit_freeze (trace +
//                  torch.jit.freeze, which folds constants and, for conv +
//                  batch norm, the norm into the weights) | jit_optimize
//                  (freeze + torch.jit.optimize_for_inference)
//   grad           no_grad | inference_mode around the call
//   threads        torch.set_num_threads at construction (default: leave it)
//   channels_last  4-D inputs and parameters in channels_last memory format,
//                  5-D ones in channels_last_3d (cuDNN's tensor-core
//                  convolutions work in these layouts; NCHW costs them
//                  transposes)
//   cudnn_benchmark torch.backends.cudnn.benchmark: cuDNN times its
//                  convolution algorithms for each shape on the first call
//                  (a validation call, never a timed one) and keeps the
//                  fastest, where by default it takes its heuristic's pick
//   float32_matmul torch.set_float32_matmul_precision: highest (PyTorch's
//                  default) or high (float32 GEMMs on TF32 tensor cores on
//                  an NVIDIA GPU; no effect on the CPU)
// Every variant computes the same function; whether it is faster, and whether
// it stays within the tolerance (a frozen graph may fold operations; TF32
// rounds the GEMM's operands to 10 mantissa bits), is what the worker
// measures on every seed. Freezing needs eval mode, so the jit_freeze and
// jit_optimize variants switch the model to eval(): for a model with dropout
// or batch norm in training mode that changes the answer, and validation
// rejects it.
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "common/task/kernelbench.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

// The Python appended to the problem's source. Each $NAME is replaced by the
// genome's value.
constexpr char kTemplate[] = R"PY(

# --- kevo builtin recipe pytorch_rewrite: ModelNew wraps the Model above ---
import torch as _kevo_torch

_KEVO_MODE = "$MODE"
_KEVO_THREADS = $THREADS
_KEVO_CHANNELS_LAST = $CHANNELS_LAST
_KEVO_FLOAT32_MATMUL = "$FLOAT32_MATMUL"
_KEVO_CUDNN_BENCHMARK = $CUDNN_BENCHMARK


def _kevo_channels_last(x):
    """A 4-D tensor in channels_last, a 5-D one in channels_last_3d; anything
    else as it is."""
    if not isinstance(x, _kevo_torch.Tensor):
        return x
    layout = {4: _kevo_torch.channels_last, 5: _kevo_torch.channels_last_3d}.get(x.dim())
    return x if layout is None else x.contiguous(memory_format=layout)


class ModelNew(_kevo_torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # First, so that it draws the same seeded parameters as the reference.
        self.model = Model(*args, **kwargs)
        if _KEVO_THREADS > 0:
            _kevo_torch.set_num_threads(_KEVO_THREADS)
        # This process's setting only: the baselines run in the judge's.
        _kevo_torch.set_float32_matmul_precision(_KEVO_FLOAT32_MATMUL)
        if _KEVO_CUDNN_BENCHMARK:
            _kevo_torch.backends.cudnn.benchmark = True
        if _KEVO_CHANNELS_LAST:
            # By hand: Module.to(memory_format=channels_last) refuses a 5-D
            # (Conv3d) weight. .cuda() later keeps the layout.
            with _kevo_torch.no_grad():
                for p in self.model.parameters():
                    p.data = _kevo_channels_last(p.data)
        self._compiled = None

    def _prepare(self, inputs):
        if not _KEVO_CHANNELS_LAST:
            return inputs
        return tuple(_kevo_channels_last(x) for x in inputs)

    def _compile(self, inputs):
        with _kevo_torch.no_grad():
            if _KEVO_MODE in ("jit_freeze", "jit_optimize"):
                self.model.eval()
            traced = _kevo_torch.jit.trace(self.model, inputs, check_trace=False)
            if _KEVO_MODE in ("jit_freeze", "jit_optimize"):
                traced = _kevo_torch.jit.freeze(traced)
            if _KEVO_MODE == "jit_optimize":
                traced = _kevo_torch.jit.optimize_for_inference(traced)
            # The profiling executor settles on its optimised graph after the
            # first runs: run them here, so every later call computes alike.
            for _ in range(3):
                traced(*inputs)
        return traced

    def forward(self, *inputs):
        inputs = self._prepare(inputs)
        with _kevo_torch.$GRAD():
            if _KEVO_MODE == "eager":
                return self.model(*inputs)
            if self._compiled is None:
                self._compiled = self._compile(inputs)
            return self._compiled(*inputs)
)PY";

class PytorchRewriteRecipe final : public Recipe {
 public:
  PytorchRewriteRecipe()
      : space_({
            {"mode",
             {"eager", "jit_trace", "jit_freeze", "jit_optimize"},
             "eager",
             "how the Model runs: eager, torch.jit.trace, trace + freeze, or freeze + "
             "optimize_for_inference"},
            {"grad", {"no_grad", "inference_mode"}, "inference_mode", "autograd mode around the call"},
            {"threads",
             {"0", "1", "2", "4", "8", "16"},
             "0",
             "torch.set_num_threads at construction (0: PyTorch's default)"},
            {"channels_last",
             {"off", "on"},
             "off",
             "4-D inputs and parameters in channels_last memory format, 5-D ones in channels_last_3d"},
            {"float32_matmul",
             {"highest", "high"},
             "highest",
             "torch.set_float32_matmul_precision: high runs float32 GEMMs on TF32 tensor cores (NVIDIA); "
             "validation decides whether the problem's tolerance allows it"},
            {"cudnn_benchmark",
             {"off", "on"},
             "off",
             "torch.backends.cudnn.benchmark: cuDNN times its convolution algorithms per shape and keeps "
             "the fastest (NVIDIA; no effect on the CPU)"},
        }) {}

  std::string name() const override { return "pytorch_rewrite"; }
  std::string family() const override { return "pytorch"; }
  std::string description() const override {
    return "KernelBench: ModelNew runs the problem's Model under inference_mode, torch.jit "
           "trace/freeze, another thread count, channels_last, TF32 GEMMs or cuDNN's autotuner";
  }
  const SearchSpace& space() const override { return space_; }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"mode", "jit_freeze"}}, {{"threads", "1"}}};
  }
  // On a GPU, TF32 first: the lever for every float32 GEMM (a 4096^2 one
  // runs on CUDA cores at about 50 TFLOP/s without it); host threads change
  // nothing there. On the CPU the setting computes as the default does.
  std::vector<std::map<std::string, std::string>> SeedOverridesOn(std::string_view platform) const override {
    if (platform != "nvidia") return SeedOverrides();
    return {{{"float32_matmul", "high"}}, {{"mode", "jit_freeze"}}};
  }

  // On a GPU, what the captured graph makes promising comes first (with one
  // GPU slot a job expands one child at a time):
  // - a parent without TF32 whose Model has a float32 GEMM (matmul, mm, bmm,
  //   addmm, baddbmm, einsum, linear, nn.Linear, and float32 attention, which
  //   runs on PyTorch's GEMMs) gets the TF32 child;
  // - a parent without cuDNN's autotuner whose Model has a convolution gets
  //   it, in the parent's layout. (Not with channels_last too: on an H100
  //   that child ran 0.21-0.64x of eager on seven of seven level-1 2-D
  //   convolutions, most with 3 or 16 input channels; docs/benchmarks.md.)
  std::vector<std::map<std::string, std::string>> DirectedMutations(const v1::Task& task, std::string_view platform,
                                                                    const Genome& parent) const override {
    if (platform != "nvidia") return {};
    static const auto* gemms =
        new std::set<std::string>{"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "Linear",
                                  // float32 attention runs PyTorch's math kernel: GEMMs
                                  "scaled_dot_product_attention"};
    static const auto* convs = new std::set<std::string>{
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",  "ConvTranspose2d",  "ConvTranspose3d"};
    bool gemm = false, conv = false;
    for (const v1::GraphNode& n : task.model_graph().nodes()) {
      if (n.dtype() != v1::F32) continue;
      gemm |= gemms->contains(n.target());
      conv |= convs->contains(n.target());
    }
    std::vector<std::map<std::string, std::string>> out;
    if (gemm && StrParam(parent, "float32_matmul") == "highest") out.push_back({{"float32_matmul", "high"}});
    if (conv && StrParam(parent, "cudnn_benchmark") == "off") out.push_back({{"cudnn_benchmark", "on"}});
    return out;
  }

  bool Applies(const v1::Task& task, std::string_view platform) const override {
    return (platform == "cpu" || platform == "nvidia") && task.format() == v1::TASK_FORMAT_KERNELBENCH &&
           task::LooksLikeKernelBench(task.reference().source());
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome));
    const std::string body = absl::StrReplaceAll(
        kTemplate, {{"$MODE", StrParam(genome, "mode")},
                    {"$GRAD", StrParam(genome, "grad")},
                    {"$THREADS", StrParam(genome, "threads")},
                    {"$CHANNELS_LAST", StrParam(genome, "channels_last") == "on" ? "True" : "False"},
                    {"$FLOAT32_MATMUL", StrParam(genome, "float32_matmul")},
                    {"$CUDNN_BENCHMARK", StrParam(genome, "cudnn_benchmark") == "on" ? "True" : "False"}});
    v1::Candidate candidate;
    candidate.set_language(task::kPythonLanguage);
    candidate.set_source(absl::StrCat("# Generated by kevo builtin recipe ", genome.ToString(),
                                      " from the KernelBench problem ", task.reference().file(), "\n",
                                      task.reference().source(), body));
    return candidate;
  }

 private:
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewPytorchRewriteRecipe() { return std::make_unique<PytorchRewriteRecipe>(); }

}  // namespace kevo::proposer
