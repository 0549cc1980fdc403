// End-to-end tests of KernelBench-format evaluation on the cpu worker: the
// real CPU backend, the real kevo-runner-kernelbench under /usr/bin/python3
// with Debian's PyTorch, the real sandbox. The problems and candidates under
// tests/data/kernelbench/ were written for these tests: a correct candidate
// is OK with a speedup over PyTorch eager, and each broken one gets its
// specific status.
//
// The judge (the runner's `evaluate`) runs the problem's Model in its own
// interpreter and the candidate in another, so a candidate that changes its
// own process changes nothing the judge measures.
#include "worker/pipeline/kernelbench_eval.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/kernelbench.h"
#include "tests/testing/process.h"
#include "tests/worker/kernelbench_testing.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::worker {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

using ::kevo::testing::BinDir;

std::string DataDir() { return kb_testing::KernelBenchDataDir(); }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

v1::Candidate Python(const std::string& source) {
  v1::Candidate c;
  c.set_language("python");
  c.set_source(source);
  return c;
}

v1::Candidate Example(const std::string& name) {
  v1::Candidate c = Python(ReadText(DataDir() + "/candidates/" + name));
  EXPECT_FALSE(c.source().empty()) << name;
  return c;
}

// A ReLU candidate whose forward body is `body` (x is the input).
v1::Candidate ReluWith(const std::string& body) {
  return Python(absl::StrCat("import torch\nimport torch.nn as nn\n\n", "class ModelNew(nn.Module):\n",
                             "    def __init__(self):\n", "        super().__init__()\n        self.calls = 0\n\n",
                             "    def forward(self, x):\n", body));
}

// A correct ReLU candidate whose module first runs `prelude`.
v1::Candidate CorrectReluAfter(const std::string& prelude) {
  return Python(absl::StrCat(prelude, "import torch\nimport torch.nn as nn\n\n",
                             "class ModelNew(nn.Module):\n    def forward(self, x):\n",
                             "        return torch.relu(x)\n"));
}

std::string Explain(const v1::Evaluation& ev) { return kb_testing::ExplainKernelBench(ev); }

class KernelBenchEvalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = kb_testing::NewKernelBenchBackend("kernelbench_eval_test");
    ASSERT_NE(backend_, nullptr);
  }
  static void TearDownTestSuite() { delete backend_; }

  static v1::Task Problem(const std::string& name) { return kb_testing::LoadProblem(name); }
  static v1::Evaluation Eval(const std::string& problem, const v1::Candidate& candidate) {
    return backend_->Evaluate(Problem(problem), candidate, nullptr);
  }
  static void ExpectOkOverEager(const v1::Evaluation& ev) {
    ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
    EXPECT_EQ(ev.validation_size(), 3);
    for (const auto& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << c.detail();
    EXPECT_GT(ev.timing().median_s(), 0);
    EXPECT_GT(ev.baseline().median_s(), 0);
    EXPECT_GT(ev.speedup(), 0);
    EXPECT_DOUBLE_EQ(ev.speedup(), ev.baseline().median_s() / ev.timing().median_s());
    EXPECT_EQ(ev.baseline_kind(), v1::BASELINE_PYTORCH_EAGER);
    EXPECT_THAT(ev.notes().at("baseline"), HasSubstr("PyTorch eager"));
    EXPECT_THAT(ev.fingerprint().compiler(), HasSubstr("torch "));
    // Every timed call's outputs were checked, on inputs drawn afresh.
    EXPECT_EQ(ev.profile().at("timed_calls_checked"),
              ev.timing().samples_s_size() * ev.profile().at("candidate_calls_per_sample"));
    EXPECT_GT(ev.profile().at("ipc_overhead_s"), 0);
  }

  static Backend* backend_;
};
Backend* KernelBenchEvalTest::backend_ = nullptr;

// Several calls a sample, each on its own input set (on a GPU the default
// for short problems; here asked for): docs/kernelbench.md, "Calls per sample".
class KernelBenchCallsPerSampleTest : public KernelBenchEvalTest {
 protected:
  static void SetUpTestSuite() {
    CpuBackendOptions options = kb_testing::KernelBenchBackendOptions("kernelbench_calls_per_sample_test");
    options.kernelbench_sample_target_s = 0.05;
    auto backend = CreateCpuBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = backend->release();
  }
};

