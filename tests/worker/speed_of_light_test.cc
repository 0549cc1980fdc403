// The speed-of-light check on its own (worker/pipeline/speed_of_light.h):
// the figures a time implies against a device's limits, a second look in a
// fresh process when the first is beyond them, and SUSPICIOUS with every
// figure when the second look agrees. The backends' own tests run it on real
// kernels (cpu_backend_test, ResultBeyondTheSpeedOfLightIsTimedAgainAndRejected).
#include "worker/pipeline/speed_of_light.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// 64 MiB of inputs and 64 MiB of outputs, no flops to speak of.
Work Copy() { return {.bytes = 128.0 * (1 << 20), .flops = 1e3, .output_bytes = 64.0 * (1 << 20)}; }

DeviceLimits Memory(double gbs) {
  DeviceLimits d;
  d.bandwidth_gbs = gbs;
  d.bandwidth_source = "measured";
  d.peak_gflops = 100;
  d.peak_source = "FP32 FMA";
  return d;
}

// 128 MiB at 50 GB/s takes 2.68 ms.
constexpr double kAtTheLimit = 128.0 * (1 << 20) / 50e9;

class SpeedOfLightTest : public ::testing::Test {
 protected:
  v1::Task task_;
  v1::Candidate candidate_;
  EventSink sink_;
  EvalRun run_{task_, candidate_, sink_};
};

TEST(SpeedOfLight, ImpliedRatesAndFractionFollowTheDeclaredWork) {
  const SpeedOfLight sol = MeasureSpeedOfLight(2 * kAtTheLimit, Copy(), Memory(50), 0.25);
  EXPECT_NEAR(sol.implied_gbs, 25, 1e-9);
  EXPECT_NEAR(sol.fraction, 0.5, 1e-9);
  EXPECT_NEAR(sol.bound_fraction, 0.5, 1e-9);
  EXPECT_FALSE(sol.Exceeded());
  // Compute-bound: the flops side of the roofline decides.
  const SpeedOfLight fma = MeasureSpeedOfLight(1e-3, {.bytes = 0, .flops = 2e8}, Memory(50), 0.25);
  EXPECT_NEAR(fma.implied_gflops, 200, 1e-9);
  EXPECT_NEAR(fma.fraction, 2, 1e-9);
  EXPECT_TRUE(fma.Exceeded());
}

// With a read-only and a copy bandwidth known (a CPU worker's probes), the
// reported fraction charges reads and writes what those passes cost: a copy
// at the copy's rate and a read-only pass at the read's are each at 1, a pass
// reading two bytes a byte written is in between, and the check itself still
// divides by the best bandwidth.
TEST(SpeedOfLight, ReadsAndWritesAreChargedWhatAReadAndACopyCost) {
  DeviceLimits limits = Memory(100);
  limits.read_gbs = 100;
  limits.copy_gbs = 50;
  // 128 MiB copied at 50 GB/s: at the copy's rate.
  const SpeedOfLight copy = MeasureSpeedOfLight(kAtTheLimit, Copy(), limits, 0.25);
  EXPECT_NEAR(copy.fraction, 1, 1e-9);
  EXPECT_NEAR(copy.bound_fraction, 0.5, 1e-9);
  // 128 MiB read (no outputs) at 100 GB/s.
  const Work read = {.bytes = 128.0 * (1 << 20), .flops = 1e3, .output_bytes = 0};
  EXPECT_NEAR(MeasureSpeedOfLight(kAtTheLimit / 2, read, limits, 0.25).fraction, 1, 1e-9);
  // 2 bytes read a byte written (vector_add): 128 MiB read at 1/100 ns a byte,
  // 64 MiB written at 2/50 - 1/100 = 3/100 ns a byte: 320 MiB-at-100-GB/s.
  const Work add = {.bytes = 192.0 * (1 << 20), .flops = 1e3, .output_bytes = 64.0 * (1 << 20)};
  const double add_s = (128.0 + 3 * 64.0) * (1 << 20) / 100e9;
  EXPECT_NEAR(MeasureSpeedOfLight(add_s, add, limits, 0.25).fraction, 1, 1e-9);
  // A copy faster than twice the read (writes cheaper than nothing): writes
  // cost nothing, and the copy's 64 MiB of reads at 60 GB/s over 2.68 ms.
  DeviceLimits cheap_writes = Memory(1000);
  cheap_writes.read_gbs = 60;
  cheap_writes.copy_gbs = 200;
  EXPECT_NEAR(MeasureSpeedOfLight(kAtTheLimit, Copy(), cheap_writes, 0.25).fraction, (64.0 / 60) / (128.0 / 50), 1e-9);
  // Never less than the bytes at the best bandwidth (100 GB/s: 0.5), even
  // where the two probes would say less.
  DeviceLimits fast_probes = Memory(100);
  fast_probes.read_gbs = 200;
  fast_probes.copy_gbs = 400;
  EXPECT_NEAR(MeasureSpeedOfLight(kAtTheLimit, Copy(), fast_probes, 0.25).fraction, 0.5, 1e-9);
  // Without the two probes, the best bandwidth alone.
  EXPECT_NEAR(MeasureSpeedOfLight(kAtTheLimit, Copy(), Memory(100), 0.25).fraction, 0.5, 1e-9);
}

