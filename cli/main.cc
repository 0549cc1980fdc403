// kevo: the command line. `kevo eval` and `kevo run` work embedded; the
// other commands talk to a coordinator.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.h"

#include "common/log.h"

namespace {

constexpr char kUsage[] =
    "usage: kevo COMMAND [ARGS]\n"
    "commands:\n"
    "  eval TASK_DIR CANDIDATE_FILE   compile, validate and profile one candidate\n"
    "  run TASK_DIR                   search for the fastest correct kernel (embedded)\n"
    "  suite TASKS_DIR                search every task under a folder; table, JSON and CSV\n"
    "  submit TASK_DIR                submit a search job to a coordinator; prints its id\n"
    "  watch JOB                      stream a job's progress until it ends\n"
    "  best JOB [-o FILE]             the best kernel of a job\n"
    "  nodes JOB                      a job's search tree: each node's times and speedup\n"
    "  jobs                           list jobs\n"
    "  cancel JOB                     stop a job (in-flight evaluations finish)\n"
    "  workers                        list the workers connected to a coordinator\n"
    "  llm-log JOB                    the LLM calls a job made (prompts, answers, tokens)\n"
    "  kb search QUERY                search the knowledge base (hardware docs, guidance)\n"
    "  kb import [DIR] --db DIR       import a knowledge-base folder into a store\n"
    "  skills                         what earlier jobs learnt (skill memory)\n"
    "  admin team|worker-token|worker teams, tokens and workers (a coordinator with --auth)\n"
    "  task export TASK_DIR           the loaded task as a kevo.v1.Task (for other clients)\n"
    "  campaign submit|run|status|list|cancel|export  fleet-wide batches of jobs and their gains\n"
    "  report CAMPAIGN_ID -o FILE     a campaign's self-contained HTML report\n"
    "llm-log, kb search and skills ask a coordinator (--coordinator ADDR) or, with --db DIR,\n"
    "read a stopped coordinator's or `kevo run --db` folder. A coordinator run with --auth\n"
    "needs a token: KEVO_TOKEN, or the file KEVO_TOKEN_FILE names (docs/security.md).\n"
    "Run `kevo COMMAND --help` for a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  kevo::SetLogComponent("kevo");
  // The embedded coordinator's one-line-per-event log goes to stderr only when
  // asked for (KEVO_LOG_LEVEL=info|debug); the CLI prints its own progress.
  if (std::getenv("KEVO_LOG_LEVEL") == nullptr) kevo::SetLogLevel(kevo::LogLevel::kWarning);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "eval") return kevo::cli::EvalCommand(args);
  if (command == "workers") return kevo::cli::WorkersCommand(args);
  if (command == "run") return kevo::cli::RunCommand(args);
  if (command == "suite") return kevo::cli::SuiteCommand(args);
  if (command == "submit") return kevo::cli::SubmitCommand(args);
  if (command == "watch") return kevo::cli::WatchCommand(args);
  if (command == "best") return kevo::cli::BestCommand(args);
  if (command == "jobs") return kevo::cli::JobsCommand(args);
  if (command == "cancel") return kevo::cli::CancelCommand(args);
  if (command == "nodes") return kevo::cli::NodesCommand(args);
  if (command == "campaign") return kevo::cli::CampaignCommand(args);
  if (command == "report") return kevo::cli::ReportCommand(args);
  if (command == "llm-log") return kevo::cli::LlmLogCommand(args);
  if (command == "kb") return kevo::cli::KbCommand(args);
  if (command == "skills") return kevo::cli::SkillsCommand(args);
  if (command == "admin") return kevo::cli::AdminCommand(args);
  if (command == "task") return kevo::cli::TaskCommand(args);
  std::fprintf(stderr, "kevo: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