TEST_F(KernelBenchCallsPerSampleTest, AShortProblemIsTimedSeveralCallsASampleEveryOneChecked) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_new.py"));
  ExpectOkOverEager(ev);  // timed_calls_checked: every call of every sample
  const double calls = ev.profile().at("candidate_calls_per_sample");
  EXPECT_GT(calls, 1) << Explain(ev);
  EXPECT_LE(calls, 16);
  EXPECT_EQ(ev.profile().at("baseline_calls_per_sample"), calls) << "eager is timed as the candidate is";
}

TEST_F(KernelBenchCallsPerSampleTest, ReturningTheSameMemoryFromEveryCallIsWrongAndSaysSo) {
  // Right on every set while the sets hold the same values (validation);
  // once they differ, the last call's result overwrites the earlier ones'.
  v1::Evaluation ev = Eval("relu.py", ReluWith("        if not hasattr(self, 'out'):\n"
                                               "            self.out = torch.empty_like(x)\n"
                                               "        return torch.clamp(x, min=0, out=self.out)\n"));
  ASSERT_EQ(ev.status(), v1::WRONG_ANSWER) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(),
              AllOf(HasSubstr("timed call"), HasSubstr("returned the same memory"), HasSubstr("on input set 1 of")));
}

TEST_F(KernelBenchEvalTest, WorkerOffersPython) {
  absl::StatusOr<v1::Hello> hello = backend_->Describe();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_THAT(hello->languages(), Contains("python"));
}

TEST_F(KernelBenchEvalTest, CorrectReluIsOkWithASpeedupOverEager) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_new.py"));
  ExpectOkOverEager(ev);
  // torch.compile: timed where torch has it, and said plainly where not.
  const std::string& note = ev.notes().at("baseline_torch_compile");
  if (ev.profile().contains("torch_compile_median_s")) {
    EXPECT_THAT(note, HasSubstr("torch.compile(Model)"));
  } else {
    EXPECT_THAT(note, AllOf(HasSubstr("torch.compile unavailable: torch "), HasSubstr("no torch.compile")));
  }
}

TEST_F(KernelBenchEvalTest, CorrectMatmulWithSeededWeightsIsOk) {
  ExpectOkOverEager(Eval("matmul.py", Example("matmul_new.py")));
}

TEST_F(KernelBenchEvalTest, WrongModelNewIsWrongAnswer) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_wrong.py"));
  ASSERT_EQ(ev.status(), v1::WRONG_ANSWER) << Explain(ev);
  ASSERT_GT(ev.validation_size(), 0);
  EXPECT_EQ(ev.validation(0).output(), "output0");
  EXPECT_GT(ev.validation(0).max_abs_err(), 1e-4);
  EXPECT_EQ(ev.timing().median_s(), 0) << "a wrong candidate must not be timed";
}

TEST_F(KernelBenchEvalTest, ModifyingTheInputIsInputModified) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_inplace.py"));
  ASSERT_EQ(ev.status(), v1::INPUT_MODIFIED) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("input0"));
}

TEST_F(KernelBenchEvalTest, RaisingIsRuntimeErrorWithTheTraceback) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_raises.py"));
  ASSERT_EQ(ev.status(), v1::RUNTIME_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), AllOf(HasSubstr("ValueError: kevo-test: rank-2 inputs are not supported"),
                                                HasSubstr("in check_rank"), HasSubstr("forward")));
}

TEST_F(KernelBenchEvalTest, HangingIsRunTimeoutNamingWhereItHung) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_hangs.py"));
  ASSERT_EQ(ev.status(), v1::RUN_TIMEOUT) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), AllOf(HasSubstr("candidate.py"), HasSubstr("forward")));
}

TEST_F(KernelBenchEvalTest, SyntaxErrorIsCompileError) {
  v1::Evaluation ev = Eval("relu.py", Example("relu_syntax.py"));
  ASSERT_EQ(ev.status(), v1::COMPILE_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("SyntaxError"));
}

TEST_F(KernelBenchEvalTest, MissingModelNewIsCompileError) {
  v1::Evaluation ev = Eval("relu.py", Python("import torch\nclass Model2(torch.nn.Module):\n    pass\n"));
  ASSERT_EQ(ev.status(), v1::COMPILE_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("no class ModelNew"));
}

