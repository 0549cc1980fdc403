// The campaign report (cli/campaign_report.h) in a real browser: a campaign of
// four tasks on cpu (with production figures) and mtia-sim (without), with
// nodes, a failed job, a cancelled job without nodes and two model gains, is
// rendered to a page; a copy of it with a test-owned script that measures each
// chart's <svg> and the marks inside it with getBoundingClientRect is loaded
// in Debian's chromium (headless, --dump-dom), and the measurements are read
// back from the dumped DOM. The page must draw every chart with the marks the
// data calls for, and must load nothing from the network.
//
// Needs chromium on PATH and Debian's libjs-d3 (scripts/install-deps.sh
// installs both). KEVO_REPORT_SCREENSHOT=PATH also writes a PNG of the page
// (docs/campaign-report.png was made so).
#include "cli/campaign_report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCampaignId[] = "c7";
constexpr int64_t kCreated = 1751536800000000;  // 2025-07-03 10:00 UTC

// One entry's outcome and the shape of its job's search.
struct EntrySpec {
  std::string task;
  std::string platform;
  v1::JobState state;
  int evaluations;
  double vs_production;  // 0: none (mtia-sim has no production kernels)
  std::string yardstick;
  double vs_reference;
  double best_time_s;
  std::string stop_reason;
  bool any_ok = true;  // false: every evaluation failed
};

// A job's nodes: mostly OK with a best that climbs to `fitness`, with some
// failures of several statuses in between; by_status counts them.
void AddJob(const EntrySpec& s, const std::string& job_id, int index, CampaignReportData* data) {
  v1::Job job;
  job.set_job_id(job_id);
  job.set_state(s.state);
  job.mutable_spec()->set_platform(s.platform);
  job.mutable_spec()->set_campaign_id(kCampaignId);
  job.set_evaluations_done(s.evaluations);
  job.set_fitness_baseline(s.vs_production > 0 ? "production" : "reference");
  job.set_stop_reason(s.stop_reason);
  const double fitness = s.vs_production > 0 ? s.vs_production : s.vs_reference;
  static const v1::EvalStatus kFailures[] = {v1::COMPILE_ERROR, v1::WRONG_ANSWER, v1::RUN_TIMEOUT, v1::COMPILE_ERROR,
                                             v1::NONFINITE};
  std::vector<v1::Node>& nodes = data->nodes[job_id];
  for (int i = 0; i < s.evaluations; ++i) {
    v1::Node n;
    n.set_node_id(absl::StrCat("n", i + 1));
    n.set_job_id(job_id);
    n.set_sequence(i);
    n.set_state(v1::NODE_DONE);
    n.set_created_unix_micros(kCreated + (index * 100 + i) * 20'000'000LL);
    const bool fails = !s.any_ok || (i % 5 == 3) || (i > 0 && i % 7 == 0);
    if (fails) {
      n.set_status(s.any_ok ? kFailures[(i + index) % 5] : (i % 3 == 2 ? v1::RUNTIME_ERROR : v1::COMPILE_ERROR));
    } else {
      n.set_status(v1::OK);
      // Climbs in steps towards the best, reached at about two thirds of the budget.
      const double progress = std::min(1.0, (i + 1.0) / (s.evaluations * 2.0 / 3.0));
      n.set_fitness(fitness * (0.35 + 0.65 * std::pow(progress, 1.5)) * (i % 4 == 1 ? 0.8 : 1.0));
    }
    (*job.mutable_by_status())[v1::EvalStatus_Name(n.status())] += 1;
    nodes.push_back(std::move(n));
  }
  // One still evaluating at the end: not counted as an evaluation.
  if (s.state == v1::JOB_RUNNING) {
    v1::Node n;
    n.set_node_id(absl::StrCat("n", s.evaluations + 1));
    n.set_sequence(s.evaluations);
    n.set_state(v1::NODE_EVALUATING);
    nodes.push_back(std::move(n));
  }
  // Counted before the erase: `nodes` is the map's entry.
  job.set_nodes(static_cast<int32_t>(nodes.size()));
  if (nodes.empty()) data->nodes.erase(job_id);
  data->jobs[job_id] = std::move(job);
}

