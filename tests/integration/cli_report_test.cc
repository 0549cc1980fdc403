// What `kevo run` and `kevo eval` say the baseline was (cli/report.h): the
// worker's own description when it gave one (the nvidia worker's cuBLAS,
// reference.cu or CPU reference; PyTorch eager for KernelBench), else its
// baseline_kind (or, stored before that field, the kind in the profile map),
// else the cpu worker's -O2 reference.
#include "cli/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo::cli {
namespace {

using ::testing::HasSubstr;

TEST(CliReportTest, BaselineIsWhatTheWorkerReported) {
  v1::Evaluation e;
  e.set_baseline_kind(v1::BASELINE_CUBLAS);
  (*e.mutable_notes())["baseline"] = "cuBLAS (cublasGemmEx, FP32 compute, no TF32) on GPU 0 (NVIDIA H200)";
  EXPECT_EQ(BaselineDescription(e), "cuBLAS (cublasGemmEx, FP32 compute, no TF32) on GPU 0 (NVIDIA H200)");
}

TEST(CliReportTest, WithoutANoteTheBaselineKindNamesIt) {
  v1::Evaluation e;
  e.set_baseline_kind(v1::BASELINE_CUDA_REFERENCE);
  EXPECT_EQ(BaselineDescription(e), "the task's CUDA reference");
  v1::Evaluation stored_before;
  (*stored_before.mutable_profile())["baseline_kind_cublas"] = 1;
  EXPECT_EQ(BaselineDescription(stored_before), "cuBLAS (cublasGemmEx, FP32)");
  v1::Evaluation cpu;
  EXPECT_EQ(BaselineDescription(cpu), "the reference compiled -O2");
}

TEST(CliReportTest, EvalReportShowsTheTorchCompileTime) {
  v1::Evaluation e;
  e.set_status(v1::OK);
  e.mutable_timing()->set_median_s(2e-6);
  e.mutable_baseline()->set_median_s(4e-6);
  e.set_speedup(2);
  e.set_baseline_kind(v1::BASELINE_PYTORCH_EAGER);
  (*e.mutable_profile())["torch_compile_median_s"] = 6e-6;
  const std::string text = HumanReport(e);
  EXPECT_THAT(text, HasSubstr("over PyTorch eager"));
  EXPECT_THAT(text, HasSubstr("torch.compile 6.00 us (the candidate 3.00x over it)"));
}

}  // namespace
}  // namespace kevo::cli
