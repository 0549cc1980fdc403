// Tests of the built-in recipe pytorch_rewrite (KernelBench tasks on cpu, nvidia): it
// applies to KernelBench tasks only, the built-in proposer seeds it for them,
// and the ModelNew variants it generates are correct on the real cpu worker
// (PyTorch under /usr/bin/python3, the real sandbox).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/testing/process.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::proposer {
namespace {

using ::kevo::testing::BinDir;
using ::kevo::testing::SourceDir;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Property;
using ::testing::SizeIs;

v1::Task Problem(const std::string& file) {
  absl::StatusOr<v1::Task> task = task::LoadTaskPath(SourceDir() + "/tests/data/kernelbench/" + file);
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// A request to the built-in proposer, skills off so that what it proposes
// follows from the recipes alone.
ProposeRequest Request(const v1::Task& task, const std::string& platform, int count, uint64_t seed) {
  ProposeRequest request;
  request.task = &task;
  request.platform = platform;
  request.count = count;
  request.seed = seed;
  request.use_skills = false;
  return request;
}

const Recipe& PytorchRewrite() {
  const Recipe* r = FindRecipe("pytorch_rewrite");
  EXPECT_NE(r, nullptr);
  return *r;
}

// The mutations of the first `count` children the built-in proposer gives a
// parent n00000 with `genome` and the children it already has.
std::vector<std::string> ChildMutations(const v1::Task& task, const std::string& platform, int count, Genome genome,
                                        std::vector<ChildInfo> children = {}) {
  ProposeRequest request = Request(task, platform, count, 11);
  ParentInfo parent;
  parent.node_id = "n00000";
  parent.genome = std::move(genome);
  parent.children = std::move(children);
  request.parents = {parent};
  absl::StatusOr<std::vector<Proposal>> out = BuiltinProposer().Propose(request);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<std::string> mutations;
  for (const Proposal& p : out.ok() ? *out : std::vector<Proposal>{}) mutations.push_back(p.mutation);
  return mutations;
}

TEST(PytorchRewriteTest, AppliesToKernelBenchTasksOnCpuAndNvidiaOnly) {
  const Recipe& r = PytorchRewrite();
  EXPECT_TRUE(r.Applies(Problem("relu.py"), "cpu"));
  EXPECT_TRUE(r.Applies(Problem("relu.py"), "nvidia"));
  EXPECT_FALSE(r.Applies(Problem("relu.py"), "amd"));
  absl::StatusOr<v1::Task> native = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_FALSE(r.Applies(*native, "cpu"));
  // And no C++ recipe applies to a KernelBench task.
  for (const auto& other : AllRecipes()) {
    if (other.get() != &r) {
      EXPECT_FALSE(other->Applies(Problem("relu.py"), "cpu")) << other->name();
    }
  }
}

TEST(PytorchRewriteTest, GeneratesAPythonModelNewAroundTheProblemsModel) {
  const Recipe& r = PytorchRewrite();
  const v1::Task task = Problem("matmul.py");
  Genome g{r.name(), r.space().Defaults()};
  g.params["mode"] = "jit_freeze";
  g.params["float32_matmul"] = "high";
  g.params["cudnn_benchmark"] = "on";
  absl::StatusOr<v1::Candidate> c = r.Generate(task, g);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->language(), "python");
  EXPECT_THAT(c->source(), HasSubstr(task.reference().source()));
  EXPECT_THAT(c->source(), HasSubstr("class ModelNew("));
  EXPECT_THAT(c->source(), HasSubstr("_KEVO_MODE = \"jit_freeze\""));
  EXPECT_THAT(c->source(), HasSubstr("_KEVO_FLOAT32_MATMUL = \"high\""));
  EXPECT_THAT(c->source(), HasSubstr("_KEVO_CUDNN_BENCHMARK = True"));
  EXPECT_THAT(c->source(), HasSubstr("_kevo_torch.backends.cudnn.benchmark = True"));
  EXPECT_THAT(c->source(), Not(HasSubstr("$")));
}

TEST(PytorchRewriteTest, TheBuiltinProposerSeedsKernelBenchJobsWithIt) {
  const v1::Task task = Problem("relu.py");
  ProposeRequest request;
  request.task = &task;
  request.platform = "cpu";
  request.count = 4;
  request.seed = 7;
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(request);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(*out, SizeIs(4));
  for (const Proposal& p : *out) {
    EXPECT_EQ(p.genome.recipe, "pytorch_rewrite");
    EXPECT_EQ(p.candidate.language(), "python");
  }
}

// The first generation on a GPU: the default, then TF32 GEMMs (the lever for
// float32 GEMM problems), then freezing; on the CPU no TF32 seed (it computes
// as the default does there).
TEST(PytorchRewriteTest, OnAGpuTheSecondSeedRunsFloat32GemmsOnTf32) {
  const v1::Task task = Problem("matmul.py");
  for (const std::string platform : {"nvidia", "cpu"}) {
    absl::StatusOr<std::vector<Proposal>> out = BuiltinProposer().Propose(Request(task, platform, 3, 7));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_THAT(*out, SizeIs(3));
    std::vector<std::string> precisions;
    for (const Proposal& p : *out) precisions.push_back(p.genome.params.at("float32_matmul"));
    if (platform == "nvidia") {
      EXPECT_THAT(precisions, ::testing::ElementsAre("highest", "high", "highest"));
      EXPECT_EQ((*out)[2].genome.params.at("mode"), "jit_freeze");
    } else {
      EXPECT_THAT(precisions, ::testing::Each("highest"));
    }
  }
}

// A graph of placeholders, one call and the output, as the worker captures it.
void SetGraph(v1::Task& task, const std::string& call, int rank) {
  task.clear_model_graph();
  for (const auto& [name, target] :
       std::vector<std::pair<std::string, std::string>>{{"x", "0"}, {"call", call}, {"output", "output"}}) {
    v1::GraphNode* n = task.mutable_model_graph()->add_nodes();
    n->set_name(name);
    n->set_target(target);
    n->set_op(name == "call" ? "call_module" : name == "output" ? "output" : "placeholder");
    if (name != "output") {
      n->set_dtype(v1::F32);
      for (int d = 0; d < rank; ++d) n->add_shape(8);
    }
    if (name == "call") n->add_inputs("x");
  }
}

// Once a worker has captured the Model's graph, a parent without TF32 whose
// Model has a float32 GEMM gets the TF32 child first on a GPU (with one GPU
// slot a job expands one child at a time); not on the CPU, not without a
// GEMM, not twice.
TEST(PytorchRewriteTest, AGpuParentWhoseModelHasAFloat32GemmGetsTf32First) {
  v1::Task task = Problem("matmul.py");
  SetGraph(task, "matmul", 2);
  const Recipe& r = PytorchRewrite();
  auto first_child = [&](const v1::Task& t, const std::string& platform, std::vector<ChildInfo> children) {
    std::vector<std::string> m = ChildMutations(t, platform, 1, Genome{r.name(), r.space().Defaults()}, children);
    return m.empty() ? std::string() : m[0];
  };
  const std::string directed = first_child(task, "nvidia", {});
  EXPECT_EQ(directed, "directed:float32_matmul highest->high");
  ChildInfo tried;
  tried.mutation = directed;
  EXPECT_NE(first_child(task, "nvidia", {tried}), directed);
  EXPECT_FALSE(absl::StartsWith(first_child(task, "cpu", {}), "directed:"));
  v1::Task no_gemm = task;
  no_gemm.mutable_model_graph()->mutable_nodes(1)->set_target("relu");
  EXPECT_FALSE(absl::StartsWith(first_child(no_gemm, "nvidia", {}), "directed:"));
  v1::Task attention = task;  // float32 attention runs on PyTorch's GEMMs
  attention.mutable_model_graph()->mutable_nodes(1)->set_target("scaled_dot_product_attention");
  EXPECT_EQ(first_child(attention, "nvidia", {}), directed);
}

// A GPU parent whose Model has a convolution (functional or module, 1-D to
// 3-D, transposed or not) gets cuDNN's autotuner next, in its own layout;
// none on the CPU, none without a convolution, none for a parent that has it
// on.
TEST(PytorchRewriteTest, AGpuParentWhoseModelHasAConvolutionGetsCudnnsAutotunerNext) {
  const Recipe& r = PytorchRewrite();
  auto children = [](const v1::Task& t, const std::string& platform, Genome parent_genome) {
    return ChildMutations(t, platform, 2, std::move(parent_genome));
  };
  Genome tf32{r.name(), r.space().Defaults()};
  tf32.params["float32_matmul"] = "high";  // the first seed on a GPU
  v1::Task task = Problem("conv3d.py");
  for (const auto& [call, rank] :
       std::vector<std::pair<std::string, int>>{{"Conv3d", 5}, {"ConvTranspose2d", 4}, {"conv1d", 3}}) {
    SetGraph(task, call, rank);
    const std::vector<std::string> gpu = children(task, "nvidia", tf32);
    ASSERT_FALSE(gpu.empty()) << call;
    EXPECT_EQ(gpu[0], "directed:cudnn_benchmark off->on") << call;
    EXPECT_THAT(children(task, "cpu", tf32), Each(Not(HasSubstr("directed:")))) << call;
  }
  Genome tuned = tf32;
  tuned.params["cudnn_benchmark"] = "on";
  EXPECT_THAT(children(task, "nvidia", tuned), Each(Not(HasSubstr("directed:"))));
  SetGraph(task, "ReLU", 5);
  // No autotuner without a convolution (the ReLU's own bridge, which runs the
  // whole Model, is a directed child of its own).
  EXPECT_THAT(children(task, "nvidia", tf32), Each(Not(HasSubstr("directed:cudnn_benchmark"))));
}

// torch.max(x, dim=1)[0] as the worker captures it: a max node (a tuple, no
// shape) and the getitem that takes its values; `indices_used` adds a node
// that reads the tuple too.
v1::Task MaxValuesTask(bool indices_used) {
  v1::Task task = Problem("reductions.py");
  task.clear_model_graph();
  auto add = [&](const std::string& name, const std::string& op, const std::string& target,
                 std::vector<std::string> inputs, std::vector<int64_t> shape) {
    v1::GraphNode* n = task.mutable_model_graph()->add_nodes();
    n->set_name(name);
    n->set_op(op);
    n->set_target(target);
    for (const std::string& i : inputs) n->add_inputs(i);
    if (!shape.empty()) n->set_dtype(v1::F32);
    for (int64_t d : shape) n->add_shape(d);
    return n;
  };
  add("x", "placeholder", "0", {}, {4, 37, 50});
  (*add("max_1", "call_function", "max", {"x"}, {})->mutable_attrs())["dim"] = "1";
  (*add("getitem", "call_function", "getitem", {"max_1"}, {4, 50})->mutable_attrs())["arg1"] = "0";
  if (indices_used) (*add("getitem_1", "call_function", "getitem", {"max_1"}, {4, 50})->mutable_attrs())["arg1"] = "1";
  add("output", "output", "output", {"getitem"}, {});
  return task;
}

// A parent that only reruns PyTorch gets, first, the bridge that lowers
// torch.max(x, dim)[0] without computing the indices PyTorch computes and the
// Model drops, on the cpu and on a GPU; not where the Model reads the indices.
TEST(PytorchRewriteTest, AParentWhoseModelDropsTorchMaxsIndicesGetsTheColumnReductionBridgeFirst) {
  const Recipe& r = PytorchRewrite();
  const Genome parent{r.name(), r.space().Defaults()};
  std::vector<std::string> cpu = ChildMutations(MaxValuesTask(false), "cpu", 2, parent);
  ASSERT_FALSE(cpu.empty());
  EXPECT_EQ(cpu[0], "directed:variant:pytorch_rewrite->kb_col_reduce");
  std::vector<std::string> gpu = ChildMutations(MaxValuesTask(false), "nvidia", 2, parent);
  ASSERT_FALSE(gpu.empty());
  EXPECT_EQ(gpu[0], "directed:variant:pytorch_rewrite->kb_cuda_col_reduce");
  EXPECT_THAT(ChildMutations(MaxValuesTask(true), "cpu", 4, parent), Each(Not(HasSubstr("directed:variant"))));
}

// Genomes evaluated end to end; together they cover every mode's code path
// except plain tracing (which freezing extends) and both grad modes, and
// channels-last layouts for a 5-D weight.
class PytorchRewriteOnWorkerTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(PytorchRewriteOnWorkerTest, GeneratedModelNewIsCorrectOnTheCpuWorker) {
  const Recipe& r = PytorchRewrite();
  const auto& [problem, genome] = GetParam();
  absl::StatusOr<Genome> g = Genome::FromString(genome);
  ASSERT_TRUE(g.ok()) << g.status();
  const v1::Task task = Problem(problem);
  absl::StatusOr<v1::Candidate> c = r.Generate(task, *g);
  ASSERT_TRUE(c.ok()) << c.status();
  worker::CpuBackendOptions o;
  o.work_dir = BinDir() + "/../tests/pytorch_rewrite_test.work";
  o.runner_path = BinDir() + "/kevo-runner-cpu";
  o.run_timeout = absl::Seconds(30);
  o.profile_time_cap_s = 0.3;
  o.calibrate = false;
  auto backend = worker::CreateCpuBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();
  v1::Evaluation ev = (*backend)->Evaluate(task, *c, nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << v1::EvalStatus_Name(ev.status()) << ": " << ev.diagnostics().message();
  EXPECT_THAT(ev.validation(), Each(Property(&v1::CaseResult::status, v1::OK)));
  EXPECT_GT(ev.speedup(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Genomes, PytorchRewriteOnWorkerTest,
    ::testing::Values(
        std::pair<std::string, std::string>{"matmul.py",
                                            "pytorch_rewrite{channels_last=off,cudnn_benchmark=off,float32_matmul="
                                            "highest,grad=no_grad,mode=eager,threads=0}"},
        std::pair<std::string, std::string>{"matmul.py",
                                            "pytorch_rewrite{channels_last=on,cudnn_benchmark=off,float32_matmul="
                                            "high,grad=inference_mode,mode=jit_optimize,threads=1}"},
        std::pair<std::string, std::string>{"conv3d.py",
                                            "pytorch_rewrite{channels_last=on,cudnn_benchmark=on,float32_matmul="
                                            "highest,grad=inference_mode,mode=eager,threads=0}"}));

}  // namespace
}  // namespace kevo::proposer
