// End-to-end tests of the mtia-sim backend with the real compiler, the real
// kevo-runner-mtia and the real sandbox: the Hello reports the simulated
// chip, a 64-PE double-buffered softmax validates and is timed in simulated
// time against the task's naive reference_mtia.cc, the simulator's counters
// come back as profile feedback, and each kind of bad candidate (wrong
// answer, kernel error, forbidden import, raw system call, CPU language, a
// task without an MTIA baseline) gets its specific status.
#include "worker/backends/mtia_sim/mtia_backend.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"

namespace kevo::worker {
namespace {

using ::testing::HasSubstr;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
std::string SourceDir() { return Env("KEVO_SOURCE_DIR", "."); }
std::string BinDir() {
  return Env("KEVO_BIN_DIR", (std::filesystem::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string());
}
std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The task's naive MTIA baseline (its "mtia-c++" extra reference), or "".
std::string ReferenceMtia(const v1::Task& task) {
  for (const v1::Reference& r : task.extra_references()) {
    if (r.language() == "mtia-c++") return r.source();
  }
  return "";
}

MtiaBackendOptions TestOptions() {
  MtiaBackendOptions o;
  o.work_dir = BinDir() + "/../tests/mtia_backend_test.work";
  o.runner_path = BinDir() + "/kevo-runner-mtia";
  o.run_timeout = absl::Seconds(120);
  o.memory_limit_bytes = int64_t{4} << 30;
  return o;
}

v1::Candidate Mtia(const std::string& source) {
  v1::Candidate c;
  c.set_language("mtia-c++");
  c.set_source(source);
  return c;
}

// The softmax candidate of the simulator's examples: 64 PEs, tiles of rows
// double-buffered in circular buffers.
v1::Candidate FastSoftmax() { return Mtia(ReadText(SourceDir() + "/mtia_sim/examples/softmax_candidate.cc")); }

class MtiaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/softmax");
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = new v1::Task(*std::move(task));
    auto backend = CreateMtiaBackend(TestOptions());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = backend->release();
    MtiaBackendOptions no_check = TestOptions();
    no_check.skip_symbol_check = true;
    auto unchecked = CreateMtiaBackend(no_check);
    ASSERT_TRUE(unchecked.ok()) << unchecked.status();
    unchecked_ = unchecked->release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete unchecked_;
    delete task_;
  }
  static std::string Explain(const v1::Evaluation& ev) {
    return absl::StrCat(v1::EvalStatus_Name(ev.status()), ": ", ev.diagnostics().message(),
                        " | violation=", ev.diagnostics().violation(),
                        " | compiler=", ev.diagnostics().compiler_output().substr(0, 800));
  }
  // The fast softmax with `from` replaced by `to` (which must occur).
  static v1::Candidate FastSoftmaxWith(const std::string& from, const std::string& to) {
    v1::Candidate c = FastSoftmax();
    EXPECT_NE(c.source().find(from), std::string::npos) << from;
    c.set_source(absl::StrReplaceAll(c.source(), {{from, to}}));
    return c;
  }

  static v1::Task* task_;
  static Backend* backend_;
  static Backend* unchecked_;
};
v1::Task* MtiaBackendTest::task_ = nullptr;
Backend* MtiaBackendTest::backend_ = nullptr;
Backend* MtiaBackendTest::unchecked_ = nullptr;

TEST_F(MtiaBackendTest, HelloReportsTheSimulatedChipNotTheHost) {
  auto hello = backend_->Describe();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->platform(), "mtia-sim");
  EXPECT_EQ(hello->device(), "MTIA 2i (simulated)");
  ASSERT_EQ(hello->languages_size(), 1);
  EXPECT_EQ(hello->languages(0), "mtia-c++");
  // 152 B/cycle at 1.35 GHz; 64 PEs x 1,024 fp16 MACs x 2 at 1.35 GHz.
  EXPECT_NEAR(hello->mem_bandwidth_gbs(), 205.2, 0.1);
  EXPECT_NEAR(hello->fp32_peak_gflops(), 176947, 1);
  EXPECT_EQ(hello->capabilities().at("chip"), "MTIA 2i");
  EXPECT_EQ(hello->capabilities().at("pes"), "8x8");
  EXPECT_EQ(hello->capabilities().at("local_memory_kib"), "384");

  MtiaBackendOptions one = TestOptions();
  one.chip = "1";
  auto mtia1 = CreateMtiaBackend(one);
  ASSERT_TRUE(mtia1.ok()) << mtia1.status();
  auto hello1 = (*mtia1)->Describe();
  ASSERT_TRUE(hello1.ok());
  EXPECT_EQ(hello1->device(), "MTIA 1 (simulated)");
  EXPECT_NEAR(hello1->mem_bandwidth_gbs(), 176, 0.5);

