// Helpers the job commands (run, submit, suite, ...) share: the JobService
// stub, RPC deadlines, the job-spec flags, and writing result files.
#pragma once

#include <chrono>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "kevo/v1/job.grpc.pb.h"

namespace kevo::cli {

inline constexpr char kDefaultCoordinator[] = "127.0.0.1:50051";

// A JobService stub on an insecure channel to `address`.
std::unique_ptr<v1::JobService::Stub> Stub(const std::string& address);
// Sets `ctx`'s deadline `seconds` from now.
void Deadline(grpc::ClientContext* ctx, int seconds = 30);

// The flags SpecFromFlags reads (platform, budget, stall, seed, max-wall,
// policy, proposer, target-speedup, max-in-flight).
extern const std::set<std::string> kSpecFlags;
// `base` plus `more`.
std::set<std::string> With(std::set<std::string> base, std::initializer_list<std::string> more);
// A JobSpec from the flags, without its task. InvalidArgument naming the
// flag when one is malformed.
absl::StatusOr<v1::JobSpec> SpecFromFlags(const ParsedArgs& args);
// SpecFromFlags plus the task loaded from the one positional TASK_DIR.
absl::StatusOr<v1::JobSpec> SpecFromArgs(const ParsedArgs& args);

// Writes `data` to `path`, creating its folder. PermissionDenied when it
// cannot be opened, DataLoss on a short write.
absl::Status WriteFile(const std::string& path, const std::string& data);
// The file extension of a kernel for `task` on `platform`: ".py" for a
// KernelBench task (a ModelNew module), ".hip" on amd, else ".cc".
std::string KernelExtension(const v1::Task& task, const std::string& platform);
// Prints "kevo COMMAND: message" on stderr; returns 2 for InvalidArgument, else 1.
int Fail(const char* command, const absl::Status& s);

}  // namespace kevo::cli
