#include "common/task/task_loader.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/tensor.h"

namespace kevo::task {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A valid task; the tests below break one line of it at a time. Line numbers
// matter: the tests assert them.
constexpr char kValidTask[] = R"pb(name: "t"
op_family: "softmax"
signature { function: "f" params: ["x", "y", "rows", "cols"] }
inputs {
  name: "x"
  dtype: F32
  shape: ["rows", "cols"]
}
outputs {
  name: "y"
  dtype: F32
  shape: ["rows", "cols"]
}
validate { name: "small" values: [{ key: "rows" value: 4 }, { key: "cols" value: 8 }] }
validate { name: "odd" values: [{ key: "rows" value: 3 }, { key: "cols" value: 9 }] }
time { name: "timed" values: [{ key: "rows" value: 64 }, { key: "cols" value: 64 }] }
bytes_moved: "8*rows*cols"
flops: "3*rows*cols"
reference { language: "c++" file: "reference.cc" }
)pb";

constexpr char kReference[] = "extern \"C\" void f() {}\n";

// The repository root: KEVO_SOURCE_DIR, else the working directory (ctest
// runs kevo_cc_test binaries in the repository root).
fs::path SourceDir() {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  return dir != nullptr ? fs::path(dir) : fs::current_path();
}

class TaskLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("kevo_task_loader_", info->name(), "_", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` as the task file (and the reference unless told not to).
  void WriteTask(const std::string& text, bool with_reference = true) {
    std::ofstream(dir_ / "task.textproto") << text;
    if (with_reference) std::ofstream(dir_ / "reference.cc") << kReference;
  }
  // Writes kValidTask with `from` replaced by `to` (which must occur).
  void WriteTaskWith(const std::string& from, const std::string& to) {
    std::string text = kValidTask;
    ASSERT_NE(text.find(from), std::string::npos) << from;
    WriteTask(absl::StrReplaceAll(text, {{from, to}}));
  }
  std::string TaskPath() const { return (dir_ / "task.textproto").string(); }
  // "<task path>:<line>:" — the prefix of an error on that line.
  std::string At(int line) const { return absl::StrCat(TaskPath(), ":", line, ":"); }

  fs::path dir_;
};

TEST_F(TaskLoaderTest, LoadsValidTaskReadsReferenceAndDefaultsSeeds) {
  WriteTask(kValidTask);
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->name(), "t");
  EXPECT_EQ(task->seeds(), 3);
  EXPECT_EQ(task->reference().source(), kReference);
  EXPECT_EQ(task->validate_size(), 2);
}

TEST_F(TaskLoaderTest, KeepsExplicitSeeds) {
  WriteTask(absl::StrCat(kValidTask, "seeds: 5\n"));
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->seeds(), 5);
}

// A time_on binding line for `platform` with the given rows.
std::string TimeOn(const std::string& platform, int rows) {
  return absl::StrCat("time_on { platform: \"", platform, "\" binding { name: \"timed_", platform,
                      "\" values: [{ key: \"rows\" value: ", rows, " }, { key: \"cols\" value: 64 }] } }\n");
}

TEST_F(TaskLoaderTest, TimeOnReplacesTheTimedBindingOnItsPlatformOnly) {
  WriteTask(absl::StrCat(kValidTask, TimeOn("nvidia", 65536), TimeOn("amd", 4096)));
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  const v1::Task nvidia = TimedOn(*task, "nvidia");
  EXPECT_EQ(nvidia.time().name(), "timed_nvidia");
  EXPECT_EQ(nvidia.time().values().at("rows"), 65536);
  EXPECT_EQ(TimedOn(*task, "amd").time().values().at("rows"), 4096);
  // Platforms without one keep `time`; validation bindings never change.
  const v1::Task cpu = TimedOn(*task, "cpu");
  EXPECT_EQ(cpu.time().name(), "timed");
  EXPECT_EQ(cpu.time().values().at("rows"), 64);
  EXPECT_EQ(nvidia.validate_size(), 2);
  EXPECT_EQ(nvidia.validate(1).values().at("rows"), 3);
  // The work the roofline divides by follows the platform's binding.
  EXPECT_DOUBLE_EQ(WorkAtTimedBinding(nvidia).first, 8.0 * 65536 * 64);
  EXPECT_DOUBLE_EQ(WorkAtTimedBinding(cpu).first, 8.0 * 64 * 64);
}

TEST_F(TaskLoaderTest, TimeOnErrorsNameTheLineAndTheProblem) {
  const int line = 20;  // the first line after kValidTask
  struct Case {
    std::string text;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {TimeOn("tpu", 8), "names platform 'tpu'; known platforms: cpu, nvidia, amd, mtia-sim"},
      {absl::StrCat(TimeOn("nvidia", 8), TimeOn("nvidia", 16)), "names platform 'nvidia' twice"},
      {"time_on { platform: \"nvidia\" }\n", "has no binding with a name"},
      {"time_on { platform: \"nvidia\" binding { name: \"big\" values: [{ key: \"rows\" value: 8 }] } }\n",
       "time_on 'nvidia' binding gives no value for symbol 'cols'"},
      {absl::StrReplaceAll(TimeOn("nvidia", 8), {{"value: 8", "value: 0"}}), "symbol values must be positive"},
  };
  for (const Case& c : cases) {
    WriteTask(absl::StrCat(kValidTask, c.text));
    auto task = LoadTaskDir(dir_.string());
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(task.status().message()), HasSubstr(c.problem)) << c.text;
    const int at = c.problem.find("twice") != std::string::npos ? line + 1 : line;
    EXPECT_THAT(std::string(task.status().message()), StartsWith(At(at))) << c.text;
  }
}

// A task whose timed binding asks for 10^12 elements once passed validation
// and took workers down (std::bad_alloc); one whose shape wraps int64 to 0
// reached a worker as a valid size. Both are refused, naming the binding, the
// tensor and the size, at every kind of binding.
TEST_F(TaskLoaderTest, BindingsBeyondTheSizeLimitsAreRefusedNamingTensorBindingAndSize) {
  struct Case {
    std::string from, to;
    int line;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"{ key: \"rows\" value: 64 }, { key: \"cols\" value: 64 }",
       "{ key: \"rows\" value: 1000000 }, { key: \"cols\" value: 1000000 }", 16,
       "time binding: tensor 'x' is 3.6 TiB (4000000000000 bytes of f32), above the limit of 8 GiB per tensor"},
      {"{ key: \"rows\" value: 3 }, { key: \"cols\" value: 9 }",
       "{ key: \"rows\" value: 3 }, { key: \"cols\" value: 999999999999 }", 15,
       "validate binding 'odd': tensor 'x' is 10.9 TiB (11999999999988 bytes of f32), above the limit of 8 GiB "
       "per tensor"},
      // 2^32 x 2^32 elements: NumElements wraps to 0.
      {"{ key: \"rows\" value: 64 }, { key: \"cols\" value: 64 }",
       "{ key: \"rows\" value: 4294967296 }, { key: \"cols\" value: 4294967296 }", 16,
       "time binding: tensor 'x': shape [4294967296 x 4294967296] has more elements than int64 holds"},
  };
  for (const Case& c : cases) {
    WriteTaskWith(c.from, c.to);
    auto task = LoadTaskDir(dir_.string());
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << c.to;
    EXPECT_THAT(std::string(task.status().message()), HasSubstr(c.problem)) << c.to;
    EXPECT_THAT(std::string(task.status().message()), StartsWith(At(c.line))) << c.to;
  }
}

TEST_F(TaskLoaderTest, ATimeOnBindingBeyondTheLimitsIsRefused) {
  WriteTask(absl::StrCat(kValidTask, TimeOn("nvidia", 1 << 30)));  // 2^30 x 64 f32 = 256 GiB
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              HasSubstr("time_on 'nvidia' binding: tensor 'x' is 256 GiB (274877906944 bytes of f32), above the "
                        "limit of 8 GiB per tensor"));
  EXPECT_THAT(std::string(task.status().message()), StartsWith(At(20)));
}

TEST(ValidateTaskTest, LimitsAreTheCallersToSet) {
  auto parsed = ParseTaskText(kValidTask, "");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  // The timed binding holds 64 x 64 f32 twice: 16 KiB each, 32 KiB in all.
  EXPECT_TRUE(ValidateTask(*parsed, {}, TaskLimits{16384, 32768}).ok());
  absl::Status tensor = ValidateTask(*parsed, {}, TaskLimits{16000, 1 << 20});
  EXPECT_EQ(tensor.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tensor.message()),
              HasSubstr("task: time binding: tensor 'x' is 16 KiB (16384 bytes of f32), above the limit of 15.6 KiB "
                        "per tensor"));
  absl::Status total = ValidateTask(*parsed, {}, TaskLimits{1 << 20, 32000});
  EXPECT_EQ(total.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(total.message()),
              HasSubstr("task: time binding: its tensors, up to and including 'y', are 32 KiB (32768 bytes), above "
                        "the limit of 31.3 KiB per binding"));
  // Overflow is refused whatever the limits.
  v1::Task task = *parsed;
  (*task.mutable_time()->mutable_values())["rows"] = INT64_MAX;
  absl::Status overflow = ValidateTask(task, {}, TaskLimits{INT64_MAX, INT64_MAX});
  EXPECT_EQ(overflow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(overflow.message()), HasSubstr("has more elements than int64 holds"));
}

TEST_F(TaskLoaderTest, KeepsProductionBaselinesPerPlatform) {
  WriteTask(absl::StrCat(kValidTask, "production { torch: \"torch.softmax(x, dim=-1)\" }\n",
                         "production { platform: \"nvidia\" torch: \"F.softmax(x, -1)\" }\n"));
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_EQ(task->production_size(), 2);
  EXPECT_EQ(task->production(0).torch(), "torch.softmax(x, dim=-1)");
  EXPECT_EQ(task->production(1).platform(), "nvidia");
}

TEST_F(TaskLoaderTest, ProductionBaselineErrorsNameTheLineAndTheProblem) {
  const int line = 20;  // the first line after kValidTask
  struct Case {
    std::string text;
    std::string problem;
    int line;
  };
  const std::vector<Case> cases = {
      {"production_baseline: \"openblas_sgemm\"\n", "production_baseline 'openblas_sgemm' is retired", line},
      {"production { platform: \"tpu\" torch: \"x\" }\n", "names platform 'tpu'", line},
      {"production { }\n", "needs a 'torch' expression or a 'vendor' call", line},
      {"production { vendor: \"cblas_sgemm(x)\" }\n", "vendor call 'cblas_sgemm(x)' is not one kevo times", line},
      {"production { torch: \"x\" }\nproduction { torch: \"x * 1\" }\n", "two production entries for every platform",
       line + 1},
      {"production { torch: \"x\" }\nno_production_reason: \"none\"\n", "keep one", line + 1},
  };
  for (const Case& c : cases) {
    WriteTask(absl::StrCat(kValidTask, c.text));
    auto task = LoadTaskDir(dir_.string());
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(task.status().message()), HasSubstr(c.problem)) << c.text;
    EXPECT_THAT(std::string(task.status().message()), StartsWith(At(c.line))) << c.text;
  }
}

TEST_F(TaskLoaderTest, IntRangeBoundExpressionsMustEvaluateUnderEveryBinding) {
  const std::string ints =
      "inputs {\n  name: \"i\"\n  dtype: I64\n  shape: [\"rows\"]\n  "
      "distribution { int_range { low: 0 high: 9 high_expr: \"EXPR\" } }\n}\n";
  auto with = [&](const std::string& expr) {
    std::string text = absl::StrReplaceAll(kValidTask, {{"params: [\"x\", \"y\"", "params: [\"x\", \"i\", \"y\""}});
    text = absl::StrReplaceAll(text, {{"outputs {", absl::StrReplaceAll(ints, {{"EXPR", expr}}) + "outputs {"}});
    WriteTask(text);
    return LoadTaskDir(dir_.string());
  };
  auto ok = with("rows-1");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->inputs(1).distribution().int_range().high_expr(), "rows-1");
  auto unknown = with("nope-1");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("int_range bound 'nope-1'"));
  auto empty = with("rows-100");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("it needs low <= high"));
}

TEST_F(TaskLoaderTest, ReadsReferenceMtiaAsTheMtiaExtraReference) {
  WriteTask(kValidTask);
  std::ofstream(dir_ / "reference_mtia.cc") << "// naive MTIA port\n";
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_EQ(task->extra_references_size(), 1);
  EXPECT_EQ(task->extra_references(0).language(), "mtia-c++");
  EXPECT_EQ(task->extra_references(0).file(), "reference_mtia.cc");
  EXPECT_EQ(task->extra_references(0).source(), "// naive MTIA port\n");
}

TEST_F(TaskLoaderTest, ReadsReferenceCuAsTheCudaExtraReference) {
  WriteTask(kValidTask);
  std::ofstream(dir_ / "reference.cu") << "// naive CUDA port\n";
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_EQ(task->extra_references_size(), 1);
  EXPECT_EQ(task->extra_references(0).language(), "cuda");
  EXPECT_EQ(task->extra_references(0).file(), "reference.cu");
  EXPECT_EQ(task->extra_references(0).source(), "// naive CUDA port\n");
}

TEST_F(TaskLoaderTest, TaskWithoutReferenceMtiaHasNoExtraReference) {
  WriteTask(kValidTask);
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->extra_references_size(), 0);
}

TEST_F(TaskLoaderTest, ListedExtraReferenceIsReadAndAMissingOneIsNotFound) {
  WriteTask(absl::StrCat(kValidTask, "extra_references { language: \"mtia-c++\" file: \"m.cc\" }\n"));
  auto missing = LoadTaskDir(dir_.string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("m.cc"));
  std::ofstream(dir_ / "m.cc") << "// listed\n";
  std::ofstream(dir_ / "reference_mtia.cc") << "// not used: one is listed\n";
  auto task = LoadTaskDir(dir_.string());
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_EQ(task->extra_references_size(), 1);
  EXPECT_EQ(task->extra_references(0).source(), "// listed\n");
}

TEST_F(TaskLoaderTest, ExtraReferenceOutsideTheFolderIsRejected) {
  WriteTask(absl::StrCat(kValidTask, "extra_references { language: \"mtia-c++\" file: \"../x.cc\" }\n"));
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << task.status();
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("stay inside"));
}

TEST_F(TaskLoaderTest, MissingFolderIsNotFound) {
  auto task = LoadTaskDir((dir_ / "nope").string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr((dir_ / "nope").string()));
}

TEST_F(TaskLoaderTest, MissingTaskFileIsNotFound) {
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr(TaskPath()));
}

TEST_F(TaskLoaderTest, MissingReferenceFileIsNotFoundNamingIt) {
  WriteTask(kValidTask, /*with_reference=*/false);
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(19)));
  EXPECT_THAT(msg, HasSubstr((dir_ / "reference.cc").string()));
}

TEST_F(TaskLoaderTest, SyntaxErrorNamesFileLineAndProblem) {
  WriteTaskWith("op_family: \"softmax\"", "op_family \"softmax\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(2)));
  EXPECT_THAT(msg, HasSubstr("Expected \":\""));
}

TEST_F(TaskLoaderTest, UnknownFieldNamesFieldAndMessageType) {
  WriteTaskWith("  shape: [\"rows\", \"cols\"]\n}\noutputs", "  shpe: [\"rows\", \"cols\"]\n}\noutputs");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(task.status().message()), absl::StrCat(At(7), "3: unknown field 'shpe' in kevo.v1.TensorSpec"));
}

TEST_F(TaskLoaderTest, UnknownDTypeListsTheKnownOnes) {
  WriteTaskWith("  dtype: F32\n  shape: [\"rows\", \"cols\"]\n}\noutputs",
                "  dtype: F33\n  shape: [\"rows\", \"cols\"]\n}\noutputs");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(6)));
  EXPECT_THAT(msg, StartsWith(absl::StrCat(At(6), "10: unknown value 'F33' for field 'dtype'")));
  EXPECT_THAT(msg, HasSubstr("F32, F64"));
}

TEST_F(TaskLoaderTest, BadShapeExpressionNamesTensorAndLine) {
  WriteTaskWith("  shape: [\"rows\", \"cols\"]\n}\noutputs", "  shape: [\"rows\", \"cols*\"]\n}\noutputs");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(7)));
  EXPECT_THAT(msg, HasSubstr("tensor 'x' dimension 1: bad shape expression \"cols*\""));
}

TEST_F(TaskLoaderTest, SymbolUnboundByOneBindingNamesBindingAndSymbol) {
  WriteTaskWith("{ key: \"rows\" value: 3 }, { key: \"cols\" value: 9 }", "{ key: \"rows\" value: 3 }");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(15)));
  EXPECT_THAT(msg, HasSubstr("validate binding 'odd' gives no value for symbol 'cols'"));
}

TEST_F(TaskLoaderTest, SymbolUnboundByTimeBinding) {
  WriteTaskWith("{ key: \"rows\" value: 64 }, { key: \"cols\" value: 64 }", "{ key: \"rows\" value: 64 }");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(16)));
  EXPECT_THAT(msg, HasSubstr("time binding gives no value for symbol 'cols'"));
}

TEST_F(TaskLoaderTest, MisspelledBindingKeyIsReported) {
  WriteTaskWith("{ key: \"cols\" value: 8 }", "{ key: \"cols\" value: 8 }, { key: \"colz\" value: 8 }");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("sets 'colz'"));
}

TEST_F(TaskLoaderTest, OnlyOneValidateBindingIsRejected) {
  WriteTaskWith("validate { name: \"odd\" values: [{ key: \"rows\" value: 3 }, { key: \"cols\" value: 9 }] }\n", "");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(14)));
  EXPECT_THAT(msg, HasSubstr("at least two validate bindings"));
  EXPECT_THAT(msg, HasSubstr("found 1"));
}

TEST_F(TaskLoaderTest, NoOddValidateBindingIsRejected) {
  WriteTaskWith("{ key: \"rows\" value: 3 }, { key: \"cols\" value: 9 }",
                "{ key: \"rows\" value: 2 }, { key: \"cols\" value: 10 }");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(14)));
  EXPECT_THAT(msg, HasSubstr("no validate binding is odd-sized"));
}

TEST_F(TaskLoaderTest, MissingTimeBindingIsRejected) {
  WriteTaskWith("time { name: \"timed\" values: [{ key: \"rows\" value: 64 }, { key: \"cols\" value: 64 }] }\n", "");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("field 'time' is missing"));
}

TEST_F(TaskLoaderTest, UnknownOpFamilyNamesLine) {
  WriteTaskWith("op_family: \"softmax\"", "op_family: \"softmaxx\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(2)));
  EXPECT_THAT(msg, HasSubstr("unknown op_family 'softmaxx'"));
}

TEST_F(TaskLoaderTest, MissingNameIsRejected) {
  WriteTaskWith("name: \"t\"", "");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("field 'name' is missing"));
}

TEST_F(TaskLoaderTest, FunctionMustBeACIdentifier) {
  WriteTaskWith("function: \"f\"", "function: \"2f\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(3)));
  EXPECT_THAT(msg, HasSubstr("'2f' is not a valid C identifier"));
}

TEST_F(TaskLoaderTest, ParamNamingNothingIsRejected) {
  WriteTaskWith("params: [\"x\", \"y\", \"rows\", \"cols\"]", "params: [\"x\", \"y\", \"rows\", \"cols\", \"depth\"]");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(3)));
  EXPECT_THAT(msg, HasSubstr("parameter 'depth' names no input, output or shape symbol"));
}

TEST_F(TaskLoaderTest, TensorMissingFromParamsIsRejected) {
  WriteTaskWith("params: [\"x\", \"y\", ", "params: [\"x\", ");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("tensor 'y' is not a signature parameter"));
}

TEST_F(TaskLoaderTest, TensorWithoutDTypeIsRejected) {
  WriteTaskWith("  name: \"y\"\n  dtype: F32\n", "  name: \"y\"\n");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(9)));
  EXPECT_THAT(msg, HasSubstr("tensor 'y' has no dtype"));
}

TEST_F(TaskLoaderTest, TensorWithoutShapeIsRejected) {
  WriteTaskWith("  dtype: F32\n  shape: [\"rows\", \"cols\"]\n}\nvalidate", "  dtype: F32\n}\nvalidate");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("tensor 'y' has no shape"));
}

TEST_F(TaskLoaderTest, DuplicateTensorNamesAreRejected) {
  WriteTaskWith("  name: \"y\"", "  name: \"x\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(10)));
  EXPECT_THAT(msg, HasSubstr("tensor name 'x' is used twice"));
}

TEST_F(TaskLoaderTest, BadBytesMovedExpressionNamesLine) {
  WriteTaskWith("bytes_moved: \"8*rows*cols\"", "bytes_moved: \"8*rows*(cols\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(17)));
  EXPECT_THAT(msg, HasSubstr("bad bytes_moved expression"));
}

TEST_F(TaskLoaderTest, FlopsDividingByZeroIsRejected) {
  WriteTaskWith("flops: \"3*rows*cols\"", "flops: \"rows/(cols-cols)\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(18)));
  EXPECT_THAT(msg, HasSubstr("division by zero"));
}

TEST_F(TaskLoaderTest, TooFewSeedsAreRejected) {
  WriteTask(absl::StrCat(kValidTask, "seeds: 2\n"));
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(20)));
  EXPECT_THAT(msg, HasSubstr("at least 3"));
}

TEST_F(TaskLoaderTest, NegativeToleranceIsRejected) {
  WriteTask(absl::StrCat(kValidTask, "tolerances { dtype: F32 atol: -1e-5 rtol: 1e-5 }\n"));
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(20)));
  EXPECT_THAT(msg, HasSubstr("non-negative"));
}

TEST_F(TaskLoaderTest, ReferenceLanguageMustBeCpp) {
  WriteTaskWith("language: \"c++\"", "language: \"python\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(task.status().message());
  EXPECT_THAT(msg, StartsWith(At(19)));
  EXPECT_THAT(msg, HasSubstr("reference language 'python'"));
}

TEST_F(TaskLoaderTest, ReferenceMayNotLeaveTheTaskFolder) {
  WriteTaskWith("file: \"reference.cc\"", "file: \"../reference.cc\"");
  auto task = LoadTaskDir(dir_.string());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("stay inside"));
}

TEST(ValidateTaskTest, TaskWithoutSourceHasNoLineInMessages) {
  auto parsed = ParseTaskText(kValidTask, "");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(ValidateTask(*parsed).ok());
  v1::Task task = *parsed;
  task.mutable_validate()->RemoveLast();
  absl::Status status = ValidateTask(task);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith("task: needs at least two"));
}

TEST(ValidateTaskTest, ZeroSeedsMeansDefaultAndIsAccepted) {
  auto parsed = ParseTaskText(kValidTask, "x");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->seeds(), 0);
  EXPECT_TRUE(ValidateTask(*parsed).ok());
  ApplyTaskDefaults(&*parsed);
  EXPECT_EQ(parsed->seeds(), kDefaultSeeds);
}

TEST_F(TaskLoaderTest, FindTaskDirsListsTaskFoldersSortedWithoutDescendingIntoThem) {
  for (const char* d : {"b/c", "a", "a/nested", "empty"}) fs::create_directories(dir_ / d);
  for (const char* d : {"b/c", "a", "a/nested"}) std::ofstream(dir_ / d / "task.textproto") << "";
  auto dirs = FindTaskDirs(dir_.string());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_THAT(*dirs, ::testing::ElementsAre((dir_ / "a").string(), (dir_ / "b/c").string()));

  auto self = FindTaskDirs((dir_ / "a").string());
  ASSERT_TRUE(self.ok());
  EXPECT_THAT(*self, ::testing::ElementsAre((dir_ / "a").string()));

  auto none = FindTaskDirs((dir_ / "empty").string());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  auto missing = FindTaskDirs((dir_ / "missing").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr((dir_ / "missing").string()));
}

// Every task shipped under tasks/ loads, validates, and renders a signature
// whose function the reference defines.
TEST(ShippedTasksTest, EveryTaskLoadsAndValidates) {
  auto dirs = FindTaskDirs((SourceDir() / "tasks").string());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  std::vector<std::string> names;
  for (const std::string& dir : *dirs) {
    SCOPED_TRACE(dir);
    auto task = LoadTaskDir(dir);
    ASSERT_TRUE(task.ok()) << task.status();
    EXPECT_EQ(task->name(), fs::path(dir).filename().string());
    EXPECT_GE(task->seeds(), 3);
    auto signature = RenderSignature(*task);
    ASSERT_TRUE(signature.ok()) << signature.status();
    EXPECT_THAT(task->reference().source(),
                HasSubstr(absl::StrCat("extern \"C\" void ", task->signature().function(), "(")));
    names.push_back(task->name());
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf({"vector_add", "softmax", "row_sum", "matmul", "bucketize"}));
}

}  // namespace
}  // namespace kevo::task
