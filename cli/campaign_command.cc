// kevo campaign submit|run|status|list|cancel|export, and kevo report: a
// team's fleet-wide batch of jobs (docs/campaigns.md), kept by the
// coordinator (CampaignService), and the page that shows what it gained.
#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/campaign_report.h"
#include "cli/commands.h"
#include "cli/embedded.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include "cli/report.h"
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "coordinator/campaigns/campaigns.h"
#include "kevo/v1/campaign.grpc.pb.h"

namespace kevo::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kCampaignUsage[] =
    "usage: kevo campaign submit FILE [--coordinator ADDR]\n"
    "       kevo campaign run FILE [--db DIR] [--report FILE] [--export DIR] [--slots N]\n"
    "       kevo campaign status ID [--coordinator ADDR] [--json]\n"
    "       kevo campaign list [--coordinator ADDR]\n"
    "       kevo campaign cancel ID [--coordinator ADDR]\n"
    "       kevo campaign export ID DIR [--coordinator ADDR]\n"
    "A campaign (docs/campaigns.md) searches task globs x platforms as jobs of your team,\n"
    "at most max_parallel_jobs at a time, and computes each profiled model's throughput gain\n"
    "from the operators' speedups over the production baseline. FILE is a text-format\n"
    "kevo.v1.CampaignSpec; its task globs are relative to its folder.\n"
    "submit stores it on the coordinator and prints its id; run does the same on an embedded\n"
    "coordinator with one local worker per platform, waits for the end, prints the status and\n"
    "writes the report (--report, default kevo-out/campaign/report.html) and the ship list\n"
    "(--export). status shows every job and the gains; export writes each winning kernel with\n"
    "its flags, validated shapes and where production must stay.\n";

constexpr char kReportUsage[] =
    "usage: kevo report CAMPAIGN_ID [-o report.html] [--coordinator ADDR]\n"
    "Writes one self-contained HTML page (no network needed to view it): per-operator speedups\n"
    "per platform against production and the reference, each job's search trajectory, the\n"
    "model throughput gains, failures by status.\n";

std::unique_ptr<v1::CampaignService::Stub> CampaignStub(const std::string& address) {
  return v1::CampaignService::NewStub(Channel(address));
}

// Text-format errors as "FILE:LINE:COL: message".
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrors(std::string path) : path_(std::move(path)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    errors_.push_back(absl::StrCat(path_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Text() const { return absl::StrJoin(errors_, "\n"); }

 private:
  std::string path_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::StatusOr<v1::SubmitCampaignRequest> LoadCampaignFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read campaign file ", path));
  std::stringstream text;
  text << in.rdbuf();
  v1::SubmitCampaignRequest request;
  google::protobuf::TextFormat::Parser parser;
  ParseErrors errors(path);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), request.mutable_spec())) {
    return absl::InvalidArgumentError(absl::StrCat("campaign file ", path, " is malformed:\n", errors.Text()));
  }
  if (request.spec().tasks().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the campaign names no tasks (tasks: \"GLOB\")"));
  }
  const fs::path base = fs::absolute(path).parent_path();
  std::set<std::string> found;  // absolute task paths
  for (const std::string& pattern : request.spec().tasks()) {
    const std::string full = fs::path(pattern).is_absolute() ? pattern : (base / pattern).string();
    glob_t g{};
    const int rc = glob(full.c_str(), GLOB_BRACE, nullptr, &g);
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    if (rc == GLOB_NOMATCH || matches.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tasks \"", pattern, "\" matches nothing (in ", base.string(), ")"));
    }
    for (const std::string& m : matches) {
      KEVO_ASSIGN_OR_RETURN(std::vector<std::string> tasks, task::FindTaskPaths(m));
      if (tasks.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": tasks \"", pattern, "\": ", m, " holds no task"));
      }
      for (const std::string& t : tasks) found.insert(fs::absolute(t).lexically_normal().string());
    }
  }
  for (const std::string& t : found) {
    auto task = task::LoadTaskPath(t);
    if (!task.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": task ", t, ": ", task.status().message()));
    }
    v1::CampaignTask* ct = request.add_tasks();
    ct->set_path(fs::relative(t, base).string());
    *ct->mutable_task() = *std::move(task);
  }
  return request;
}

