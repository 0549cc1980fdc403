// Production baselines, end to end with the real compiler, Debian's PyTorch
// (python3-torch) and the real runners:
//   - kevo-runner-production itself: the candidate, the rival and every form
//     are timed in interleaved rounds (each round holds one sample of each),
//     many times, and only on copies of the timed inputs the worker wrote;
//   - the cpu backend: a production expression that computes something else
//     than the reference is reported as such and is no yardstick; one that
//     agrees gives the evaluation its production speedup; one that raises is
//     named with its error; the speedup over the reference stays beside it;
//   - a rival (the job's best) timed beside the candidate: the slower of the
//     two loses whichever is passed first, and a rival that computes
//     something else is no comparison.
#include "worker/pipeline/production_eval.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
std::string BinDir() {
  return Env("KEVO_BIN_DIR", (fs::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string());
}
std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// y = 2 * x over n floats, as a task and as a kernel.
constexpr char kTask[] = R"pb(name: "twice"
op_family: "elementwise"
signature { function: "twice" params: ["x", "y", "n"] }
inputs { name: "x" dtype: F32 shape: ["n"] }
outputs { name: "y" dtype: F32 shape: ["n"] }
validate { name: "small" values: [{ key: "n" value: 64 }] }
validate { name: "odd" values: [{ key: "n" value: 1001 }] }
time { name: "timed" values: [{ key: "n" value: 262144 }] }
bytes_moved: "8*n"
flops: "n"
reference { language: "c++" file: "reference.cc" }
production { torch: "PRODUCTION" }
)pb";
constexpr char kReference[] =
    "#include <cstdint>\n"
    "extern \"C\" void twice(const float* x, float* y, int64_t n) {\n"
    "  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n"
    "}\n";

v1::Task TwiceTask(const std::string& production) {
  v1::Task task;
  EXPECT_TRUE(
      google::protobuf::TextFormat::ParseFromString(absl::StrReplaceAll(kTask, {{"PRODUCTION", production}}), &task));
  task.mutable_reference()->set_source(kReference);
  return task;
}

class ProductionRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("kevo_production_runner_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // kevo-runner-production on `spec` (written to the folder), the inputs file
  // there and `kernel` (and `rival`, if any) at a 1 s time cap; its result.
  nlohmann::json RunRunner(const nlohmann::json& spec, const std::string& kernel, const std::string& rival) {
    std::ofstream(dir_ / "spec.json") << spec.dump();
    const std::string cmd =
        absl::StrCat("/usr/bin/python3 ", BinDir(), "/kevo-runner-production --spec=", (dir_ / "spec.json").string(),
                     " --inputs=", (dir_ / "inputs.bin").string(), " --kernel=", kernel,
                     rival.empty() ? "" : " --rival=", rival, " --device=cpu --outputs=", (dir_ / "out.bin").string(),
                     " --result=", (dir_ / "result.json").string(), " --time_cap_s=1");
    const std::string result = (dir_ / "result.json").string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << ReadText(result);
    return nlohmann::json::parse(ReadText(result), nullptr, /*allow_exceptions=*/false);
  }
  fs::path dir_;
};

