// KernelBench-format problems on the nvidia worker, on a real GPU (ctest
// label "gpu"): the problems and candidates of tests/data/kernelbench run
// with the interpreter whose torch has CUDA (python3 on PATH, then
// /usr/bin/python3), validated and timed on the GPU against PyTorch eager
// and torch.compile. Skipped, with the reason, where there is no GPU or no
// Python with a CUDA build of PyTorch (CI).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/kernelbench.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/testing/process.h"
#include "worker/backends/nvidia/nvidia_backend.h"
#include "worker/pipeline/eval_pipeline.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::kevo::testing::BinDir;
using ::kevo::testing::SourceDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

std::string DataDir() { return SourceDir() + "/tests/data/kernelbench"; }

std::string Explain(const v1::Evaluation& ev) {
  std::string events;
  for (const auto& e : ev.events()) absl::StrAppend(&events, "\n  ", v1::Stage_Name(e.stage()), " ", e.message());
  return absl::StrCat(v1::EvalStatus_Name(ev.status()), ": ", ev.diagnostics().message(), events);
}

class NvidiaKernelBenchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    NvidiaBackendOptions o;
    o.work_dir = (fs::path(BinDir()) / ".." / "tests" / "nvidia-kernelbench-work").lexically_normal().string();
    o.runner_path = BinDir() + "/kevo-runner-cuda";
    o.cpu_runner_path = BinDir() + "/kevo-runner-cpu";
    o.kernelbench_runner_path = BinDir() + "/kevo-runner-kernelbench";
    o.run_timeout = absl::Seconds(60);
    o.profile_time_cap_s = 0.5;
    o.torch_compile_timeout = absl::Seconds(90);
    o.measure = false;
    auto b = CreateNvidiaBackend(o);
    if (!b.ok()) {
      skip_reason_ = new std::string(absl::StrCat("no usable NVIDIA GPU here: ", b.status().ToString()));
      return;
    }
    auto hello = (*b)->Describe();
    if (!hello.ok() ||
        std::find(hello->languages().begin(), hello->languages().end(), "python") == hello->languages().end()) {
      skip_reason_ = new std::string(
          absl::StrCat("no Python with a CUDA torch here: ",
                       hello.ok() ? hello->capabilities().at("kernelbench") : hello.status().ToString()));
      return;
    }
    hello_ = new v1::Hello(*hello);
    backend_ = b->release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << *skip_reason_;
  }

  static v1::Evaluation Eval(const std::string& problem, const std::string& candidate_file) {
    absl::StatusOr<v1::Task> task = task::LoadTaskPath(DataDir() + "/" + problem);
    EXPECT_TRUE(task.ok()) << task.status();
    v1::Candidate c;
    c.set_language("python");
    auto source = ReadFileBytes(DataDir() + "/candidates/" + candidate_file);
    EXPECT_TRUE(source.ok()) << source.status();
    c.set_source(source.ok() ? *source : "");
    EXPECT_FALSE(c.source().empty()) << candidate_file;
    return backend_->Evaluate(*task, c, nullptr);
  }

  // OK on the GPU, timed against eager, with torch.compile timed or the
  // reason it was not.
  static void ExpectOkOnTheGpu(const v1::Evaluation& ev) {
    ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
    EXPECT_EQ(ev.validation_size(), 3);
    for (const auto& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << c.detail();
    EXPECT_EQ(ev.platform(), "nvidia");
    EXPECT_GT(ev.timing().median_s(), 0);
    EXPECT_GT(ev.baseline().median_s(), 0);
    EXPECT_DOUBLE_EQ(ev.speedup(), ev.baseline().median_s() / ev.timing().median_s());
    EXPECT_EQ(ev.baseline_kind(), v1::BASELINE_PYTORCH_EAGER);
    EXPECT_THAT(ev.notes().at("baseline"), HasSubstr("PyTorch eager"));
    EXPECT_THAT(ev.notes().at("baseline"), HasSubstr("cuda:"));
    // Timed on the GPU, under its timing slot, with the L2 flushed.
    EXPECT_GT(ev.profile().at("l2_flush_bytes"), 0);
    ASSERT_TRUE(ev.has_device_use());
    EXPECT_GT(ev.device_use().stage_s(), 0);
    // The path's cost, measured on the trusted control process, is what was
    // taken out of the candidate's samples.
    ASSERT_TRUE(ev.profile().contains("path_control_cross_s")) << Explain(ev);
    EXPECT_GT(ev.profile().at("path_control_cross_s"), ev.profile().at("path_control_inproc_s"));
    EXPECT_NEAR(ev.profile().at("ipc_overhead_s"),
                ev.profile().at("path_control_cross_s") - ev.profile().at("path_control_inproc_s"), 1e-9);
    // Every timed call's outputs were checked against eager's on its inputs.
    EXPECT_EQ(ev.profile().at("timed_calls_checked"),
              ev.timing().samples_s_size() * ev.profile().at("candidate_calls_per_sample"));
    const std::string& compiled = ev.notes().at("baseline_torch_compile");
    if (hello_->capabilities().at("kernelbench_torch_compile") == "yes" &&
        !absl::StartsWith(compiled, "torch.compile unavailable: ")) {
      EXPECT_THAT(compiled, HasSubstr("torch.compile(Model)"));
      EXPECT_GT(ev.profile().at("torch_compile_median_s"), 0);
      EXPECT_GT(ev.profile().at("speedup_vs_torch_compile"), 0);
    } else {
      EXPECT_THAT(compiled, HasSubstr("torch.compile unavailable: "));
    }
  }

  static Backend* backend_;
  static v1::Hello* hello_;
  static std::string* skip_reason_;
};
Backend* NvidiaKernelBenchTest::backend_ = nullptr;
v1::Hello* NvidiaKernelBenchTest::hello_ = nullptr;
std::string* NvidiaKernelBenchTest::skip_reason_ = nullptr;

