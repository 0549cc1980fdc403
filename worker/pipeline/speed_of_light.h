// The speed-of-light check that every timing backend applies to a candidate it
// measured (docs/reliability.md, "Speed of light"). The time of one call, the
// bytes and flops the task declares for a call at its timed binding, and the
// device's limits (memory bandwidth and the compute peak that applies to the
// task) give the rates the result implies and its fraction of the roofline.
// No kernel can beat the device's limits: a result above them by more than a
// stated margin means that the candidate did not do the work, that it was
// timed wrongly, or that the limits or the task's figures are wrong. The
// backend times such a candidate once more in a fresh runner process (and
// measures the limits again where it measures them); if it is still beyond
// them, the evaluation ends SUSPICIOUS with the figures in its message and
// its profile counters (sol_*).
//
// Thread-safety: pure functions and plain structs.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "worker/pipeline/eval_pipeline.h"

namespace kevo::worker {

// How far above the limits a result may be before it is timed again and, if
// it stays there, rejected: 0.5 = 150% of the roofline. The limits are the
// highest figures a worker measured (or the datasheet's), but a shared host's
// memory moves with its neighbours' load, which the guest cannot see: a
// kernel timed in a quiet moment has beaten every probe of a young worker by
// up to 40% (docs/reliability.md, "Speed of light"). The results this check is
// for are beyond the limits by 10x and more.
inline constexpr double kDefaultSpeedOfLightMargin = 0.5;

// What one call of the task does at its timed binding, as the task declares
// it (WorkAtTimedBinding), and how many of the bytes are its outputs.
struct Work {
  double bytes = 0;
  double flops = 0;
  double output_bytes = 0;
};

// The task's Work at its timed binding (bytes and flops 0 when it declares
// none; output_bytes 0 when its shapes do not resolve).
Work TimedWork(const v1::Task& task);

// A device's limits for one task. 0 where unknown: that side of the roofline
// is not checked.
struct DeviceLimits {
  double bandwidth_gbs = 0;  // 1e9 bytes/s
  // Where known (a CPU worker's probes), the bandwidth of a read-only pass and
  // of a copy (bytes read and written both counted): the roofline the fraction
  // reports then charges a call's reads and writes what those two passes show
  // they cost, so that a pass writing as much as it reads is at 1 at the
  // copy's rate, not at the best probe's (on the 2-core Zen 4 VM the best
  // probe read 116-134 GB/s, partly from the L3, while memory gave a copy
  // 67-81 GB/s). A pass whose data stays partly in a cache may then read
  // above 1. The check keeps bandwidth_gbs.
  double read_gbs = 0;
  double copy_gbs = 0;
  double peak_gflops = 0;  // the compute roof that applies to the task
  // Outputs up to this many bytes may still sit in a cache when the timer
  // stops (the last-level cache of a CPU, a GPU's L2, which is flushed before
  // each sample): their write-back to memory need not fall inside the timed
  // call, so the check does not count them.
  double cache_bytes = 0;
  // Where each figure comes from, for the message ("the best measured on this
  // worker", "datasheet").
  std::string bandwidth_source;
  std::string peak_source;
};

// What a measured time implies against the limits.
struct SpeedOfLight {
  double time_s = 0;
  Work work;
  double implied_gbs = 0;     // declared bytes / time
  double implied_gflops = 0;  // flops / time
  DeviceLimits limits;
  // Roofline time (the larger of the bytes' memory time and flops / peak) over
  // the measured time: 1 = at the roofline (above 1 where data stayed in a
  // cache the memory rates do not count). 0 without limits or work.
  // The memory time is bytes / bandwidth, or with read_gbs and copy_gbs the
  // reads (the bytes less the outputs) at 1 / read_gbs a byte and the writes
  // at what a copy's writes add (2 / copy_gbs - 1 / read_gbs), never less
  // than bytes / bandwidth.
  double fraction = 0;
  // The same with only the bytes that must cross memory during the call (the
  // declared bytes less the outputs a cache may hold): what the check uses.
  double bound_fraction = 0;
  double margin = kDefaultSpeedOfLightMargin;

  // True when the result is beyond the limits by more than the margin.
  bool Exceeded() const { return bound_fraction > 1 + margin; }
  // One line with every figure: "0.05 ms for 192 MiB and 16.8 MFLOP implies
  // 4027 GB/s and 336 GFLOP/s; the limits are 51.2 GB/s (the best measured on
  // this worker) and 570 GFLOP/s (FP32 FMA, ...): 78.6x the roofline (allowed
  // up to 1.5x)".
  std::string Describe() const;
};

SpeedOfLight MeasureSpeedOfLight(double time_s, const Work& work, const DeviceLimits& limits, double margin);

// A fresh measurement, for the check's second look: the candidate's time in
// a new runner process and the limits as they stand after it.
struct Remeasured {
  double time_s = 0;
  DeviceLimits limits;
};

// The check as a backend's profile stage applies it, once the candidate's
// time is known (and, where it has them, the limits). Sets
// run.ev.roofline_fraction and the profile counters sol_* (the figures;
// sol_remeasured is 1 when it looked twice). When the first figure is beyond
// the limits, `remeasure` is called once to time the candidate again in a
// fresh runner process; it returns nullopt when that failed, having failed the
// evaluation itself (run.Fail). A null `remeasure` means the measurement is
// deterministic (a simulator): the first figure is final. Returns the figures
// that stand (the second look's, when there was one); nullopt when the
// evaluation has failed: SUSPICIOUS at STAGE_PROFILE, with the figures in the
// message, or the failure `remeasure` recorded.
std::optional<SpeedOfLight> CheckSpeedOfLight(EvalRun& run, double time_s, const Work& work, const DeviceLimits& limits,
                                              double margin,
                                              const std::function<std::optional<Remeasured>()>& remeasure);

}  // namespace kevo::worker
