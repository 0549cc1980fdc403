// Search-job commands: run (embedded), submit, watch, best, jobs, cancel.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/embedded.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include "cli/report.h"
#include <grpcpp/grpcpp.h>

#include "common/grpc_status.h"
#include "common/rpc/client_channel.h"
#include "common/status.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "kevo/v1/job.grpc.pb.h"

namespace kevo::cli {

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  static const absl::StatusOr<rpc::ClientCredentials>* credentials =
      new absl::StatusOr<rpc::ClientCredentials>(rpc::CredentialsFromEnvironment());
  if (!credentials->ok()) {
    std::fprintf(stderr, "kevo: %s\n", std::string(credentials->status().message()).c_str());
    std::exit(2);
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);  // the coordinator's send limit
  return rpc::ClientChannel(address, **credentials, channel_args);
}

std::unique_ptr<v1::JobService::Stub> Stub(const std::string& address) {
  return v1::JobService::NewStub(Channel(address));
}

absl::Status CoordinatorError(const std::string& address, const grpc::Status& status) {
  absl::Status s = FromGrpcStatus(status);
  if (s.code() != absl::StatusCode::kUnavailable) return s;
  return absl::UnavailableError(absl::StrCat("no coordinator answers at ", address, " (", s.message(),
                                             "); start one, or pass --coordinator HOST:PORT"));
}

void Deadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

namespace {

std::string Failures(const v1::Job& job) {
  std::vector<std::string> parts;
  for (const auto& [status, n] : job.by_status()) {
    if (status != "OK") parts.push_back(absl::StrCat(status, " ", n));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

std::string ByStatus(const v1::Job& job) {
  std::vector<std::string> parts;
  for (const auto& [status, n] : job.by_status()) parts.push_back(absl::StrCat(status, " ", n));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

std::string Eta(const v1::Job& job) {
  int done = job.evaluations_done();
  int budget = job.spec().budget().max_evaluations();
  if (done == 0 || budget <= done) return "-";
  double elapsed = static_cast<double>(absl::ToUnixMicros(absl::Now()) - job.created_unix_micros()) / 1e6;
  double left = elapsed / done * (budget - done);
  return absl::FormatDuration(absl::Seconds(static_cast<int64_t>(left)));
}

std::string ProgressLine(const v1::Job& job, bool bar) {
  int done = job.evaluations_done();
  int budget = std::max(1, job.spec().budget().max_evaluations());
  std::string prefix;
  if (bar) {
    int width = 24;
    int filled = std::min(width, done * width / budget);
    prefix = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ");
  }
  return absl::StrFormat("%s%d/%d evaluated, %d in flight | best %s | failures: %s | ETA %s", prefix, done, budget,
                         job.evaluations_in_flight(), JobBestLabel(job), Failures(job), Eta(job));
}

}  // namespace

absl::StatusOr<v1::Job> WatchJobStream(const std::string& address, const std::string& job_id, bool quiet,
                                       const std::function<void(const v1::Job&)>& on_event) {
  auto stub = Stub(address);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(48));
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  auto reader = stub->WatchJob(&ctx, req);
  bool tty = isatty(STDERR_FILENO);
  v1::JobEvent event;
  v1::Job last;
  int printed_done = -1;
  while (reader->Read(&event)) {
    last = event.job();
    if (on_event) on_event(last);
    if (quiet) continue;
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", ProgressLine(last, /*bar=*/true).c_str());
      std::fflush(stderr);
    } else if (last.evaluations_done() != printed_done) {
      // Plain lines, one per finished evaluation, when not on a terminal.
      printed_done = last.evaluations_done();
      std::fprintf(stderr, "%s\n", ProgressLine(last, /*bar=*/false).c_str());
    }
  }
  if (tty && !quiet) std::fprintf(stderr, "\n");
  grpc::Status st = reader->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  return last;
}

absl::StatusOr<v1::JobSpec> SpecFromArgs(const ParsedArgs& args) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("expected one TASK_DIR");
  KEVO_ASSIGN_OR_RETURN(v1::JobSpec spec, SpecFromFlags(args));
  KEVO_ASSIGN_OR_RETURN(*spec.mutable_task(), task::LoadTaskPath(args.positional[0]));
  return spec;
}