TEST_F(KernelBenchEvalTest, CxxCandidateForAKernelBenchTaskIsCompileError) {
  v1::Candidate c;
  c.set_language("c++");
  c.set_source("extern \"C\" void relu() {}\n");
  v1::Evaluation ev = Eval("relu.py", c);
  ASSERT_EQ(ev.status(), v1::COMPILE_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("takes Python candidates"));
}

TEST_F(KernelBenchEvalTest, WrongShapeIsWrongAnswer) {
  v1::Evaluation ev = Eval("relu.py", ReluWith("        return torch.relu(x)[:, :100]\n"));
  ASSERT_EQ(ev.status(), v1::WRONG_ANSWER) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("[16, 100] f32, the reference's [16, 4096] f32"));
}

TEST_F(KernelBenchEvalTest, InfinitiesAreNonfinite) {
  v1::Evaluation ev = Eval("relu.py", ReluWith("        return torch.relu(x) / 0.0\n"));
  ASSERT_EQ(ev.status(), v1::NONFINITE) << Explain(ev);
}

TEST_F(KernelBenchEvalTest, DifferentResultsOnTwoCallsAreNondeterministic) {
  v1::Evaluation ev = Eval("relu.py", ReluWith("        self.calls += 1\n"
                                               "        return torch.relu(x) + (self.calls - 1) * 1e-3\n"));
  ASSERT_EQ(ev.status(), v1::NONDETERMINISTIC) << Explain(ev);
}

// A problem whose own Model differs bitwise between two calls (as cuDNN's
// grouped transposed convolutions do on a GPU): ModelNew = Model is correct,
// and the note says why its calls were compared within the tolerance.
TEST_F(KernelBenchEvalTest, AModelThatIsItselfNondeterministicAsksOnlyAgreementWithinTheTolerance) {
  v1::Evaluation ev = Eval("noisy_relu.py", Python(ReadText(DataDir() + "/noisy_relu.py") + "\nModelNew = Model\n"));
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_THAT(
      ev.notes().at("reference_nondeterministic"),
      AllOf(HasSubstr("two different results on the same inputs (output0["), HasSubstr("within the tolerance")));
}

TEST_F(KernelBenchEvalTest, OnANondeterministicModelCallsThatDifferBeyondTheToleranceAreStillNondeterministic) {
  v1::Evaluation ev = Eval("noisy_relu.py", ReluWith("        self.calls += 1\n"
                                                     "        return torch.relu(x) + (self.calls - 1) * 1.0\n"));
  ASSERT_EQ(ev.status(), v1::NONDETERMINISTIC) << Explain(ev);
  EXPECT_THAT(Explain(ev), HasSubstr("beyond the tolerance"));
}

// A deterministic Model keeps the bitwise rule, and no note.
TEST_F(KernelBenchEvalTest, ADeterministicModelGetsNoNondeterminismNote) {
  v1::Evaluation ev = Eval("relu.py", CorrectReluAfter(""));
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_FALSE(ev.notes().contains("reference_nondeterministic"));
}

// A candidate that stops Python's clock at import: the runner took its clock
// before importing it, so the times are real and the speedup is plausible
// (a correct ReLU cannot be 100x PyTorch's own).
TEST_F(KernelBenchEvalTest, PatchingPythonsClockDoesNotChangeTheTimes) {
  v1::Evaluation ev = Eval("relu.py", CorrectReluAfter("import time\ntime.perf_counter = lambda: 0.0\n"));
  ExpectOkOverEager(ev);
  EXPECT_LT(ev.speedup(), 100) << Explain(ev);
}

// One that reaches into the runner's own clock changes the clock of its own
// process only: the judge that times it runs in another.
TEST_F(KernelBenchEvalTest, StoppingTheRunnersClockChangesNothingTheJudgeTimes) {
  v1::Evaluation ev = Eval("relu.py", CorrectReluAfter("import sys\nsys.modules['__main__']._clock = lambda: 0.0\n"));
  ExpectOkOverEager(ev);
  EXPECT_LT(ev.speedup(), 100) << Explain(ev);
}

