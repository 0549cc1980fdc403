// Unit tests for the CPU backend's static checks and the runner protocol: the
// ELF symbol reader, the import allowlist, the extra-flag check, the
// generated wrapper and the report/result formats.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "worker/pipeline/elf_symbols.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/pipeline/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class ElfSymbolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/kevo-elf-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tiny.cc") << "#include <unistd.h>\n"
                                        "extern \"C\" int tiny_kernel(int x) { return x + getpid(); }\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Compile(const std::string& args) {
    std::string cmd = absl::StrCat("cd ", dir_, " && g++ -O2 -fPIC ", args, " tiny.cc 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::string dir_;
};

TEST_F(ElfSymbolsTest, ListsImportsAndExportsOfATinySharedObject) {
  Compile("-shared -o tiny.so");
  auto symbols = ReadElfSymbols(dir_ + "/tiny.so");
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  std::vector<std::string> undefined = UndefinedSymbolNames(*symbols);
  EXPECT_THAT(undefined, Contains("getpid"));
  EXPECT_THAT(undefined, Not(Contains("tiny_kernel")));
  bool exported = false;
  for (const ElfSymbol& s : *symbols) {
    if (s.name == "tiny_kernel") exported = !s.undefined && s.function && s.global;
  }
  EXPECT_TRUE(exported);
  EXPECT_THAT(ForbiddenImports(undefined), Contains("getpid"));
}

TEST_F(ElfSymbolsTest, ReadsTheStaticTableOfARelocatableObject) {
  Compile("-c -o tiny.o");
  auto symbols = ReadElfSymbols(dir_ + "/tiny.o");
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  // An object has none of the start files' imports (__cxa_finalize, ...).
  EXPECT_THAT(UndefinedSymbolNames(*symbols), ElementsAre("getpid"));
}

TEST(ElfSymbolsParseTest, RejectsWhatIsNotElf64) {
  EXPECT_EQ(ParseElfSymbols("not an elf file at all").status().code(), absl::StatusCode::kInvalidArgument);
  std::string truncated =
      "\x7f"
      "ELF\x02\x01\x01";
  truncated.resize(70, '\0');
  EXPECT_EQ(ParseElfSymbols(truncated).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadElfSymbols("/nonexistent/kevo.so").status().code(), absl::StatusCode::kNotFound);
}

TEST(SymbolPolicyTest, AllowsMathMemoryOpenMpAndTheCxxRuntime) {
  for (const char* name : {"expf",
                           "sqrt",
                           "tanhf",
                           "_ZGVdN8v_expf",
                           "memcpy",
                           "memset",
                           "malloc",
                           "free",
                           "posix_memalign",
                           "_Znwm",
                           "_ZdlPvm",
                           "_ZnwmSt11align_val_t",
                           "GOMP_parallel",
                           "omp_get_thread_num",
                           "__cxa_guard_acquire",
                           "__stack_chk_fail",
                           "_Unwind_Resume",
                           "__gxx_personality_v0",
                           "_ZSt17__throw_bad_allocv",
                           "_ZSt20__throw_length_errorPKc",
                           "__cxa_finalize",
                           "_ITM_registerTMCloneTable",
                           "__gmon_start__"}) {
    EXPECT_TRUE(IsAllowedImport(name)) << name;
  }
}

TEST(SymbolPolicyTest, RefusesProcessesFilesNetworkClocksAndThreads) {
  for (const char* name :
       {"fork",  "vfork",         "execve",       "system",         "popen",     "socket", "connect", "dlopen",
        "dlsym", "clock_gettime", "gettimeofday", "pthread_create", "open",      "fopen",  "syscall", "mmap",
        "kill",  "ptrace",        "_ZSt4cout",    "printf",         "sigaction", "getenv"}) {
    EXPECT_FALSE(IsAllowedImport(name)) << name;
  }
  EXPECT_THAT(ForbiddenImports({"expf", "fork", "memcpy", "socket"}), ElementsAre("fork", "socket"));
}