absl::StatusOr<v1::JobSpec> SpecFromFlags(const ParsedArgs& args) {
  v1::JobSpec spec;
  spec.set_platform(args.Get("platform", "cpu"));
  KEVO_ASSIGN_OR_RETURN(int64_t budget, ParseIntFlag(args, "budget", 60));
  KEVO_ASSIGN_OR_RETURN(int64_t stall, ParseIntFlag(args, "stall", 0));
  KEVO_ASSIGN_OR_RETURN(int64_t seed, ParseIntFlag(args, "seed", 1));
  KEVO_ASSIGN_OR_RETURN(int64_t wall, ParseIntFlag(args, "max-wall", 0));
  KEVO_ASSIGN_OR_RETURN(int64_t in_flight, ParseIntFlag(args, "max-in-flight", 0));
  if (budget < 1) return absl::InvalidArgumentError("--budget must be at least 1");
  spec.mutable_budget()->set_max_evaluations(static_cast<int32_t>(budget));
  spec.mutable_budget()->set_stall_evaluations(static_cast<int32_t>(stall));
  spec.mutable_budget()->set_max_wall_seconds(static_cast<double>(wall));
  if (args.Has("target-speedup")) {
    spec.mutable_budget()->set_target_speedup(std::stod(args.Get("target-speedup")));
  }
  spec.set_policy(args.Get("policy"));
  spec.set_proposer(args.Get("proposer", "builtin"));
  spec.set_warm_start(args.Has("warm-start"));
  spec.set_no_skills(args.Has("no-skills"));
  spec.set_fitness_vs_reference(args.Has("fitness-vs-reference"));
  spec.set_seed(static_cast<uint64_t>(seed));
  spec.set_max_in_flight(static_cast<int32_t>(in_flight));
  return spec;
}

const std::set<std::string> kSpecFlags = {"platform", "budget",   "stall",          "seed",         "max-wall",
                                          "policy",   "proposer", "target-speedup", "max-in-flight"};

std::set<std::string> With(std::set<std::string> base, std::initializer_list<std::string> more) {
  for (const auto& m : more) base.insert(m);
  return base;
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out << data;
  return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat("short write to ", path));
}

namespace {
constexpr absl::string_view kFlagsTag = "kevo-flags:";
}  // namespace

std::string KernelFileText(const v1::Candidate& candidate) {
  if (candidate.extra_flags().empty()) return candidate.source();
  const char* comment = candidate.language() == task::kPythonLanguage ? "#" : "//";
  return absl::StrCat(comment, " ", kFlagsTag, " ", absl::StrJoin(candidate.extra_flags(), " "), "\n",
                      candidate.source());
}

std::vector<std::string> KernelFileFlags(const std::string& text) {
  absl::string_view line = absl::string_view(text).substr(0, text.find('\n'));
  if (!absl::ConsumePrefix(&line, "//") && !absl::ConsumePrefix(&line, "#")) return {};
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, kFlagsTag)) return {};
  return absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
}

std::variant<ParsedArgs, int> ParseJobReaderArgs(const char* command, const std::vector<std::string>& argv,
                                                 std::set<std::string> bool_flags, const char* usage) {
  bool_flags.insert("help");
  auto args = ParseArgs(argv, {"db", "coordinator"}, bool_flags);
  if (!args.ok()) return Fail(command, args.status());
  if (args->Has("help")) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (args->positional.size() != 1) {
    std::fputs(usage, stderr);
    return 2;
  }
  if (args->Has("db") && args->Has("coordinator")) {
    return Fail(command, absl::InvalidArgumentError(
                             "--db reads a stopped coordinator's folder, --coordinator a running one: give one"));
  }
  return *std::move(args);
}

std::string StoreDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / "db" / "CURRENT", ec)) {
    return (std::filesystem::path(dir) / "db").string();
  }
  return dir;
}

std::string KernelExtension(const v1::Task& task, const std::string& platform) {
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) return ".py";
  return platform == "amd" ? ".hip" : ".cc";
}