TEST_F(NvidiaKernelBenchTest, HelloSaysWhichPythonAndTorchRunTheProblems) {
  EXPECT_THAT(hello_->languages(), Contains("python"));
  EXPECT_THAT(hello_->languages(), Contains("cuda"));
  EXPECT_THAT(hello_->capabilities().at("kernelbench_torch"), HasSubstr("(CUDA "));
  EXPECT_TRUE(hello_->capabilities().contains("kernelbench_triton"));
  EXPECT_TRUE(hello_->capabilities().contains("kernelbench_torch_compile"));
}

TEST_F(NvidiaKernelBenchTest, PlainPytorchReluIsOkWithBothBaselines) {
  ExpectOkOnTheGpu(Eval("relu.py", "relu_new.py"));
}

TEST_F(NvidiaKernelBenchTest, LoadInlineCudaReluIsOk) {
  v1::Evaluation ev = Eval("relu.py", "relu_cuda.py");
  ExpectOkOnTheGpu(ev);
  EXPECT_GT(ev.profile().at("import_ahead_s"), 0);
}

TEST_F(NvidiaKernelBenchTest, TritonReluIsOk) {
  if (hello_->capabilities().at("kernelbench_triton") == "none") GTEST_SKIP() << "this torch has no Triton";
  ExpectOkOnTheGpu(Eval("relu.py", "relu_triton.py"));
}

TEST_F(NvidiaKernelBenchTest, SeededLinearLayerIsOk) { ExpectOkOnTheGpu(Eval("matmul.py", "matmul_new.py")); }

TEST_F(NvidiaKernelBenchTest, BrokenCandidatesGetTheirStatusesOnTheGpu) {
  v1::Evaluation wrong = Eval("relu.py", "relu_wrong.py");
  EXPECT_EQ(wrong.status(), v1::WRONG_ANSWER) << Explain(wrong);
  v1::Evaluation inplace = Eval("relu.py", "relu_inplace.py");
  EXPECT_EQ(inplace.status(), v1::INPUT_MODIFIED) << Explain(inplace);
  // Found before the GPU is taken: the candidate is imported ahead.
  v1::Evaluation syntax = Eval("relu.py", "relu_syntax.py");
  EXPECT_EQ(syntax.status(), v1::COMPILE_ERROR) << Explain(syntax);
  EXPECT_FALSE(syntax.has_device_use());
}