TEST(ExtraFlagsTest, AcceptsCodeGenerationFlags) {
  EXPECT_TRUE(CheckExtraFlags({}).ok());
  absl::Status s = CheckExtraFlags({"-O2", "-Ofast", "-funroll-loops", "-ffast-math", "-mavx2", "-march=znver4",
                                    "-mprefer-vector-width=512", "-DTILE=64", "-UNDEBUG", "-std=c++20", "-Wall", "-g",
                                    "--param=max-unroll-times=8"});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ExtraFlagsTest, RefusesFlagsThatReadFilesRunProgramsOrLoadPlugins) {
  for (const char* flag : {"-fplugin=/tmp/evil.so",
                           "@/etc/flags",
                           "-B/tmp/evil",
                           "-wrapper",
                           "-specs=/tmp/x.specs",
                           "-Wl,--script=/etc/passwd",
                           "-Wa,-a=/tmp/listing",
                           "-Wp,-MD,/tmp/x",
                           "-Xlinker",
                           "-I/etc",
                           "-include/etc/passwd",
                           "-isystem/tmp",
                           "-L/tmp",
                           "-lcurl",
                           "-o/tmp/out",
                           "-xc",
                           "-save-temps",
                           "-fprofile-use=/tmp/p",
                           "-fdump-tree-all",
                           "-flto",
                           "-fuse-ld=gold",
                           "extra.cc",
                           "-D1BAD",
                           "-O2\n-fplugin=x"}) {
    absl::Status s = CheckExtraFlags({"-O3", flag});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
  }
  EXPECT_THAT(std::string(CheckExtraFlags({"-fplugin=x.so"}).message()), HasSubstr("-fplugin=x.so"));
  EXPECT_EQ(CheckExtraFlags(std::vector<std::string>(100, "-O2")).code(), absl::StatusCode::kInvalidArgument);
}

v1::Task SoftmaxLikeTask() {
  v1::Task task;
  task.set_name("t");
  task.mutable_signature()->set_function("kern");
  for (const char* p : {"x", "y", "rows", "cols"}) task.mutable_signature()->add_params(p);
  auto* x = task.add_inputs();
  x->set_name("x");
  x->set_dtype(v1::F32);
  x->add_shape("rows");
  x->add_shape("cols");
  auto* y = task.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::F64);
  y->add_shape("rows");
  auto* b = task.add_validate();
  b->set_name("small");
  (*b->mutable_values())["rows"] = 3;
  (*b->mutable_values())["cols"] = 5;
  return task;
}