namespace {

std::string Ratio(double x) { return x > 0 ? absl::StrFormat("%.2fx", x) : "-"; }

std::string JobsLine(const v1::Campaign& c) {
  auto n = [&](const char* k) {
    auto it = c.jobs_by_state().find(k);
    return it == c.jobs_by_state().end() ? 0 : it->second;
  };
  return absl::StrFormat("%d jobs: %d done, %d running, %d queued, %d failed, %d cancelled", c.entries_size(),
                         n("done"), n("running"), n("queued"), n("failed"), n("cancelled"));
}

std::string GainLine(const v1::ModelGain& g) {
  const std::string baseline = g.baseline() == "production"  ? "vs production"
                               : g.baseline() == "reference" ? "vs the naive reference (no production kernels here)"
                               : g.baseline() == "mixed"     ? "vs production where measured, else the reference"
                                                             : "nothing measured yet";
  std::vector<std::string> kept;
  for (const v1::OperatorGain& o : g.operators()) {
    if (o.kept_production()) kept.push_back(absl::StrFormat("%s %.3fx", o.task(), o.measured_speedup()));
  }
  return absl::StrFormat("%s on %s: %+.1f%% throughput %s (operators cover %.0f%% of its time)%s", g.model(),
                         g.platform(), 100 * g.throughput_gain(), baseline, 100 * g.covered_share(),
                         kept.empty() ? "" : absl::StrCat("; production kept for ", absl::StrJoin(kept, ", ")));
}

void PrintCampaign(const v1::Campaign& c) {
  std::printf("campaign %s \"%s\"%s: %s, priority %d\n", c.campaign_id().c_str(), c.spec().name().c_str(),
              c.spec().team().empty() ? "" : absl::StrCat(" (team ", c.spec().team(), ")").c_str(),
              campaigns::CampaignStateName(c.state()).c_str(), c.spec().priority());
  std::printf("%s\n", JobsLine(c).c_str());
  size_t task_w = 4;
  for (const auto& e : c.entries()) task_w = std::max(task_w, e.task_name().size());
  std::printf("%-*s  %-8s  %-9s  %5s  %-26s  %12s  %s\n", static_cast<int>(task_w), "TASK", "PLATFORM", "STATE",
              "EVALS", "VS PRODUCTION", "VS REFERENCE", "JOB");
  for (const auto& e : c.entries()) {
    std::string production = e.best_speedup_vs_production() > 0  ? absl::StrCat(Ratio(e.best_speedup_vs_production()),
                                                                                " ", e.best_production_yardstick())
                             : e.best_speedup_vs_reference() > 0 ? "none measured"
                                                                 : "-";
    std::printf("%-*s  %-8s  %-9s  %5d  %-26s  %12s  %s\n", static_cast<int>(task_w), e.task_name().c_str(),
                e.platform().c_str(), campaigns::EntryStateName(e).c_str(), e.evaluations_done(), production.c_str(),
                Ratio(e.best_speedup_vs_reference()).c_str(), e.job_id().empty() ? "-" : e.job_id().c_str());
    if (e.job_state() == v1::JOB_FAILED && !e.stop_reason().empty()) {
      std::printf("%*s  why: %s\n", static_cast<int>(task_w), "", e.stop_reason().c_str());
    }
  }
  if (!c.gains().empty()) {
    std::printf("model throughput gains (Amdahl over each profile; an operator below 1x keeps production):\n");
    for (const auto& g : c.gains()) std::printf("  %s\n", GainLine(g).c_str());
  }
}

nlohmann::json CampaignJson(const v1::Campaign& c) {
  nlohmann::json j;
  j["campaign_id"] = c.campaign_id();
  j["name"] = c.spec().name();
  j["team"] = c.spec().team();
  j["state"] = campaigns::CampaignStateName(c.state());
  j["stop_reason"] = c.stop_reason();
  j["jobs_by_state"] = nlohmann::json::object();
  for (const auto& [k, v] : c.jobs_by_state()) j["jobs_by_state"][k] = v;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : c.entries()) {
    j["entries"].push_back({{"task", e.task_name()},
                            {"path", e.task_path()},
                            {"platform", e.platform()},
                            {"state", campaigns::EntryStateName(e)},
                            {"job_id", e.job_id()},
                            {"evaluations", e.evaluations_done()},
                            {"speedup_vs_production", e.best_speedup_vs_production()},
                            {"production_yardstick", e.best_production_yardstick()},
                            {"speedup_vs_reference", e.best_speedup_vs_reference()},
                            {"best_time_s", e.best_time_s()},
                            {"stop_reason", e.stop_reason()}});
  }
  j["gains"] = nlohmann::json::array();
  for (const auto& g : c.gains()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& o : g.operators()) {
      ops.push_back({{"task", o.task()},
                     {"share", o.share()},
                     {"speedup", o.speedup()},
                     {"measured_speedup", o.measured_speedup()},
                     {"baseline", o.baseline()},
                     {"kept_production", o.kept_production()}});
    }
    j["gains"].push_back({{"model", g.model()},
                          {"platform", g.platform()},
                          {"throughput_gain", g.throughput_gain()},
                          {"covered_share", g.covered_share()},
                          {"baseline", g.baseline()},
                          {"operators", ops}});
  }
  return j;
}

