// kevo suite: every task under a folder (native task folders and KernelBench
// files, found as kevo run finds them) searched as a job, K at a time,
// embedded or against a coordinator; a table, a JSON results file and a CSV
// beside it. Resumable: tasks already finished in the results file are
// skipped, so a long suite survives an interruption. KernelBench problems
// get KernelBench's own metrics too (cli/kernelbench_metrics.h): speedups over
// PyTorch eager and torch.compile per row, fast_p over the suite.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/embedded.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include "cli/kernelbench_metrics.h"
#include "cli/report.h"
#include "google/protobuf/util/message_differencer.h"
#include <nlohmann/json.hpp>

#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kSuiteUsage[] =
    "usage: kevo suite TASKS_DIR [--platform cpu] [--budget N] [--jobs K] [--out results.json]\n"
    "                  [--coordinator ADDR] [--db DIR] [--rerun TASK,TASK] [--markdown]\n"
    "                  [--policy P] [--seed S] [--stall K] [--max-wall S] [--target-speedup X]\n"
    "                  [--warm-start] [--no-skills] [--fitness-vs-reference] [--no-production]\n"
    "                  [--profile-cap S] [--lease-seconds N]\n"
    "Searches every task under TASKS_DIR (native task folders and KernelBench .py\n"
    "files, as kevo run finds them) as a job, K at a time (embedded, or on the\n"
    "coordinator at ADDR), then prints a table and writes --out (JSON, default\n"
    "kevo-out/suite/results.json), a CSV beside it and each best kernel in\n"
    "<out>-kernels/. Tasks already finished in an existing --out are skipped (rows with\n"
    "an error are run again); --rerun runs the named tasks again anyway. With the same\n"
    "--db, jobs an interrupted run left unfinished are continued (or cancelled when the\n"
    "task or the flags changed since); evaluations such a run left in flight go back to\n"
    "the queue after --lease-seconds (embedded: default 120).\n"
    "KernelBench problems also get KernelBench's metrics: each row's speedup over PyTorch\n"
    "eager and torch.compile and seconds per evaluation, and fast_p (correct and more than\n"
    "p times faster, p = 0, 1, 1.5, 2) against each baseline (n/a where torch.compile was\n"
    "never timed) in the table and the JSON's \"kernelbench\" object.\n"
    "Exit status: 0 when every task ended with a correct kernel, 3 otherwise.\n";

// One task's outcome: a row of the table, the JSON and the CSV.
struct SuiteRow {
  std::string task;  // the task path relative to TASKS_DIR (the resume key)
  std::string family;
  std::string op_family;
  std::string status = "ERROR";  // OK | NO_CORRECT_KERNEL | ERROR
  std::string error;
  std::string job_id;
  double baseline_time_s = 0;
  double best_time_s = 0;
  double speedup = 0;  // over the naive reference
  // Over what users run today (the fastest production form that agreed with
  // the reference, timed beside the best kernel), 0 when none was usable;
  // which form it was and its time; every form's time by name.
  double speedup_vs_production = 0;
  std::string production_yardstick;
  double production_time_s = 0;
  std::map<std::string, double> production_times_s;
  // Each form's speedup, over the candidate's calls interleaved with it.
  std::map<std::string, double> production_speedups;
  std::string fitness_baseline;
  // The best time against the median of the job's baselines (0: unknown).
  double speedup_vs_median_baseline = 0;
  double median_baseline_time_s = 0;
  double roofline_fraction = 0;
  int evaluations = 0;
  std::map<std::string, int> by_status;
  std::string stop_reason;
  std::string best_genome;
  std::string best_kernel_path;
  std::string cpu_model;
  double wall_s = 0;
  // KernelBench problems: the best kernel over torch.compile and that time,
  // 0 when torch.compile was not timed (why, as the worker said, in the note).
  // Over PyTorch eager it is `speedup`: eager is their reference.
  double speedup_vs_compile = 0;
  double torch_compile_time_s = 0;
  std::string torch_compile_note;

  bool correct() const { return status == "OK"; }
  // A row of a KernelBench problem (one that did not load has no op family
  // yet, but its key is the .py file).
  bool kernelbench() const { return op_family == kevo::task::kKernelBenchFamily || task.ends_with(".py"); }
  double seconds_per_evaluation() const { return evaluations > 0 ? wall_s / evaluations : 0; }
  // The row as KernelBench's metrics read it: speedups only for a correct kernel.
  KernelBenchProblem problem() const {
    return {.correct = correct(),
            .speedup_vs_eager = correct() ? speedup : 0,
            .speedup_vs_compile = correct() ? speedup_vs_compile : 0,
            .compile_note = torch_compile_note,
            .evaluations = evaluations,
            .wall_s = wall_s};
  }
  bool faster() const { return correct() && speedup > 1.0; }
  bool faster_than_production() const { return correct() && speedup_vs_production > 1.0; }
};