TEST(SpeedOfLight, OutputsACacheMayHoldAreNotCountedByTheCheck) {
  DeviceLimits limits = Memory(50);
  limits.cache_bytes = 32 << 20;
  // 1.4x the roofline on the declared bytes, but 32 MiB of the outputs may be
  // written back after the timer: 96 MiB must move, 1.05x.
  const SpeedOfLight sol = MeasureSpeedOfLight(kAtTheLimit / 1.4, Copy(), limits, 0.25);
  EXPECT_NEAR(sol.fraction, 1.4, 1e-9);
  EXPECT_NEAR(sol.bound_fraction, 1.05, 1e-9);
  EXPECT_FALSE(sol.Exceeded());
  EXPECT_THAT(sol.Describe(), HasSubstr("96 MiB of them through memory while timed"));
}

TEST_F(SpeedOfLightTest, WithinTheLimitsIsNotTimedAgain) {
  int timed_again = 0;
  auto sol = CheckSpeedOfLight(run_, kAtTheLimit / 1.2, Copy(), Memory(50), 0.25, [&] {
    ++timed_again;
    return std::optional<Remeasured>();
  });
  ASSERT_TRUE(sol.has_value());
  EXPECT_EQ(timed_again, 0);
  EXPECT_NEAR(run_.ev.roofline_fraction(), 1.2, 1e-9);
  EXPECT_EQ(run_.ev.profile().at("sol_remeasured"), 0);
  EXPECT_EQ(run_.ev.status(), v1::EVAL_STATUS_UNSPECIFIED);
}

// Fast only on its first run: the second look, in a fresh process, is the one
// that stands.
TEST_F(SpeedOfLightTest, BeyondOnceButNotWhenTimedAgainStandsAtTheSecondFigure) {
  auto sol = CheckSpeedOfLight(run_, kAtTheLimit / 10, Copy(), Memory(50), 0.25, [&] {
    return std::optional<Remeasured>(Remeasured{kAtTheLimit / 0.9, Memory(50)});
  });
  ASSERT_TRUE(sol.has_value());
  EXPECT_NEAR(sol->time_s, kAtTheLimit / 0.9, 1e-12);
  EXPECT_NEAR(run_.ev.roofline_fraction(), 0.9, 1e-9);
  const auto& p = run_.ev.profile();
  EXPECT_EQ(p.at("sol_remeasured"), 1);
  EXPECT_NEAR(p.at("sol_first_fraction"), 10, 1e-9);
  EXPECT_NEAR(p.at("sol_fraction"), 0.9, 1e-9);
  EXPECT_THAT(run_.ev.notes().at("speed_of_light"), HasSubstr("timed again in a fresh process it was not"));
  EXPECT_EQ(run_.ev.status(), v1::EVAL_STATUS_UNSPECIFIED);
}

TEST_F(SpeedOfLightTest, BeyondTwiceIsSuspiciousWithEveryFigure) {
  auto sol = CheckSpeedOfLight(run_, kAtTheLimit / 10, Copy(), Memory(50), 0.25, [&] {
    return std::optional<Remeasured>(Remeasured{kAtTheLimit / 8, Memory(50)});
  });
  EXPECT_FALSE(sol.has_value());
  EXPECT_EQ(run_.ev.status(), v1::SUSPICIOUS);
  const std::string& message = run_.ev.diagnostics().message();
  // The time, the bytes, the implied rate, the limit and the margin, both times.
  EXPECT_THAT(message, HasSubstr("0.2684 ms for 128 MiB"));
  EXPECT_THAT(message, HasSubstr("implies 500 GB/s"));
  EXPECT_THAT(message, HasSubstr("50 GB/s (measured)"));
  EXPECT_THAT(message, HasSubstr("10x the roofline (allowed up to 1.25x)"));
  EXPECT_THAT(message, HasSubstr("timed again in a fresh process: 0.3355 ms"));
  EXPECT_THAT(message, HasSubstr("8x the roofline"));
  ASSERT_EQ(run_.ev.events_size(), 1);
  EXPECT_EQ(run_.ev.events(0).stage(), v1::STAGE_PROFILE);
  EXPECT_FALSE(run_.ev.events(0).ok());
}

// A simulator's time is deterministic: no second look, the first is final.
TEST_F(SpeedOfLightTest, WithoutASecondLookTheFirstFigureIsFinal) {
  auto sol = CheckSpeedOfLight(run_, kAtTheLimit / 2, Copy(), Memory(50), 0.25, nullptr);
  EXPECT_FALSE(sol.has_value());
  EXPECT_EQ(run_.ev.status(), v1::SUSPICIOUS);
  EXPECT_THAT(run_.ev.diagnostics().message(), Not(HasSubstr("timed again")));
}

// The second look failed (the runner crashed, say): its failure stands.
TEST_F(SpeedOfLightTest, ASecondLookThatFailsEndsTheEvaluationWithItsOwnStatus) {
  auto sol = CheckSpeedOfLight(run_, kAtTheLimit / 10, Copy(), Memory(50), 0.25, [&] {
    run_.Fail(v1::STAGE_PROFILE, v1::RUNTIME_ERROR, "the runner crashed");
    return std::optional<Remeasured>();
  });
  EXPECT_FALSE(sol.has_value());
  EXPECT_EQ(run_.ev.status(), v1::RUNTIME_ERROR);
}

TEST(SpeedOfLight, NoLimitsNoCheck) {
  const SpeedOfLight sol = MeasureSpeedOfLight(1e-9, Copy(), DeviceLimits{}, 0.25);
  EXPECT_EQ(sol.fraction, 0);
  EXPECT_FALSE(sol.Exceeded());
}

}  // namespace
}  // namespace kevo::worker
