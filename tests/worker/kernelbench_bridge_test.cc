// The KernelBench bridge end to end on the cpu worker: the worker captures a
// problem's Model as an operator graph (kevo-runner-kernelbench capture), and
// the built-in proposer's kb_* recipes turn the nodes kevo has recipes for
// into kernels inside a ModelNew that the worker judges like any candidate.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/task/kernelbench.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/worker/kernelbench_testing.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

class KernelBenchBridgeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = kb_testing::NewKernelBenchBackend("kernelbench_bridge_test");
    ASSERT_NE(backend_, nullptr);
  }
  static void TearDownTestSuite() { delete backend_; }

  static v1::Task Problem(const std::string& name) { return kb_testing::LoadProblem(name); }

  // The problem's own Model as the candidate: correct by construction; its
  // evaluation brings the graph (the first on this worker for the problem,
  // kept here for the suite's later tests).
  static v1::ModelGraph Capture(const v1::Task& task) {
    static auto* graphs = new std::map<std::string, v1::ModelGraph>();
    if (auto it = graphs->find(task.name()); it != graphs->end()) return it->second;
    v1::Candidate itself;
    itself.set_language("python");
    itself.set_source(absl::StrCat(task.reference().source(), "\nModelNew = Model\n"));
    v1::Evaluation ev = backend_->Evaluate(task, itself, nullptr);
    EXPECT_EQ(ev.status(), v1::OK) << kb_testing::ExplainKernelBench(ev);
    EXPECT_TRUE(ev.has_model_graph()) << "the first evaluation of a problem on a worker carries its graph";
    (*graphs)[task.name()] = ev.model_graph();
    return ev.model_graph();
  }

  // `genome`'s candidate for `task`, judged on the worker (OK expected); its
  // source ("" once a failure is recorded).
  static std::string JudgedSource(const v1::Task& task, const std::string& genome) {
    absl::StatusOr<proposer::Genome> g = proposer::Genome::FromString(genome);
    const proposer::Recipe* recipe = g.ok() ? proposer::FindRecipe(g->recipe) : nullptr;
    if (recipe == nullptr) {
      ADD_FAILURE() << genome << ": " << (g.ok() ? "no such recipe" : g.status().ToString());
      return "";
    }
    absl::StatusOr<v1::Candidate> c = recipe->Generate(task, *g);
    if (!c.ok()) {
      ADD_FAILURE() << genome << ": " << c.status();
      return "";
    }
    v1::Evaluation ev = backend_->Evaluate(task, *c, nullptr);
    EXPECT_EQ(ev.status(), v1::OK) << genome << ": " << kb_testing::ExplainKernelBench(ev);
    return c->source();
  }

  static const v1::GraphNode* Node(const v1::ModelGraph& g, const std::string& name) {
    for (const v1::GraphNode& n : g.nodes()) {
      if (n.name() == name) return &n;
    }
    return nullptr;
  }

  // Every bridge recipe that applies, its default genome's candidate judged.
  static std::map<std::string, v1::Evaluation> EvaluateBridges(const v1::Task& task) {
    std::map<std::string, v1::Evaluation> out;
    for (const auto& r : proposer::AllRecipes()) {
      if (r->name().rfind("kb_", 0) != 0 || !r->Applies(task, "cpu")) continue;
      absl::StatusOr<v1::Candidate> c = r->Generate(task, proposer::Genome{r->name(), r->space().Defaults()});
      EXPECT_TRUE(c.ok()) << r->name() << ": " << c.status();
      if (c.ok()) out[r->name()] = backend_->Evaluate(task, *c, nullptr);
    }
    return out;
  }

  // Every evaluation OK and correct on every seed.
  static void ExpectAllCorrect(const std::map<std::string, v1::Evaluation>& evs) {
    for (const auto& [name, ev] : evs) {
      EXPECT_EQ(ev.status(), v1::OK) << name << ": " << kb_testing::ExplainKernelBench(ev);
      EXPECT_EQ(ev.validation_size(), 3) << name;
      for (const auto& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << name << ": " << c.detail();
    }
  }

  static Backend* backend_;
};
Backend* KernelBenchBridgeTest::backend_ = nullptr;

