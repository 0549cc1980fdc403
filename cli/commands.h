// The kevo subcommands. Each takes its arguments (after the subcommand name)
// and returns the process exit status.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "kevo/v1/job.pb.h"

namespace kevo::cli {

int EvalCommand(const std::vector<std::string>& args);
int WorkersCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int SubmitCommand(const std::vector<std::string>& args);
int WatchCommand(const std::vector<std::string>& args);
int BestCommand(const std::vector<std::string>& args);
int JobsCommand(const std::vector<std::string>& args);
int CancelCommand(const std::vector<std::string>& args);
int LlmLogCommand(const std::vector<std::string>& args);
int SuiteCommand(const std::vector<std::string>& args);
int KbCommand(const std::vector<std::string>& args);
int SkillsCommand(const std::vector<std::string>& args);
int NodesCommand(const std::vector<std::string>& args);
int AdminCommand(const std::vector<std::string>& args);
int TaskCommand(const std::vector<std::string>& args);
int CampaignCommand(const std::vector<std::string>& args);
int ReportCommand(const std::vector<std::string>& args);

// Streams a job's progress (a bar on a terminal, plain lines otherwise, on
// stderr) until it ends; returns the final Job or the RPC's error. When
// given, `on_event` sees the job after every event (on this thread).
absl::StatusOr<v1::Job> WatchJobStream(const std::string& address, const std::string& job_id, bool quiet,
                                       const std::function<void(const v1::Job&)>& on_event = nullptr);

// Streams one evaluation through a coordinator's JobService, printing stage
// lines on stderr unless `quiet`. Returns the final Evaluation, or the RPC's
// error.
absl::StatusOr<v1::Evaluation> EvaluateRemote(const std::string& address, const v1::EvaluateRequest& request,
                                              bool quiet);
// "  compile   ok (1.20s)  message".
std::string StageLine(const v1::StageEvent& event);

}  // namespace kevo::cli