// The runner on its own: a kevo_entry kernel built here, a spec as the
// worker writes it, the inputs file; then what it reports is checked,
// and that the kernel wrote into the same outputs on every input copy.
TEST_F(ProductionRunnerTest, TimesEveryFormInInterleavedRoundsOnTheTimedInputsOnly) {
  const std::string src = (dir_ / "k.cc").string();
  // The kernel also counts the calls whose output is not its first call's.
  const std::string moved = (dir_ / "moved.txt").string();
  std::ofstream(src) << "#include <cstdint>\n#include <cstdio>\nstatic float* first = nullptr;\n"
                        "static long moved = 0;\nextern \"C\" void kevo_entry(void** a) {\n"
                        "  const float* x = static_cast<const float*>(a[0]); float* y = static_cast<float*>(a[1]);\n"
                        "  int64_t n = *static_cast<int64_t*>(a[2]);\n"
                        "  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n"
                        "#ifdef MOVED\n  if (!first) first = y;\n  if (y != first) ++moved;\n"
                        "  FILE* f = fopen(MOVED, \"w\"); fprintf(f, \"%ld\\n\", moved); fclose(f);\n#endif\n}\n";
  const std::string so = (dir_ / "k.so").string();
  ASSERT_EQ(std::system(absl::StrCat("g++ -O2 -shared -fPIC -DMOVED='\"", moved, "\"' -o ", so, " ", src).c_str()), 0);
  const std::string rival_so = (dir_ / "rival.so").string();
  ASSERT_EQ(std::system(absl::StrCat("g++ -O0 -shared -fPIC -o ", rival_so, " ", src).c_str()), 0);
  constexpr int64_t n = 1 << 16;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  const std::string inputs(reinterpret_cast<const char*>(x.data()), n * sizeof(float));
  std::ofstream(dir_ / "inputs.bin", std::ios::binary) << inputs;
  nlohmann::json spec = {
      {"task", "twice"},
      {"inputs", {{{"name", "x"}, {"dtype", "F32"}, {"shape", {n}}}}},
      {"outputs", {{{"name", "y"}, {"dtype", "F32"}, {"shape", {n}}}}},
      {"params",
       {{{"name", "x"}, {"kind", "input"}}, {{"name", "y"}, {"kind", "output"}}, {{"name", "n"}, {"kind", "symbol"}}}},
      {"symbols", {{"n", n}}},
      {"torch", "x * 2"},
      {"vendor", ""},
      {"threads", {2}},
      // A small "cache", so that several input copies rotate.
      {"llc_bytes", 1 << 20},
      {"mem_budget_bytes", 64 << 20}};
  const nlohmann::json r = RunRunner(spec, so, rival_so);
  ASSERT_EQ(r.at("status"), "OK") << r.dump();
  EXPECT_GT(r.at("copies").get<int>(), 1);

  // Every series ran on copies of the inputs file and on nothing else.
  const std::string digest = Sha256Hex(inputs);
  EXPECT_EQ(r.at("inputs_digest"), digest);
  const nlohmann::json& cand = r.at("candidate");
  EXPECT_EQ(cand.at("input_digests"), nlohmann::json::array({digest}));
  const nlohmann::json& rival = r.at("rival");
  EXPECT_EQ(rival.at("input_digests"), nlohmann::json::array({digest}));
  std::vector<const nlohmann::json*> series = {&cand, &rival};
  int timed_forms = 0;
  for (const nlohmann::json& f : r.at("forms")) {
    if (!f.at("timed").get<bool>()) {
      EXPECT_EQ(f.at("name"), "torch_compile") << f.dump();  // torch 1.13 has none
      EXPECT_THAT(f.at("error").get<std::string>(), HasSubstr("torch.compile unavailable"));
      continue;
    }
    ++timed_forms;
    EXPECT_EQ(f.at("error"), "");
    EXPECT_EQ(f.at("series").at("input_digests"), nlohmann::json::array({digest})) << f.at("name");
    series.push_back(&f.at("series"));
  }
  ASSERT_GE(timed_forms, 1);
  // Interleaved: as many samples of each, many of them, and sample k of every
  // series taken in round k (all of round k's before any of round k+1's).
  const size_t rounds = r.at("rounds").get<size_t>();
  EXPECT_GE(rounds, 3u);
  for (const nlohmann::json* s : series) {
    ASSERT_EQ(s->at("starts_s").size(), rounds);
    ASSERT_EQ(s->at("samples_s").size(), rounds);
  }
  for (size_t k = 0; k + 1 < rounds; ++k) {
    double latest = 0, earliest_next = 1e300;
    for (const nlohmann::json* s : series) {
      latest = std::max(latest, s->at("starts_s")[k].get<double>());
      earliest_next = std::min(earliest_next, s->at("starts_s")[k + 1].get<double>());
    }
    EXPECT_LT(latest, earliest_next) << "round " << k;
  }
  // The candidate wrote into one set of outputs on every copy, as a PyTorch
  // form's result lands in the block its allocator recycles.
  EXPECT_EQ(ReadText(moved), "0\n");
  // Outputs: each timed form's, then the candidate's and the rival's, all 2x.
  const std::string out = ReadText((dir_ / "out.bin").string());
  ASSERT_EQ(out.size(), (timed_forms + 2) * inputs.size());
  for (int part = 0; part <= timed_forms + 1; ++part) {
    const float* y = reinterpret_cast<const float*>(out.data() + part * inputs.size());
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(y[i], 2.0f * x[i]) << "part " << part << " at " << i;
  }
}