// Amdahl, as the coordinator computes it (campaign.proto's ModelGain).
v1::ModelGain Gain(const std::string& model, const std::string& platform, const std::string& baseline,
                   const std::vector<v1::OperatorGain>& operators) {
  v1::ModelGain g;
  g.set_model(model);
  g.set_platform(platform);
  g.set_baseline(baseline);
  double covered = 0, time = 0;
  for (const v1::OperatorGain& o : operators) {
    covered += o.share();
    time += o.share() / o.speedup();
    *g.add_operators() = o;
  }
  g.set_covered_share(covered);
  g.set_throughput_gain(1 / (time + 1 - covered) - 1);
  return g;
}

v1::OperatorGain Operator(const std::string& task, double share, double measured, const std::string& baseline,
                          const std::string& yardstick = "") {
  v1::OperatorGain o;
  o.set_task(task);
  o.set_share(share);
  o.set_measured_speedup(measured);
  o.set_speedup(std::max(1.0, measured));
  o.set_baseline(baseline);
  o.set_yardstick(yardstick);
  o.set_kept_production(measured > 0 && measured < 1);
  return o;
}

CampaignReportData FleetCampaign() {
  const std::vector<EntrySpec> specs = {
      {"softmax", "cpu", v1::JOB_DONE, 40, 1.42, "torch_eager_2t", 14.9, 2.13e-4, "evaluation budget spent"},
      {"layernorm", "cpu", v1::JOB_DONE, 40, 0.87, "torch_compile", 6.3, 3.9e-4, "no gain in 15 evaluations"},
      {"matmul", "cpu", v1::JOB_DONE, 36, 1.08, "vendor", 38.5, 1.71e-3, "target speedup reached"},
      {"gelu", "cpu", v1::JOB_DONE, 24, 2.35, "torch_eager_2t", 4.1, 8.8e-5, "no gain in 15 evaluations"},
      {"softmax", "mtia-sim", v1::JOB_DONE, 30, 0, "", 9.7, 6.2e-5, "evaluation budget spent"},
      {"layernorm", "mtia-sim", v1::JOB_FAILED, 9, 0, "", 0, 0,
       "proposer failed: no candidate compiled for mtia-sim in 9 attempts", /*any_ok=*/false},
      {"matmul", "mtia-sim", v1::JOB_DONE, 28, 0, "", 4.2, 4.4e-4, "evaluation budget spent"},
      {"gelu", "mtia-sim", v1::JOB_CANCELLED, 0, 0, "", 0, 0, "cancelled"},
  };
  CampaignReportData data;
  v1::Campaign& c = data.campaign;
  c.set_campaign_id(kCampaignId);
  c.set_state(v1::CAMPAIGN_DONE);
  c.set_created_unix_micros(kCreated);
  c.set_finished_unix_micros(kCreated + int64_t{2} * 3600 * 1'000'000 + 17 * 60 * 1'000'000);
  c.set_stop_reason("6 jobs done, 1 failed, 1 cancelled");
  v1::CampaignSpec& spec = *c.mutable_spec();
  spec.set_name("ads-q3-elementwise");
  spec.set_team("ads-infra");
  spec.add_tasks("tasks/softmax");
  spec.add_tasks("tasks/layernorm");
  spec.add_tasks("tasks/matmul");
  spec.add_tasks("tasks/gelu");
  spec.add_platforms("cpu");
  spec.add_platforms("mtia-sim");
  spec.mutable_budget()->set_max_evaluations(40);
  spec.mutable_budget()->set_stall_evaluations(15);
  spec.mutable_budget()->set_target_speedup(3);
  spec.set_policy("uct");
  spec.set_priority(2);
  std::map<std::string, int32_t> by_state;
  for (size_t i = 0; i < specs.size(); ++i) {
    const EntrySpec& s = specs[i];
    v1::CampaignEntry& e = *c.add_entries();
    e.set_task_path(absl::StrCat("tasks/", s.task));
    e.set_task_name(s.task);
    e.set_task_hash(absl::StrCat("h", s.task));
    e.set_platform(s.platform);
    e.set_job_id(absl::StrCat(kCampaignId, "-", i));
    e.set_job_state(s.state);
    e.set_evaluations_done(s.evaluations);
    e.set_best_speedup_vs_production(s.vs_production);
    e.set_best_production_yardstick(s.yardstick);
    e.set_best_speedup_vs_reference(s.vs_reference);
    e.set_best_time_s(s.best_time_s);
    e.set_stop_reason(s.stop_reason);
    AddJob(s, e.job_id(), static_cast<int>(i), &data);
    by_state[s.state == v1::JOB_DONE ? "done" : s.state == v1::JOB_FAILED ? "failed" : "cancelled"] += 1;
  }
  for (const char* state : {"queued", "running", "done", "failed", "cancelled"}) {
    (*c.mutable_jobs_by_state())[state] = by_state[state];
  }
  *c.add_gains() = Gain("ads-ranker", "cpu", "production",
                        {Operator("softmax", 0.18, 1.42, "production", "torch_eager_2t"),
                         Operator("layernorm", 0.07, 0.87, "production", "torch_compile"),
                         Operator("matmul", 0.45, 1.08, "production", "vendor")});
  *c.add_gains() = Gain("ads-ranker", "mtia-sim", "reference",
                        {Operator("softmax", 0.2, 9.7, "reference"), Operator("matmul", 0.5, 4.2, "reference"),
                         Operator("layernorm", 0.1, 0, "none")});
  return data;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (const auto& dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Measures, in the browser, what the page drew: each chart's box and the
// marks inside it that are visible and within it; script errors; resources
// fetched; any external src/href. Writes JSON into #kevo-test-result.
constexpr char kErrorCatcher[] = R"html(<script>window.kevoTestErrors = [];
window.addEventListener("error", function (e) { window.kevoTestErrors.push(String(e.message)); });</script>
)html";
constexpr char kMeasureScript[] = R"html(<pre id="kevo-test-result"></pre>
<script>
(function () {
  var result = {errors: window.kevoTestErrors, chart_errors: [], resources: [], external: [], charts: {}};
  document.querySelectorAll(".chart-error").forEach(function (p) { result.chart_errors.push(p.textContent); });
  performance.getEntriesByType("resource").forEach(function (r) { result.resources.push(r.name); });
  document.querySelectorAll("[src], [href]").forEach(function (e) {
    var v = e.getAttribute("src") || e.getAttribute("href");
    if (/^\s*(https?:)?\/\//i.test(v)) result.external.push(v);
  });
  ["chart-speedups", "chart-trajectories", "chart-gains", "chart-failures"].forEach(function (id) {
    var svg = document.getElementById(id);
    if (!svg) return;
    var box = svg.getBoundingClientRect();
    function inside(el, lines) {
      var b = el.getBoundingClientRect();
      var sized = lines ? (b.width > 0 || b.height > 0) : (b.width > 0 && b.height > 0);
      return sized && b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1 &&
             b.bottom <= box.bottom + 1;
    }
    function count(selector, lines) {
      var n = 0;
      svg.querySelectorAll(selector).forEach(function (e) { if (inside(e, lines)) n++; });
      return n;
    }
    var texts = [];
    svg.querySelectorAll("text").forEach(function (t) { texts.push(t.textContent); });
    result.charts[id] = {
      width: box.width, height: box.height,
      bars: count("rect", false),
      production_bars: count("rect.bar-production", false),
      reference_bars: count("rect.bar-reference", false),
      lines: count("path:not(.domain)", true),
      texts: texts
    };
  });
  document.getElementById("kevo-test-result").textContent = JSON.stringify(result);
})();
</script>
)html";

std::string Unescape(std::string s) {
  return absl::StrReplaceAll(s, {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&nbsp;", " "}, {"&amp;", "&"}});
}

class CampaignReportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = kevo::testing::MakeTempDir("campaign-report"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The page for `data`; fails the test with what to install when d3 is missing.
  std::string Render(const CampaignReportData& data) {
    absl::StatusOr<std::string> page = RenderCampaignReport(data);
    EXPECT_TRUE(page.ok()) << page.status() << " (scripts/install-deps.sh installs libjs-d3)";
    return page.ok() ? *page : "";
  }

  // Loads `page` with the measuring script in headless chromium; the
  // measurements, or null (with a test failure) when there are none.
  json Measure(const std::string& page) {
    const std::string chromium = FindOnPath("chromium");
    if (chromium.empty()) {
      ADD_FAILURE() << "chromium is not on PATH: the campaign report's browser test needs Debian's chromium "
                       "(install it: scripts/install-deps.sh, or apt-get install chromium)";
      return nullptr;
    }
    std::string copy = page;
    const size_t head = copy.find("<head>");
    const size_t body_end = copy.rfind("</body>");
    if (head == std::string::npos || body_end == std::string::npos) {
      ADD_FAILURE() << "the page has no <head> or </body>";
      return nullptr;
    }
    copy.insert(body_end, kMeasureScript);
    copy.insert(head + 6, kErrorCatcher);
    const std::string path = dir_ + "/measured.html";
    kevo::testing::WriteTextFile(path, copy);
    kevo::testing::CommandResult r =
        kevo::testing::RunCommand({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                   "--mute-audio", absl::StrCat("--user-data-dir=", dir_, "/profile"),
                                   "--window-size=1280,2600", "--dump-dom", absl::StrCat("file://", path)},
                                  absl::Seconds(90));
    const std::string open = "<pre id=\"kevo-test-result\">";
    const size_t at = r.out.find(open);
    const size_t end = at == std::string::npos ? at : r.out.find("</pre>", at);
    if (r.exit_code != 0 || end == std::string::npos) {
      ADD_FAILURE() << "chromium exit " << r.exit_code << ", no result in its DOM dump; stderr:\n" << r.err;
      return nullptr;
    }
    json result = json::parse(Unescape(r.out.substr(at + open.size(), end - at - open.size())), nullptr,
                              /*allow_exceptions=*/false);
    if (!result.is_object()) ADD_FAILURE() << "the measuring script wrote no JSON: " << r.out.substr(at, 400);
    return result;
  }

  std::string dir_;
};

TEST_F(CampaignReportTest, EveryChartIsDrawnWithTheMarksItsDataCallsFor) {
  const CampaignReportData data = FleetCampaign();
  const std::string page = Render(data);
  ASSERT_FALSE(page.empty());
  const std::string page_path = dir_ + "/report.html";
  kevo::testing::WriteTextFile(page_path, page);

  // What the data calls for, counted from the data.
  int production_bars = 0, reference_bars = 0, trajectories = 0, no_production = 0;
  for (const v1::CampaignEntry& e : data.campaign.entries()) {
    production_bars += e.best_speedup_vs_production() > 0;
    reference_bars += e.best_speedup_vs_reference() > 0;
    no_production += e.best_speedup_vs_production() == 0 && e.best_speedup_vs_reference() > 0;
    auto nodes = data.nodes.find(e.job_id());
    if (nodes == data.nodes.end()) continue;
    trajectories += std::any_of(nodes->second.begin(), nodes->second.end(),
                                [](const v1::Node& n) { return n.state() == v1::NODE_DONE && n.status() == v1::OK; });
  }
  std::set<std::string> failed_statuses;
  for (const auto& [id, job] : data.jobs) {
    for (const auto& [status, n] : job.by_status()) {
      if (status != "OK" && n > 0) failed_statuses.insert(status);
    }
  }
  ASSERT_EQ(production_bars, 4);
  ASSERT_EQ(reference_bars, 6);
  ASSERT_EQ(trajectories, 6);  // the failed job had no OK node; the cancelled one no node at all
  ASSERT_GE(failed_statuses.size(), 4u);

  const json m = Measure(page);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["errors"], json::array()) << "script errors";
  EXPECT_EQ(m["chart_errors"], json::array());
  EXPECT_EQ(m["resources"], json::array()) << "the page fetched something";
  EXPECT_EQ(m["external"], json::array());
  for (const char* id : {"chart-speedups", "chart-trajectories", "chart-gains", "chart-failures"}) {
    ASSERT_TRUE(m["charts"].contains(id)) << id << " missing";
    EXPECT_GT(m["charts"][id]["width"].get<double>(), 100) << id;
    EXPECT_GT(m["charts"][id]["height"].get<double>(), 50) << id;
  }
  const json& speedups = m["charts"]["chart-speedups"];
  EXPECT_EQ(speedups["production_bars"], production_bars);
  EXPECT_EQ(speedups["reference_bars"], reference_bars);
  EXPECT_EQ(speedups["bars"], production_bars + reference_bars);
  const std::vector<std::string> texts = speedups["texts"].get<std::vector<std::string>>();
  EXPECT_EQ(std::count(texts.begin(), texts.end(), "no production baseline"), no_production);
  EXPECT_THAT(texts, ::testing::Contains("1.42x vs torch_eager_2t"));
  EXPECT_THAT(texts, ::testing::Contains("0.87x vs torch_compile"));
  EXPECT_THAT(texts, ::testing::Contains("9.70x vs reference"));
  EXPECT_THAT(texts, ::testing::Contains("1x"));  // the axis shows the 1x line's value

  EXPECT_EQ(m["charts"]["chart-trajectories"]["lines"], trajectories);
  EXPECT_EQ(m["charts"]["chart-gains"]["bars"], data.campaign.gains_size());
  EXPECT_THAT(
      m["charts"]["chart-gains"]["texts"].get<std::vector<std::string>>(),
      ::testing::Contains(absl::StrFormat("%+.1f%% (vs production)", 100 * data.campaign.gains(0).throughput_gain())));
  EXPECT_EQ(m["charts"]["chart-failures"]["bars"], static_cast<int>(failed_statuses.size()));

  // No network: nothing names a remote src or href in the page itself either.
  EXPECT_THAT(page, Not(::testing::ContainsRegex("(src|href)[ \t]*=[ \t]*[\"']?[ \t]*(https?:)?//")));
  EXPECT_THAT(page, Not(HasSubstr("<link")));

  if (const char* shot = std::getenv("KEVO_REPORT_SCREENSHOT"); shot != nullptr && *shot != '\0') {
    kevo::testing::CommandResult r = kevo::testing::RunCommand(
        {FindOnPath("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         absl::StrCat("--user-data-dir=", dir_, "/profile"), absl::StrCat("--screenshot=", shot),
         "--window-size=1280,2600", absl::StrCat("file://", page_path)},
        absl::Seconds(90));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    struct stat st {};
    EXPECT_EQ(::stat(shot, &st), 0) << "no screenshot at " << shot;
  }
}

// Without a browser: the header, the entry table and the gains' operator
// tables hold every figure as text.
TEST_F(CampaignReportTest, TheHeadlineIsVsProductionAndTheTablesHoldEveryNumber) {
  const CampaignReportData data = FleetCampaign();
  const std::string page = Render(data);
  ASSERT_FALSE(page.empty());
  EXPECT_THAT(page, HasSubstr("<h1>Campaign ads-q3-elementwise</h1>"));
  EXPECT_THAT(page, HasSubstr("ads-infra"));
  EXPECT_THAT(page, HasSubstr("2025-07-03 10:00:00 UTC"));
  EXPECT_THAT(page, HasSubstr("(after 2h17m)"));
  EXPECT_THAT(page, HasSubstr("0 queued · 0 running · 6 done · 1 failed · 1 cancelled"));
  EXPECT_THAT(page, HasSubstr("40 evaluations, stop after 15 without gain, target 3.00x per job"));
  EXPECT_THAT(page, HasSubstr("Stop reason: 6 jobs done, 1 failed, 1 cancelled"));
  EXPECT_THAT(page, HasSubstr("correctness oracle, not a yardstick"));
  // The entry table: each entry's figures, the mtia-sim ones without production.
  EXPECT_THAT(
      page, HasSubstr("<td>softmax</td><td>cpu</td><td class=\"nowrap\">c7-0</td><td>done</td><td class=\"num\">40</td>"
                      "<td class=\"num\">1.42x</td><td class=\"nowrap\"><span title=\"PyTorch eager at 2 "
                      "threads\">torch_eager_2t</span></td>"
                      "<td class=\"num\">14.90x</td><td class=\"num\">213.00 us</td>"
                      "<td>evaluation budget spent</td>"));
  EXPECT_THAT(
      page,
      HasSubstr(
          "<td>softmax</td><td>mtia-sim</td><td class=\"nowrap\">c7-4</td><td>done</td><td class=\"num\">30</td>"
          "<td class=\"num\">no production baseline</td><td class=\"nowrap\">-</td><td class=\"num\">9.70x</td>"));
  EXPECT_THAT(page, HasSubstr("<td>layernorm</td><td>mtia-sim</td><td class=\"nowrap\">c7-5</td><td>failed</td>"));
  EXPECT_THAT(page, HasSubstr("proposer failed: no candidate compiled for mtia-sim in 9 attempts"));
  // The gains' operator tables.
  EXPECT_THAT(page, HasSubstr(absl::StrFormat("<h3>ads-ranker on cpu: %+.1f%% throughput, vs production",
                                              100 * data.campaign.gains(0).throughput_gain())));
  EXPECT_THAT(page, HasSubstr(absl::StrFormat("<h3>ads-ranker on mtia-sim: %+.0f%% throughput, vs reference",
                                              100 * data.campaign.gains(1).throughput_gain())));
  EXPECT_THAT(page, HasSubstr("<td>layernorm</td><td class=\"num\">7.0%</td><td class=\"num\">1.00x</td>"
                              "<td class=\"num\">0.87x</td><td>torch_compile (torch.compile)</td>"
                              "<td>kept production (measured below 1x)</td>"));
  // The jobs without a trajectory say why.
  EXPECT_THAT(page, HasSubstr("layernorm on mtia-sim (c7-5, 9 failed evaluations)"));
  EXPECT_THAT(page, HasSubstr("gelu on mtia-sim (c7-7, no evaluations)"));
}

TEST_F(CampaignReportTest, DataCannotCloseItsScript) {
  CampaignReportData data = FleetCampaign();
  const std::string hostile = "x</script><script>document.title='owned'</script><!--";
  data.campaign.mutable_spec()->set_name(hostile);
  data.campaign.mutable_entries(0)->set_task_name(hostile);
  const std::string page = Render(data);
  ASSERT_FALSE(page.empty());
  // Three scripts: the data, d3, kevo's drawing script; the name adds none.
  size_t closes = 0;
  for (size_t at = page.find("</script"); at != std::string::npos; at = page.find("</script", at + 1)) ++closes;
  EXPECT_EQ(closes, 3u);
  const std::string open = "<script id=\"kevo-data\" type=\"application/json\">";
  const size_t at = page.find(open);
  ASSERT_NE(at, std::string::npos);
  const size_t end = page.find("</script>", at);
  const json j = json::parse(page.substr(at + open.size(), end - at - open.size()));
  EXPECT_EQ(j["campaign"]["name"], hostile);
  EXPECT_EQ(j["entries"][0]["task"], hostile);
  EXPECT_THAT(page, HasSubstr("<h1>Campaign x&lt;/script&gt;&lt;script&gt;"));
}

TEST_F(CampaignReportTest, EmptySectionsSaySoInsteadOfAnEmptyChart) {
  CampaignReportData data;
  data.campaign.set_campaign_id("c9");
  data.campaign.set_state(v1::CAMPAIGN_RUNNING);
  data.campaign.mutable_spec()->set_name("just-started");
  data.campaign.mutable_spec()->add_platforms("cpu");
  v1::CampaignEntry& e = *data.campaign.add_entries();
  e.set_task_name("softmax");
  e.set_platform("cpu");
  e.set_job_id("c9-0");
  e.set_job_state(v1::JOB_RUNNING);
  data.jobs["c9-0"].set_job_id("c9-0");
  (*data.jobs["c9-0"].mutable_by_status())["OK"] = 0;
  data.campaign.add_entries()->set_task_name("gelu");  // not launched
  const std::string page = Render(data);
  ASSERT_FALSE(page.empty());
  for (const char* id : {"chart-speedups", "chart-trajectories", "chart-gains", "chart-failures"}) {
    EXPECT_THAT(page, Not(HasSubstr(absl::StrCat("id=\"", id, "\"")))) << id;
  }
  EXPECT_THAT(page, HasSubstr("No entry has a correct kernel yet"));
  EXPECT_THAT(page, HasSubstr("No job has a correct kernel yet"));
  EXPECT_THAT(page, HasSubstr("softmax on cpu (c9-0, no evaluations)"));
  EXPECT_THAT(page, HasSubstr("No model gains"));
  EXPECT_THAT(page, HasSubstr("No evaluation failed."));
  EXPECT_THAT(page, HasSubstr("finished</dt><dd>not yet"));
  EXPECT_THAT(page, HasSubstr("Stop reason: still running"));
  // The drawing script skips the charts the page left out, without an error.
  const json m = Measure(page);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["errors"], json::array());
  EXPECT_EQ(m["charts"], json::object());
}

TEST_F(CampaignReportTest, MissingD3IsNotFoundAndSaysWhatToInstall) {
  absl::StatusOr<std::string> page = RenderCampaignReport(FleetCampaign(), dir_ + "/no-such-d3.min.js");
  EXPECT_EQ(page.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(page.status().message(), HasSubstr("libjs-d3"));
}

TEST_F(CampaignReportTest, AnotherD3VersionIsRefused) {
  const std::string path = dir_ + "/d3.v7.min.js";
  kevo::testing::WriteTextFile(path, "// https://d3js.org v7.8.5\n!function(t){var version=\"7.8.5\";}(this);");
  absl::StatusOr<std::string> page = RenderCampaignReport(FleetCampaign(), path);
  EXPECT_EQ(page.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(page.status().message(), HasSubstr("d3 version 3"));
}

}  // namespace
}  // namespace kevo::cli
