#include "cli/campaign_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli/report.h"
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/campaigns/campaigns.h"
#include "kevo/v1/evaluation.pb.h"

namespace kevo::cli {
namespace {

using nlohmann::json;

constexpr char kStyle[] = R"css(
:root { --production: #1f5fa8; --reference: #9cbde3; --gain: #2a8c55; --failure: #c4553b; --ink: #1d2330;
        --muted: #5d6675; --rule: #dde2ea; }
* { box-sizing: border-box; }
body { margin: 0; background: #f5f7fa; color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 40px; }
header h1 { margin: 0 0 4px; font-size: 26px; }
header .subtitle { color: var(--muted); margin: 0 0 14px; }
section { background: #fff; border: 1px solid var(--rule); border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
h2 { font-size: 18px; margin: 0 0 6px; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.caption, .note { color: var(--muted); margin: 4px 0 10px; max-width: 900px; }
.empty { color: var(--muted); font-style: italic; }
.chart-error { color: var(--failure); font-weight: 600; }
dl.facts { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.stop { margin: 10px 0 0; font-weight: 600; }
.legend { margin: 0 0 8px; color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin: 0 4px 0 12px; }
.swatch.production { background: var(--production); }
.swatch.reference { background: var(--reference); }
svg.chart { display: block; max-width: 100%; height: auto; font-size: 12px; }
svg.chart text { fill: var(--ink); }
.axis path, .axis line { fill: none; stroke: #9aa3b2; shape-rendering: crispEdges; }
.axis text { fill: var(--muted); font-size: 11px; }
.grid line { stroke: #eef1f5; }
.one-x { stroke: #333; stroke-width: 1.2px; stroke-dasharray: 4 3; }
.bar-production { fill: var(--production); }
.bar-reference { fill: var(--reference); }
.bar-gain { fill: var(--gain); }
.bar-failure { fill: var(--failure); }
svg.chart text.bar-missing { fill: var(--muted); font-style: italic; }
svg.chart text.platform-head { font-weight: 700; font-size: 13px; }
svg.chart text.panel-title { font-weight: 600; }
svg.chart text.panel-best, svg.chart text.axis-label { fill: var(--muted); font-size: 11px; }
.trajectory { fill: none; stroke: var(--production); stroke-width: 2px; }
.trajectory-end { fill: var(--production); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, td.nowrap { white-space: nowrap; }
footer { color: var(--muted); font-size: 12px; margin-top: 12px; }
)css";

// kevo's drawing script: reads the page's JSON (#kevo-data) and draws each
// chart into its <svg> with d3 v3 (the ids chart-speedups,
// chart-trajectories, chart-gains and chart-failures, and the classes of the
// marks, are what tests and anyone embedding the page find them by); a chart whose <svg> the page left out
// (nothing to show: the page says so in a sentence) is skipped. A chart that
// throws says so on the page instead of failing silently.
constexpr char kDrawScript[] = R"js(
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kevo-data").textContent);
  var W = 1140;
  var LOG_TICKS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100,
                   200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

  function draw(id, fn) {
    var svg = d3.select("#" + id);
    if (svg.empty()) return;
    try {
      fn(svg);
    } catch (e) {
      var p = document.createElement("p");
      p.className = "chart-error";
      p.textContent = "This chart could not be drawn: " + (e && e.message ? e.message : String(e));
      svg.node().parentNode.insertBefore(p, svg.node());
    }
  }
  function size(svg, w, h) {
    svg.attr("width", w).attr("height", h).attr("viewBox", "0 0 " + w + " " + h);
  }
  function fmtTimes(v) { return (v >= 1 ? d3.format(",g")(v) : String(v)) + "x"; }
  // A log domain around the values that always shows the 1x line.
  function logDomain(values) {
    var lo = values.length ? d3.min(values) : 1, hi = values.length ? d3.max(values) : 1;
    return [Math.min(lo / 1.5, 0.6), Math.max(hi * 1.5, 1.8)];
  }
  function ticksIn(domain, max) {
    var t = LOG_TICKS.filter(function (v) { return v >= domain[0] && v <= domain[1]; });
    // Too many for the space: keep 1, 10, 100... and the 1-2-5 steps around 1x.
    if (max && t.length > max) t = t.filter(function (v) { return Math.abs(Math.log(v) / Math.LN10 % 1) < 1e-9; });
    return t;
  }
  // A horizontal bar from x0 to x1 (either side of it), at least 2 px wide.
  function hbar(g, x0, x1, y, h, cls) {
    return g.append("rect").attr("class", "bar " + cls)
        .attr("x", Math.min(x0, x1)).attr("y", y)
        .attr("width", Math.max(Math.abs(x1 - x0), 2)).attr("height", h);
  }

  // Per-operator speedups, grouped by platform: vs production, then vs the
  // naive reference, as bars from the 1x line on a log scale.
  draw("chart-speedups", function (svg) {
    var m = {top: 34, right: 250, bottom: 12, left: 180}, rowH = 34, barH = 12, headH = 28;
    var rows = [], y = 0, values = [];
    data.platforms.forEach(function (p) {
      var es = data.entries.filter(function (e) { return e.platform === p; });
      if (!es.length) return;
      rows.push({head: p, y: y});
      y += headH;
      es.forEach(function (e) {
        rows.push({entry: e, y: y});
        y += rowH;
        if (e.vs_production) values.push(e.vs_production);
        if (e.vs_reference) values.push(e.vs_reference);
      });
    });
    var iw = W - m.left - m.right, ih = y;
    size(svg, W, ih + m.top + m.bottom);
    var x = d3.scale.log().domain(logDomain(values)).range([0, iw]).clamp(true);
    var ticks = ticksIn(x.domain(), 14);
    var g = svg.append("g").attr("transform", "translate(" + m.left + "," + m.top + ")");
    g.append("g").attr("class", "grid").selectAll("line").data(ticks).enter().append("line")
        .attr("x1", x).attr("x2", x).attr("y1", 0).attr("y2", ih);
    g.append("g").attr("class", "axis x")
        .call(d3.svg.axis().scale(x).orient("top").tickValues(ticks).tickFormat(fmtTimes));
    rows.forEach(function (r) {
      if (r.head) {
        g.append("text").attr("class", "platform-head").attr("x", -m.left + 6).attr("y", r.y + 20)
            .text(r.head);
        return;
      }
      var e = r.entry;
      var row = g.append("g").attr("class", "row").attr("transform", "translate(0," + r.y + ")");
      row.append("text").attr("x", -12).attr("y", rowH / 2 + 2).attr("text-anchor", "end").text(e.task);
      [[e.vs_production, e.production_label, "bar-production", 4],
       [e.vs_reference, e.reference_label, "bar-reference", 6 + barH]].forEach(function (b) {
        if (b[0]) {
          hbar(row, x(1), x(b[0]), b[3], barH, b[2]).append("title").text(e.task + " on " + e.platform + ": " + b[1]);
          row.append("text").attr("x", Math.max(x(1), x(b[0])) + 6).attr("y", b[3] + barH - 2).text(b[1]);
        } else {
          row.append("text").attr("class", "bar-missing").attr("x", x(1) + 6).attr("y", b[3] + barH - 2).text(b[1]);
        }
      });
    });
    g.append("line").attr("class", "one-x").attr("x1", x(1)).attr("x2", x(1)).attr("y1", -4).attr("y2", ih);
  });

  // Best fitness so far over finished evaluations, one panel per job, on
  // shared scales so that the panels compare.
  draw("chart-trajectories", function (svg) {
    var ts = data.trajectories, cols = Math.min(3, ts.length), pw = Math.floor(W / cols), ph = 165;
    var m = {top: 28, right: 24, bottom: 34, left: 52};
    var iw = pw - m.left - m.right, ih = ph - m.top - m.bottom;
    size(svg, W, Math.ceil(ts.length / cols) * ph);
    var all = [];
    ts.forEach(function (t) { t.points.forEach(function (p) { all.push(p[1]); }); });
    var x = d3.scale.linear().domain([0, Math.max(1, d3.max(ts, function (t) { return t.evaluations; }))])
        .range([0, iw]);
    var y = d3.scale.log().domain(logDomain(all)).range([ih, 0]).clamp(true);
    var line = d3.svg.line().interpolate("step-after")
        .x(function (p) { return x(p[0]); }).y(function (p) { return y(p[1]); });
    ts.forEach(function (t, i) {
      var g = svg.append("g").attr("class", "panel")
          .attr("transform", "translate(" + ((i % cols) * pw + m.left) + "," + (Math.floor(i / cols) * ph + m.top) + ")");
      g.append("text").attr("class", "panel-title").attr("x", -m.left + 8).attr("y", -12).text(t.label);
      g.append("g").attr("class", "axis x").attr("transform", "translate(0," + ih + ")")
          .call(d3.svg.axis().scale(x).orient("bottom").ticks(5).tickFormat(d3.format("d")));
      g.append("g").attr("class", "axis y")
          .call(d3.svg.axis().scale(y).orient("left").tickValues(ticksIn(y.domain(), 6)).tickFormat(fmtTimes));
      g.append("text").attr("class", "axis-label").attr("x", iw).attr("y", ih + 30).attr("text-anchor", "end")
          .text("evaluations");
      g.append("line").attr("class", "one-x").attr("x1", 0).attr("x2", iw).attr("y1", y(1)).attr("y2", y(1));
      g.append("path").datum(t.points).attr("class", "line trajectory").attr("d", line)
          .append("title").text(t.label + ": " + t.best_label);
      var last = t.points[t.points.length - 1];
      g.append("circle").attr("class", "trajectory-end").attr("r", 3.5).attr("cx", x(last[0])).attr("cy", y(last[1]));
      g.append("text").attr("class", "panel-best").attr("x", iw).attr("y", -12).attr("text-anchor", "end")
          .text(t.best_label);
    });
  });

  // Models' throughput gains (Amdahl over the operators' speedups).
  draw("chart-gains", function (svg) {
    var gs = data.gains, m = {top: 30, right: 300, bottom: 10, left: 220}, rowH = 30, barH = 18;
    var iw = W - m.left - m.right, ih = gs.length * rowH;
    size(svg, W, ih + m.top + m.bottom);
    var lo = Math.min(0, d3.min(gs, function (d) { return d.gain; }));
    var hi = Math.max(0.01, d3.max(gs, function (d) { return d.gain; }));
    var x = d3.scale.linear().domain([lo, hi]).nice().range([0, iw]);
    var g = svg.append("g").attr("transform", "translate(" + m.left + "," + m.top + ")");
    g.append("g").attr("class", "grid").selectAll("line").data(x.ticks(6)).enter().append("line")
        .attr("x1", x).attr("x2", x).attr("y1", 0).attr("y2", ih);
    g.append("g").attr("class", "axis x")
        .call(d3.svg.axis().scale(x).orient("top").ticks(6).tickFormat(d3.format("+.0%")));
    gs.forEach(function (d, i) {
      var yy = i * rowH + (rowH - barH) / 2;
      g.append("text").attr("x", -12).attr("y", yy + barH - 4).attr("text-anchor", "end")
          .text(d.model + " on " + d.platform);
      hbar(g, x(0), x(d.gain), yy, barH, "bar-gain").append("title").text(d.model + " on " + d.platform + ": " + d.label);
      g.append("text").attr("x", Math.max(x(0), x(d.gain)) + 6).attr("y", yy + barH - 4)
          .text(d.label + " (vs " + d.baseline + ")");
    });
    g.append("line").attr("class", "one-x").attr("x1", x(0)).attr("x2", x(0)).attr("y1", -4).attr("y2", ih);
  });

  // Evaluations that failed, by status, over every job of the campaign.
  draw("chart-failures", function (svg) {
    var fs = data.failures, m = {top: 30, right: 120, bottom: 10, left: 220}, rowH = 26, barH = 16;
    var iw = W - m.left - m.right, ih = fs.length * rowH;
    size(svg, W, ih + m.top + m.bottom);
    var x = d3.scale.linear().domain([0, d3.max(fs, function (d) { return d.count; })]).nice().range([0, iw]);
    var g = svg.append("g").attr("transform", "translate(" + m.left + "," + m.top + ")");
    var ticks = x.ticks(Math.min(8, x.domain()[1])).filter(function (v) { return v % 1 === 0; });
    g.append("g").attr("class", "grid").selectAll("line").data(ticks).enter().append("line")
        .attr("x1", x).attr("x2", x).attr("y1", 0).attr("y2", ih);
    g.append("g").attr("class", "axis x")
        .call(d3.svg.axis().scale(x).orient("top").tickValues(ticks).tickFormat(d3.format("d")));
    fs.forEach(function (d, i) {
      var yy = i * rowH + (rowH - barH) / 2;
      g.append("text").attr("x", -12).attr("y", yy + barH - 3).attr("text-anchor", "end").text(d.status);
      hbar(g, x(0), x(d.count), yy, barH, "bar-failure").append("title").text(d.status + ": " + d.count);
      g.append("text").attr("x", x(d.count) + 6).attr("y", yy + barH - 3).text(d3.format(",d")(d.count));
    });
  });
})();
)js";

std::string Html(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON that can sit inside a <script> element: '<' only occurs inside JSON
// strings, where \u003c means the same, so no "</script" or "<!--" can end
// or confuse the element. Invalid UTF-8 (a user's task name) is replaced
// rather than thrown.
std::string ScriptSafeJson(const json& j) {
  std::string text = j.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  return absl::StrReplaceAll(text, {{"<", "\\u003c"}});
}

std::string FormatMicros(int64_t micros) {
  if (micros <= 0) return "";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMicros(micros), absl::UTCTimeZone());
}

std::string Times(double v) { return v >= 100 ? absl::StrFormat("%.0fx", v) : absl::StrFormat("%.2fx", v); }

std::string Percent(double gain) {
  const double p = 100 * gain;
  return std::abs(p) >= 10 ? absl::StrFormat("%+.0f%%", p) : absl::StrFormat("%+.1f%%", p);
}

// "torch_eager_2t (PyTorch eager at 2 threads)", or the name alone when the
// label adds nothing.
std::string YardstickText(const std::string& name) {
  if (name.empty()) return "production";
  const std::string label = YardstickLabel(name);
  return label == name ? name : absl::StrCat(name, " (", label, ")");
}

// The yardstick's name, its human label on hover (the table stays narrow).
std::string YardstickCell(const std::string& name) {
  if (name.empty()) return "production";
  return absl::StrCat("<span title=\"", Html(YardstickLabel(name)), "\">", Html(name), "</span>");
}

// Why an entry has no figure to draw.
std::string NoResultText(const v1::CampaignEntry& e) {
  if (e.skipped()) return "skipped (campaign cancelled)";
  if (e.job_id().empty() || e.job_state() == v1::JOB_STATE_UNSPECIFIED) return "not launched yet";
  if (e.job_state() == v1::JOB_RUNNING) return "no correct kernel yet";
  return "no correct kernel";
}

std::string ProductionLabel(const v1::CampaignEntry& e) {
  if (e.best_speedup_vs_production() > 0) {
    return absl::StrCat(Times(e.best_speedup_vs_production()), " vs ",
                        e.best_production_yardstick().empty() ? "production" : e.best_production_yardstick());
  }
  // A correct kernel but nothing to compare it with: the platform has no
  // production kernels (mtia-sim) or none could be timed.
  if (e.best_speedup_vs_reference() > 0) return "no production baseline";
  return NoResultText(e);
}

std::string ReferenceLabel(const v1::CampaignEntry& e) {
  if (e.best_speedup_vs_reference() > 0) return absl::StrCat(Times(e.best_speedup_vs_reference()), " vs reference");
  return e.best_speedup_vs_production() > 0 ? "no reference figure" : "";
}

std::string EntryLabel(const v1::CampaignEntry& e) { return absl::StrCat(e.task_name(), " on ", e.platform()); }

// One job's best fitness so far, as [evaluation, best] at each improvement
// and at the last finished evaluation (the chart draws steps between them).
// Counts every finished node; only OK nodes with a measured (not static)
// fitness can improve the best.
struct Trajectory {
  json points = json::array();
  int evaluations = 0;
  double best = 0;
};

Trajectory TrajectoryOf(std::vector<v1::Node> nodes) {
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const v1::Node& a, const v1::Node& b) { return a.sequence() < b.sequence(); });
  Trajectory t;
  int last_point = 0;
  for (const v1::Node& n : nodes) {
    if (n.state() != v1::NODE_DONE) continue;
    ++t.evaluations;
    if (n.status() == v1::OK && !n.static_fitness() && n.fitness() > t.best) {
      t.best = n.fitness();
      t.points.push_back({t.evaluations, t.best});
      last_point = t.evaluations;
    }
  }
  if (t.best > 0 && last_point < t.evaluations) t.points.push_back({t.evaluations, t.best});
  return t;
}

// Platforms in the campaign's order, then any only the entries name.
std::vector<std::string> PlatformsOf(const v1::Campaign& c) {
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  for (const std::string& p : c.spec().platforms()) add(p);
  for (const v1::CampaignEntry& e : c.entries()) add(e.platform());
  return out;
}

std::string BudgetText(const v1::Budget& b) {
  std::vector<std::string> parts;
  parts.push_back(b.max_evaluations() > 0 ? absl::StrCat(b.max_evaluations(), " evaluations")
                                          : "60 evaluations (default)");
  if (b.max_wall_seconds() > 0) {
    parts.push_back(absl::StrCat(absl::FormatDuration(absl::Seconds(b.max_wall_seconds())), " wall time"));
  }
  if (b.stall_evaluations() > 0) parts.push_back(absl::StrCat("stop after ", b.stall_evaluations(), " without gain"));
  if (b.target_speedup() > 0) parts.push_back(absl::StrCat("target ", Times(b.target_speedup())));
  if (b.target_roofline() > 0) {
    parts.push_back(absl::StrFormat("target %.0f%% of roofline", 100 * b.target_roofline()));
  }
  return absl::StrCat(absl::StrJoin(parts, ", "), " per job");
}

std::string JobsByStateText(const v1::Campaign& c) {
  static const char* const kOrder[] = {"queued", "running", "done", "failed", "cancelled"};
  std::map<std::string, int32_t> rest(c.jobs_by_state().begin(), c.jobs_by_state().end());
  std::vector<std::string> parts;
  for (const char* state : kOrder) {
    auto it = rest.find(state);
    if (it == rest.end()) continue;
    parts.push_back(absl::StrCat(it->second, " ", state));
    rest.erase(it);
  }
  for (const auto& [state, n] : rest) parts.push_back(absl::StrCat(n, " ", state));
  return parts.empty() ? "none yet" : absl::StrJoin(parts, " · ");
}

struct Failures {
  std::vector<std::pair<std::string, int64_t>> by_status;  // most first
  int64_t total = 0;                                       // every status, OK included
  int64_t ok = 0;
};

Failures FailuresOf(const CampaignReportData& data) {
  std::map<std::string, int64_t> sum;
  Failures f;
  for (const auto& [id, job] : data.jobs) {
    for (const auto& [status, n] : job.by_status()) {
      f.total += n;
      if (status == v1::EvalStatus_Name(v1::OK)) {
        f.ok += n;
      } else if (n > 0) {
        sum[status] += n;
      }
    }
  }
  f.by_status.assign(sum.begin(), sum.end());
  std::stable_sort(f.by_status.begin(), f.by_status.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return f;
}

void AppendFact(std::string* out, const std::string& name, const std::string& value) {
  absl::StrAppend(out, "<dt>", Html(name), "</dt><dd>", Html(value.empty() ? "-" : value), "</dd>");
}

void AppendHeader(const v1::Campaign& c, std::string* out) {
  const v1::CampaignSpec& s = c.spec();
  absl::StrAppend(out, "<header>\n<h1>Campaign ", Html(s.name().empty() ? c.campaign_id() : s.name()), "</h1>\n");
  absl::StrAppend(out, "<p class=\"subtitle\">kevo campaign report: ", c.entries_size(), " task x platform entries, ",
                  s.tasks_size() > 0 ? absl::StrCat(s.tasks_size(), " task patterns, ") : "", PlatformsOf(c).size(),
                  " platforms (", Html(absl::StrJoin(PlatformsOf(c), ", ")), ")</p>\n");
  absl::StrAppend(out, "<dl class=\"facts\">");
  AppendFact(out, "campaign id", c.campaign_id());
  AppendFact(out, "team", s.team());
  AppendFact(out, "state", campaigns::CampaignStateName(c.state()));
  AppendFact(out, "jobs", JobsByStateText(c));
  AppendFact(out, "created", FormatMicros(c.created_unix_micros()));
  std::string finished = FormatMicros(c.finished_unix_micros());
  if (!finished.empty() && c.created_unix_micros() > 0 && c.finished_unix_micros() >= c.created_unix_micros()) {
    absl::StrAppend(&finished, " (after ",
                    absl::FormatDuration(absl::Trunc(
                        absl::Microseconds(c.finished_unix_micros() - c.created_unix_micros()), absl::Seconds(1))),
                    ")");
  }
  AppendFact(out, "finished", finished.empty() ? "not yet" : finished);
  AppendFact(out, "budget", BudgetText(s.budget()));
  AppendFact(out, "search",
             absl::StrCat("policy ", s.policy().empty() ? "default" : s.policy(), ", proposer ",
                          s.proposer().empty() ? "builtin" : s.proposer(),
                          s.priority() != 0 ? absl::StrCat(", priority ", s.priority()) : ""));
  absl::StrAppend(out, "</dl>\n");
  absl::StrAppend(out,
                  "<p class=\"stop\">Stop reason: ", Html(c.stop_reason().empty() ? "still running" : c.stop_reason()),
                  "</p>\n</header>\n");
}

void AppendGainTables(const v1::Campaign& c, std::string* out) {
  for (const v1::ModelGain& g : c.gains()) {
    absl::StrAppend(out, "<h3>", Html(g.model()), " on ", Html(g.platform()), ": ", Percent(g.throughput_gain()),
                    " throughput, vs ", Html(g.baseline()),
                    absl::StrFormat(" (its operators cover %.0f%% of its time)", 100 * g.covered_share()), "</h3>\n");
    absl::StrAppend(out,
                    "<table class=\"gain-operators\"><thead><tr><th>operator</th><th class=\"num\">share</th>"
                    "<th class=\"num\">speedup used</th><th class=\"num\">measured</th><th>vs</th><th>note</th>"
                    "</tr></thead><tbody>\n");
    for (const v1::OperatorGain& o : g.operators()) {
      std::string vs = o.baseline() == "production"  ? YardstickText(o.yardstick())
                       : o.baseline() == "reference" ? "the naive reference"
                                                     : "none (no correct kernel)";
      std::string note;
      if (o.kept_production()) {
        note = "kept production (measured below 1x)";
      } else if (o.baseline() == "none") {
        note = "counted as 1x";
      }
      absl::StrAppend(out, "<tr><td>", Html(o.task()), "</td><td class=\"num\">",
                      absl::StrFormat("%.1f%%", 100 * o.share()), "</td><td class=\"num\">", Times(o.speedup()),
                      "</td><td class=\"num\">", o.measured_speedup() > 0 ? Times(o.measured_speedup()) : "none",
                      "</td><td>", Html(vs), "</td><td>", Html(note), "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table>\n");
  }
}

void AppendEntryTable(const CampaignReportData& data, std::string* out) {
  absl::StrAppend(out,
                  "<table id=\"entries-table\"><thead><tr><th>task</th><th>platform</th><th>job</th><th>state</th>"
                  "<th class=\"num\">evaluations</th><th class=\"num\">best vs production</th><th>yardstick</th>"
                  "<th class=\"num\">vs reference</th><th class=\"num\">best time</th><th>stop reason</th>"
                  "</tr></thead><tbody>\n");
  for (const v1::CampaignEntry& e : data.campaign.entries()) {
    std::string vs_production = e.best_speedup_vs_production() > 0  ? Times(e.best_speedup_vs_production())
                                : e.best_speedup_vs_reference() > 0 ? "no production baseline"
                                                                    : "-";
    absl::StrAppend(out, "<tr><td>", Html(e.task_name()), "</td><td>", Html(e.platform()), "</td><td class=\"nowrap\">",
                    Html(e.job_id().empty() ? "-" : e.job_id()), "</td><td>", campaigns::EntryStateName(e),
                    "</td><td class=\"num\">", e.evaluations_done(), "</td><td class=\"num\">", Html(vs_production),
                    "</td><td class=\"nowrap\">",
                    e.best_speedup_vs_production() > 0 ? YardstickCell(e.best_production_yardstick()) : "-",
                    "</td><td class=\"num\">",
                    e.best_speedup_vs_reference() > 0 ? Times(e.best_speedup_vs_reference()) : "-",
                    "</td><td class=\"num\">", Html(FormatSeconds(e.best_time_s())), "</td><td>",
                    Html(e.stop_reason().empty() ? "-" : e.stop_reason()), "</td></tr>\n");
  }
  absl::StrAppend(out, "</tbody></table>\n");
}

// Whether the library declares `version: "3.` (d3 = {version: "3.5.16"}).
bool DeclaresVersion3(absl::string_view text) {
  for (size_t at = text.find("version"); at != absl::string_view::npos; at = text.find("version", at + 1)) {
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(text.substr(at + 7));
    if (!absl::ConsumePrefix(&rest, ":")) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (absl::StartsWith(rest, "\"3.")) return true;
  }
  return false;
}

absl::StatusOr<std::string> ReadD3(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read d3 at ", path,
                                            ": the campaign report inlines d3 v3; install Debian's libjs-d3 "
                                            "(scripts/install-deps.sh does)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string d3 = std::move(text).str();
  // The drawing script speaks d3 v3's API (d3.scale.*, d3.svg.*).
  if (!DeclaresVersion3(d3)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not d3 version 3 (Debian's libjs-d3 3.5): the campaign report needs d3 v3"));
  }
  if (absl::StrContains(absl::AsciiStrToLower(d3), "</script")) {
    return absl::FailedPreconditionError(absl::StrCat(path, " contains \"</script\": it cannot be inlined"));
  }
  return d3;
}

}  // namespace

absl::StatusOr<std::string> RenderCampaignReport(const CampaignReportData& data, const std::string& d3_path) {
  KEVO_ASSIGN_OR_RETURN(const std::string d3, ReadD3(d3_path.empty() ? kDefaultD3Path : d3_path));
  const v1::Campaign& c = data.campaign;

  json j;
  j["campaign"] = {{"id", c.campaign_id()},
                   {"name", c.spec().name()},
                   {"team", c.spec().team()},
                   {"state", campaigns::CampaignStateName(c.state())}};
  j["platforms"] = PlatformsOf(c);
  j["entries"] = json::array();
  j["trajectories"] = json::array();
  bool any_speedup = false;
  std::vector<std::string> without_trajectory;
  for (const v1::CampaignEntry& e : c.entries()) {
    const double production = e.best_speedup_vs_production(), reference = e.best_speedup_vs_reference();
    any_speedup = any_speedup || production > 0 || reference > 0;
    j["entries"].push_back({{"task", e.task_name()},
                            {"platform", e.platform()},
                            {"job_id", e.job_id()},
                            {"state", campaigns::EntryStateName(e)},
                            {"evaluations", e.evaluations_done()},
                            {"vs_production", production > 0 ? json(production) : json(nullptr)},
                            {"yardstick", e.best_production_yardstick()},
                            {"production_label", ProductionLabel(e)},
                            {"vs_reference", reference > 0 ? json(reference) : json(nullptr)},
                            {"reference_label", ReferenceLabel(e)},
                            {"best_time_s", e.best_time_s()}});
    if (e.job_id().empty()) continue;
    auto nodes = data.nodes.find(e.job_id());
    Trajectory t = nodes == data.nodes.end() ? Trajectory{} : TrajectoryOf(nodes->second);
    if (t.points.empty()) {
      without_trajectory.push_back(absl::StrCat(
          EntryLabel(e), " (", e.job_id(),
          t.evaluations > 0 ? absl::StrCat(", ", t.evaluations, " failed evaluations") : ", no evaluations", ")"));
      continue;
    }
    auto job = data.jobs.find(e.job_id());
    std::string baseline = job != data.jobs.end() ? job->second.fitness_baseline() : "";
    if (baseline.empty()) baseline = production > 0 ? "production" : "reference";
    j["trajectories"].push_back({{"job_id", e.job_id()},
                                 {"label", EntryLabel(e)},
                                 {"baseline", baseline},
                                 {"evaluations", t.evaluations},
                                 {"best_label", absl::StrCat("best ", Times(t.best), " vs ", baseline)},
                                 {"points", std::move(t.points)}});
  }
  j["gains"] = json::array();
  for (const v1::ModelGain& g : c.gains()) {
    j["gains"].push_back({{"model", g.model()},
                          {"platform", g.platform()},
                          {"gain", g.throughput_gain()},
                          {"label", Percent(g.throughput_gain())},
                          {"baseline", g.baseline()},
                          {"covered_share", g.covered_share()}});
  }
  const Failures failures = FailuresOf(data);
  j["failures"] = json::array();
  for (const auto& [status, n] : failures.by_status) j["failures"].push_back({{"status", status}, {"count", n}});
  j["evaluations"] = {{"total", failures.total}, {"ok", failures.ok}};

  std::string page;
  page.reserve(d3.size() + 64 * 1024);
  absl::StrAppend(&page, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>kevo campaign ",
                  Html(c.spec().name().empty() ? c.campaign_id() : c.spec().name()),
                  "</title>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>", kStyle,
                  "</style>\n</head>\n<body>\n<main>\n");
  AppendHeader(c, &page);

  absl::StrAppend(&page, "<section id=\"speedups\">\n<h2>Per-operator speedups, by platform</h2>\n",
                  "<p class=\"caption\">Each task's best kernel on each platform. The headline figure is the speedup "
                  "over <b>production</b>: the fastest form users run today (PyTorch eager, torch.compile or the "
                  "vendor library), named beside each bar. The naive reference is the task's correctness oracle, not "
                  "a yardstick: its figure is shown for context, and is the only one on a platform without production "
                  "kernels (mtia-sim). Log scale; bars start at the 1x line, right of it is faster.</p>\n",
                  "<p class=\"legend\"><span class=\"swatch production\"></span>vs production"
                  "<span class=\"swatch reference\"></span>vs the naive reference</p>\n");
  if (any_speedup) {
    absl::StrAppend(&page, "<svg id=\"chart-speedups\" class=\"chart\"></svg>\n");
  } else {
    absl::StrAppend(&page, "<p class=\"empty\">No entry has a correct kernel yet: nothing to chart.</p>\n");
  }
  absl::StrAppend(&page, "</section>\n");

  absl::StrAppend(&page, "<section id=\"trajectories\">\n<h2>Search trajectories</h2>\n",
                  "<p class=\"caption\">Each job's best fitness so far (its speedup over the baseline it searched "
                  "against, named in each panel) over its finished evaluations; failed evaluations count but never "
                  "raise the line. Shared scales; log y; the dashed line is 1x.</p>\n");
  if (!j["trajectories"].empty()) {
    absl::StrAppend(&page, "<svg id=\"chart-trajectories\" class=\"chart\"></svg>\n");
  } else {
    absl::StrAppend(&page, "<p class=\"empty\">No job has a correct kernel yet: no trajectory to draw.</p>\n");
  }
  if (!without_trajectory.empty()) {
    std::vector<std::string> escaped;
    for (const std::string& s : without_trajectory) escaped.push_back(Html(s));
    absl::StrAppend(&page, "<p class=\"note\" id=\"no-trajectory\">Without a trajectory (no correct kernel): ",
                    absl::StrJoin(escaped, "; "), ".</p>\n");
  }
  absl::StrAppend(&page, "</section>\n");

  absl::StrAppend(&page, "<section id=\"gains\">\n<h2>Model throughput gains</h2>\n",
                  "<p class=\"caption\">What the kept kernels would give each profiled model on each platform "
                  "(Amdahl over the shares of its time its operators take); an operator measured below 1x counts as "
                  "1x, since production stays. Each bar names its baseline: production, reference (no production "
                  "kernels on the platform) or mixed.</p>\n");
  if (c.gains_size() > 0) {
    absl::StrAppend(&page, "<svg id=\"chart-gains\" class=\"chart\"></svg>\n");
    AppendGainTables(c, &page);
  } else {
    absl::StrAppend(&page,
                    "<p class=\"empty\">No model gains: the campaign names no model profiles, or none of their "
                    "operators has a result yet.</p>\n");
  }
  absl::StrAppend(&page, "</section>\n");

  absl::StrAppend(&page, "<section id=\"failures\">\n<h2>Failed evaluations, by status</h2>\n",
                  absl::StrFormat("<p class=\"caption\">Over every job of the campaign: %d evaluations, %d OK",
                                  failures.total, failures.ok),
                  failures.total > 0 ? absl::StrFormat(" (%.0f%%)", 100.0 * failures.ok / failures.total) : "",
                  ".</p>\n");
  if (!failures.by_status.empty()) {
    absl::StrAppend(&page, "<svg id=\"chart-failures\" class=\"chart\"></svg>\n");
  } else {
    absl::StrAppend(&page, "<p class=\"empty\">No evaluation failed.</p>\n");
  }
  absl::StrAppend(&page, "</section>\n");

  absl::StrAppend(&page, "<section id=\"entries\">\n<h2>Every entry</h2>\n");
  AppendEntryTable(data, &page);
  absl::StrAppend(&page, "</section>\n");

  absl::StrAppend(&page, "<footer>Generated by kevo (kevo report ", Html(c.campaign_id()),
                  "). Self-contained: d3 v3 and the data are inlined; no network needed.</footer>\n</main>\n");
  absl::StrAppend(&page, "<script id=\"kevo-data\" type=\"application/json\">", ScriptSafeJson(j), "</script>\n");
  absl::StrAppend(&page, "<script>\n", d3, "\n</script>\n");
  absl::StrAppend(&page, "<script>", kDrawScript, "</script>\n</body>\n</html>\n");
  return page;
}

}  // namespace kevo::cli