// A number, or null for 0 (not measured).
nlohmann::json NumberOrNull(double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

// `j[key]` when it is a number; 0 when absent or null (rows from before the
// key existed, or not measured).
double NumberOr0(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

nlohmann::json RowJson(const SuiteRow& r) {
  nlohmann::json j = {{"task", r.task},
                      {"family", r.family},
                      {"op_family", r.op_family},
                      {"status", r.status},
                      {"correct", r.correct()},
                      {"faster", r.faster()},
                      {"error", r.error},
                      {"job_id", r.job_id},
                      {"baseline_time_s", r.baseline_time_s},
                      {"best_time_s", r.best_time_s},
                      {"speedup_vs_production", r.speedup_vs_production},
                      {"production_yardstick", r.production_yardstick},
                      {"production_time_s", r.production_time_s},
                      {"production_times_s", r.production_times_s},
                      {"production_speedups", r.production_speedups},
                      {"fitness_baseline", r.fitness_baseline},
                      {"speedup", r.speedup},
                      {"speedup_vs_median_baseline", r.speedup_vs_median_baseline},
                      {"median_baseline_time_s", r.median_baseline_time_s},
                      {"roofline_fraction", r.roofline_fraction},
                      {"evaluations", r.evaluations},
                      {"evaluations_by_status", r.by_status},
                      {"stop_reason", r.stop_reason},
                      {"best_genome", r.best_genome},
                      {"best_kernel_path", r.best_kernel_path},
                      {"cpu_model", r.cpu_model},
                      {"wall_s", r.wall_s}};
  if (r.kernelbench()) {
    const KernelBenchProblem p = r.problem();
    j["speedup_vs_eager"] = NumberOrNull(p.speedup_vs_eager);
    j["speedup_vs_compile"] = NumberOrNull(p.speedup_vs_compile);
    j["torch_compile_time_s"] = NumberOrNull(r.torch_compile_time_s);
    j["torch_compile_note"] = r.torch_compile_note;
    j["seconds_per_evaluation"] = NumberOrNull(r.seconds_per_evaluation());
  }
  return j;
}

SuiteRow RowFromJson(const nlohmann::json& j) {
  SuiteRow r;
  r.task = j.value("task", "");
  r.family = j.value("family", "");
  r.op_family = j.value("op_family", "");
  r.status = j.value("status", "ERROR");
  r.error = j.value("error", "");
  r.job_id = j.value("job_id", "");
  r.baseline_time_s = j.value("baseline_time_s", 0.0);
  r.best_time_s = j.value("best_time_s", 0.0);
  r.speedup = j.value("speedup", 0.0);
  r.speedup_vs_production = j.value("speedup_vs_production", 0.0);
  r.production_yardstick = j.value("production_yardstick", "");
  r.production_time_s = j.value("production_time_s", 0.0);
  r.production_times_s = j.value("production_times_s", std::map<std::string, double>{});
  r.production_speedups = j.value("production_speedups", std::map<std::string, double>{});
  r.fitness_baseline = j.value("fitness_baseline", "");
  r.speedup_vs_median_baseline = j.value("speedup_vs_median_baseline", 0.0);
  r.median_baseline_time_s = j.value("median_baseline_time_s", 0.0);
  r.roofline_fraction = j.value("roofline_fraction", 0.0);
  r.evaluations = j.value("evaluations", 0);
  r.by_status = j.value("evaluations_by_status", std::map<std::string, int>{});
  r.stop_reason = j.value("stop_reason", "");
  r.best_genome = j.value("best_genome", "");
  r.best_kernel_path = j.value("best_kernel_path", "");
  r.cpu_model = j.value("cpu_model", "");
  r.wall_s = j.value("wall_s", 0.0);
  r.speedup_vs_compile = NumberOr0(j, "speedup_vs_compile");
  r.torch_compile_time_s = NumberOr0(j, "torch_compile_time_s");
  r.torch_compile_note = j.value("torch_compile_note", "");
  return r;
}

// The pattern the task's hints name; else the family of the best node's
// recipe when it is not the generic mutator; else the task's op family.
std::string Family(const v1::Task& task, const std::string& genome) {
  if (auto it = task.hints().find("pattern"); it != task.hints().end()) return it->second;
  if (auto g = proposer::Genome::FromString(genome); g.ok()) {
    const proposer::Recipe* recipe = proposer::FindRecipe(g->recipe);
    if (recipe != nullptr && recipe->family() != "generic") return recipe->family();
  }
  return task.op_family();
}

struct Summary {
  int tasks = 0, correct = 0, faster = 0, errors = 0;
  int faster_vs_median = 0;  // faster also against the job's median baseline
  int with_production = 0;   // correct, with a usable production figure
  int faster_than_production = 0;
  double geomean_vs_production = 0;  // over the tasks with a production figure
};

Summary Summarise(const std::map<std::string, SuiteRow>& rows) {
  Summary s;
  for (const auto& [_, r] : rows) {
    ++s.tasks;
    s.correct += r.correct();
    s.faster += r.faster();
    s.faster_vs_median += r.faster() && r.speedup_vs_median_baseline > 1.0;
    s.errors += r.status == "ERROR";
    if (r.correct() && r.speedup_vs_production > 0) {
      ++s.with_production;
      s.faster_than_production += r.faster_than_production();
      s.geomean_vs_production += std::log(r.speedup_vs_production);
    }
  }
  if (s.with_production > 0) s.geomean_vs_production = std::exp(s.geomean_vs_production / s.with_production);
  return s;
}

// KernelBench's metrics over the KernelBench rows (problems 0 when none).
KernelBenchMetrics SummariseKernelBenchRows(const std::map<std::string, SuiteRow>& rows) {
  std::vector<KernelBenchProblem> problems;
  for (const auto& [_, r] : rows) {
    if (r.kernelbench()) problems.push_back(r.problem());
  }
  return SummariseKernelBench(problems);
}

std::string SummaryLine(const Summary& s) {
  std::string production = s.with_production > 0
                               ? absl::StrFormat(
                                     "against what users run (PyTorch, OpenBLAS/cuBLAS): %d/%d tasks faster, geomean "
                                     "%.2fx\n",
                                     s.faster_than_production, s.with_production, s.geomean_vs_production)
                               : "against what users run: no task had a usable production baseline\n";
  return production +
         absl::StrFormat(
             "against the naive reference: %d/%d tasks (%.0f%%) ended with a correct kernel faster (%d also against "
             "their job's median baseline); %d correct, %d with an error",
             s.faster, s.tasks, s.tasks ? 100.0 * s.faster / s.tasks : 0.0, s.faster_vs_median, s.correct, s.errors);
}

std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

bool AnyKernelBench(const std::map<std::string, SuiteRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.second.kernelbench(); });
}

