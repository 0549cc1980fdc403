// The kevo subcommands. Each takes its arguments (after the subcommand name)
// and returns the process exit status.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kevo/v1/job.pb.h"

namespace kevo::cli {

int EvalCommand(const std::vector<std::string>& args);
int WorkersCommand(const std::vector<std::string>& args);

// Streams one evaluation through a coordinator's JobService, printing stage
// lines on stderr unless `quiet`. Returns the final Evaluation, or the RPC's
// error.
absl::StatusOr<v1::Evaluation> EvaluateRemote(const std::string& address,
                                              const v1::EvaluateRequest& request, bool quiet);
// "  compile   ok (1.20s)  message".
std::string StageLine(const v1::StageEvent& event);

}  // namespace kevo::cli
