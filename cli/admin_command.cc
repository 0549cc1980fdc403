// kevo admin: teams, their tokens, worker tokens and workers, on a
// coordinator run with --auth (docs/security.md). Every call carries the
// admin token from the environment (KEVO_TOKEN or KEVO_TOKEN_FILE).
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_common.h"

#include "common/grpc_status.h"
#include "kevo/v1/admin.grpc.pb.h"

namespace kevo::cli {
namespace {

constexpr char kAdminUsage[] =
    "usage: kevo admin team create NAME [--weight W] [--max-running-jobs N]\n"
    "                                  [--max-evaluations-per-day N]\n"
    "       kevo admin team list\n"
    "       kevo admin team rotate NAME     a new token; the team's earlier ones stop working\n"
    "       kevo admin team revoke NAME     every token of the team stops working\n"
    "       kevo admin worker-token create NAME\n"
    "       kevo admin worker revoke WORKER_ID\n"
    "  [--coordinator HOST:PORT] (default 127.0.0.1:50051)\n"
    "The admin token comes from KEVO_TOKEN or the file KEVO_TOKEN_FILE names (the\n"
    "coordinator writes it to DB/admin.token); a token printed here is shown once.\n";

int Fail(const std::string& address, const grpc::Status& st) {
  absl::Status s = CoordinatorError(address, st);
  std::fprintf(stderr, "kevo admin: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

void PrintToken(const char* what, const std::string& name, const std::string& token) {
  std::fprintf(stderr,
               "%s %s: its token follows, shown only this once; keep it in a file only its "
               "users can read and pass it as KEVO_TOKEN_FILE (or KEVO_TOKEN)\n",
               what, name.c_str());
  std::printf("%s\n", token.c_str());
}

std::string Limit(int n) { return n > 0 ? absl::StrCat(n) : "-"; }

}  // namespace

int AdminCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator", "weight", "max-running-jobs", "max-evaluations-per-day"}, {"help"});
  if (!args.ok() || args->Has("help") || args->positional.size() < 2) {
    if (!args.ok()) std::fprintf(stderr, "kevo admin: %s\n", std::string(args.status().message()).c_str());
    std::fputs(kAdminUsage, args.ok() && args->Has("help") ? stdout : stderr);
    return args.ok() && args->Has("help") ? 0 : 2;
  }
  const std::string address = args->Get("coordinator", kDefaultCoordinator);
  const std::string noun = args->positional[0], verb = args->positional[1];
  const std::string name = args->positional.size() > 2 ? args->positional[2] : "";
  auto stub = v1::AdminService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  auto need_name = [&](const char* what) {
    if (!name.empty() && args->positional.size() == 3) return true;
    std::fprintf(stderr, "kevo admin %s %s: give one %s\n%s", noun.c_str(), verb.c_str(), what, kAdminUsage);
    return false;
  };
  if (noun == "team" && verb == "create") {
    if (!need_name("team name")) return 2;
    v1::CreateTeamRequest req;
    req.set_name(name);
    double weight = 1;
    if (args->Has("weight") && (!absl::SimpleAtod(args->Get("weight"), &weight) || weight <= 0)) {
      std::fprintf(stderr, "kevo admin: --weight must be a positive number\n");
      return 2;
    }
    req.set_weight(weight);
    auto jobs = ParseIntFlag(*args, "max-running-jobs", 0);
    auto evals = ParseIntFlag(*args, "max-evaluations-per-day", 0);
    if (!jobs.ok() || !evals.ok()) {
      std::fprintf(stderr, "kevo admin: %s\n",
                   std::string((jobs.ok() ? evals.status() : jobs.status()).message()).c_str());
      return 2;
    }
    req.set_max_running_jobs(static_cast<int32_t>(*jobs));
    req.set_max_evaluations_per_day(static_cast<int32_t>(*evals));
    v1::TeamToken resp;
    grpc::Status st = stub->CreateTeam(&ctx, req, &resp);
    if (!st.ok()) return Fail(address, st);
    PrintToken("team", resp.team().name(), resp.token());
    return 0;
  }
  if (noun == "team" && verb == "list") {
    v1::ListTeamsResponse resp;
    grpc::Status st = stub->ListTeams(&ctx, v1::ListTeamsRequest(), &resp);
    if (!st.ok()) return Fail(address, st);
    std::printf("%-20s %7s %17s %24s %s\n", "TEAM", "WEIGHT", "MAX RUNNING JOBS", "MAX EVALUATIONS PER DAY", "CREATED");
    for (const auto& t : resp.teams()) {
      std::printf("%-20s %7.2f %17s %24s %s\n", t.name().c_str(), t.weight(), Limit(t.max_running_jobs()).c_str(),
                  Limit(t.max_evaluations_per_day()).c_str(),
                  absl::FormatTime("%Y-%m-%d %H:%M", absl::FromUnixMicros(t.created_unix_micros()), absl::UTCTimeZone())
                      .c_str());
    }
    return 0;
  }
  if (noun == "team" && verb == "rotate") {
    if (!need_name("team name")) return 2;
    v1::RotateTeamTokenRequest req;
    req.set_name(name);
    v1::TeamToken resp;
    grpc::Status st = stub->RotateTeamToken(&ctx, req, &resp);
    if (!st.ok()) return Fail(address, st);
    PrintToken("team", resp.team().name(), resp.token());
    return 0;
  }
  if (noun == "team" && verb == "revoke") {
    if (!need_name("team name")) return 2;
    v1::RevokeTeamTokensRequest req;
    req.set_name(name);
    v1::RevokeTeamTokensResponse resp;
    grpc::Status st = stub->RevokeTeamTokens(&ctx, req, &resp);
    if (!st.ok()) return Fail(address, st);
    std::printf("team %s: %d token(s) revoked; `kevo admin team rotate %s` issues a new one\n", name.c_str(),
                resp.revoked(), name.c_str());
    return 0;
  }
  if (noun == "worker-token" && verb == "create") {
    if (!need_name("token name")) return 2;
    v1::CreateWorkerTokenRequest req;
    req.set_name(name);
    v1::WorkerToken resp;
    grpc::Status st = stub->CreateWorkerToken(&ctx, req, &resp);
    if (!st.ok()) return Fail(address, st);
    PrintToken("worker token", resp.name(), resp.token());
    return 0;
  }
  if (noun == "worker" && verb == "revoke") {
    if (!need_name("worker id")) return 2;
    v1::RevokeWorkerRequest req;
    req.set_worker_id(name);
    v1::RevokeWorkerResponse resp;
    grpc::Status st = stub->RevokeWorker(&ctx, req, &resp);
    if (!st.ok()) return Fail(address, st);
    std::printf("worker %s revoked (its token %s no longer works; its leases returned to the queue)\n", name.c_str(),
                resp.token_name().c_str());
    return 0;
  }
  std::fprintf(stderr, "kevo admin: unknown command '%s %s'\n%s", noun.c_str(), verb.c_str(), kAdminUsage);
  return 2;
}

}  // namespace kevo::cli