// "2.00x" for a correct KernelBench row's speedup, "n/a" when its baseline
// was not timed, "-" for an incorrect or native row.
std::string KernelBenchSpeedupCell(const SuiteRow& r, double speedup) {
  if (!r.kernelbench() || !r.correct()) return "-";
  return speedup > 0 ? absl::StrFormat("%.2fx", speedup) : "n/a";
}

// The CSV; a suite with KernelBench problems gets three more columns
// (speedup_vs_eager, speedup_vs_compile, seconds_per_evaluation), empty where
// not measured.
std::string Csv(const std::map<std::string, SuiteRow>& rows) {
  const bool kernelbench = AnyKernelBench(rows);
  std::string out = absl::StrCat(
      "task,family,op_family,status,correct,faster,production_yardstick,production_time_s,"
      "speedup_vs_production,baseline_time_s,best_time_s,speedup,"
      "speedup_vs_median_baseline,roofline_fraction,evaluations,stop_reason,best_genome,error",
      kernelbench ? ",speedup_vs_eager,speedup_vs_compile,seconds_per_evaluation" : "", "\n");
  auto number = [](double v) { return v > 0 ? absl::StrFormat("%.4f", v) : std::string(); };
  for (const auto& [_, r] : rows) {
    absl::StrAppend(
        &out,
        absl::StrJoin(
            {CsvField(r.task), CsvField(r.family), CsvField(r.op_family), r.status,
             std::string(r.correct() ? "true" : "false"), std::string(r.faster() ? "true" : "false"),
             CsvField(r.production_yardstick), absl::StrFormat("%.9g", r.production_time_s),
             absl::StrFormat("%.4f", r.speedup_vs_production), absl::StrFormat("%.9g", r.baseline_time_s),
             absl::StrFormat("%.9g", r.best_time_s), absl::StrFormat("%.4f", r.speedup),
             absl::StrFormat("%.4f", r.speedup_vs_median_baseline), absl::StrFormat("%.4f", r.roofline_fraction),
             absl::StrCat(r.evaluations), CsvField(r.stop_reason), CsvField(r.best_genome), CsvField(r.error)},
            ","),
        kernelbench && r.kernelbench()
            ? absl::StrCat(",", number(r.problem().speedup_vs_eager), ",", number(r.problem().speedup_vs_compile), ",",
                           number(r.seconds_per_evaluation()))
        : kernelbench ? ",,,"
                      : "",
        "\n");
  }
  return out;
}