TEST_F(KernelBenchBridgeTest, CaptureOfAMultiOpModelGivesItsGraph) {
  const v1::Task task = Problem("softmax_gelu_cumsum.py");
  const v1::ModelGraph g = Capture(task);
  EXPECT_EQ(g.error(), "");
  std::vector<std::string> walk;
  for (const v1::GraphNode& n : g.nodes()) {
    walk.push_back(absl::StrCat(n.op(), " ", n.target(), "(", absl::StrJoin(n.inputs(), ","), ")"));
    if (n.op() != "output") {
      EXPECT_THAT(n.shape(), ElementsAre(64, 1000)) << n.name();
      EXPECT_EQ(n.dtype(), v1::F32) << n.name();
    }
  }
  EXPECT_THAT(
      walk, ElementsAre("placeholder 0()", "call_function softmax(x)", "call_function gelu(softmax)",
                        "call_function cumsum(gelu)", "call_function leaky_relu(cumsum)", "output output(leaky_relu)"));
  EXPECT_EQ(Node(g, "softmax")->attrs().at("dim"), "-1");
  EXPECT_EQ(Node(g, "cumsum")->attrs().at("dim"), "1");
  // The Model's constructor argument, baked into the trace.
  EXPECT_EQ(Node(g, "leaky_relu")->attrs().at("negative_slope"), "0.05");

  // Once per problem and worker: the next evaluation does not capture again.
  v1::Candidate again;
  again.set_language("python");
  again.set_source(absl::StrCat(task.reference().source(), "\nModelNew = Model\n"));
  EXPECT_FALSE(backend_->Evaluate(task, again, nullptr).has_model_graph());
}

