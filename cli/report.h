// How the CLI shows evaluations: a short human report and a JSON object.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/job.pb.h"

namespace kevo::cli {

// Keys: status, speedup, roofline_fraction, baseline_time_s, time_s,
// validation (one entry per seed x binding), diagnostics, timing, worker...
nlohmann::json EvaluationJson(const v1::Evaluation& evaluation);

// A few readable lines: status, times, speedup, roofline, failures.
std::string HumanReport(const v1::Evaluation& evaluation);

// A job's best: "1.52x" when measured, "static score 0.875" when a
// compile-only fleet ranked it without measuring ("s0.88" in short form).
std::string JobBestLabel(const v1::Job& job, bool short_form = false);

// What an evaluation's baseline was, as its worker described it
// (notes["baseline"]: "cuBLAS (cublasGemmEx, FP32 compute) on GPU 0 (NVIDIA
// H200)", "PyTorch eager: the problem's Model (...)"), else from the kind in
// its profile map; "the reference compiled -O2" for the cpu worker.
std::string BaselineDescription(const v1::Evaluation& evaluation);

// The job's best time against the median of the baselines its evaluations
// measured (Job.median_baseline_time_s); 0 when not measured (a job with
// fewer than two timed evaluations, or one from before the field existed).
double SpeedupVsMedianBaseline(const v1::Job& job);

// The production forms an evaluation timed, one line each: "torch_eager_2t
// 2.41 ms (the candidate 1.06x over it; torch.softmax(x, dim=-1), torch
// 1.13.0a0, 2 threads)" or "torch_compile unusable: ...". Empty when none.
std::string ProductionLines(const v1::Evaluation& evaluation, const std::string& indent);

// "1.06x vs PyTorch (torch_eager_2t), 14.90x vs the naive reference", or the
// reference figure alone when no production form was usable.
std::string SpeedupLine(double vs_production, const std::string& yardstick, double vs_reference);

// A human name for a production form: "PyTorch eager", "PyTorch eager at 2
// threads", "torch.compile", "the vendor library (OpenBLAS ...)".
std::string YardstickLabel(const std::string& name);

// "1.23 ms", "45.6 us".
std::string FormatSeconds(double seconds);

}  // namespace kevo::cli
