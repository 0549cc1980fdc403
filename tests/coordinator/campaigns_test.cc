// Campaign files the coordinator refuses, and the model throughput gain
// (Amdahl over a model profile) computed from a campaign's best speedups.
#include "coordinator/campaigns/campaigns.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"

namespace kevo::campaigns {
namespace {

using ::testing::HasSubstr;

// The shipped task `name` (tasks/<name>), as the CLI sends it.
v1::CampaignTask Task(const std::string& name) {
  const char* source_dir = std::getenv("KEVO_SOURCE_DIR");
  absl::StatusOr<v1::Task> task =
      task::LoadTaskDir(absl::StrCat(source_dir != nullptr ? source_dir : ".", "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  v1::CampaignTask t;
  t.set_path("tasks/" + name);
  if (task.ok()) *t.mutable_task() = *task;
  return t;
}

v1::CampaignSpec Spec() {
  v1::CampaignSpec s;
  s.set_name("nightly");
  s.add_platforms("cpu");
  s.add_platforms("mtia-sim");
  v1::ModelProfile* m = s.add_model();
  m->set_name("ranker");
  m->set_platform("cpu");
  v1::OperatorShare* op = m->add_operator_();
  op->set_task("softmax");
  op->set_share(0.4);
  return s;
}

std::vector<v1::CampaignTask> Tasks() { return {Task("softmax"), Task("relu")}; }

TEST(CampaignsTest, AValidCampaignIsAccepted) {
  absl::Status s = ValidateCampaign(Spec(), Tasks());
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CampaignsTest, MalformedCampaignsAreRefusedSayingWhy) {
  struct Case {
    std::function<void(v1::CampaignSpec&, std::vector<v1::CampaignTask>&)> change;
    std::string why;
  };
  const std::vector<Case> cases = {
      {[](auto& s, auto&) { s.clear_name(); }, "has no name"},
      {[](auto& s, auto&) { s.clear_platforms(); }, "names no platforms"},
      {[](auto&, auto& t) { t.clear(); }, "has no tasks"},
      {[](auto& s, auto&) { s.add_platforms("tpu"); }, "unknown platform \"tpu\""},
      {[](auto& s, auto&) { s.add_platforms("cpu"); }, "platform cpu is named twice"},
      {[](auto&, auto& t) { t.push_back(Task("relu")); }, "are both named relu"},
      // Each task is checked as EvaluateCandidate checks one: 10^12 elements
      // at the timed binding, or a task that is not one at all.
      {[](auto&, auto& t) {
         for (auto& [symbol, value] : *t[1].mutable_task()->mutable_time()->mutable_values()) value = 1000000000000;
       },
       "task tasks/relu: time binding: tensor 'x' is 3.6 TiB (4000000000000 bytes of f32), above the limit of 8 GiB "
       "per tensor"},
      {[](auto&, auto& t) { t[0].mutable_task()->clear_outputs(); }, "task tasks/softmax: "},
      {[](auto& s, auto&) { s.mutable_budget()->set_max_evaluations(-1); }, "must not be negative"},
      {[](auto& s, auto&) { s.mutable_model(0)->set_platform("nvidia"); }, "does not run on platform \"nvidia\""},
      {[](auto& s, auto&) { s.mutable_model(0)->mutable_operator_(0)->set_task("gemm"); },
       "operator gemm is not one of the campaign's tasks"},
      {[](auto& s, auto&) { s.mutable_model(0)->mutable_operator_(0)->set_share(0); }, "outside (0, 1]"},
      {[](auto& s, auto&) { s.mutable_model(0)->mutable_operator_(0)->set_share(1.5); }, "outside (0, 1]"},
      {[](auto& s, auto&) {
         auto* op = s.mutable_model(0)->add_operator_();
         op->set_task("relu");
         op->set_share(0.7);
       },
       "sum to 1.1, above 1"},
      {[](auto& s, auto&) { *s.add_model() = s.model(0); }, "model ranker on cpu is profiled twice"},
      {[](auto& s, auto&) { s.mutable_model(0)->clear_operator_(); }, "lists no operators"},
  };
  for (const Case& c : cases) {
    v1::CampaignSpec spec = Spec();
    std::vector<v1::CampaignTask> tasks = Tasks();
    c.change(spec, tasks);
    absl::Status s = ValidateCampaign(spec, tasks);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.why;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.why));
  }
}

v1::CampaignEntry Entry(const std::string& task, const std::string& platform, double vs_production,
                        double vs_reference) {
  v1::CampaignEntry e;
  e.set_task_name(task);
  e.set_platform(platform);
  e.set_job_state(v1::JOB_DONE);
  e.set_best_speedup_vs_production(vs_production);
  e.set_best_speedup_vs_reference(vs_reference);
  e.set_best_production_yardstick(vs_production > 0 ? "torch_eager" : "");
  return e;
}

TEST(CampaignsTest, ThroughputGainIsAmdahlOverTheProductionSpeedups) {
  v1::Campaign c;
  *c.mutable_spec() = Spec();
  auto* op = c.mutable_spec()->mutable_model(0)->add_operator_();
  op->set_task("relu");
  op->set_share(0.2);
  *c.add_entries() = Entry("softmax", "cpu", 2.0, 15.0);    // 40% of the time twice as fast
  *c.add_entries() = Entry("relu", "cpu", 0.8, 9.0);        // slower than production: kept at 1x
  *c.add_entries() = Entry("softmax", "mtia-sim", 0, 3.0);  // another platform: not this model's
  std::vector<v1::ModelGain> gains = ThroughputGains(c);
  ASSERT_EQ(gains.size(), 1u);
  const v1::ModelGain& g = gains[0];
  EXPECT_EQ(g.baseline(), "production");
  EXPECT_NEAR(g.covered_share(), 0.6, 1e-12);
  // 1 / (0.4 / 2 + 0.2 / 1 + 0.4) - 1 = 1 / 0.8 - 1
  EXPECT_NEAR(g.throughput_gain(), 0.25, 1e-12);
  ASSERT_EQ(g.operators_size(), 2);
  EXPECT_DOUBLE_EQ(g.operators(0).speedup(), 2.0);
  EXPECT_FALSE(g.operators(0).kept_production());
  EXPECT_DOUBLE_EQ(g.operators(1).speedup(), 1.0);
  EXPECT_DOUBLE_EQ(g.operators(1).measured_speedup(), 0.8);
  EXPECT_TRUE(g.operators(1).kept_production());
}

TEST(CampaignsTest, APlatformWithoutProductionKernelsNamesTheReferenceAsItsBaseline) {
  v1::Campaign c;
  *c.mutable_spec() = Spec();
  v1::ModelProfile* m = c.mutable_spec()->add_model();
  m->set_name("ranker");
  m->set_platform("mtia-sim");
  auto* op = m->add_operator_();
  op->set_task("softmax");
  op->set_share(0.5);
  op = m->add_operator_();
  op->set_task("relu");
  op->set_share(0.25);
  *c.add_entries() = Entry("softmax", "mtia-sim", 0, 4.0);
  *c.add_entries() = Entry("relu", "mtia-sim", 0, 0);  // no correct kernel: 1x
  std::vector<v1::ModelGain> gains = ThroughputGains(c);
  ASSERT_EQ(gains.size(), 2u);
  EXPECT_EQ(gains[0].baseline(), "none");  // the cpu profile: nothing measured there
  EXPECT_DOUBLE_EQ(gains[0].throughput_gain(), 0);
  EXPECT_EQ(gains[1].baseline(), "reference");
  // 1 / (0.5 / 4 + 0.25 / 1 + 0.25) - 1
  EXPECT_NEAR(gains[1].throughput_gain(), 1 / 0.625 - 1, 1e-12);
  EXPECT_EQ(gains[1].operators(1).baseline(), "none");
  EXPECT_FALSE(gains[1].operators(1).kept_production());

  *c.mutable_entries(1) = Entry("relu", "mtia-sim", 1.5, 6.0);
  EXPECT_EQ(ThroughputGains(c)[1].baseline(), "mixed");
}

TEST(CampaignsTest, JobsAreCountedByState) {
  v1::Campaign c;
  *c.add_entries() = Entry("a", "cpu", 1, 1);
  c.add_entries()->set_job_state(v1::JOB_RUNNING);
  c.add_entries();  // not launched
  c.add_entries()->set_skipped(true);
  c.add_entries()->set_job_state(v1::JOB_FAILED);
  auto n = JobsByState(c);
  EXPECT_EQ(n["done"], 1);
  EXPECT_EQ(n["running"], 1);
  EXPECT_EQ(n["queued"], 1);
  EXPECT_EQ(n["cancelled"], 1);
  EXPECT_EQ(n["failed"], 1);
}

}  // namespace
}  // namespace kevo::campaigns