TEST_F(KernelBenchBridgeTest, EveryBridgeCandidateOfAMultiOpModelIsCorrect) {
  v1::Task task = Problem("softmax_gelu_cumsum.py");
  // Without a graph no bridge applies: only pytorch_rewrite.
  for (const auto& r : proposer::AllRecipes()) {
    EXPECT_FALSE(r->name().rfind("kb_", 0) == 0 && r->Applies(task, "cpu")) << r->name();
  }
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  std::vector<std::string> names;
  for (const auto& [name, ev] : evs) {
    names.push_back(name);
    EXPECT_EQ(ev.status(), v1::OK) << name << ": " << kb_testing::ExplainKernelBench(ev);
    EXPECT_EQ(ev.validation_size(), 3) << name;
    for (const auto& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << name << ": " << c.detail();
  }
  EXPECT_THAT(names,
              UnorderedElementsAre("kb_elementwise", "kb_softmax_three_pass", "kb_softmax_online", "kb_row_scan"));
  // The elementwise bridge lowers GELU and the leaky ReLU (its slope from the
  // graph); the cumulative sum stays PyTorch.
  const proposer::Recipe* elementwise = proposer::FindRecipe("kb_elementwise");
  ASSERT_NE(elementwise, nullptr);
  absl::StatusOr<v1::Candidate> c =
      elementwise->Generate(task, proposer::Genome{"kb_elementwise", elementwise->space().Defaults()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source(), HasSubstr("'gelu': ('map', ['softmax']"));
  EXPECT_THAT(c->source(), HasSubstr("'leaky_relu': ('map', ['cumsum']"));
  EXPECT_THAT(c->source(), HasSubstr("(x0) > 0.0f ? (x0) : 0.05f * (x0)"));
  EXPECT_THAT(c->source(), Not(HasSubstr("'cumsum': (")));
}

TEST_F(KernelBenchBridgeTest, LayerNormModuleWithItsWeightsIsLoweredAndCorrect) {
  v1::Task task = Problem("layer_norm_relu.py");
  *task.mutable_model_graph() = Capture(task);
  const v1::GraphNode* norm = Node(task.model_graph(), "norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->op(), "call_module");
  EXPECT_EQ(norm->target(), "LayerNorm");
  EXPECT_EQ(norm->attrs().at("normalized_shape"), "(16, 96)");
  EXPECT_EQ(norm->attrs().at("elementwise_affine"), "True");
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_norm")) << "nn.LayerNorm over the last two dims was not lowered";
  ASSERT_TRUE(evs.count("kb_elementwise"));
  ExpectAllCorrect(evs);
  // Each bridge runs one of the two operators, the other stays PyTorch:
  // neither is tried before chance picks it.
  for (const char* name : {"kb_row_norm", "kb_elementwise"}) {
    EXPECT_FALSE(proposer::FindRecipe(name)->DirectedVariant(task, "cpu")) << name;
  }
}

// row_norm's corners: one pass, one accumulator, plain stores, one thread;
// two passes, eight accumulators, streaming stores, every thread.
constexpr const char* kRowNormCorners[] = {
    "kb_row_norm{accumulators=1,schedule=static,stats=one_pass,store=normal,threads=1}",
    "kb_row_norm{accumulators=8,schedule=dynamic,stats=two_pass,store=nontemporal,threads=all}"};

// nn.InstanceNorm2d and nn.InstanceNorm1d at their defaults (KernelBench 34's
// kind) are layer norm kernels over each (sample, channel), gamma ones and
// beta zeros, each with its own eps; one with weights stays PyTorch. Both
// corners of the layer norm's space are correct, also on rows far from 0.
TEST_F(KernelBenchBridgeTest, InstanceNormsAtTheirDefaultsAreLayerNormKernelsAndCorrect) {
  v1::Task task = Problem("instance_norm.py");
  *task.mutable_model_graph() = Capture(task);
  const v1::GraphNode* plain = Node(task.model_graph(), "plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->target(), "InstanceNorm2d");
  EXPECT_EQ(plain->attrs().at("affine"), "False");
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_norm")) << "no instance norm was lowered";
  ExpectAllCorrect(evs);
  for (const char* genome : kRowNormCorners) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'plain': ('instance_norm', ['x'], False, '', 'kevo_bridge_")) << genome;
    EXPECT_THAT(source, HasSubstr("'loose': ('instance_norm', ['add'], False, '', 'kevo_bridge_")) << genome;
    EXPECT_THAT(source, Not(HasSubstr("'weighted': ("))) << "an instance norm with weights stays PyTorch";
    EXPECT_THAT(source, HasSubstr("[], 2),")) << "the 2-D norm's two dims";
    EXPECT_THAT(source, HasSubstr("[], 1),")) << "the 1-D norm's one dim";
  }
}

// nn.GroupNorm (KernelBench 35's kind) is a row_norm kernel over each
// (sample, group), scaled and shifted per channel: with its weights (away from
// ones and zeros), and without (ones and zeros made in the call). Both corners
// of the space are correct, channels of 63 and 5 values (no whole vector).
// On nvidia it stays PyTorch (cuda_layer_norm has no per-channel scale).
TEST_F(KernelBenchBridgeTest, GroupNormsAreRowNormKernelsWithPerChannelScalesAndCorrect) {
  v1::Task task = Problem("group_norm.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_norm")) << "no group norm was lowered";
  ExpectAllCorrect(evs);
  for (const char* genome : kRowNormCorners) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'gn': ('group_norm', ['x'], False, 'gn', 'kevo_bridge_")) << genome;
    EXPECT_THAT(source, HasSubstr("'plain': ('group_norm', ['s'], False, '', 'kevo_bridge_")) << genome;
    EXPECT_THAT(source, HasSubstr("[], 4),")) << "gn's four groups";
    EXPECT_THAT(source, HasSubstr("[], 2),")) << "plain's two groups";
  }
  EXPECT_FALSE(proposer::FindRecipe("kb_cuda_layer_norm")->Applies(task, "nvidia"));
}

// Reductions along dims that are not the last (KernelBench 47-53's kind) are
// col_reduce kernels: sum with keepdim, torch.max(x, dim)[0] without its
// indices (the max node absorbed), amin over a negative dim, mean over dim 0,
// argmin's int64 indices over dim 0; a sum over two dims stays PyTorch. Every
// candidate is correct, and the bridge is tried first (work saved).
TEST_F(KernelBenchBridgeTest, ReductionsAlongOtherDimsAreColumnKernelsAndCorrect) {
  v1::Task task = Problem("reductions.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_col_reduce")) << "no reduction was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_col_reduce");
  ASSERT_NE(recipe, nullptr);
  for (const char* genome :
       {"kb_col_reduce{split=1,threads=1,tile=64}", "kb_col_reduce{split=4,threads=all,tile=1024}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'sum_1': ('col_reduce', ['x'], True, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'getitem': ('col_reduce', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['max_1'], 1),"));
    EXPECT_THAT(source, HasSubstr("'amin': ('col_reduce', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'mean': ('col_reduce', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("[], 0),"));
    EXPECT_THAT(source, HasSubstr("'argmin': ('col_index', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, Not(HasSubstr("'sum_2': (")));
  }
  // The sum over two dims and the arithmetic stay PyTorch: the bridge is
  // tried first only because torch.max's indices are work saved.
  EXPECT_TRUE(proposer::FindRecipe("kb_col_reduce")->DirectedVariant(task, "cpu"));
}

// A row divided by its L2 norm, and by the mean of its absolute values
// (KernelBench 39 and 38): each one row_scale kernel in the divide's place,
// the norm (and abs) absorbed; correct, and tried first (passes saved).
TEST_F(KernelBenchBridgeTest, RowNormsAndTheirDivideAreOneKernelEachAndCorrect) {
  v1::Task task = Problem("row_norms.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_scale")) << "no row norm was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_row_scale");
  ASSERT_NE(recipe, nullptr);
  absl::StatusOr<v1::Candidate> c =
      recipe->Generate(task, proposer::Genome{recipe->name(), recipe->space().Defaults()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source(), HasSubstr("'truediv': ('rows', ['x'], False, '', 'kevo_bridge_"));
  EXPECT_THAT(c->source(), HasSubstr("['norm'], -1),"));
  EXPECT_THAT(c->source(), HasSubstr("'truediv_1': ('rows', ['x'], False, '', 'kevo_bridge_"));
  EXPECT_THAT(c->source(), HasSubstr("['mean', 'abs_1'], -1),"));
  EXPECT_THAT(c->source(), HasSubstr("sqrtf(kevo_s)"));
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "the norm's own passes are work saved";
}

// x over its root mean square along a dim that is not the last (KernelBench
// 36's kind): one col_reduce kernel (op rms_norm) in the divide's place, the
// sqrt, add, mean and square absorbed, for x ** 2 over the channels and
// torch.pow over dim 0 with its own eps; over the last dim it is no column
// kernel. Every genome corner is correct, and the bridge is tried first.
TEST_F(KernelBenchBridgeTest, RmsNormsAlongAMiddleDimAreOneColumnKernelEachAndCorrect) {
  v1::Task task = Problem("col_norms.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_col_reduce")) << "no RMS norm was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_col_reduce");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "the squares PyTorch writes and reads are work saved";
  for (const char* genome :
       {"kb_col_reduce{split=1,threads=1,tile=64}", "kb_col_reduce{split=4,threads=all,tile=1024}"}) {
    const std::string source = JudgedSource(task, genome);
    // fx names the divides in the order they are traced (x / rms last).
    EXPECT_THAT(source, HasSubstr("'truediv_2': ('col_scale', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['sqrt', 'add', 'mean', 'pow_1'], 1),"));
    EXPECT_THAT(source, HasSubstr("'truediv': ('col_scale', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['sqrt_1', 'add_1', 'mean_1', 'pow_2'], 0),"));
    EXPECT_THAT(source, HasSubstr("static_cast<float>(0.001"));
    EXPECT_THAT(source, Not(HasSubstr("'truediv_1': ('col_scale'")));
    EXPECT_THAT(source, Not(HasSubstr("'truediv_3': ('col_scale'"))) << "torch.add's alpha scales eps";
  }
}

// F.cross_entropy with its defaults (KernelBench 95) is one row_cross_entropy
// kernel, tried first (PyTorch writes the whole log_softmax); with label
// smoothing it stays PyTorch. Every genome corner is correct, also where some
// targets are the ignored -100 (the call leaves those to PyTorch).
TEST_F(KernelBenchBridgeTest, CrossEntropyIsOneRowKernelAndCorrect) {
  v1::Task task = Problem("cross_entropy.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_cross_entropy")) << "the cross-entropy was not lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_row_cross_entropy");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "the log_softmax PyTorch writes is work saved";
  EXPECT_FALSE(recipe->Applies(task, "nvidia")) << "a cpu recipe only";
  for (const char* genome :
       {"kb_row_cross_entropy{accumulators=1,exp=cephes,schedule=dynamic,stats=online,threads=1}",
        "kb_row_cross_entropy{accumulators=8,exp=poly5,schedule=static,stats=two_pass,threads=all}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'cross_entropy': ('cross_entropy', ['predictions', 'targets'], False, '', "));
    EXPECT_THAT(source, HasSubstr("'cross_entropy_1': ('cross_entropy', ['predictions', 'some_ignored'], False, '', "));
    EXPECT_THAT(source, Not(HasSubstr("'cross_entropy_2': (")));
  }
}