// A correct first answer, then the last result again: every timed call gets
// inputs unlike the call before's, and its output is checked.
TEST_F(KernelBenchEvalTest, ReturningTheLastResultWhenTimedIsRejected) {
  v1::Evaluation ev = Eval("relu.py", ReluWith("        self.calls += 1\n"
                                               "        if self.calls <= 2 * 3:\n"
                                               "            self.last = torch.relu(x)\n"
                                               "        return self.last\n"));
  ASSERT_EQ(ev.status(), v1::WRONG_ANSWER) << Explain(ev);
  EXPECT_EQ(ev.events().rbegin()->stage(), v1::STAGE_PROFILE) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("timed call"));
}

// A result file the candidate writes before ending the judge is not taken.
TEST_F(KernelBenchEvalTest, SlowingTheNoWorkRepliesBuysNothing) {
  // The candidate sleeps 19 ms per call and makes its process's no-work
  // replies 20 ms slower: the overhead taken out of its samples is bounded
  // by a process that never ran its code, so its time stays about 19 ms.
  v1::Evaluation ev = Eval("relu.py", Example("relu_slow_nop.py"));
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_GT(ev.timing().median_s(), 0.015);
  EXPECT_LT(ev.profile().at("ipc_overhead_s"), 0.005);
}

TEST_F(KernelBenchEvalTest, AForgedResultIsNotTaken) {
  v1::Evaluation ev = Eval(
      "relu.py",
      ReluWith("        import json, os, signal\n"
               "        for d in {os.getcwd(), os.path.dirname(os.path.abspath(__file__))}:\n"
               "            with open(os.path.join(d, 'result.json'), 'w') as f:\n"
               "                json.dump({'status': 'OK', 'stage': 'profile', 'cases': [{'seed': s, 'status': 'OK'}\n"
               "                           for s in (1, 2, 3)], 'series': {'candidate': {'median_s': 1e-9},\n"
               "                           'eager': {'median_s': 1.0}}}, f)\n"
               "        os.kill(os.getppid(), signal.SIGKILL)\n"
               "        return torch.relu(x)\n"));
  EXPECT_NE(ev.status(), v1::OK) << Explain(ev);
  EXPECT_EQ(ev.speedup(), 0);
}

// The GPU path of the same evaluator and runner (what the nvidia worker
// uses), here with Debian's CPU-only torch: the probe and the runner say so
// plainly instead of running on the CPU.
TEST(KernelBenchCudaWithoutCudaTest, ProbeNamesTheCpuOnlyBuild) {
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::string runner = BinDir() + "/" + kKernelBenchRunnerName;
  auto cpu = ProbeKernelBench(**sb, kDefaultPython, runner, "cpu", ::testing::TempDir() + "/kbprobe-cpu",
                              SandboxSystemPaths(), {});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->torch.empty());
  EXPECT_FALSE(cpu->python_version.empty());
  if (!cpu->torch_cuda.empty()) GTEST_SKIP() << "this torch has CUDA " << cpu->torch_cuda;
  auto cuda = ProbeKernelBench(**sb, kDefaultPython, runner, "cuda", ::testing::TempDir() + "/kbprobe-cuda",
                               SandboxSystemPaths(), {});
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cuda.status().message(), HasSubstr("is a CPU-only build (torch.version.cuda is None)"));
  auto missing = ProbeKernelBench(**sb, "/nonexistent/python3", runner, "cuda", ::testing::TempDir() + "/kbprobe-none",
                                  SandboxSystemPaths(), {});
  EXPECT_THAT(missing.status().message(), HasSubstr("no such interpreter"));
}

