// `kevo nodes JOB`: a job's search tree, one line per node in the order the
// nodes were created: parent, status, the candidate's and the baseline's
// medians as that evaluation measured them, the speedup (fitness), roofline
// and genome. From a running coordinator (JobService.ListNodes) or offline
// from the RocksDB folder of a stopped one or of `kevo run --db` (`--db`).
//
// The baseline column shows how much the reference's own time moved from
// evaluation to evaluation: every speedup is the ratio measured in one
// evaluation, so the best node is also, in part, the one whose baseline ran
// slowest (the summary line says by how much).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include <nlohmann/json.hpp>

#include "coordinator/jobs/manager.h"
#include "coordinator/store/store.h"

namespace kevo::cli {
namespace {

constexpr char kUsage[] =
    "usage: kevo nodes JOB [--coordinator ADDR | --db DIR] [--json]\n"
    "A job's search tree, oldest node first: parent, status, time, the baseline's time in that\n"
    "evaluation, speedup, % of roofline and genome; the best node is marked '*'. --json prints\n"
    "the nodes as a JSON array. From the coordinator at ADDR (default 127.0.0.1:50051), or\n"
    "with --db from the folder given to `kevo run --db` or `kevo-coordinator --db` (not while\n"
    "a coordinator runs on it).\n";

int Fail(const absl::Status& s) { return cli::Fail("nodes", s); }

std::string Seconds(double s) {
  if (s <= 0) return "-";
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.1f us", s * 1e6);
}

nlohmann::json NodeJson(const v1::Node& n) {
  return {{"node_id", n.node_id()},
          {"sequence", n.sequence()},
          {"parent_ids", std::vector<std::string>(n.parent_ids().begin(), n.parent_ids().end())},
          {"state", v1::NodeState_Name(n.state())},
          {"status", v1::EvalStatus_Name(n.status())},
          {"speedup_vs_production", n.speedup_vs_production()},
          {"production_yardstick", n.production_yardstick()},
          {"production_time_s", n.production_time_s()},
          {"rival_node_id", n.rival_node_id()},
          {"speedup_vs_rival", n.speedup_vs_rival()},
          {"best_decision", n.best_decision()},
          {"retiming", n.retiming().eval_id().empty()
                           ? nlohmann::json(nullptr)
                           : nlohmann::json{{"eval_id", n.retiming().eval_id()},
                                            {"done", n.retiming().done()},
                                            {"status", v1::EvalStatus_Name(n.retiming().status())},
                                            {"rival_node_id", n.retiming().rival_node_id()},
                                            {"first_fitness", n.retiming().first_fitness()},
                                            {"retimed_fitness", n.retiming().retimed_fitness()},
                                            {"disagreement", n.retiming().disagreement()},
                                            {"disagrees", n.retiming().disagrees()},
                                            {"speedup_vs_rival", n.retiming().speedup_vs_rival()}}},
          {"speedup_vs_reference", n.speedup_vs_reference()},
          {"fitness", n.fitness()},
          {"static_fitness", n.static_fitness()},
          {"time_s", n.time_s()},
          {"baseline_time_s", n.baseline_time_s()},
          {"roofline_fraction", n.roofline_fraction()},
          {"genome", n.genome()},
          {"proposer", n.proposer()},
          {"mutation", n.mutation()},
          {"eval_id", n.eval_id()}};
}

// `best_node_id`: the job's best (which the table stars), chosen by the
// job, side by side where it could be (Node.best_decision).
void PrintTable(const std::vector<v1::Node>& nodes, const std::string& best_node_id) {
  const v1::Node* best = nullptr;
  for (const v1::Node& n : nodes) {
    if (n.node_id() == best_node_id) best = &n;
  }
  std::printf("%4s %-14s %-14s %-18s %11s %11s %9s %11s %9s %8s  %s\n", "SEQ", "NODE", "PARENT", "STATUS", "TIME",
              "PRODUCTION", "VS PROD", "REFERENCE", "VS REF", "ROOF", "GENOME");
  std::vector<const v1::Node*> all;
  for (const v1::Node& n : nodes) {
    all.push_back(&n);
    const bool evaluated = n.state() == v1::NODE_DONE;
    const std::string status = evaluated ? v1::EvalStatus_Name(n.status()) : v1::NodeState_Name(n.state());
    const std::string speedup =
        n.fitness() > 0 ? absl::StrFormat(n.static_fitness() ? "%.3f s" : "%.2fx", n.fitness()) : "-";
    const std::string roof = n.roofline_fraction() > 0 ? absl::StrFormat("%.1f%%", 100 * n.roofline_fraction()) : "-";
    const std::string vs_ref = n.speedup_vs_reference() > 0 ? absl::StrFormat("%.2fx", n.speedup_vs_reference())
                                                            : (n.speedup_vs_production() > 0 ? "-" : speedup);
    const std::string vs_prod =
        n.speedup_vs_production() > 0 ? absl::StrFormat("%.2fx", n.speedup_vs_production()) : "-";
    std::printf("%4d %-14s %-14s %-18s %11s %11s %9s %11s %9s %8s %s%s\n", n.sequence(), n.node_id().c_str(),
                n.parent_ids().empty() ? "-" : absl::StrJoin(n.parent_ids(), "+").c_str(), status.c_str(),
                Seconds(n.time_s()).c_str(), Seconds(n.production_time_s()).c_str(), vs_prod.c_str(),
                Seconds(n.baseline_time_s()).c_str(), vs_ref.c_str(), roof.c_str(), &n == best ? "*" : " ",
                n.genome().c_str());
  }
  if (best != nullptr && !best->best_decision().empty()) {
    std::printf("\nbest %s: %s\n", best->node_id().c_str(), best->best_decision().c_str());
  }
  // Would-be bests whose re-timing disagreed with their own evaluation, or is
  // still out (docs/search.md, "Re-timing").
  for (const v1::Node& n : nodes) {
    const v1::Retiming& t = n.retiming();
    if (t.eval_id().empty()) continue;
    if (!t.done()) {
      std::printf("re-timing %s: %s, before it can become the best\n", n.node_id().c_str(), t.eval_id().c_str());
    } else if (t.disagrees()) {
      std::printf("re-timed %s: fitness %.3f then %.3f, %.2fx apart: the lower stands\n", n.node_id().c_str(),
                  t.first_fitness(), t.retimed_fitness(), t.disagreement());
    }
  }
  const std::vector<double> baselines = jobs::BaselineTimes(all);
  if (best != nullptr && !best->static_fitness() && baselines.size() >= 2) {
    const double median = jobs::Median(baselines);
    std::printf(
        "\nreference over %zu evaluations: median %s (%s to %s); the best node's was %s, so against the "
        "median reference time it is %.2fx\n",
        baselines.size(), Seconds(median).c_str(),
        Seconds(*std::min_element(baselines.begin(), baselines.end())).c_str(),
        Seconds(*std::max_element(baselines.begin(), baselines.end())).c_str(),
        Seconds(best->baseline_time_s()).c_str(), median / best->time_s());
  }
}

}  // namespace

int NodesCommand(const std::vector<std::string>& argv) {
  auto parsed = ParseJobReaderArgs("nodes", argv, {"json"}, kUsage);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const ParsedArgs* args = &std::get<ParsedArgs>(parsed);
  const std::string& job_id = args->positional[0];
  std::vector<v1::Node> nodes;
  std::string best_node_id;
  if (args->Has("db")) {
    auto store = store::Store::Open(StoreDir(args->Get("db")));
    if (!store.ok()) return Fail(store.status());
    auto read = jobs::ReadNodes(**store, job_id);
    if (!read.ok()) return Fail(read.status());
    if (read->empty()) {
      return Fail(absl::NotFoundError(absl::StrCat("no nodes of job ", job_id, " in ", args->Get("db"))));
    }
    nodes = *std::move(read);
    if (auto job = jobs::ReadJob(**store, job_id); job.ok()) best_node_id = job->best_node_id();
  } else {
    v1::ListNodesRequest req;
    req.set_job_id(job_id);
    auto resp = CallCoordinator(args->Get("coordinator", kDefaultCoordinator), &v1::JobService::Stub::ListNodes, req);
    if (!resp.ok()) return Fail(resp.status());
    nodes.assign(resp->nodes().begin(), resp->nodes().end());
    v1::GetJobRequest job_req;
    job_req.set_job_id(job_id);
    auto job = CallCoordinator(args->Get("coordinator", kDefaultCoordinator), &v1::JobService::Stub::GetJob, job_req);
    if (job.ok()) best_node_id = job->best_node_id();
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const v1::Node& a, const v1::Node& b) { return a.sequence() < b.sequence(); });
  if (args->Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Node& n : nodes) out.push_back(NodeJson(n));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  PrintTable(nodes, best_node_id);
  return 0;
}

}  // namespace kevo::cli