// Scans along the last dim (KernelBench 89-93's kind): cumsum, cumprod, a
// reverse cumsum (its flips absorbed), an exclusive one (the narrow, zeros
// and cat absorbed) and one of x * mask (the bool mask passed to the kernel,
// the product absorbed) are one row_scan kernel each; the cumsums inside the
// reverse and exclusive forms are not kernels of their own. Every genome
// corner is correct.
TEST_F(KernelBenchBridgeTest, ScansAndWhatSurroundsThemAreOneRowScanKernelEachAndCorrect) {
  v1::Task task = Problem("scans.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_row_scan")) << "no scan was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_row_scan");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "the absorbed flips, cat and product are work saved";
  for (const char* genome : {"kb_row_scan{segments=1,threads=1}", "kb_row_scan{segments=8,threads=all}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'cumsum': ('scan', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'cumprod': ('scan', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'flip_1': ('scan', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['cumsum_1', 'flip'], -1),"));
    EXPECT_THAT(source, HasSubstr("'cat': ('scan', ['x'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['cumsum_2', 'narrow', 'zeros_like'], -1),"));
    EXPECT_THAT(source, HasSubstr("'cumsum_3': ('scan', ['x', 'mask'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['mul'], -1),"));
    EXPECT_THAT(source, Not(HasSubstr("'cumsum_1': (")));
    EXPECT_THAT(source, Not(HasSubstr("'cumsum_2': (")));
    // x.flip(1, 0) is not undone by .flip(1): a plain scan of the flipped x.
    EXPECT_THAT(source, HasSubstr("'cumsum_4': ('scan', ['flip_2'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, Not(HasSubstr("'flip_3': (")));
  }
}

// Losses and sums over every element (KernelBench 94, 96 and 98's kind):
// torch.mean of an elementwise chain (the chain folded into the term),
// smooth_l1_loss, kl_div of a log (the log folded in, divided by the
// batch), an nn.L1Loss module summing, and a plain sum are one map_reduce
// kernel each; the elementwise chains they absorb are not kernels of their
// own. Every genome corner is correct.
TEST_F(KernelBenchBridgeTest, LossesAndWholeSumsAreOneMapReduceKernelEachAndCorrect) {
  v1::Task task = Problem("losses.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_map_reduce")) << "no loss was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_map_reduce");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "a loss's passes are work saved";
  for (const char* genome : {"kb_map_reduce{threads=1}", "kb_map_reduce{threads=all}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'mean': ('map_reduce', ['predictions', 'targets'], False, 'numel', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['pow_1', 'sub'], -1),"));
    EXPECT_THAT(
        source,
        HasSubstr("'smooth_l1_loss': ('map_reduce', ['predictions', 'targets'], False, 'numel', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'kl_div': ('map_reduce', ['p', 'q'], False, 'batch', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['log'], -1),"));
    EXPECT_THAT(source, HasSubstr("'l1': ('map_reduce', ['predictions', 'targets'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'sum_1': ('map_reduce', ['predictions'], False, '', 'kevo_bridge_"));
  }
  // The elementwise bridge still takes the chains alone.
  const proposer::Recipe* elementwise = proposer::FindRecipe("kb_elementwise");
  ASSERT_NE(elementwise, nullptr);
  EXPECT_TRUE(elementwise->Applies(task, "cpu"));
}