// The KernelBench bridge on the GPU: the worker's capture of the Model, then
// every kb_* recipe that applies on nvidia, its default genome's candidate
// (kevo's CUDA kernels built with nvcc at import, the rest PyTorch) judged
// like any candidate: correct on every seed, timed against both baselines.
// KEVO_BRIDGE_PROBLEMS (problem files, space-separated) runs only those, for a
// device call too short for all of them.
TEST_F(NvidiaKernelBenchTest, BridgeCandidatesRunKevosCudaKernelsAndAreCorrect) {
  const char* only = std::getenv("KEVO_BRIDGE_PROBLEMS");
  const std::vector<std::string> picked =
      only == nullptr ? std::vector<std::string>{} : absl::StrSplit(only, ' ', absl::SkipEmpty());
  for (const auto& [problem, bridges] : std::map<std::string, std::vector<std::string>>{
           {"softmax_gelu_cumsum.py", {"kb_cuda_elementwise", "kb_cuda_softmax", "kb_cuda_row_scan"}},
           {"layer_norm_relu.py", {"kb_cuda_elementwise", "kb_cuda_layer_norm"}},
           {"instance_norm.py", {"kb_cuda_elementwise", "kb_cuda_layer_norm"}},
           {"gelu_chain.py", {"kb_cuda_elementwise"}},
           {"reductions.py", {"kb_cuda_elementwise", "kb_cuda_col_reduce"}},
           {"row_norms.py", {"kb_cuda_elementwise", "kb_cuda_row_reduce", "kb_cuda_row_scale"}},
           {"scans.py", {"kb_cuda_row_scan"}},
           {"losses.py", {"kb_cuda_elementwise", "kb_cuda_map_reduce"}},
           {"hinge.py", {"kb_cuda_map_reduce"}},
           {"pools.py", {"kb_cuda_pool"}},
           {"cross_entropy.py", {"kb_cuda_row_cross_entropy"}}}) {
    if (!picked.empty() && std::find(picked.begin(), picked.end(), problem) == picked.end()) continue;
    SCOPED_TRACE(problem);
    absl::StatusOr<v1::Task> task = task::LoadTaskPath(DataDir() + "/" + problem);
    ASSERT_TRUE(task.ok()) << task.status();
    v1::Candidate itself;
    itself.set_language("python");
    itself.set_source(absl::StrCat(task->reference().source(), "\nModelNew = Model\n"));
    const v1::Evaluation first = backend_->Evaluate(*task, itself, nullptr);
    ASSERT_EQ(first.status(), v1::OK) << Explain(first);
    ASSERT_TRUE(first.has_model_graph()) << "the first evaluation of a problem on a worker carries its graph";
    *task->mutable_model_graph() = first.model_graph();
    std::vector<std::string> applied;
    for (const auto& r : proposer::AllRecipes()) {
      if (r->name().rfind("kb_", 0) != 0) continue;
      EXPECT_FALSE(r->Applies(*task, "nvidia") && r->Applies(*task, "cpu")) << r->name() << " is one platform's";
      if (!r->Applies(*task, "nvidia")) continue;
      applied.push_back(r->name());
      absl::StatusOr<v1::Candidate> c = r->Generate(*task, proposer::Genome{r->name(), r->space().Defaults()});
      ASSERT_TRUE(c.ok()) << r->name() << ": " << c.status();
      EXPECT_THAT(c->source(), HasSubstr("__global__")) << r->name();
      SCOPED_TRACE(r->name());
      ExpectOkOnTheGpu(backend_->Evaluate(*task, *c, nullptr));
    }
    EXPECT_THAT(applied, UnorderedElementsAreArray(bridges));
  }
}

}  // namespace
}  // namespace kevo::worker