// Problems at KernelBench's own scale on a worker left at its defaults
// (timeouts, memory limit, timing cap): nothing here is tuned to let them
// through.
class KernelBenchAtScaleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CpuBackendOptions o;
    o.work_dir = BinDir() + "/../tests/kernelbench_scale_test.work";
    o.runner_path = BinDir() + "/kevo-runner-cpu";
    o.calibrate = false;
    auto backend = CreateCpuBackend(o);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = backend->release();
  }
  static void TearDownTestSuite() { delete backend_; }

  // A KernelBench-format ReLU problem whose one input is `shape` (fp32),
  // written as `name`.py.
  static v1::Task ReluProblem(const std::string& name, const std::string& shape) {
    const std::string dir = ::testing::TempDir() + "/kb-scale";
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/" + name + ".py";
    std::ofstream(path) << "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                        << "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                        << "def get_inputs():\n    return [torch.randn(" << shape << ")]\n\n\n"
                        << "def get_init_inputs():\n    return []\n";
    absl::StatusOr<v1::Task> task = task::LoadTaskPath(path);
    EXPECT_TRUE(task.ok()) << task.status();
    return task.ok() ? *task : v1::Task();
  }

  static Backend* backend_;
};
Backend* KernelBenchAtScaleTest::backend_ = nullptr;

TEST_F(KernelBenchAtScaleTest, A256MiBProblemEvaluatesWithinTheDefaultTimeouts) {
  v1::Task task = ReluProblem("relu_256mib", "8192, 8192");
  v1::Evaluation ev = backend_->Evaluate(task, CorrectReluAfter(""), nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_EQ(ev.validation_size(), 3);
  EXPECT_GE(ev.profile().at("working_set_bytes"), 256.0 * (1 << 20));
  EXPECT_EQ(ev.profile().at("timed_calls_checked"),
            ev.timing().samples_s_size() * ev.profile().at("candidate_calls_per_sample"));
  for (const char* stage : {"stage_compile_s", "stage_validate_s", "stage_profile_s"}) {
    ASSERT_TRUE(ev.profile().contains(stage)) << stage;
    EXPECT_GT(ev.profile().at(stage), 0) << stage;
    std::printf("%s %.2f s\n", stage, ev.profile().at(stage));
  }
}

TEST_F(KernelBenchAtScaleTest, AProblemLargerThanTheWorkerIsResourceExhaustedNamingItAndTheWorkerGoesOn) {
  v1::Task task = ReluProblem("relu_64gib", "1 << 17, 1 << 17");
  v1::Evaluation ev = backend_->Evaluate(task, CorrectReluAfter(""), nullptr);
  ASSERT_EQ(ev.status(), v1::RESOURCE_EXHAUSTED) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), AllOf(HasSubstr("KernelBench problem 'relu_64gib'"), HasSubstr("64.00 GiB")));
  // Refused before anything was drawn: no 64 GiB was touched.
  EXPECT_LT(ev.profile().contains("peak_rss_bytes") ? ev.profile().at("peak_rss_bytes") : 0, 4.0 * (1 << 30));
  v1::Evaluation next = backend_->Evaluate(ReluProblem("relu_small", "16, 4096"), CorrectReluAfter(""), nullptr);
  EXPECT_EQ(next.status(), v1::OK) << Explain(next);
}

TEST(KernelBenchCudaWithoutCudaTest, EvaluatingOnCudaIsAnInfraErrorNamingTheCpuOnlyBuild) {
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok()) << sb.status();
  KernelBenchOptions o;
  o.runner_path = BinDir() + "/" + kKernelBenchRunnerName;
  o.device = "cuda";
  o.work_dir = ::testing::TempDir() + "/kb-cuda-without-cuda";
  o.compile_timeout = absl::Seconds(60);
  o.run_timeout = absl::Seconds(8);
  KernelBenchEvaluator evaluator(sb->get(), o);
  absl::StatusOr<v1::Task> task = task::LoadTaskPath(DataDir() + "/relu.py");
  ASSERT_TRUE(task.ok()) << task.status();
  std::vector<std::string> devices;
  v1::Evaluation ev = evaluator.Evaluate(*task, Example("relu_new.py"), nullptr, "nvidia", v1::Fingerprint(),
                                         [&](EvalRun&, const std::function<bool(const std::string&)>& stages) {
                                           devices.push_back("cuda:0");
                                           return stages("cuda:0");
                                         });
  if (ev.status() == v1::OK) GTEST_SKIP() << "this host's torch runs on a GPU";
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("CPU-only build"));
  // The import ran ahead without the device (it does not need CUDA); the
  // device was taken once, for the judge (validation and timing).
  EXPECT_GT(ev.profile().at("import_ahead_s"), 0);
  EXPECT_EQ(devices.size(), 1u);
}

}  // namespace
}  // namespace kevo::worker
