// Who may call the coordinator: teams, their bearer tokens, worker tokens and
// the admin token (docs/security.md). Tokens are random 256-bit strings
// handed out once; only their SHA-256 is stored (RocksDB family `auth`), and
// every token is checked against an in-memory copy of those records, so a
// revocation takes effect on the next call.
//
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

#include "coordinator/store/store.h"
#include "kevo/v1/admin.pb.h"

namespace kevo::auth {

// The caller a token proves.
struct Principal {
  v1::TokenKind kind = v1::TOKEN_KIND_UNSPECIFIED;
  std::string team;        // TOKEN_TEAM
  std::string name;        // TOKEN_WORKER: the token's name
  std::string token_hash;  // empty for the open (no --auth) principal
  bool admin() const { return kind == v1::TOKEN_ADMIN; }
};

// The principal of every call when authentication is off: an admin with no team.
Principal OpenPrincipal();

// "kevo_" and 43 base64url characters (32 bytes from the OS's CSPRNG).
std::string NewToken();

// The token of an `authorization` metadata value "Bearer <token>";
// Unauthenticated when it is missing or malformed.
absl::StatusOr<std::string> BearerToken(absl::string_view header);

class Authority {
 public:
  // Loads every team and token record from `store` (which must outlive it).
  static absl::StatusOr<std::unique_ptr<Authority>> Open(store::Store* store);

  // The principal `token` proves. Unauthenticated (without saying which
  // part failed) for an unknown or revoked token.
  absl::StatusOr<Principal> Authenticate(const std::string& token) const;
  // True while the token with this hash is known and not revoked.
  bool Valid(const std::string& token_hash) const;

  // Reads the admin token from `path`, or, when the file does not exist,
  // creates one, stores its hash and writes it there (mode 0600). Returns
  // true when it created one. A token in the file that the store does not
  // know is registered (an operator-provided admin token).
  absl::StatusOr<bool> EnsureAdminToken(const std::string& path);

  // InvalidArgument for a bad name or limits, AlreadyExists for a taken name.
  absl::StatusOr<v1::TeamToken> CreateTeam(const v1::CreateTeamRequest& request);
  std::vector<v1::Team> ListTeams() const;
  // NotFound for an unknown team.
  absl::StatusOr<v1::Team> GetTeam(const std::string& name) const;
  // Revokes every token of the team and issues a new one.
  absl::StatusOr<v1::TeamToken> RotateTeamToken(const std::string& name);
  // Revokes every token of the team; returns how many were live.
  absl::StatusOr<int> RevokeTeamTokens(const std::string& name);

  // Counts one evaluation against the team's max_evaluations_per_day (a UTC
  // day); ResourceExhausted, saying when the quota resets, once it is spent.
  // Teams without that limit, and the empty team, always pass.
  absl::Status ChargeEvaluation(const std::string& team);
  // ResourceExhausted when the team's quota for today is spent (charges nothing).
  absl::Status CheckEvaluationQuota(const std::string& team) const;

  // InvalidArgument for a bad name.
  absl::StatusOr<v1::WorkerToken> CreateWorkerToken(const std::string& name);
  // Revokes one token by its hash (a worker's); NotFound when unknown.
  absl::Status RevokeToken(const std::string& token_hash, const std::string& why);
  // The record of a token hash; NotFound when unknown.
  absl::StatusOr<v1::TokenRecord> Token(const std::string& token_hash) const;

 private:
  explicit Authority(store::Store* store) : store_(store) {}
  // Adds `record` (stamped with its creation time) for a new token to
  // `batch` and returns the token's text.
  absl::StatusOr<std::string> IssueLocked(v1::TokenRecord* record, store::Batch* batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> RevokeTeamLocked(const std::string& name, const std::string& why, store::Batch* batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  mutable absl::Mutex mu_;
  std::map<std::string, v1::TokenRecord> tokens_ ABSL_GUARDED_BY(mu_);  // by SHA-256 hex
  std::map<std::string, v1::Team> teams_ ABSL_GUARDED_BY(mu_);          // by name
  // Evaluations charged today, by team: the UTC day ("20261202") and count.
  mutable std::map<std::string, std::pair<std::string, int64_t>> usage_ ABSL_GUARDED_BY(mu_);
  // The usage_ entry of `team` for today, read from the store on first use.
  std::pair<std::string, int64_t>& UsageLocked(const std::string& team) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status QuotaErrorLocked(const v1::Team& team) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace kevo::auth