// OpenBLAS's pool (under torch.matmul and the vendor form) spins for ~0.1 s
// after each call unless told otherwise; a kernel timed in that window shares
// its cores with spinning threads (a 6.3 ms GEMM read 15.8 ms). The candidate
// here counts, on each call, the other threads of its process that are
// running or runnable: beside GEMM forms timed in most rounds just before
// it, they must have gone idle by its calls. The vendor form names the
// thread count OpenBLAS runs at, not OpenMP's.
TEST_F(ProductionRunnerTest, NoSeriesIsTimedBesideAnotherFormsSpinningThreads) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "OpenBLAS keeps no pool on one CPU";
  const std::string counts = (dir_ / "counts.txt").string();
  const std::string src = (dir_ / "k.cc").string();
  std::ofstream(src) << R"cc(#include <dirent.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static long calls = 0, beside = 0;
// The other threads of this process in state R (running or runnable).
static int OthersRunning() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.' || atol(e->d_name) == gettid()) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char* close = strrchr(buf, ')');
    if (close && close[1] == ' ' && close[2] == 'R') ++n;
  }
  if (d) closedir(d);
  return n;
}
extern "C" void kevo_entry(void** a) {
  const int64_t n = *static_cast<int64_t*>(a[3]);
  float* c = static_cast<float*>(a[2]);
  for (int64_t i = 0; i < n * n; ++i) c[i] = 0.0f;
  ++calls;
  beside += OthersRunning() > 0;
  FILE* f = fopen(COUNTS, "w");
  fprintf(f, "%ld %ld\n", calls, beside);
  fclose(f);
}
)cc";
  const std::string so = (dir_ / "k.so").string();
  ASSERT_EQ(std::system(absl::StrCat("g++ -O2 -shared -fPIC -DCOUNTS='\"", counts, "\"' -o ", so, " ", src).c_str()),
            0);
  constexpr int64_t n = 512;
  const std::string inputs(2 * n * n * sizeof(float), '\0');
  std::ofstream(dir_ / "inputs.bin", std::ios::binary) << inputs;
  nlohmann::json spec = {
      {"task", "gemm"},
      {"inputs",
       {{{"name", "A"}, {"dtype", "F32"}, {"shape", {n, n}}}, {{"name", "B"}, {"dtype", "F32"}, {"shape", {n, n}}}}},
      {"outputs", {{{"name", "C"}, {"dtype", "F32"}, {"shape", {n, n}}}}},
      {"params",
       {{{"name", "A"}, {"kind", "input"}},
        {{"name", "B"}, {"kind", "input"}},
        {{"name", "C"}, {"kind", "output"}},
        {{"name", "n"}, {"kind", "symbol"}}}},
      {"symbols", {{"n", n}}},
      {"torch", "torch.matmul(A, B)"},
      {"vendor", "gemm(A, B)"},
      {"threads", {2}},
      {"llc_bytes", 1 << 20},
      {"mem_budget_bytes", 64 << 20}};
  const nlohmann::json r = RunRunner(spec, so, "");
  ASSERT_EQ(r.at("status"), "OK") << r.dump();
  bool vendor_timed = false;
  for (const nlohmann::json& f : r.at("forms")) {
    if (f.at("name") != "vendor") continue;
    ASSERT_TRUE(f.at("timed").get<bool>()) << f.dump();
    vendor_timed = true;
    // OpenBLAS's default: every CPU the process may run on, as the candidate.
    EXPECT_EQ(f.at("threads"), r.at("candidate_threads")) << f.dump();
  }
  ASSERT_TRUE(vendor_timed);
  long calls = 0, beside = 0;
  ASSERT_EQ(std::sscanf(ReadText(counts).c_str(), "%ld %ld", &calls, &beside), 2);
  ASSERT_GE(calls, 10);
  // Spinning pools show beside every call (91 of 91 with OpenBLAS's default
  // spin); on a busy host a pool thread waiting for a core to go to sleep on
  // is runnable too (7 of 37 with two busy loops on two CPUs).
  EXPECT_LT(beside, calls / 2) << beside << " of " << calls << " calls ran beside another running thread";
}