// The table, plain (aligned columns) or as Markdown. With KernelBench
// problems it has three more columns before the stop reason: the best over
// PyTorch eager and over torch.compile, and seconds per evaluation.
std::string Table(const std::map<std::string, SuiteRow>& rows, bool markdown) {
  const bool kernelbench = AnyKernelBench(rows);
  std::vector<std::string> head = {"task",      "family", "correct",   "production", "best", "vs prod",
                                   "reference", "vs ref", "vs median", "% roofline", "evals"};
  if (kernelbench) head.insert(head.end(), {"vs eager", "vs compile", "s/eval"});
  head.push_back("stop reason");
  // Columns 3 up to the stop reason are figures, aligned right.
  auto right = [&](size_t i) { return i >= 3 && i + 1 < head.size(); };
  std::vector<std::vector<std::string>> cells;
  for (const auto& [_, r] : rows) {
    bool timed = r.correct();
    cells.push_back(
        {r.task, r.family.empty() ? "-" : r.family, r.status == "ERROR" ? "error" : (r.correct() ? "yes" : "no"),
         r.production_time_s > 0 ? absl::StrCat(FormatSeconds(r.production_time_s), " ", r.production_yardstick) : "-",
         timed ? FormatSeconds(r.best_time_s) : "-",
         timed && r.speedup_vs_production > 0 ? absl::StrFormat("%.2fx", r.speedup_vs_production) : "-",
         FormatSeconds(r.baseline_time_s), timed ? absl::StrFormat("%.2fx", r.speedup) : "-",
         timed && r.speedup_vs_median_baseline > 0 ? absl::StrFormat("%.2fx", r.speedup_vs_median_baseline) : "-",
         timed ? absl::StrFormat("%.1f%%", 100 * r.roofline_fraction) : "-", absl::StrCat(r.evaluations)});
    if (kernelbench) {
      cells.back().insert(
          cells.back().end(),
          {KernelBenchSpeedupCell(r, r.speedup), KernelBenchSpeedupCell(r, r.speedup_vs_compile),
           r.kernelbench() && r.evaluations > 0 ? absl::StrFormat("%.2f", r.seconds_per_evaluation()) : "-"});
    }
    cells.back().push_back(r.error.empty() ? r.stop_reason : absl::StrCat("error: ", r.error));
  }
  std::string out;
  if (markdown) {
    absl::StrAppend(&out, "| ", absl::StrJoin(head, " | "), " |\n|");
    for (size_t i = 0; i < head.size(); ++i) absl::StrAppend(&out, right(i) ? "---:|" : "---|");
    absl::StrAppend(&out, "\n");
    for (auto& row : cells) {
      for (auto& c : row) c = absl::StrReplaceAll(c, {{"|", "\\|"}, {"\n", " "}});
      absl::StrAppend(&out, "| ", absl::StrJoin(row, " | "), " |\n");
    }
    return out;
  }
  std::vector<size_t> width(head.size());
  for (size_t i = 0; i < head.size(); ++i) width[i] = head[i].size();
  for (const auto& row : cells) {
    for (size_t i = 0; i + 1 < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& row) {
    std::string l;
    for (size_t i = 0; i < row.size(); ++i) {
      std::string c = row[i].substr(0, i + 1 == row.size() ? 200 : std::string::npos);
      if (i + 1 == row.size()) {
        absl::StrAppend(&l, c);
      } else {
        absl::StrAppend(&l, absl::StrFormat(right(i) ? "%*s  " : "%-*s  ", static_cast<int>(width[i]), c));
      }
    }
    return l + "\n";
  };
  out = line(head);
  for (const auto& row : cells) out += line(row);
  return out;
}

// Overall progress on stderr: a live line on a terminal, plain lines (a task
// starting or finishing, and the overall state at most every 30 s) otherwise.
// Thread-safe.
class Progress {
 public:
  Progress(int total, bool tty) : total_(total), tty_(tty) {}

  void Started(const std::string& task, int budget) {
    absl::MutexLock l(&mu_);
    running_[task] = {0, budget, 0};
    if (!tty_) std::fprintf(stderr, "[%d/%d] %s: started\n", done_, total_, task.c_str());
    Draw();
  }

  void Update(const std::string& task, const v1::Job& job) {
    absl::MutexLock l(&mu_);
    auto it = running_.find(task);
    if (it == running_.end()) return;
    it->second = {job.evaluations_done(), job.spec().budget().max_evaluations(), job.best_speedup()};
    if (tty_) {
      if (absl::Now() - last_draw_ > absl::Milliseconds(200)) Draw();
    } else if (absl::Now() - last_draw_ > absl::Seconds(30)) {
      std::fprintf(stderr, "%s\n", Line().c_str());
      last_draw_ = absl::Now();
    }
  }

  void Finished(const SuiteRow& row) {
    absl::MutexLock l(&mu_);
    running_.erase(row.task);
    ++done_;
    evaluations_finished_ += row.evaluations;
    std::string what =
        row.status == "ERROR" ? absl::StrCat("error: ", row.error)
        : row.correct()
            ? absl::StrFormat(
                  "%s; %.2fx vs the naive reference (%s -> %s; %s against the median "
                  "reference), %d evaluations, %s",
                  row.speedup_vs_production > 0
                      ? absl::StrFormat("%.2fx vs %s (%s)", row.speedup_vs_production, row.production_yardstick,
                                        FormatSeconds(row.production_time_s))
                      : std::string("no production figure"),
                  row.speedup, FormatSeconds(row.baseline_time_s), FormatSeconds(row.best_time_s),
                  row.speedup_vs_median_baseline > 0 ? absl::StrFormat("%.2fx", row.speedup_vs_median_baseline) : "-",
                  row.evaluations, row.stop_reason)
            : absl::StrCat("no correct kernel, ", row.evaluations, " evaluations, ", row.stop_reason);
    if (row.kernelbench() && row.correct()) {
      absl::StrAppend(&what, "; vs torch.compile ",
                      row.speedup_vs_compile > 0 ? absl::StrFormat("%.2fx", row.speedup_vs_compile) : "n/a");
    }
    std::fprintf(stderr, "%s[%d/%d] %s: %s\n", tty_ ? "\r\033[K" : "", done_, total_, row.task.c_str(), what.c_str());
    Draw();
  }

  // Ends the live line.
  void Close() {
    absl::MutexLock l(&mu_);
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  std::string Line() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int evaluations = evaluations_finished_;
    std::vector<std::string> parts;
    for (const auto& [task, r] : running_) {
      evaluations += r.done;
      parts.push_back(absl::StrFormat("%s %d/%d %.2fx", task, r.done, r.budget, r.best));
    }
    return absl::StrFormat("suite: %d/%d tasks done, %d evaluations%s%s", done_, total_, evaluations,
                           parts.empty() ? "" : " | ", absl::StrJoin(parts, " | "));
  }

  void Draw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K%s", Line().c_str());
    std::fflush(stderr);
    last_draw_ = absl::Now();
  }

  struct Running {
    int done = 0;
    int budget = 0;
    double best = 0;
  };
  absl::Mutex mu_;
  const int total_;
  const bool tty_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int evaluations_finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Running> running_ ABSL_GUARDED_BY(mu_);
  absl::Time last_draw_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

struct SuiteContext {
  std::string address;
  v1::JobSpec base;  // the spec every job gets, without its task
  std::string kernels_dir;
  Progress* progress = nullptr;
};

// One task of the suite: its key (the path relative to TASKS_DIR) and the
// task loaded from that path, or why it did not load.
struct SuiteTask {
  std::string key;
  absl::StatusOr<v1::Task> task;
  std::string adopted_job;  // a job an interrupted run left running: watched, not submitted
};

// Whether `job` is what this run would submit for `task`: the same task, and
// the same spec where the suite sets it (the coordinator fills in defaults for
// what it leaves empty).
bool SameJob(const v1::JobSpec& job, const v1::JobSpec& base, const v1::Task& task) {
  using google::protobuf::util::MessageDifferencer;
  return MessageDifferencer::Equals(job.task(), task) && job.platform() == base.platform() &&
         MessageDifferencer::Equals(job.budget(), base.budget()) && job.seed() == base.seed() &&
         job.warm_start() == base.warm_start() && job.no_skills() == base.no_skills() &&
         job.fitness_vs_reference() == base.fitness_vs_reference() &&
         (base.policy().empty() || job.policy() == base.policy()) &&
         (base.proposer().empty() || job.proposer() == base.proposer());
}

// A suite resumed on its own --db: the embedded coordinator resumed the jobs
// the interrupted run left running (docs/search.md, "Crash safety"), and they
// would take worker slots beside this run's. A job that is what this run would
// submit for a task still to do is adopted; one for such a task with another
// spec (the task file or the flags changed since) is cancelled. Jobs of other
// tasks are left alone.
absl::Status AdoptLeftoverJobs(const std::string& address, const v1::JobSpec& base, std::vector<SuiteTask>& todo) {
  auto stub = Stub(address);
  grpc::ClientContext c;
  Deadline(&c);
  v1::ListJobsResponse list;
  grpc::Status st = stub->ListJobs(&c, v1::ListJobsRequest(), &list);
  if (!st.ok()) return FromGrpcStatus(st);
  for (const v1::Job& job : list.jobs()) {
    if (job.state() != v1::JOB_RUNNING || job.spec().platform() != base.platform()) continue;
    SuiteTask* same_name = nullptr;
    SuiteTask* adopter = nullptr;
    for (SuiteTask& t : todo) {
      if (!t.task.ok() || t.task->name() != job.spec().task().name() || !t.adopted_job.empty()) continue;
      same_name = &t;
      if (SameJob(job.spec(), base, *t.task)) {
        adopter = &t;
        break;
      }
    }
    if (adopter != nullptr) {
      adopter->adopted_job = job.job_id();
      LogInfo("suite: ", adopter->key, " continues job ", job.job_id(), " (", job.evaluations_done(),
              " evaluations done) that an interrupted run left running");
      std::fprintf(stderr, "suite: %s continues job %s (%d evaluations done before the interruption)\n",
                   adopter->key.c_str(), job.job_id().c_str(), job.evaluations_done());
    } else if (same_name != nullptr) {
      grpc::ClientContext cc;
      Deadline(&cc);
      v1::CancelJobRequest creq;
      creq.set_job_id(job.job_id());
      v1::Job cresp;
      grpc::Status cst = stub->CancelJob(&cc, creq, &cresp);
      if (!cst.ok()) return FromGrpcStatus(cst);
      LogInfo("suite: cancelled job ", job.job_id(), " of ", same_name->key,
              ": left running by an interrupted run with another spec");
      std::fprintf(stderr,
                   "suite: cancelled job %s of %s: an interrupted run left it running with another "
                   "spec (the task or the flags changed since)\n",
                   job.job_id().c_str(), same_name->key.c_str());
    }
  }
  return absl::OkStatus();
}

// Runs one task as a job. Every failure (the task did not load, the job
// fails, an RPC fails) becomes the row's error.
SuiteRow RunTask(const SuiteContext& ctx, const SuiteTask& t) {
  const std::string& key = t.key;
  SuiteRow row;
  row.task = key;
  absl::Time start = absl::Now();
  // "started" is said once the task's job exists (submitted, or adopted from
  // an interrupted run), or when the task ends before it could: a run killed
  // after the line leaves a job the next run continues.
  bool said_started = false;
  auto started = [&] {
    if (!said_started) ctx.progress->Started(key, ctx.base.budget().max_evaluations());
    said_started = true;
  };
  auto finish = [&](SuiteRow& r) -> SuiteRow {
    started();
    r.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
    LogInfo("suite task ", r.task, " ", r.status, " speedup ", r.speedup, " after ", r.evaluations, " evaluations",
            r.error.empty() ? "" : ": ", r.error);
    ctx.progress->Finished(r);
    return r;
  };
  const auto& task = t.task;
  if (!task.ok()) {
    row.error = std::string(task.status().message());
    return finish(row);
  }
  row.op_family = task->op_family();
  row.family = Family(*task, "");
  auto stub = Stub(ctx.address);
  row.job_id = t.adopted_job;
  if (row.job_id.empty()) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = ctx.base;
    *req.mutable_spec()->mutable_task() = *task;
    v1::SubmitJobResponse resp;
    grpc::ClientContext c;
    Deadline(&c);
    grpc::Status st = stub->SubmitJob(&c, req, &resp);
    if (!st.ok()) {
      row.error = absl::StrCat("submit: ", FromGrpcStatus(st).message());
      return finish(row);
    }
    row.job_id = resp.job_id();
  }
  started();
  auto job =
      WatchJobStream(ctx.address, row.job_id, /*quiet=*/true, [&](const v1::Job& j) { ctx.progress->Update(key, j); });
  if (!job.ok()) {
    row.error = absl::StrCat("watch: ", job.status().message());
    return finish(row);
  }
  row.baseline_time_s = job->baseline_time_s();
  row.evaluations = job->evaluations_done();
  for (const auto& [s, n] : job->by_status()) row.by_status[s] = n;
  row.stop_reason = job->stop_reason();
  if (job->state() == v1::JOB_FAILED || job->state() == v1::JOB_CANCELLED) {
    row.error = absl::StrCat("job ", v1::JobState_Name(job->state()), ": ", job->stop_reason());
    return finish(row);
  }
  v1::GetBestResponse best;
  grpc::ClientContext c;
  Deadline(&c);
  v1::GetBestRequest breq;
  breq.set_job_id(row.job_id);
  grpc::Status bst = stub->GetBest(&c, breq, &best);
  if (bst.error_code() == grpc::StatusCode::NOT_FOUND) {
    row.status = "NO_CORRECT_KERNEL";
    return finish(row);
  }
  if (!bst.ok()) {
    row.error = absl::StrCat("best: ", FromGrpcStatus(bst).message());
    return finish(row);
  }
  row.status = "OK";
  row.speedup = job->best_speedup_vs_reference() > 0 ? job->best_speedup_vs_reference() : job->best_speedup();
  row.speedup_vs_production = job->best_speedup_vs_production();
  row.production_yardstick = job->best_production_yardstick();
  row.production_time_s = job->best_production_time_s();
  row.fitness_baseline = job->fitness_baseline();
  for (const v1::ProductionTiming& p : best.evaluation().production()) {
    if (!p.error().empty()) continue;
    row.production_times_s[p.name()] = p.timing().median_s();
    row.production_speedups[p.name()] = p.speedup();
  }
  row.speedup_vs_median_baseline = SpeedupVsMedianBaseline(*job);
  row.median_baseline_time_s = job->median_baseline_time_s();
  row.best_time_s = job->best_time_s();
  row.roofline_fraction = job->best_roofline_fraction();
  row.best_genome = best.node().genome();
  row.family = Family(*task, row.best_genome);
  row.cpu_model = best.evaluation().fingerprint().cpu_model();
  if (row.kernelbench()) {
    // The KernelBench judge's torch.compile figures for the best kernel
    // (worker/pipeline/kernelbench_eval.cc), or its note on why none.
    const auto& profile = best.evaluation().profile();
    if (auto it = profile.find("torch_compile_median_s"); it != profile.end() && it->second > 0) {
      row.torch_compile_time_s = it->second;
      if (auto s = profile.find("speedup_vs_torch_compile"); s != profile.end()) row.speedup_vs_compile = s->second;
    }
    if (row.speedup_vs_compile <= 0) {
      const auto& notes = best.evaluation().notes();
      auto n = notes.find("baseline_torch_compile");
      row.torch_compile_note = n != notes.end() ? n->second : "the worker did not time torch.compile";
    }
  }
  std::string stem = key;
  if (stem.ends_with(".py")) stem.resize(stem.size() - 3);
  std::string kernel = absl::StrCat(ctx.kernels_dir, "/", absl::StrReplaceAll(stem, {{"/", "__"}}),
                                    KernelExtension(*task, ctx.base.platform()));
  if (absl::Status w = WriteFile(kernel, KernelFileText(best.candidate())); w.ok()) {
    row.best_kernel_path = kernel;
  } else {
    LogWarning("suite: cannot keep the best kernel of ", key, ": ", w.message());
  }
  return finish(row);
}