  // MTIA 300: the roofline is Meta's public figures, 6.1 TB/s and 0.6 PFLOPS.
  MtiaBackendOptions three_hundred = TestOptions();
  three_hundred.chip = "300";
  auto mtia300 = CreateMtiaBackend(three_hundred);
  ASSERT_TRUE(mtia300.ok()) << mtia300.status();
  auto hello300 = (*mtia300)->Describe();
  ASSERT_TRUE(hello300.ok());
  EXPECT_EQ(hello300->device(), "MTIA 300 (simulated)");
  EXPECT_NEAR(hello300->mem_bandwidth_gbs(), 6100, 1e-6);
  EXPECT_NEAR(hello300->fp32_peak_gflops(), 600000, 1e-6);
  EXPECT_EQ(hello300->capabilities().at("pes"), "8x8");
  EXPECT_EQ(hello300->capabilities().at("local_memory_kib"), "512");
}

TEST_F(MtiaBackendTest, UnknownChipIsInvalidArgument) {
  MtiaBackendOptions o = TestOptions();
  o.chip = "400";  // announced with MTIA 300, not modelled
  auto b = CreateMtiaBackend(o);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MtiaBackendTest, DoubleBufferedSoftmaxIsCorrectAndFasterThanTheNaiveBaselineInSimulatedTime) {
  std::vector<v1::StageEvent> sunk;
  v1::Evaluation ev = backend_->Evaluate(*task_, FastSoftmax(), [&](const v1::StageEvent& e) { sunk.push_back(e); });
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_EQ(ev.platform(), "mtia-sim");
  EXPECT_EQ(ev.fingerprint().device(), "MTIA 2i (simulated)");
  // Validation like every platform: every binding x seed.
  ASSERT_EQ(ev.validation_size(), task_->validate_size() * 3);
  for (const v1::CaseResult& c : ev.validation()) EXPECT_EQ(c.status(), v1::OK) << c.detail();
  // Simulated time: one deterministic sample, no spread.
  ASSERT_EQ(ev.timing().samples_s_size(), 1);
  EXPECT_EQ(ev.timing().spread(), 0);
  EXPECT_GT(ev.timing().median_s(), 0);
  EXPECT_GT(ev.baseline().median_s(), 0);
  // 64 PEs streaming vs one PE waiting on every store.
  EXPECT_GE(ev.speedup(), 3.0) << ev.timing().median_s() << " vs " << ev.baseline().median_s();
  // Against the chip's DRAM roofline: 32 MiB at 205 GB/s is about 164 us.
  EXPECT_GT(ev.roofline_fraction(), 0.5);
  EXPECT_LE(ev.roofline_fraction(), 1.0);
  // The simulator's counters are the profile feedback.
  const auto& p = ev.profile();
  for (const char* key : {"cycles", "simd_busy_cycles", "re_busy_cycles", "dma_busy_cycles", "dram_read_bytes",
                          "dram_write_bytes", "pe_utilization", "dram_utilization", "baseline_cycles"}) {
    ASSERT_TRUE(p.contains(key)) << key;
  }
  EXPECT_EQ(p.at("dram_read_bytes"), 4096.0 * 1024 * 4);
  EXPECT_EQ(p.at("dram_write_bytes"), 4096.0 * 1024 * 4);
  EXPECT_GT(p.at("baseline_cycles"), 3 * p.at("cycles"));
  EXPECT_NEAR(ev.timing().median_s(), p.at("cycles") / 1.35e9, 1e-12);
  ASSERT_EQ(sunk.size(), 3u);
  EXPECT_THAT(sunk[2].message(), HasSubstr("simulated"));

  // Deterministic: the same candidate costs the same cycles again.
  v1::Evaluation again = backend_->Evaluate(*task_, FastSoftmax(), nullptr);
  ASSERT_EQ(again.status(), v1::OK) << Explain(again);
  EXPECT_EQ(again.profile().at("cycles"), p.at("cycles"));
}