absl::StatusOr<v1::Campaign> GetCampaign(const std::string& address, const std::string& id) {
  v1::GetCampaignRequest req;
  req.set_campaign_id(id);
  return CallCoordinator(address, &v1::CampaignService::Stub::GetCampaign, req);
}

absl::StatusOr<CampaignReportData> GatherReport(const std::string& address, const std::string& id) {
  CampaignReportData data;
  KEVO_ASSIGN_OR_RETURN(data.campaign, GetCampaign(address, id));
  for (const auto& e : data.campaign.entries()) {
    if (e.job_id().empty()) continue;
    v1::GetJobRequest jr;
    jr.set_job_id(e.job_id());
    auto job = CallCoordinator(address, &v1::JobService::Stub::GetJob, jr);
    if (!job.ok()) continue;  // a job that never started (refused spec)
    v1::ListNodesRequest nr;
    nr.set_job_id(e.job_id());
    KEVO_ASSIGN_OR_RETURN(v1::ListNodesResponse nodes, CallCoordinator(address, &v1::JobService::Stub::ListNodes, nr));
    std::vector<v1::Node> list(nodes.nodes().begin(), nodes.nodes().end());
    std::sort(list.begin(), list.end(),
              [](const v1::Node& a, const v1::Node& b) { return a.sequence() < b.sequence(); });
    data.nodes[e.job_id()] = std::move(list);
    data.jobs[e.job_id()] = *std::move(job);
  }
  return data;
}

absl::Status WriteReport(const std::string& address, const std::string& id, const std::string& out) {
  KEVO_ASSIGN_OR_RETURN(CampaignReportData data, GatherReport(address, id));
  KEVO_ASSIGN_OR_RETURN(std::string html, RenderCampaignReport(data));
  return WriteFile(out, html);
}

std::string SafeName(std::string s) {
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  }
  return s;
}

std::string BindingText(const v1::Binding& b) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : std::map<std::string, int64_t>(b.values().begin(), b.values().end())) {
    parts.push_back(absl::StrCat(k, "=", v));
  }
  return absl::StrJoin(parts, ",");
}