int Fail(const char* command, const absl::Status& s) {
  std::fprintf(stderr, "kevo %s: %s\n", command, std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

constexpr char kRunUsage[] =
    "usage: kevo run TASK [--platform cpu] [--budget N] [--db DIR] [--json] [--out FILE]\n"
    "                [--policy greedy|uct|evolution] [--seed S] [--stall K] [--max-wall S]\n"
    "                [--target-speedup X] [--slots N] [--profile-cap S] [--run-timeout S]\n"
    "                [--warm-start] [--no-skills] [--fitness-vs-reference] [--no-production]\n"
    "Searches for the fastest correct kernel for a task, embedded: a coordinator and a local\n"
    "worker in this process tree, state in --db (a temporary folder when not given).\n"
    "TASK is a task folder, a KernelBench problem (.py), or a folder of several: one search\n"
    "each, in turn (see docs/kernelbench.md).\n"
    "Writes the best kernel to --out (default kevo-out/TASK/best.cc, .py for KernelBench).\n"
    "--slots: the worker's\n"
    "evaluation slots (default 1; on nvidia the worker's own default, GPUs + 2, so that nvcc\n"
    "runs ahead of the GPU); --profile-cap: the worker's timing cap per candidate, seconds;\n"
    "--run-timeout: the worker's limit on one run of a candidate (validation + timing, with\n"
    "the reference), seconds (default 60: raise it for slow references on a loaded host).\n"
    "--proposer builtin|llm|llm+builtin with --llm-config FILE (the LLM endpoints; see\n"
    "docs/llm.md); `kevo llm-log JOB --db DIR` then shows the LLM calls.\n"
    "--warm-start: seed the search with the best kernels of earlier jobs on this task (in --db);\n"
    "--no-skills: do not use what earlier jobs taught (skill memory: the builtin proposer's\n"
    "priors, the skills in LLM prompts); the job still adds to it when it ends.\n"
    "--fitness-vs-reference: search for speed over the task's naive reference instead of over\n"
    "its production baseline (what users run: PyTorch, OpenBLAS/cuBLAS), the default when the\n"
    "task names one and the worker can time it.\n"
    "--no-production: the embedded worker times no production baseline (faster; fitness and\n"
    "figures are then over the naive reference).\n";

// `argv` with its one positional argument (the task) replaced by `path`.
std::vector<std::string> WithTask(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
                                  const std::string& path) {
  std::vector<std::string> out = argv;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].rfind("-", 0) != 0) {
      out[i] = path;
      break;
    }
    const std::string name = out[i].substr(out[i].rfind("--", 0) == 0 ? 2 : 1);
    if (name.find('=') == std::string::npos && value_flags.contains(name)) ++i;  // skip its value
  }
  return out;
}

// `kevo run DIR` where DIR holds several tasks (a KernelBench level folder):
// one search per task, in turn, each with the same flags.
int RunEach(const std::vector<std::string>& argv, const std::set<std::string>& value_flags, const ParsedArgs& args,
            const std::vector<std::string>& paths) {
  if (args.Has("out")) {
    return Fail("run", absl::InvalidArgumentError("--out names one file; with several tasks each best kernel goes to "
                                                  "kevo-out/TASK/"));
  }
  int failed = 0, errors = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::fprintf(stderr, "== task %zu/%zu: %s\n", i + 1, paths.size(), paths[i].c_str());
    const int rc = RunCommand(WithTask(argv, value_flags, paths[i]));
    failed += rc == 3;
    errors += rc != 0 && rc != 3;
  }
  std::fprintf(stderr, "== %zu tasks: %zu with a correct kernel, %d without, %d errors\n", paths.size(),
               paths.size() - failed - errors, failed, errors);
  return errors > 0 ? 1 : failed > 0 ? 3 : 0;
}