TEST_F(MtiaBackendTest, TheNaiveReferenceAsCandidateMatchesItself) {
  ASSERT_FALSE(ReferenceMtia(*task_).empty());
  v1::Evaluation ev = backend_->Evaluate(*task_, Mtia(ReferenceMtia(*task_)), nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
  EXPECT_DOUBLE_EQ(ev.speedup(), 1.0);
}

// Candidates written before the simulator left worker/ include the API by
// its old path; they still compile and run.
TEST_F(MtiaBackendTest, ACandidateIncludingTheApisOldPathStillRuns) {
  v1::Evaluation ev =
      backend_->Evaluate(*task_, FastSoftmaxWith("\"mtia_sim/mtia.h\"", "\"worker/mtia_sim/mtia.h\""), nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
}

TEST_F(MtiaBackendTest, ForgettingToNormaliseIsAWrongAnswer) {
  v1::Evaluation ev =
      backend_->Evaluate(*task_, FastSoftmaxWith("pe.BinaryRow(BinaryOp::kMul, yt, yt, s);", ""), nullptr);
  EXPECT_EQ(ev.status(), v1::WRONG_ANSWER) << Explain(ev);
}

TEST_F(MtiaBackendTest, LocalMemoryOverflowIsARuntimeErrorNamingTheKernelError) {
  v1::Evaluation ev = backend_->Evaluate(*task_,
                                         FastSoftmaxWith("CircularBuffer in = pe.AllocCircular(",
                                                         "pe.Alloc(1 << 20); CircularBuffer in = pe.AllocCircular("),
                                         nullptr);
  EXPECT_EQ(ev.status(), v1::RUNTIME_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("local memory"));
}

TEST_F(MtiaBackendTest, CppCandidateIsACompileErrorNamingTheLanguage) {
  v1::Candidate c = FastSoftmax();
  c.set_language("c++");
  v1::Evaluation ev = backend_->Evaluate(*task_, c, nullptr);
  EXPECT_EQ(ev.status(), v1::COMPILE_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("mtia-c++"));
}

TEST_F(MtiaBackendTest, MissingLaunchFunctionIsACompileError) {
  v1::Evaluation ev = backend_->Evaluate(*task_, FastSoftmaxWith("kevo_mtia_launch", "kevo_mtia_lunch"), nullptr);
  EXPECT_EQ(ev.status(), v1::COMPILE_ERROR) << Explain(ev);
}

TEST_F(MtiaBackendTest, TaskWithoutReferenceMtiaHasNoMtiaBaseline) {
  v1::Task task = *task_;
  task.clear_extra_references();  // what a task without reference_mtia.cc loads as
  v1::Evaluation ev = backend_->Evaluate(task, FastSoftmax(), nullptr);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("no reference_mtia.cc: no MTIA baseline"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("FAILED_PRECONDITION"));
}

constexpr char kOpensAFile[] = R"(
#include <cstdio>
#include "mtia_sim/mtia.h"
extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void** args) {
  std::FILE* f = std::fopen("/etc/passwd", "r");
  if (f != nullptr) std::fclose(f);
}
)";

TEST_F(MtiaBackendTest, ImportingFopenIsAViolationNamingIt) {
  v1::Evaluation ev = backend_->Evaluate(*task_, Mtia(kOpensAFile), nullptr);
  EXPECT_EQ(ev.status(), v1::SANDBOX_VIOLATION) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().violation(), HasSubstr("fopen"));
}

constexpr char kRawSocket[] = R"(
#include <sys/syscall.h>
#include "mtia_sim/mtia.h"
extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void** args) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(SYS_socket), "D"(2), "S"(1), "d"(0) : "rcx", "r11", "memory");
}
)";

TEST_F(MtiaBackendTest, SeccompStopsARawSocketWithoutTheSymbolCheck) {
  v1::Evaluation ev = unchecked_->Evaluate(*task_, Mtia(kRawSocket), nullptr);
  EXPECT_EQ(ev.status(), v1::SANDBOX_VIOLATION) << Explain(ev);
  EXPECT_THAT(ev.diagnostics().violation(), HasSubstr("socket"));
}

// Every starter task's naive reference_mtia.cc, as a candidate, is correct
// against the task's C++ reference on every binding and seed, and ties with
// itself as the baseline.
class MtiaReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MtiaReferenceTest, ReferenceMtiaIsCorrectAndIsItsOwnBaseline) {
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/" + GetParam());
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string reference = ReferenceMtia(*task);
  EXPECT_NE(reference.find("NAIVE single-PE"), std::string::npos);
  MtiaBackendOptions o = TestOptions();
  auto backend = CreateMtiaBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();
  v1::Evaluation ev = (*backend)->Evaluate(*task, Mtia(reference), nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << v1::EvalStatus_Name(ev.status()) << ": " << ev.diagnostics().message();
  EXPECT_DOUBLE_EQ(ev.speedup(), 1.0);
  // One PE: the other 63 idle.
  EXPECT_LT(ev.profile().at("pe_utilization"), 1.0 / 64 + 1e-9);
}

INSTANTIATE_TEST_SUITE_P(StarterTasks, MtiaReferenceTest,
                         ::testing::Values("vector_add", "softmax", "row_sum", "matmul"));

TEST(MtiaSymbolPolicyTest, AllowsTheRuntimePiecesOfMtiaHAndRefusesIo) {
  EXPECT_TRUE(IsAllowedMtiaImport("_Znwm"));
  EXPECT_TRUE(IsAllowedMtiaImport("_ZNSt13runtime_errorC2ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"));
  EXPECT_TRUE(IsAllowedMtiaImport("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm"));
  EXPECT_FALSE(IsAllowedMtiaImport("fopen"));
  EXPECT_FALSE(IsAllowedMtiaImport("clock_gettime"));
  EXPECT_FALSE(IsAllowedMtiaImport("syscall"));
}

}  // namespace
}  // namespace kevo::worker