// The ship list: for every entry with a correct kernel, DIR/<platform>/<task>/
// kernel.<ext> and manifest.json; DIR/shiplist.json lists them all.
absl::Status Export(const std::string& address, const std::string& id, const std::string& dir) {
  KEVO_ASSIGN_OR_RETURN(v1::Campaign c, GetCampaign(address, id));
  nlohmann::json list = nlohmann::json::array();
  int written = 0;
  for (const auto& e : c.entries()) {
    nlohmann::json item = {{"task", e.task_name()}, {"platform", e.platform()}, {"job_id", e.job_id()}};
    if (e.best_node_id().empty()) {
      item["kernel"] = nullptr;
      item["use"] = "production";
      item["why"] = e.job_id().empty() ? "not searched" : "no correct kernel was found";
      list.push_back(item);
      continue;
    }
    v1::GetBestRequest br;
    br.set_job_id(e.job_id());
    KEVO_ASSIGN_OR_RETURN(v1::GetBestResponse best, CallCoordinator(address, &v1::JobService::Stub::GetBest, br));
    v1::GetJobRequest jr;
    jr.set_job_id(e.job_id());
    KEVO_ASSIGN_OR_RETURN(v1::Job job, CallCoordinator(address, &v1::JobService::Stub::GetJob, jr));
    const v1::Task timed = task::TimedOn(job.spec().task(), e.platform());
    const std::string sub = absl::StrCat(SafeName(e.platform()), "/", SafeName(e.task_name()));
    const std::string kernel = absl::StrCat("kernel", KernelExtension(job.spec().task(), e.platform()));
    KEVO_RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/", sub, "/", kernel), KernelFileText(best.candidate())));
    // Shape-aware dispatch: the kernel where it was validated and timed faster
    // than production; production wherever it lost or was not timed.
    const double vs_production = best.node().speedup_vs_production();
    nlohmann::json shapes = nlohmann::json::array();
    std::set<std::string> failed;
    for (const auto& cs : best.evaluation().validation()) {
      if (cs.status() != v1::OK) failed.insert(cs.binding());
    }
    for (const v1::Binding& b : timed.validate()) {
      shapes.push_back({{"binding", b.name()},
                        {"shape", BindingText(b)},
                        {"validated", !failed.contains(b.name())},
                        {"timed", false},
                        {"use", "production (validated, not timed)"}});
    }
    const bool wins = vs_production > 1;
    shapes.push_back({{"binding", timed.time().name().empty() ? "timed" : timed.time().name()},
                      {"shape", BindingText(timed.time())},
                      {"validated", true},
                      {"timed", true},
                      {"speedup_vs_production", vs_production},
                      {"use", vs_production <= 0 ? "kevo (no production baseline measured)"
                              : wins             ? "kevo"
                                                 : "production"}});
    nlohmann::json manifest = {
        {"task", e.task_name()},
        {"platform", e.platform()},
        {"campaign_id", c.campaign_id()},
        {"job_id", e.job_id()},
        {"node_id", best.node().node_id()},
        {"kernel", kernel},
        {"language", best.candidate().language()},
        {"flags", best.candidate().extra_flags()},
        {"genome", best.node().genome()},
        {"time_s", best.node().time_s()},
        {"speedup_vs_production", vs_production},
        {"production_yardstick", best.node().production_yardstick()},
        {"production_time_s", best.node().production_time_s()},
        {"speedup_vs_reference", best.node().speedup_vs_reference()},
        {"loses_to_production", vs_production > 0 && !wins},
        {"shapes", shapes},
        {"reference", BaselineDescription(best.evaluation())},
    };
    KEVO_RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/", sub, "/manifest.json"), manifest.dump(2) + "\n"));
    item["kernel"] = absl::StrCat(sub, "/", kernel);
    item["manifest"] = absl::StrCat(sub, "/manifest.json");
    item["use"] = vs_production <= 0 ? "kevo" : wins ? "kevo" : "production";
    item["speedup_vs_production"] = vs_production;
    item["speedup_vs_reference"] = best.node().speedup_vs_reference();
    if (vs_production > 0 && !wins) {
      item["why"] = absl::StrFormat("%.2fx of %s at the timed shape: keep the production kernel", vs_production,
                                    best.node().production_yardstick());
    }
    list.push_back(item);
    ++written;
  }
  nlohmann::json index = {{"campaign_id", c.campaign_id()}, {"name", c.spec().name()}, {"entries", list}};
  KEVO_RETURN_IF_ERROR(WriteFile(dir + "/shiplist.json", index.dump(2) + "\n"));
  std::fprintf(stderr, "wrote %d kernels and %s/shiplist.json\n", written, dir.c_str());
  return absl::OkStatus();
}