// A loss whose operand broadcasts along the leading dims (KernelBench 100's
// targets [cols] times predictions [rows, cols]; a [1, cols] weight): one
// map_reduce kernel each reading the operand at i % m, the chain absorbed,
// where the elementwise bridge leaves such a chain to PyTorch. Correct at
// every genome corner.
TEST_F(KernelBenchBridgeTest, LossesWithABroadcastOperandAreOneMapReduceKernelEachAndCorrect) {
  v1::Task task = Problem("hinge.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_map_reduce")) << "no loss was lowered";
  EXPECT_FALSE(evs.count("kb_elementwise")) << "a broadcast chain is the reduction's alone";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_map_reduce");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "the chain's passes are work saved";
  for (const char* genome : {"kb_map_reduce{threads=1}", "kb_map_reduce{threads=all}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'mean': ('map_reduce', ['predictions', 'targets'], False, 'numel', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("['clamp', 'sub', 'mul'], 2),")) << "the chain absorbed; x1 broadcast";
    EXPECT_THAT(source, HasSubstr("['mul_1', 'pow_1', 'sub_1'], 1),")) << "x0 (the weight) broadcast";
    EXPECT_THAT(source, HasSubstr("'sum_1': ('map_reduce', ['weight', 'predictions'], False, '', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'mean_1': ('map_reduce', ['q', 's'], False, 'numel', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("const float x1 = kevo_in1[kevo_j + kevo_k];")) << "targets read at i % m";
  }
}

// Pooling modules over one, two and three dims (KernelBench 41-46's kind):
// max with dilation and padding, average with and without the padding in
// its count, a stride that defaults to the kernel, a pool of a pool; each
// one pool kernel, and correct at every genome corner.
TEST_F(KernelBenchBridgeTest, PoolingModulesArePoolKernelsAndCorrect) {
  v1::Task task = Problem("pools.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_TRUE(evs.count("kb_pool")) << "no pool was lowered";
  ExpectAllCorrect(evs);
  const proposer::Recipe* recipe = proposer::FindRecipe("kb_pool");
  ASSERT_NE(recipe, nullptr);
  EXPECT_TRUE(recipe->DirectedVariant(task, "cpu")) << "a max pool's indices are work saved";
  for (const char* genome : {"kb_pool{chunk=64,threads=1}", "kb_pool{chunk=1024,threads=all}"}) {
    const std::string source = JudgedSource(task, genome);
    EXPECT_THAT(source, HasSubstr("'max1': ('pool', ['seq'], False, '1,1,8|1,1,1|0,0,4|1,1,3', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'max3': ('pool', ['volume'], False, '3,3,3|2,2,2|1,1,1|3,3,3', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'avg2': ('pool', ['image'], False, '1,5,5|1,5,5|0,0,0|1,1,1', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("'avg3': ('pool', ['volume'], False, '3,3,3|2,2,2|1,1,1|1,1,1', 'kevo_bridge_"));
    EXPECT_THAT(source, HasSubstr("kevo_rows * kevo_inside")) << "avg3 leaves the padding out of its count";
    // A kernel reading another's result: ModelNew passes it the first's call.
    EXPECT_THAT(source, HasSubstr("'max2_1': ('pool', ['avg1_1'], False, '1,4,4|1,1,1|0,1,1|1,1,1', 'kevo_bridge_"));
  }
}

// An elementwise chain written out in operators (GELU's tanh form, a second
// input, a clamp, a scale) is one fused kernel over both inputs, and correct.
TEST_F(KernelBenchBridgeTest, AnElementwiseChainIsFusedIntoOneKernelAndCorrect) {
  v1::Task task = Problem("gelu_chain.py");
  *task.mutable_model_graph() = Capture(task);
  std::map<std::string, v1::Evaluation> evs = EvaluateBridges(task);
  ASSERT_EQ(evs.size(), 1u);
  const v1::Evaluation& ev = evs.at("kb_elementwise");
  EXPECT_EQ(ev.status(), v1::OK) << kb_testing::ExplainKernelBench(ev);
  for (const auto& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << c.detail();
  const proposer::Recipe* elementwise = proposer::FindRecipe("kb_elementwise");
  absl::StatusOr<v1::Candidate> c =
      elementwise->Generate(task, proposer::Genome{"kb_elementwise", elementwise->space().Defaults()});
  ASSERT_TRUE(c.ok()) << c.status();
  // One kernel, in the last operator's place, reading x and y; the other ten
  // operators are fused into it.
  const std::string& source = c->source();
  const size_t entry = source.find("'mul_4': ('map', ['x', 'y'], False, '', 'kevo_bridge_");
  ASSERT_NE(entry, std::string::npos) << source;
  EXPECT_EQ(source.find("('map', ", entry + 12), std::string::npos) << "more than one kernel";
  EXPECT_EQ(source.find("('map', "), entry + 9);
  EXPECT_THAT(source, HasSubstr("['clamp', 'sub', 'mul_3', 'mul', 'add_1', 'tanh', 'mul_2', 'add', 'mul_1', 'pow_1']"));
  EXPECT_THAT(source, HasSubstr("tanhf("));
  EXPECT_THAT(source, HasSubstr("fmaxf("));
  EXPECT_TRUE(elementwise->DirectedVariant(task, "cpu")) << "the whole Model is one kernel of kevo's: tried first";
}

// A node read twice by the same operator (`y * y`) is not fused into it: its
// kernel would read a node the call erased. It is a kernel of its own, read
// once by the product's. (The graph by hand: no worker needed.)
TEST(KernelBenchBridgeFusionTest, ANodeReadTwiceByOneOperatorIsItsOwnKernel) {
  v1::Task task = kb_testing::LoadProblem("relu.py");
  auto add = [&](const std::string& name, const std::string& op, const std::string& target,
                 std::vector<std::string> inputs) {
    v1::GraphNode* n = task.mutable_model_graph()->add_nodes();
    n->set_name(name);
    n->set_op(op);
    n->set_target(target);
    for (const std::string& in : inputs) n->add_inputs(in);
    if (op == "output") return;
    n->set_dtype(v1::F32);
    n->add_shape(4);
    n->add_shape(8);
  };
  add("x", "placeholder", "0", {});
  add("tanh", "call_function", "tanh", {"x"});
  add("mul", "call_function", "mul", {"tanh", "tanh"});
  add("output", "output", "output", {"mul"});
  const proposer::Recipe* elementwise = proposer::FindRecipe("kb_elementwise");
  ASSERT_NE(elementwise, nullptr);
  absl::StatusOr<v1::Candidate> c =
      elementwise->Generate(task, proposer::Genome{"kb_elementwise", elementwise->space().Defaults()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source(), HasSubstr("'tanh': ('map', ['x'], False, '', 'kevo_bridge_1'"));
  EXPECT_THAT(c->source(), HasSubstr("'mul': ('map', ['tanh'], False, '', 'kevo_bridge_2'"));
  EXPECT_THAT(c->source(), HasSubstr("(x0) * (x0)"));
  EXPECT_THAT(c->source(), Not(HasSubstr("['tanh']),\n"))) << "tanh erased by the product's call";
}

// A bridge passes its inner recipe's directed children on: kb_cuda_elementwise
// at its defaults (one 16-byte vector per thread) gets cuda_elementwise's
// second seed (two in flight) next, as the native recipe does.
TEST(KernelBenchBridgeRecipeTest, ACudaElementwiseBridgeGetsTheInnerRecipesDirectedChild) {
  const proposer::Recipe* bridge = proposer::FindRecipe("kb_cuda_elementwise");
  const proposer::Recipe* inner = proposer::FindRecipe("cuda_elementwise");
  ASSERT_NE(bridge, nullptr);
  ASSERT_NE(inner, nullptr);
  const v1::Task task = kb_testing::LoadProblem("relu.py");
  const proposer::Genome defaults{bridge->name(), bridge->space().Defaults()};
  const auto directed = bridge->DirectedMutations(task, "nvidia", defaults);
  ASSERT_FALSE(directed.empty());
  EXPECT_EQ(directed, inner->DirectedMutations(task, "nvidia", proposer::Genome{inner->name(), defaults.params}));
  proposer::Genome child = defaults;
  for (const auto& [k, v] : directed[0]) child.params[k] = v;
  EXPECT_TRUE(bridge->DirectedMutations(task, "nvidia", child).empty()) << "directed once";
}

}  // namespace
}  // namespace kevo::worker