CpuBackendOptions TestOptions() {
  CpuBackendOptions o;
  o.work_dir = BinDir() + "/../tests/production_eval_test.work";
  o.runner_path = BinDir() + "/kevo-runner-cpu";
  o.compile_timeout = absl::Seconds(60);
  o.run_timeout = absl::Seconds(10);
  o.memory_limit_bytes = int64_t{4} << 30;
  o.profile_time_cap_s = 0.3;
  o.calibrate = false;
  return o;
}

class ProductionBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto backend = CreateCpuBackend(TestOptions());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = backend->release();
  }
  static void TearDownTestSuite() { delete backend_; }
  static v1::Candidate Kernel(const std::string& body) {
    v1::Candidate c;
    c.set_language("c++");
    c.set_source(absl::StrCat("#include <cstdint>\nextern \"C\" void twice(const float* x, float* y, int64_t n) {\n",
                              body, "\n}\n"));
    return c;
  }
  static v1::Candidate Fast() {
    return Kernel("#pragma omp parallel for simd\n  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];");
  }
  // Fast() on one thread (an OpenMP team is at the mercy of the tests
  // running beside it), and Slow(), right with about 30x the work: x and y
  // may alias, so no pass can be dropped.
  static v1::Candidate OneThread() { return Kernel("for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];"); }
  static v1::Candidate Slow() {
    return Kernel("for (int r = 0; r < 30; ++r)\n    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];");
  }
  static v1::Evaluation Eval(const std::string& production) {
    return backend_->Evaluate(TwiceTask(production), Fast(), nullptr);
  }
  static const v1::ProductionTiming* Form(const v1::Evaluation& ev, const std::string& name) {
    for (const auto& p : ev.production()) {
      if (p.name() == name) return &p;
    }
    return nullptr;
  }
  static Backend* backend_;
};
Backend* ProductionBackendTest::backend_ = nullptr;

TEST_F(ProductionBackendTest, AnAgreeingProductionBaselineIsTheYardstick) {
  const v1::Evaluation ev = Eval("x * 2");
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  const v1::ProductionTiming* eager = Form(ev, "torch_eager");
  ASSERT_NE(eager, nullptr) << ev.DebugString();
  EXPECT_EQ(eager->error(), "");
  EXPECT_EQ(eager->call(), "x * 2");
  EXPECT_THAT(eager->library(), HasSubstr("torch"));
  EXPECT_GE(eager->timing().samples_s_size(), 3);
  EXPECT_EQ(eager->timing().samples_s_size(), eager->candidate().samples_s_size());
  EXPECT_GT(eager->speedup(), 0);
  EXPECT_DOUBLE_EQ(eager->speedup(), eager->timing().median_s() / eager->candidate().median_s());
  // The yardstick is the fastest usable form, and the figure is its speedup.
  ASSERT_FALSE(ev.production_yardstick().empty());
  const v1::ProductionTiming* yard = Form(ev, ev.production_yardstick());
  ASSERT_NE(yard, nullptr);
  for (const auto& p : ev.production()) {
    if (p.error().empty()) {
      EXPECT_LE(yard->timing().median_s(), p.timing().median_s()) << p.name();
    }
  }
  EXPECT_DOUBLE_EQ(ev.speedup_vs_production(), yard->speedup());
  // The reference figure stays beside it.
  EXPECT_GT(ev.speedup(), 0);
}

