// Helpers the job commands (run, submit, suite, ...) share: the JobService
// stub, RPC deadlines, the job-spec flags, and writing result files.
#pragma once

#include <chrono>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flags.h"
#include <grpcpp/grpcpp.h>

#include "kevo/v1/job.grpc.pb.h"

namespace kevo::cli {

inline constexpr char kDefaultCoordinator[] = "127.0.0.1:50051";

// A channel to the coordinator at `address` with the credentials of the
// environment (rpc::CredentialsFromEnvironment: KEVO_TOKEN, KEVO_TOKEN_FILE,
// KEVO_TLS_CA), accepting answers as large as the coordinator sends (64 MiB).
// Exits with status 2 when a named token or CA file cannot be read.
std::shared_ptr<grpc::Channel> Channel(const std::string& address);
// A JobService stub on Channel(address).
std::unique_ptr<v1::JobService::Stub> Stub(const std::string& address);
// `status` as an absl::Status; when the coordinator could not be reached
// (Unavailable), the message says which address was tried.
absl::Status CoordinatorError(const std::string& address, const grpc::Status& status);

// Sets `ctx`'s deadline `seconds` from now.
void Deadline(grpc::ClientContext* ctx, int seconds = 30);

// Calls the unary `method` of a coordinator service (e.g.
// &v1::JobService::Stub::ListSkills, &v1::CampaignService::Stub::GetCampaign)
// on the coordinator at `address` with the default deadline. Returns its
// answer, or its error through CoordinatorError.
template <typename ServiceStub, typename Request, typename Response>
absl::StatusOr<Response> CallCoordinator(const std::string& address,
                                         grpc::Status (ServiceStub::*method)(grpc::ClientContext*, const Request&,
                                                                             Response*),
                                         const Request& request) {
  ServiceStub stub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  Response response;
  grpc::Status st = (stub.*method)(&ctx, request, &response);
  if (!st.ok()) return CoordinatorError(address, st);
  return response;
}

// The flags SpecFromFlags reads (platform, budget, stall, seed, max-wall,
// policy, proposer, target-speedup, max-in-flight).
extern const std::set<std::string> kSpecFlags;
// `base` plus `more`.
std::set<std::string> With(std::set<std::string> base, std::initializer_list<std::string> more);
// A JobSpec from the flags, without its task; also reads the boolean flags
// --warm-start and --no-skills, which the caller declares. InvalidArgument
// naming the flag when one is malformed.
absl::StatusOr<v1::JobSpec> SpecFromFlags(const ParsedArgs& args);
// SpecFromFlags plus the task loaded from the one positional TASK_DIR.
absl::StatusOr<v1::JobSpec> SpecFromArgs(const ParsedArgs& args);

// Writes `data` to `path`, creating its folder. PermissionDenied when it
// cannot be opened, DataLoss on a short write.
absl::Status WriteFile(const std::string& path, const std::string& data);
// The text of a kernel file for `candidate`: its source, preceded by a
// "kevo-flags: ..." comment line (// or #, by language) when the candidate was
// compiled with extra flags (a recipe's -ffast-math, say), so that `kevo eval
// TASK FILE` compiles the file as the search did.
std::string KernelFileText(const v1::Candidate& candidate);
// The flags named by a kernel file's first line when it is a "kevo-flags:"
// comment; none otherwise.
std::vector<std::string> KernelFileFlags(const std::string& text);
// The arguments of a command that reads one JOB from a running coordinator
// (--coordinator ADDR) or, with --db DIR, from a stopped one's folder: JOB,
// those two and `bool_flags` (plus --help). Returns them, or the exit code
// the command should end with: 0 after printing `usage` for --help, 2 for a
// usage error (usage on stderr, or both sources given).
std::variant<ParsedArgs, int> ParseJobReaderArgs(const char* command, const std::vector<std::string>& argv,
                                                 std::set<std::string> bool_flags, const char* usage);
// The RocksDB folder under --db DIR: `kevo run --db DIR` keeps it in DIR/db,
// a coordinator in DIR itself.
std::string StoreDir(const std::string& dir);
// The file extension of a kernel for `task` on `platform`: ".py" for a
// KernelBench task (a ModelNew module), ".hip" on amd, else ".cc".
std::string KernelExtension(const v1::Task& task, const std::string& platform);
// Prints "kevo COMMAND: message" on stderr; returns 2 for InvalidArgument, else 1.
int Fail(const char* command, const absl::Status& s);

}  // namespace kevo::cli