// Polls the campaign until it ends, printing a line when its counts change.
absl::StatusOr<v1::Campaign> WaitForCampaign(const std::string& address, const std::string& id) {
  std::string last;
  while (true) {
    KEVO_ASSIGN_OR_RETURN(v1::Campaign c, GetCampaign(address, id));
    int evaluations = 0;
    for (const auto& e : c.entries()) evaluations += e.evaluations_done();
    std::string line = absl::StrCat(JobsLine(c), ", ", evaluations, " evaluations");
    if (line != last) {
      std::fprintf(stderr, "[%s] %s\n", absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone()).c_str(),
                   line.c_str());
      last = line;
    }
    if (c.state() != v1::CAMPAIGN_RUNNING) return c;
    absl::SleepFor(absl::Seconds(1));
  }
}

absl::StatusOr<std::string> Submit(const std::string& address, const v1::SubmitCampaignRequest& request) {
  auto stub = CampaignStub(address);
  grpc::ClientContext ctx;
  Deadline(&ctx, 120);
  v1::SubmitCampaignResponse response;
  grpc::Status st = stub->SubmitCampaign(&ctx, request, &response);
  if (!st.ok()) return CoordinatorError(address, st);
  return response.campaign_id();
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "kevo campaign: %s\n%s", why.c_str(), kCampaignUsage);
  return 2;
}

}  // namespace

int CampaignCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return Usage("expected a subcommand");
  const std::string sub = argv[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kCampaignUsage, stdout);
    return 0;
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  auto args = ParseArgs(rest, {"coordinator", "db", "report", "export", "slots"}, {"json", "help"});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (args->Has("help")) {
    std::fputs(kCampaignUsage, stdout);
    return 0;
  }
  const std::string address = args->Get("coordinator", kDefaultCoordinator);
  auto fail = [](const absl::Status& s) { return Fail("campaign", s); };
  auto positional = [&](size_t n) { return args->positional.size() == n; };

  if (sub == "submit") {
    if (!positional(1)) return Usage("submit takes one FILE");
    auto request = LoadCampaignFile(args->positional[0]);
    if (!request.ok()) return fail(request.status());
    auto id = Submit(address, *request);
    if (!id.ok()) return fail(id.status());
    std::fprintf(stderr, "campaign %s submitted: %d tasks x %d platforms\n", id->c_str(), request->tasks_size(),
                 request->spec().platforms_size());
    std::printf("%s\n", id->c_str());
    return 0;
  }
  if (sub == "run") {
    if (!positional(1)) return Usage("run takes one FILE");
    auto request = LoadCampaignFile(args->positional[0]);
    if (!request.ok()) return fail(request.status());
    auto slots = ParseIntFlag(*args, "slots", 0);
    if (!slots.ok()) return fail(slots.status());
    EmbeddedOptions options;
    options.db_dir = args->Get("db");
    options.platforms.assign(request->spec().platforms().begin(), request->spec().platforms().end());
    options.slots = static_cast<int>(*slots);
    auto embedded = Embedded::Start(options);
    if (!embedded.ok()) return fail(embedded.status());
    auto id = Submit((*embedded)->address(), *request);
    if (!id.ok()) return fail(id.status());
    std::fprintf(stderr, "campaign %s: %d tasks x %d platforms on an embedded coordinator (%s)\n", id->c_str(),
                 request->tasks_size(), request->spec().platforms_size(), (*embedded)->db_dir().c_str());
    auto done = WaitForCampaign((*embedded)->address(), *id);
    if (!done.ok()) return fail(done.status());
    PrintCampaign(*done);
    const std::string report = args->Get("report", "kevo-out/campaign/report.html");
    if (absl::Status s = WriteReport((*embedded)->address(), *id, report); !s.ok()) return fail(s);
    std::fprintf(stderr, "report: %s\n", report.c_str());
    if (args->Has("export")) {
      if (absl::Status s = Export((*embedded)->address(), *id, args->Get("export")); !s.ok()) return fail(s);
    }
    return done->jobs_by_state().at("done") > 0 ? 0 : 3;
  }
  if (sub == "status") {
    if (!positional(1)) return Usage("status takes one campaign ID");
    auto c = GetCampaign(address, args->positional[0]);
    if (!c.ok()) return fail(c.status());
    if (args->Has("json")) {
      std::printf("%s\n", CampaignJson(*c).dump(2).c_str());
    } else {
      PrintCampaign(*c);
    }
    return 0;
  }
  if (sub == "list") {
    if (!positional(0)) return Usage("list takes no arguments");
    auto list = CallCoordinator(address, &v1::CampaignService::Stub::ListCampaigns, v1::ListCampaignsRequest());
    if (!list.ok()) return fail(list.status());
    if (args->Has("json")) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : list->campaigns()) out.push_back(CampaignJson(c));
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::printf("%-18s  %-20s  %-10s  %-10s  %s\n", "CAMPAIGN", "NAME", "TEAM", "STATE", "JOBS");
    for (const auto& c : list->campaigns()) {
      std::printf("%-18s  %-20s  %-10s  %-10s  %s\n", c.campaign_id().c_str(), c.spec().name().c_str(),
                  c.spec().team().empty() ? "-" : c.spec().team().c_str(),
                  campaigns::CampaignStateName(c.state()).c_str(), JobsLine(c).c_str());
    }
    return 0;
  }
  if (sub == "cancel") {
    if (!positional(1)) return Usage("cancel takes one campaign ID");
    v1::CancelCampaignRequest req;
    req.set_campaign_id(args->positional[0]);
    auto c = CallCoordinator(address, &v1::CampaignService::Stub::CancelCampaign, req);
    if (!c.ok()) return fail(c.status());
    PrintCampaign(*c);
    return 0;
  }
  if (sub == "export") {
    if (!positional(2)) return Usage("export takes a campaign ID and a DIR");
    if (absl::Status s = Export(address, args->positional[0], args->positional[1]); !s.ok()) return fail(s);
    return 0;
  }
  return Usage(absl::StrCat("unknown subcommand \"", sub, "\""));
}

int ReportCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  for (const std::string& a : argv) rest.push_back(a == "-o" ? "--out" : a);
  auto args = ParseArgs(rest, {"out", "coordinator"}, {"help"});
  if (!args.ok() || (!args->Has("help") && args->positional.size() != 1)) {
    std::fprintf(stderr, "kevo report: %s\n%s",
                 args.ok() ? "expected one CAMPAIGN_ID" : std::string(args.status().message()).c_str(), kReportUsage);
    return 2;
  }
  if (args->Has("help")) {
    std::fputs(kReportUsage, stdout);
    return 0;
  }
  const std::string out = args->Get("out", "report.html");
  absl::Status s = WriteReport(args->Get("coordinator", kDefaultCoordinator), args->positional[0], out);
  if (!s.ok()) return Fail("report", s);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace kevo::cli