int RunCommand(const std::vector<std::string>& argv) {
  const std::set<std::string> value_flags =
      With(kSpecFlags, {"db", "out", "slots", "profile-cap", "run-timeout", "llm-config"});
  auto args = ParseArgs(argv, value_flags,
                        {"json", "warm-start", "no-skills", "fitness-vs-reference", "no-production", "help"});
  if (!args.ok()) return Fail("run", args.status());
  if (args->Has("help")) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  if (args->positional.size() == 1) {
    auto paths = task::FindTaskPaths(args->positional[0]);
    if (paths.ok() && paths->size() > 1) return RunEach(argv, value_flags, *args, *paths);
  }
  auto spec = SpecFromArgs(*args);
  if (!spec.ok()) {
    std::fprintf(stderr, "kevo run: %s\n%s", std::string(spec.status().message()).c_str(),
                 spec.status().code() == absl::StatusCode::kInvalidArgument ? kRunUsage : "");
    return spec.status().code() == absl::StatusCode::kNotFound ? 1 : 2;
  }
  // 0: the worker's default (on nvidia GPUs + 2: CPU slots compile ahead).
  auto slots = ParseIntFlag(*args, "slots", spec->platform() == "nvidia" ? 0 : 1);
  if (!slots.ok()) return Fail("run", slots.status());
  EmbeddedOptions eo;
  eo.db_dir = args->Get("db");
  eo.platform = spec->platform();
  eo.slots = static_cast<int>(*slots);
  for (const char* flag : {"profile-cap", "run-timeout"}) {
    if (args->Has(flag)) {
      eo.worker_flags.push_back(absl::StrCat("--", flag));
      eo.worker_flags.push_back(args->Get(flag));
    }
  }
  if (args->Has("no-production")) eo.worker_flags.insert(eo.worker_flags.end(), {"--production", "off"});
  eo.llm_config = args->Get("llm-config");
  auto embedded = Embedded::Start(eo);
  if (!embedded.ok()) return Fail("run", embedded.status());
  std::string address = (*embedded)->address();
  auto stub = Stub(address);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::SubmitJobRequest req;
  *req.mutable_spec() = *spec;
  v1::SubmitJobResponse resp;
  grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
  if (!st.ok()) return Fail("run", FromGrpcStatus(st));
  bool json = args->Has("json");
  std::fprintf(stderr, "job %s: searching %s on %s, budget %d evaluations\n", resp.job_id().c_str(),
               spec->task().name().c_str(), spec->platform().c_str(), spec->budget().max_evaluations());
  auto job = WatchJobStream(address, resp.job_id(), /*quiet=*/false);
  if (!job.ok()) return Fail("run", job.status());

  const bool kernelbench = spec->task().format() == v1::TASK_FORMAT_KERNELBENCH;
  std::string out_path = args->Get(
      "out", absl::StrCat("kevo-out/", spec->task().name(), "/best", KernelExtension(spec->task(), spec->platform())));
  v1::GetBestResponse best;
  bool have_best = false;
  {
    grpc::ClientContext bctx;
    Deadline(&bctx);
    v1::GetBestRequest breq;
    breq.set_job_id(resp.job_id());
    grpc::Status bst = stub->GetBest(&bctx, breq, &best);
    have_best = bst.ok();
    if (have_best) {
      absl::Status w = WriteFile(out_path, KernelFileText(best.candidate()));
      if (!w.ok()) return Fail("run", w);
    }
  }
  if (json) {
    nlohmann::json j;
    j["job_id"] = job->job_id();
    j["task"] = spec->task().name();
    j["platform"] = spec->platform();
    j["status"] = have_best ? "OK" : "NO_CORRECT_KERNEL";
    j["job_state"] = v1::JobState_Name(job->state());
    j["stop_reason"] = job->stop_reason();
    // A compile-only fleet measures nothing: its best is a static score.
    const bool static_best = job->best_speedup() == 0 && job->best_static_score() > 0;
    j["score_kind"] = static_best ? "static" : "measured";
    // What users run today first, then the naive reference.
    j["fitness_baseline"] = job->fitness_baseline();
    j["speedup_vs_production"] = job->best_speedup_vs_production() > 0
                                     ? nlohmann::json(job->best_speedup_vs_production())
                                     : nlohmann::json(nullptr);
    j["production_yardstick"] = job->best_production_yardstick();
    j["production_time_s"] = job->best_production_time_s();
    j["speedup_vs_reference"] =
        static_best ? nlohmann::json(nullptr)
                    : nlohmann::json(job->best_speedup_vs_reference() > 0 ? job->best_speedup_vs_reference()
                                                                          : job->best_speedup());
    j["speedup"] = static_best ? nlohmann::json(nullptr) : nlohmann::json(job->best_speedup());
    if (static_best) j["static_score"] = job->best_static_score();
    j["best_time_s"] = job->best_time_s();
    if (have_best) j["best_decision"] = best.node().best_decision();
    j["baseline_time_s"] = job->baseline_time_s();
    j["roofline_fraction"] = job->best_roofline_fraction();
    // The best time against the median of every evaluation's baseline: the
    // figure that does not depend on how slow one reference run happened to be.
    const double vs_median = SpeedupVsMedianBaseline(*job);
    j["median_baseline_time_s"] = job->median_baseline_time_s();
    j["baseline_evaluations"] = job->baseline_evaluations();
    j["speedup_vs_median_baseline"] =
        vs_median > 0 && !static_best ? nlohmann::json(vs_median) : nlohmann::json(nullptr);
    nlohmann::json by_status = nlohmann::json::object();
    for (const auto& [s, n] : job->by_status()) by_status[s] = n;
    j["evaluations"] = by_status;
    j["evaluations_total"] = job->evaluations_done();
    // Would-be bests evaluated a second time (not in the total or the budget).
    j["retimings"] = job->retimings();
    j["retiming_disagreements"] = job->retiming_disagreements();
    // The evaluation count at which the final best was first reached.
    j["first_best_at"] = job->last_gain_at();
    j["device_busy_s"] = job->device_busy_s();
    j["device_utilisation"] = job->device_utilisation();
    j["policy"] = job->spec().policy();
    j["no_skills"] = job->spec().no_skills();
    j["best_kernel_path"] = have_best ? out_path : "";
    j["best_kernel_flags"] = have_best ? absl::StrJoin(best.candidate().extra_flags(), " ") : "";
    if (have_best) {
      j["best_node"] = best.node().node_id();
      j["best_genome"] = best.node().genome();
      j["best_evaluation"] = EvaluationJson(best.evaluation());
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("task          %s (%s, policy %s)\n", spec->task().name().c_str(), spec->platform().c_str(),
                job->spec().policy().c_str());
    const bool mtia = spec->platform() == "mtia-sim";
    if (have_best && best.node().static_fitness()) {
      std::printf("baseline      none (compile-only worker: nothing ran, so nothing was timed)\n");
    } else {
      // What the baseline was, as the worker that timed the best reported it
      // (cuBLAS, reference.cu or the CPU reference on nvidia, PyTorch eager
      // for KernelBench problems).
      const std::string what = mtia          ? "the task's naive reference_mtia.cc, simulated time"
                               : have_best   ? BaselineDescription(best.evaluation())
                               : kernelbench ? "PyTorch eager: the problem's Model"
                                             : "the reference compiled -O2";
      std::printf("baseline      %s (%s)\n", FormatSeconds(job->baseline_time_s()).c_str(), what.c_str());
      if (have_best && kernelbench) {
        const auto& e = best.evaluation();
        if (auto it = e.profile().find("torch_compile_median_s"); it != e.profile().end() && it->second > 0) {
          std::printf("torch.compile %s (the best %.2fx over it)\n", FormatSeconds(it->second).c_str(),
                      e.profile().at("speedup_vs_torch_compile"));
        } else if (auto n = e.notes().find("baseline_torch_compile"); n != e.notes().end()) {
          std::printf("torch.compile %s\n", n->second.c_str());
        }
      }
    }
    if (have_best && best.node().static_fitness()) {
      std::printf("best          node %s (%s)\n", best.node().node_id().c_str(),
                  best.node().genome().empty() ? best.node().mutation().c_str() : best.node().genome().c_str());
      std::printf(
          "static score  %.3f (static: occupancy, spills and LDS from the compiler's "
          "report; compile-only worker, nothing validated or timed; not a speedup)\n",
          best.node().fitness());
    } else if (have_best) {
      std::printf("best          %s (node %s, %s)\n", FormatSeconds(job->best_time_s()).c_str(),
                  best.node().node_id().c_str(),
                  best.node().genome().empty() ? best.node().mutation().c_str() : best.node().genome().c_str());
      if (!best.node().best_decision().empty()) {
        std::printf("chosen        %s\n", best.node().best_decision().c_str());
      }
      if (best.evaluation().production_size() > 0) {
        std::printf("production    what users run today, timed beside the best:\n%s",
                    ProductionLines(best.evaluation(), "  ").c_str());
      }
      const double vs_reference =
          job->best_speedup_vs_reference() > 0 ? job->best_speedup_vs_reference() : job->best_speedup();
      std::printf(
          "speedup       %s\n",
          SpeedupLine(job->best_speedup_vs_production(), job->best_production_yardstick(), vs_reference).c_str());
      if (const double vs_median = SpeedupVsMedianBaseline(*job); vs_median > 0) {
        std::printf("              (%.2fx against the median reference time, %s over %d evaluations)\n", vs_median,
                    FormatSeconds(job->median_baseline_time_s()).c_str(), job->baseline_evaluations());
      }
      if (job->fitness_baseline() == "reference" && !job->spec().fitness_vs_reference() &&
          best.evaluation().production_size() > 0) {
        std::printf("fitness       over the naive reference (no production form was usable)\n");
      }
      std::printf(mtia ? "roofline      %.1f%% of the simulated chip's limits\n"
                       : "roofline      %.1f%% of the worker's measured limits\n",
                  100 * job->best_roofline_fraction());
    } else {
      std::printf("best          no correct kernel found\n");
    }
    std::printf("evaluations   %d: %s%s\n", job->evaluations_done(), ByStatus(*job).c_str(),
                job->retimings() > 0
                    ? absl::StrFormat("; and %d re-timing%s of new bests, %d disagreeing", job->retimings(),
                                      job->retimings() == 1 ? "" : "s", job->retiming_disagreements())
                          .c_str()
                    : "");
    std::printf("stopped       %s\n", job->stop_reason().c_str());
    if (job->device_busy_s() > 0) {
      std::printf("device use    %.1f%% of the GPU timing slots over the job (%.1f s held)\n",
                  100 * job->device_utilisation(), job->device_busy_s());
    }
    if (have_best) std::printf("best kernel   %s\n", out_path.c_str());
    if (have_best && !best.node().static_fitness()) {
      // The last line: both yardsticks, the production one first.
      const double vs_reference =
          job->best_speedup_vs_reference() > 0 ? job->best_speedup_vs_reference() : job->best_speedup();
      std::printf(
          "result        %s: %s\n", spec->task().name().c_str(),
          SpeedupLine(job->best_speedup_vs_production(), job->best_production_yardstick(), vs_reference).c_str());
    }
  }
  return have_best ? 0 : 3;
}

constexpr char kSubmitUsage[] =
    "usage: kevo submit TASK [--coordinator ADDR] [--platform cpu] [--budget N]\n"
    "                   [--proposer builtin|llm|llm+builtin] [--policy greedy|uct|evolution]\n"
    "                   [--seed S] [--stall K] [--max-wall S] [--target-speedup X]\n"
    "                   [--max-in-flight N] [--warm-start] [--no-skills] [--fitness-vs-reference]\n"
    "Submits a search job to the coordinator at ADDR (default 127.0.0.1:50051) and prints its\n"
    "id; the flags mean what they mean for `kevo run`.\n";

int SubmitCommand(const std::vector<std::string>& argv) {
  auto args =
      ParseArgs(argv, With(kSpecFlags, {"coordinator"}), {"warm-start", "no-skills", "fitness-vs-reference", "help"});
  if (!args.ok()) return Fail("submit", args.status());
  if (args->Has("help")) {
    std::fputs(kSubmitUsage, stdout);
    return 0;
  }
  auto spec = SpecFromArgs(*args);
  if (!spec.ok()) return Fail("submit", spec.status());
  auto stub = Stub(args->Get("coordinator", kDefaultCoordinator));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::SubmitJobRequest req;
  *req.mutable_spec() = *spec;
  v1::SubmitJobResponse resp;
  grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
  if (!st.ok()) return Fail("submit", FromGrpcStatus(st));
  std::printf("%s\n", resp.job_id().c_str());
  return 0;
}

int WatchCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator"}, {});
  if (!args.ok()) return Fail("watch", args.status());
  if (args->positional.size() != 1) return Fail("watch", absl::InvalidArgumentError("expected JOB_ID"));
  auto job = WatchJobStream(args->Get("coordinator", kDefaultCoordinator), args->positional[0],
                            /*quiet=*/false);
  if (!job.ok()) return Fail("watch", job.status());
  std::printf("job %s %s: %s; best %s after %d evaluations\n", job->job_id().c_str(),
              v1::JobState_Name(job->state()).c_str(), job->stop_reason().c_str(), JobBestLabel(*job).c_str(),
              job->evaluations_done());
  return 0;
}

int BestCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator", "o", "out"}, {"json"});
  if (!args.ok()) return Fail("best", args.status());
  if (args->positional.size() != 1) return Fail("best", absl::InvalidArgumentError("expected JOB_ID"));
  auto stub = Stub(args->Get("coordinator", kDefaultCoordinator));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::GetBestRequest req;
  req.set_job_id(args->positional[0]);
  v1::GetBestResponse resp;
  grpc::Status st = stub->GetBest(&ctx, req, &resp);
  if (!st.ok()) return Fail("best", FromGrpcStatus(st));
  std::string out = args->Get("o", args->Get("out"));
  if (!out.empty()) {
    absl::Status w = WriteFile(out, KernelFileText(resp.candidate()));
    if (!w.ok()) return Fail("best", w);
  }
  if (args->Has("json")) {
    nlohmann::json j = EvaluationJson(resp.evaluation());
    j["node"] = resp.node().node_id();
    j["genome"] = resp.node().genome();
    j["path"] = out;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    if (resp.node().static_fitness()) {
      std::printf(
          "node %s (%s): static score %.3f (static, from the compiler's report; not "
          "measured)\n",
          resp.node().node_id().c_str(), resp.node().genome().c_str(), resp.node().fitness());
    } else {
      const v1::Node& n = resp.node();
      std::printf("node %s (%s): %s, %s\n", n.node_id().c_str(), n.genome().c_str(),
                  SpeedupLine(n.speedup_vs_production(), n.production_yardstick(),
                              n.speedup_vs_reference() > 0 ? n.speedup_vs_reference() : n.fitness())
                      .c_str(),
                  FormatSeconds(n.time_s()).c_str());
      std::printf("%s", ProductionLines(resp.evaluation(), "  ").c_str());
    }
    if (out.empty())
      std::printf("%s", resp.candidate().source().c_str());
    else
      std::printf("written to %s\n", out.c_str());
  }
  return 0;
}

int JobsCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator", "team"}, {"json"});
  if (!args.ok()) return Fail("jobs", args.status());
  const std::string address = args->Get("coordinator", kDefaultCoordinator);
  auto stub = Stub(address);
  // Every page: a team sees its own jobs, the admin every team's (or one's, --team).
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest req;
  req.set_page_size(500);
  req.set_team(args->Get("team"));
  do {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListJobsResponse resp;
    grpc::Status st = stub->ListJobs(&ctx, req, &resp);
    if (!st.ok()) return Fail("jobs", CoordinatorError(address, st));
    for (auto& j : *resp.mutable_jobs()) jobs.push_back(std::move(j));
    req.set_page_token(resp.next_page_token());
  } while (!req.page_token().empty());
  const bool teams = std::any_of(jobs.begin(), jobs.end(), [](const v1::Job& j) { return !j.spec().team().empty(); });
  if (teams) std::printf("%-12s ", "TEAM");
  std::printf("%-16s %-14s %-9s %-14s %-9s %-8s %s\n", "JOB", "TASK", "PLATFORM", "STATE", "EVALS", "BEST", "REASON");
  for (const auto& j : jobs) {
    if (teams) std::printf("%-12s ", j.spec().team().empty() ? "-" : j.spec().team().c_str());
    std::printf("%-16s %-14s %-9s %-14s %4d/%-4d %7s  %s\n", j.job_id().c_str(), j.spec().task().name().c_str(),
                j.spec().platform().c_str(), v1::JobState_Name(j.state()).c_str(), j.evaluations_done(),
                j.spec().budget().max_evaluations(), JobBestLabel(j, /*short_form=*/true).c_str(),
                j.stop_reason().c_str());
  }
  return 0;
}

int CancelCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator"}, {});
  if (!args.ok()) return Fail("cancel", args.status());
  if (args->positional.size() != 1) return Fail("cancel", absl::InvalidArgumentError("expected JOB_ID"));
  auto stub = Stub(args->Get("coordinator", kDefaultCoordinator));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::CancelJobRequest req;
  req.set_job_id(args->positional[0]);
  v1::Job job;
  grpc::Status st = stub->CancelJob(&ctx, req, &job);
  if (!st.ok()) return Fail("cancel", FromGrpcStatus(st));
  std::printf("cancelling %s (evaluations in flight finish and are recorded)\n", job.job_id().c_str());
  return 0;
}

}  // namespace kevo::cli