// Writes `data` to `path` through a temporary file and a rename, so that an
// interrupted suite never leaves a half-written results file.
absl::Status WriteAtomically(const std::string& path, const std::string& data) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  KEVO_RETURN_IF_ERROR(WriteFile(tmp, data));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("rename ", tmp, " to ", path, ": ", ec.message()));
  return absl::OkStatus();
}

std::string CsvPath(const std::string& json_path) {
  fs::path p(json_path);
  if (p.extension() == ".json") return p.replace_extension(".csv").string();
  return json_path + ".csv";
}

}  // namespace

int SuiteCommand(const std::vector<std::string>& argv) {
  auto args =
      ParseArgs(argv, With(kSpecFlags, {"jobs", "out", "coordinator", "db", "rerun", "profile-cap", "lease-seconds"}),
                {"help", "warm-start", "no-skills", "fitness-vs-reference", "no-production", "markdown"});
  if (!args.ok()) return Fail("suite", args.status());
  if (args->Has("help")) {
    std::fputs(kSuiteUsage, stdout);
    return 0;
  }
  if (args->positional.size() != 1) {
    std::fprintf(stderr, "kevo suite: expected one TASKS_DIR\n%s", kSuiteUsage);
    return 2;
  }
  auto base = SpecFromFlags(*args);
  if (!base.ok()) return Fail("suite", base.status());
  auto jobs = ParseIntFlag(*args, "jobs", 1);
  if (!jobs.ok()) return Fail("suite", jobs.status());
  if (*jobs < 1) return Fail("suite", absl::InvalidArgumentError("--jobs must be at least 1"));
  const std::string root = args->positional[0];
  // The same tasks `kevo run` finds: native task folders and KernelBench files.
  auto paths = task::FindTaskPaths(root);
  if (!paths.ok()) return Fail("suite", paths.status());
  if (paths->empty()) {
    return Fail("suite", absl::NotFoundError(absl::StrCat("no task (a folder holding ", task::kTaskFileName,
                                                          ", or a KernelBench .py problem) under ", root)));
  }
  const std::string out = args->Get("out", "kevo-out/suite/results.json");
  const std::string csv = CsvPath(out);
  std::string kernels_dir = (fs::path(out).parent_path() / (fs::path(out).stem().string() + "-kernels")).string();

  // Tasks by key; the key is the task's path (folder or .py file) relative to
  // TASKS_DIR.
  std::vector<std::pair<std::string, std::string>> tasks;
  for (const auto& d : *paths) {
    std::string key = fs::path(d).lexically_relative(root).string();
    if (key.empty() || key == ".") key = fs::path(d).filename().string();
    if (key.empty()) key = fs::absolute(d).lexically_normal().parent_path().filename().string();
    tasks.emplace_back(key, d);
  }

  // Resume: keep the finished rows of an existing results file.
  std::map<std::string, SuiteRow> rows;
  std::set<std::string> rerun;
  for (auto part : absl::StrSplit(args->Get("rerun"), ',', absl::SkipEmpty())) {
    rerun.insert(std::string(part));
  }
  std::error_code ec;
  if (fs::exists(out, ec)) {
    std::ifstream in(out);
    nlohmann::json old;
    try {
      in >> old;
    } catch (const nlohmann::json::exception& e) {
      return Fail("suite",
                  absl::InvalidArgumentError(absl::StrCat(out, " exists but is not a kevo suite results file (",
                                                          e.what(), "); move it away or choose another --out")));
    }
    std::set<std::string> known;
    for (const auto& [key, _] : tasks) known.insert(key);
    int errors = 0;
    for (const auto& j : old.value("tasks", nlohmann::json::array())) {
      SuiteRow r = RowFromJson(j);
      if (!known.contains(r.task) || rerun.contains(r.task)) continue;
      if (r.status == "ERROR") {
        ++errors;
        continue;
      }
      rows[r.task] = r;
    }
    std::fprintf(stderr, "resuming from %s: %zu of %zu tasks already finished, skipped%s\n", out.c_str(), rows.size(),
                 tasks.size(), errors ? absl::StrCat("; ", errors, " with an error run again").c_str() : "");
  }
  // Load what is left first: a suite whose remaining tasks all fail to load
  // needs no worker.
  std::vector<SuiteTask> todo;
  bool any_loaded = false;
  for (const auto& [key, dir] : tasks) {
    if (rows.contains(key)) continue;
    todo.push_back({key, task::LoadTaskPath(dir)});
    any_loaded |= todo.back().task.ok();
  }

  std::unique_ptr<Embedded> embedded;
  SuiteContext ctx;
  ctx.base = *base;
  ctx.kernels_dir = kernels_dir;
  if (any_loaded) {
    if (args->Has("coordinator")) {
      ctx.address = args->Get("coordinator");
    } else {
      EmbeddedOptions eo;
      eo.db_dir = args->Get("db");
      eo.platform = base->platform();
      eo.slots = static_cast<int>(*jobs);
      if (args->Has("no-production")) eo.worker_flags = {"--production", "off"};
      if (args->Has("profile-cap")) {
        eo.worker_flags.insert(eo.worker_flags.end(), {"--profile-cap", args->Get("profile-cap")});
      }
      auto lease = ParseIntFlag(*args, "lease-seconds", absl::ToInt64Seconds(eo.lease));
      if (!lease.ok()) return Fail("suite", lease.status());
      if (*lease <= 0) return Fail("suite", absl::InvalidArgumentError("--lease-seconds must be positive"));
      eo.lease = absl::Seconds(*lease);
      auto e = Embedded::Start(eo);
      if (!e.ok()) return Fail("suite", e.status());
      embedded = std::move(*e);
      ctx.address = embedded->address();
      if (absl::Status a = AdoptLeftoverJobs(ctx.address, *base, todo); !a.ok()) return Fail("suite", a);
    }
  }
  std::fprintf(stderr, "suite: %zu tasks under %s on %s, budget %d evaluations each, %d at a time%s\n", todo.size(),
               root.c_str(), base->platform().c_str(), base->budget().max_evaluations(), static_cast<int>(*jobs),
               embedded              ? " (embedded)"
               : ctx.address.empty() ? ""
                                     : absl::StrCat(" (coordinator ", ctx.address, ")").c_str());

  nlohmann::json header = {{"tasks_dir", root},
                           {"platform", base->platform()},
                           {"budget", base->budget().max_evaluations()},
                           {"jobs", *jobs},
                           {"policy", base->policy()},
                           {"command", absl::StrCat("kevo suite ", absl::StrJoin(argv, " "))}};
  absl::Mutex rows_mu;
  absl::Status write_status;
  auto save = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(rows_mu) {
    nlohmann::json j;
    j["suite"] = header;
    Summary s = Summarise(rows);
    j["suite"]["updated_unix"] = absl::ToUnixSeconds(absl::Now());
    j["summary"] = {{"tasks", s.tasks},   {"correct", s.correct},
                    {"faster", s.faster}, {"faster_vs_median_baseline", s.faster_vs_median},
                    {"errors", s.errors}, {"total", tasks.size()}};
    if (KernelBenchMetrics kb = SummariseKernelBenchRows(rows); kb.problems > 0) {
      j["kernelbench"] = KernelBenchJson(kb);
    }
    j["tasks"] = nlohmann::json::array();
    for (const auto& [_, r] : rows) j["tasks"].push_back(RowJson(r));
    absl::Status w = WriteAtomically(out, j.dump(2) + "\n");
    if (w.ok()) w = WriteAtomically(csv, Csv(rows));
    if (!w.ok() && write_status.ok()) {
      LogError("suite: ", w.message());
      write_status = w;
    }
  };

  Progress progress(static_cast<int>(todo.size()), isatty(STDERR_FILENO) != 0);
  ctx.progress = &progress;
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < std::min<int64_t>(*jobs, static_cast<int64_t>(todo.size())); ++i) {
    threads.emplace_back([&]() {
      for (size_t k; (k = next.fetch_add(1)) < todo.size();) {
        SuiteRow row = RunTask(ctx, todo[k]);
        absl::MutexLock l(&rows_mu);
        rows[row.task] = std::move(row);
        save();
      }
    });
  }
  for (auto& t : threads) t.join();
  progress.Close();
  {
    absl::MutexLock l(&rows_mu);
    save();
  }
  std::printf("%s\n%s\n", Table(rows, args->Has("markdown")).c_str(), SummaryLine(Summarise(rows)).c_str());
  if (KernelBenchMetrics kb = SummariseKernelBenchRows(rows); kb.problems > 0) {
    std::printf("\n%s", KernelBenchText(kb, args->Has("markdown")).c_str());
  }
  if (!write_status.ok()) return Fail("suite", write_status);
  std::printf("results: %s, %s; best kernels in %s\n", out.c_str(), csv.c_str(), kernels_dir.c_str());
  Summary s = Summarise(rows);
  return s.correct == s.tasks ? 0 : 3;
}

}  // namespace kevo::cli
