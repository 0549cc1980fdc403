#include "worker/pipeline/speed_of_light.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "common/log.h"
#include "common/tensor.h"

namespace kevo::worker {
namespace {

std::string Limit(double value, const char* unit, const std::string& source) {
  if (value <= 0) return absl::StrCat("no ", unit, " limit");
  return absl::StrFormat("%.4g %s%s", value, unit, source.empty() ? "" : absl::StrCat(" (", source, ")"));
}

// The bytes of a call that must cross memory while it is timed.
double BoundBytes(const Work& work, const DeviceLimits& limits) {
  return std::max(0.0, work.bytes - std::min(work.output_bytes, limits.cache_bytes));
}

// The figures as profile counters, each named `prefix` + what it is.
void Record(const SpeedOfLight& sol, const char* prefix, v1::Evaluation& ev) {
  auto& counters = *ev.mutable_profile();
  auto put = [&](const char* key, double value) { counters[absl::StrCat(prefix, key)] = value; };
  put("time_s", sol.time_s);
  put("implied_gbs", sol.implied_gbs);
  put("implied_gflops", sol.implied_gflops);
  put("limit_gbs", sol.limits.bandwidth_gbs);
  put("limit_gflops", sol.limits.peak_gflops);
  put("fraction", sol.bound_fraction);
}

}  // namespace

Work TimedWork(const v1::Task& task) {
  Work work;
  std::tie(work.bytes, work.flops) = WorkAtTimedBinding(task);
  if (auto outputs = ResolveTimedOutputs(task); outputs.ok()) work.output_bytes = static_cast<double>(outputs->bytes);
  return work;
}

std::string SpeedOfLight::Describe() const {
  const double bound = BoundBytes(work, limits);
  return absl::StrFormat(
      "%.4g ms for %s%s and %.4g MFLOP implies %.4g GB/s and %.4g GFLOP/s; the limits are %s and %s: "
      "%.3gx the roofline (allowed up to %.3gx)",
      time_s * 1e3, FormatBytes(static_cast<int64_t>(work.bytes)),
      // Said where it shows at the precision the bytes are printed with.
      bound < 0.99 * work.bytes
          ? absl::StrCat(" (", FormatBytes(static_cast<int64_t>(bound)),
                         " of them through memory while timed: outputs up to the ",
                         FormatBytes(static_cast<int64_t>(limits.cache_bytes)), " cache may be written back after)")
          : "",
      work.flops / 1e6, implied_gbs, implied_gflops, Limit(limits.bandwidth_gbs, "GB/s", limits.bandwidth_source),
      Limit(limits.peak_gflops, "GFLOP/s", limits.peak_source), bound_fraction, 1 + margin);
}

SpeedOfLight MeasureSpeedOfLight(double time_s, const Work& work, const DeviceLimits& limits, double margin) {
  SpeedOfLight sol;
  sol.time_s = time_s;
  sol.work = work;
  sol.limits = limits;
  sol.margin = margin;
  if (time_s <= 0) return sol;
  sol.implied_gbs = std::max(work.bytes, 0.0) / time_s / 1e9;
  sol.implied_gflops = std::max(work.flops, 0.0) / time_s / 1e9;
  // The roofline time of the flops and `memory_s`, over the measured time.
  auto fraction = [&](double memory_s) {
    double roofline_s = memory_s;
    if (limits.peak_gflops > 0) roofline_s = std::max(roofline_s, work.flops / (limits.peak_gflops * 1e9));
    return roofline_s / time_s;
  };
  auto at_best = [&](double bytes) { return limits.bandwidth_gbs > 0 ? bytes / (limits.bandwidth_gbs * 1e9) : 0.0; };
  const double bytes = std::max(work.bytes, 0.0);
  double memory_s = at_best(bytes);
  if (limits.read_gbs > 0 && limits.copy_gbs > 0) {
    const double writes = std::clamp(work.output_bytes, 0.0, bytes);
    const double per_read = 1 / (limits.read_gbs * 1e9);
    const double per_write = std::max(0.0, 2 / (limits.copy_gbs * 1e9) - per_read);
    memory_s = std::max(memory_s, (bytes - writes) * per_read + writes * per_write);
  }
  sol.fraction = fraction(memory_s);
  sol.bound_fraction = fraction(at_best(BoundBytes(work, limits)));
  return sol;
}

std::optional<SpeedOfLight> CheckSpeedOfLight(EvalRun& run, double time_s, const Work& work, const DeviceLimits& limits,
                                              double margin,
                                              const std::function<std::optional<Remeasured>()>& remeasure) {
  v1::Evaluation& ev = run.ev;
  const SpeedOfLight first = MeasureSpeedOfLight(time_s, work, limits, margin);
  auto& counters = *ev.mutable_profile();
  counters["sol_margin"] = margin;
  counters["sol_bytes"] = BoundBytes(work, limits);
  counters["sol_flops"] = work.flops;
  counters["sol_remeasured"] = 0;
  Record(first, "sol_", ev);
  ev.set_roofline_fraction(first.fraction);
  if (!first.Exceeded()) return first;
  LogWarning("speed of light: ", run.task.name(), ": ", first.Describe(),
             remeasure ? "; timing it again in a fresh process" : "");
  SpeedOfLight standing = first;
  if (remeasure) {
    std::optional<Remeasured> again = remeasure();
    if (!again.has_value()) return std::nullopt;
    standing = MeasureSpeedOfLight(again->time_s, work, again->limits, margin);
    counters["sol_remeasured"] = 1;
    Record(first, "sol_first_", ev);
    Record(standing, "sol_", ev);
    ev.set_roofline_fraction(standing.fraction);
  }
  if (!standing.Exceeded()) {
    (*ev.mutable_notes())["speed_of_light"] =
        absl::StrCat("the first timing was beyond the device's limits (", first.Describe(),
                     "); timed again in a fresh process it was not (", standing.Describe(), ")");
    return standing;
  }
  // What a rate beyond the device can mean, the likeliest first.
  constexpr char kWhy[] =
      ". Either the candidate does not do the work the task declares (it skips or caches it), or its "
      "timing was fooled, or the task declares more bytes or flops than a call moves or computes";
  const std::string message = remeasure ? absl::StrCat("faster than the device can be: ", first.Describe(),
                                                       "; timed again in a fresh process: ", standing.Describe(), kWhy)
                                        : absl::StrCat("faster than the device can be: ", first.Describe(), kWhy);
  (*ev.mutable_notes())["speed_of_light"] = message;
  run.Fail(v1::STAGE_PROFILE, v1::SUSPICIOUS, message);
  return std::nullopt;
}

}  // namespace kevo::worker