TEST_F(ProductionBackendTest, AProductionBaselineThatComputesSomethingElseIsRejected) {
  const v1::Evaluation ev = Eval("x * 3");
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  ASSERT_GT(ev.production_size(), 0);
  int rejected = 0;
  for (const auto& p : ev.production()) {
    if (p.name() == "torch_compile" && absl::StrContains(p.error(), "unavailable")) continue;
    EXPECT_THAT(p.error(), HasSubstr("disagrees with the task's reference")) << p.name();
    EXPECT_THAT(p.error(), HasSubstr("y["));
    EXPECT_EQ(p.speedup(), 0);
    ++rejected;
  }
  EXPECT_GE(rejected, 1);
  EXPECT_EQ(ev.speedup_vs_production(), 0);
  EXPECT_EQ(ev.production_yardstick(), "");
  EXPECT_GT(ev.speedup(), 0);
}

TEST_F(ProductionBackendTest, AProductionBaselineThatRaisesIsNamedWithItsError) {
  const v1::Evaluation ev = Eval("torch.no_such_op(x)");
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  const v1::ProductionTiming* eager = Form(ev, "torch_eager");
  ASSERT_NE(eager, nullptr);
  EXPECT_THAT(eager->error(), HasSubstr("raised"));
  EXPECT_THAT(eager->error(), HasSubstr("no_such_op"));
  EXPECT_EQ(ev.speedup_vs_production(), 0);
}

TEST_F(ProductionBackendTest, TheSlowerOfCandidateAndRivalLosesSideBySide) {
  const v1::Task task = TwiceTask("x * 2");
  const v1::Evaluation fast_first = backend_->EvaluateBeside(task, OneThread(), Slow(), nullptr);
  ASSERT_EQ(fast_first.status(), v1::OK) << fast_first.diagnostics().message();
  EXPECT_EQ(fast_first.rival_error(), "");
  // One loop: as many rival samples as the candidate's beside each form.
  ASSERT_GT(fast_first.production_size(), 0);
  EXPECT_EQ(fast_first.rival().samples_s_size(), fast_first.production(0).candidate().samples_s_size());
  EXPECT_DOUBLE_EQ(fast_first.speedup_vs_rival(),
                   fast_first.rival().median_s() / fast_first.production(0).candidate().median_s());
  EXPECT_GT(fast_first.speedup_vs_rival(), 2.0);
  const v1::Evaluation slow_first = backend_->EvaluateBeside(task, Slow(), OneThread(), nullptr);
  ASSERT_EQ(slow_first.status(), v1::OK) << slow_first.diagnostics().message();
  EXPECT_GT(slow_first.speedup_vs_rival(), 0);
  EXPECT_LT(slow_first.speedup_vs_rival(), 0.5);
}

TEST_F(ProductionBackendTest, ARivalThatComputesSomethingElseIsNoComparison) {
  const v1::Candidate wrong = Kernel("for (int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];");
  const v1::Evaluation ev = backend_->EvaluateBeside(TwiceTask("x * 2"), Fast(), wrong, nullptr);
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  EXPECT_THAT(ev.rival_error(), HasSubstr("the rival disagreed with the reference"));
  EXPECT_EQ(ev.speedup_vs_rival(), 0);
  // The candidate's own production figure is untouched.
  EXPECT_GT(ev.speedup_vs_production(), 0);
}

TEST(ProductionForTest, APlatformEntryWinsOverTheGenericOne) {
  v1::Task task;
  auto* generic = task.add_production();
  generic->set_torch("a");
  auto* nvidia = task.add_production();
  nvidia->set_platform("nvidia");
  nvidia->set_torch("b");
  EXPECT_EQ(ProductionFor(task, "nvidia")->torch(), "b");
  EXPECT_EQ(ProductionFor(task, "cpu")->torch(), "a");
  task.mutable_production()->DeleteSubrange(0, 1);
  EXPECT_EQ(ProductionFor(task, "cpu"), nullptr);
}

}  // namespace
}  // namespace kevo::worker