TEST(RunnerProtocolTest, WrapperCallsTheTaskFunctionWithTypedArguments) {
  auto src = runner::GenerateWrapperSource(SoftmaxLikeTask());
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_THAT(*src, HasSubstr("extern \"C\" void kern(const float* x, double* y, int64_t rows, int64_t cols);"));
  EXPECT_THAT(*src, HasSubstr("void kevo_entry(void** args)"));
  EXPECT_THAT(*src, HasSubstr("static_cast<const float*>(args[0])"));
  EXPECT_THAT(*src, HasSubstr("static_cast<double*>(args[1])"));
  EXPECT_THAT(*src, HasSubstr("*static_cast<const int64_t*>(args[3])"));
  v1::Task bad = SoftmaxLikeTask();
  bad.mutable_signature()->add_params("nothing");
  EXPECT_EQ(runner::GenerateWrapperSource(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunnerProtocolTest, SeedsAreOneToNAndAtLeastThree) {
  v1::Task task;
  EXPECT_THAT(runner::ValidationSeeds(task), ElementsAre(1, 2, 3));
  task.set_seeds(5);
  EXPECT_THAT(runner::ValidationSeeds(task), ElementsAre(1, 2, 3, 4, 5));
}

TEST(RunnerProtocolTest, OutputLayoutIsBindingBySeedByOutput) {
  auto layout = runner::OutputLayout(SoftmaxLikeTask(), {1, 2});
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->size(), 2u);
  EXPECT_EQ((*layout)[0].seed, 1u);
  EXPECT_EQ((*layout)[0].bytes, 3 * 8);
  EXPECT_EQ((*layout)[1].offset, 24);
}

TEST(RunnerProtocolTest, ParsesTheReport) {
  runner::Report r =
      runner::ParseReport("alloc_failed 53687091200\nsigsys 57\nsigsys 41\nbad_alloc std::bad_alloc\nerror x y\n");
  ASSERT_TRUE(r.sigsys_nr.has_value());
  EXPECT_EQ(*r.sigsys_nr, 57);  // the first violation wins
  EXPECT_THAT(r.alloc_failures, ElementsAre(53687091200));
  EXPECT_EQ(r.bad_alloc, "std::bad_alloc");
  EXPECT_EQ(r.error, "x y");
}

TEST(RunnerProtocolTest, CasesAndProfileRoundTripThroughJson) {
  runner::CaseReport c;
  c.binding = "odd";
  c.seed = 2;
  c.nondet_output = "z";
  c.nondet_index = 7;
  auto cases = runner::CasesFromJson(runner::CasesToJson({c}));
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 1u);
  EXPECT_EQ((*cases)[0].nondet_index, 7);
  EXPECT_EQ(runner::CasesFromJson("{").status().code(), absl::StatusCode::kDataLoss);

  runner::ProfileReport p;
  p.candidate.samples_s = {3, 1, 2, 4, 5};
  runner::Summarise(p.candidate);
  EXPECT_DOUBLE_EQ(p.candidate.median_s, 3);
  EXPECT_DOUBLE_EQ(p.candidate.spread, (4.0 - 2.0) / 3.0);
  auto back = runner::ProfileFromJson(runner::ProfileToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->candidate.median_s, 3);
}

TEST(RunnerProtocolTest, ProfileCarriesItsTimedChecksAndPerturbedInputs) {
  runner::ProfileReport p;
  p.timed_checks = {0, 7, 19, 40};
  p.perturbed_inputs = {"x", "indices"};
  p.unperturbed_inputs = {"boundaries"};
  auto back = runner::ProfileFromJson(runner::ProfileToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->timed_checks, ElementsAre(0, 7, 19, 40));
  EXPECT_THAT(back->perturbed_inputs, ElementsAre("x", "indices"));
  EXPECT_THAT(back->unperturbed_inputs, ElementsAre("boundaries"));
  // A runner that checks no timed call (kevo-runner-mtia's simulated profile,
  // an older runner) writes none of the three: the worker reads the check
  // pair alone.
  auto old = runner::ProfileFromJson(
      R"({"candidate":{"samples_s":[1],"median_s":1,"spread":0,"calls_per_sample":1},)"
      R"("baseline":{"samples_s":[2],"median_s":2,"spread":0,"calls_per_sample":1},)"
      R"("copies":1,"working_set_bytes":8,"elapsed_s":0.1,"converged":true,"modified_input":""})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->timed_checks.empty());
  EXPECT_TRUE(old->perturbed_inputs.empty());
  EXPECT_TRUE(old->unperturbed_inputs.empty());
}

// The GPU runners' own observations travel in the same profile (no second
// file); a profile without its two whole timing series is not a result.
TEST(RunnerProtocolTest, ProfileCarriesWhatOnlyAGpuRunnerSeesAndNeedsItsSeries) {
  runner::ProfileReport p;
  p.escaped_samples_candidate = 3;
  p.escaped_samples_baseline = 1;
  p.l2_flush_bytes = int64_t{50} << 20;
  p.overflowed = "y";
  auto back = runner::ProfileFromJson(runner::ProfileToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->escaped_samples_candidate, 3);
  EXPECT_EQ(back->escaped_samples_baseline, 1);
  EXPECT_EQ(back->l2_flush_bytes, int64_t{50} << 20);
  EXPECT_EQ(back->overflowed, "y");
  EXPECT_EQ(runner::ProfileFromJson("{}").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(runner::ProfileFromJson(R"({"candidate":{},"baseline":{}})").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(runner::ProfileFromJson("[1]").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kevo::worker
