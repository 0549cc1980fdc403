#include "coordinator/auth/authority.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include <openssl/rand.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"

namespace kevo::auth {
namespace {

constexpr char kTokenPrefix[] = "auth/token/";
constexpr char kTeamPrefix[] = "auth/team/";
constexpr int kMaxNameLength = 63;

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

absl::Status CheckName(const std::string& what, const std::string& name) {
  bool ok =
      !name.empty() && name.size() <= kMaxNameLength && (absl::ascii_islower(name[0]) || absl::ascii_isdigit(name[0]));
  for (char c : name) {
    ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " name '", name, "' is not valid: 1 to 63 of a-z, 0-9, '-' and '_', starting with a letter or digit"));
}

}  // namespace

Principal OpenPrincipal() {
  Principal p;
  p.kind = v1::TOKEN_ADMIN;
  return p;
}

std::string NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    LogError("RAND_bytes failed: no token can be made");
    std::abort();
  }
  return absl::StrCat("kevo_",
                      absl::WebSafeBase64Escape(std::string(reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

absl::StatusOr<std::string> BearerToken(absl::string_view header) {
  if (header.empty()) {
    return absl::UnauthenticatedError(
        "no credentials: send 'authorization: Bearer <token>' (the CLI reads KEVO_TOKEN or "
        "--token-file)");
  }
  absl::string_view rest = header;
  if (!absl::ConsumePrefix(&rest, "Bearer ") && !absl::ConsumePrefix(&rest, "bearer ")) {
    return absl::UnauthenticatedError("the authorization header is not 'Bearer <token>'");
  }
  rest = absl::StripAsciiWhitespace(rest);
  if (rest.empty()) return absl::UnauthenticatedError("the bearer token is empty");
  return std::string(rest);
}

absl::StatusOr<std::unique_ptr<Authority>> Authority::Open(store::Store* store) {
  std::unique_ptr<Authority> a(new Authority(store));
  absl::MutexLock l(&a->mu_);
  absl::Status bad = absl::OkStatus();
  absl::Status s = store->Scan(store::Family::kAuth, "auth/", [&](std::string_view k, std::string_view value) {
    const std::string key(k);
    absl::string_view rest = key;
    if (absl::ConsumePrefix(&rest, kTokenPrefix)) {
      v1::TokenRecord r;
      if (!r.ParseFromString(std::string(value))) bad = absl::DataLossError(absl::StrCat("unreadable ", key));
      a->tokens_[std::string(rest)] = std::move(r);
    } else if (absl::ConsumePrefix(&rest, kTeamPrefix)) {
      v1::Team t;
      if (!t.ParseFromString(std::string(value))) bad = absl::DataLossError(absl::StrCat("unreadable ", key));
      a->teams_[std::string(rest)] = std::move(t);
    }
    return bad.ok();
  });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  return a;
}

absl::StatusOr<Principal> Authority::Authenticate(const std::string& token) const {
  const std::string hash = Sha256Hex(token);
  absl::MutexLock l(&mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end() || it->second.revoked()) {
    return absl::UnauthenticatedError("the token is not valid (unknown, revoked or rotated)");
  }
  Principal p;
  p.kind = it->second.kind();
  p.team = it->second.team();
  p.name = it->second.name();
  p.token_hash = hash;
  return p;
}

bool Authority::Valid(const std::string& token_hash) const {
  absl::MutexLock l(&mu_);
  auto it = tokens_.find(token_hash);
  return it != tokens_.end() && !it->second.revoked();
}

absl::StatusOr<std::string> Authority::IssueLocked(v1::TokenRecord* record, store::Batch* batch) {
  std::string token = NewToken();
  record->set_created_unix_micros(NowMicros());
  batch->Put(store::Family::kAuth, absl::StrCat(kTokenPrefix, Sha256Hex(token)), record->SerializeAsString());
  return token;
}

absl::StatusOr<bool> Authority::EnsureAdminToken(const std::string& path) {
  std::ifstream in(path);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string token(absl::StripAsciiWhitespace(ss.str()));
    if (token.size() < 24) {
      return absl::InvalidArgumentError(absl::StrCat("the admin token in ", path, " is shorter than 24 characters"));
    }
    const std::string hash = Sha256Hex(token);
    absl::MutexLock l(&mu_);
    auto it = tokens_.find(hash);
    if (it != tokens_.end()) {
      if (it->second.revoked() || it->second.kind() != v1::TOKEN_ADMIN) {
        return absl::PermissionDeniedError(absl::StrCat("the token in ", path, " is not a live admin token"));
      }
      return false;
    }
    v1::TokenRecord r;
    r.set_kind(v1::TOKEN_ADMIN);
    r.set_name("admin");
    r.set_created_unix_micros(NowMicros());
    KEVO_RETURN_IF_ERROR(
        store_->Put(store::Family::kAuth, absl::StrCat(kTokenPrefix, hash), r.SerializeAsString(), /*sync=*/true));
    tokens_[hash] = r;
    return false;
  }
  absl::MutexLock l(&mu_);
  v1::TokenRecord r;
  r.set_kind(v1::TOKEN_ADMIN);
  r.set_name("admin");
  store::Batch batch;
  KEVO_ASSIGN_OR_RETURN(std::string token, IssueLocked(&r, &batch));
  // Write the file first (exclusive, 0600): a token that never reached its
  // file must not be live.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("create admin token file ", path, ": ", std::strerror(errno)));
  }
  const std::string line = token + "\n";
  const bool wrote = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!wrote) {
    ::unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("write admin token file ", path));
  }
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  tokens_[Sha256Hex(token)] = r;
  return true;
}

absl::StatusOr<v1::TeamToken> Authority::CreateTeam(const v1::CreateTeamRequest& request) {
  KEVO_RETURN_IF_ERROR(CheckName("team", request.name()));
  if (request.weight() < 0 || request.max_running_jobs() < 0 || request.max_evaluations_per_day() < 0) {
    return absl::InvalidArgumentError("a team's weight and limits must not be negative");
  }
  absl::MutexLock l(&mu_);
  if (teams_.count(request.name())) {
    return absl::AlreadyExistsError(absl::StrCat("team ", request.name(), " exists"));
  }
  v1::Team team;
  team.set_name(request.name());
  team.set_weight(request.weight() > 0 ? request.weight() : 1.0);
  team.set_max_running_jobs(request.max_running_jobs());
  team.set_max_evaluations_per_day(request.max_evaluations_per_day());
  team.set_created_unix_micros(NowMicros());
  team.set_token_generation(1);
  store::Batch batch;
  batch.Put(store::Family::kAuth, absl::StrCat(kTeamPrefix, team.name()), team.SerializeAsString());
  v1::TokenRecord r;
  r.set_kind(v1::TOKEN_TEAM);
  r.set_team(team.name());
  KEVO_ASSIGN_OR_RETURN(std::string token, IssueLocked(&r, &batch));
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  tokens_[Sha256Hex(token)] = r;
  teams_[team.name()] = team;
  LogInfo("team ", team.name(), " created (weight ", team.weight(), ")");
  v1::TeamToken out;
  *out.mutable_team() = team;
  out.set_token(token);
  return out;
}

std::vector<v1::Team> Authority::ListTeams() const {
  absl::MutexLock l(&mu_);
  std::vector<v1::Team> out;
  for (const auto& [name, t] : teams_) out.push_back(t);
  return out;
}

absl::StatusOr<v1::Team> Authority::GetTeam(const std::string& name) const {
  absl::MutexLock l(&mu_);
  auto it = teams_.find(name);
  if (it == teams_.end()) return absl::NotFoundError(absl::StrCat("no team ", name));
  return it->second;
}

absl::StatusOr<int> Authority::RevokeTeamLocked(const std::string& name, const std::string& why, store::Batch* batch) {
  if (!teams_.count(name)) return absl::NotFoundError(absl::StrCat("no team ", name));
  int n = 0;
  for (const auto& [hash, r] : tokens_) {
    if (r.kind() != v1::TOKEN_TEAM || r.team() != name || r.revoked()) continue;
    v1::TokenRecord revoked = r;
    revoked.set_revoked(true);
    revoked.set_revoked_unix_micros(NowMicros());
    revoked.set_revoked_why(why);
    batch->Put(store::Family::kAuth, absl::StrCat(kTokenPrefix, hash), revoked.SerializeAsString());
    ++n;
  }
  return n;
}

absl::StatusOr<v1::TeamToken> Authority::RotateTeamToken(const std::string& name) {
  absl::MutexLock l(&mu_);
  store::Batch batch;
  KEVO_RETURN_IF_ERROR(RevokeTeamLocked(name, "rotated", &batch).status());
  v1::Team team = teams_[name];
  team.set_token_generation(team.token_generation() + 1);
  batch.Put(store::Family::kAuth, absl::StrCat(kTeamPrefix, name), team.SerializeAsString());
  v1::TokenRecord r;
  r.set_kind(v1::TOKEN_TEAM);
  r.set_team(name);
  KEVO_ASSIGN_OR_RETURN(std::string token, IssueLocked(&r, &batch));
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  for (const auto& op : batch.ops()) {
    absl::string_view rest = op.key;
    if (absl::ConsumePrefix(&rest, kTokenPrefix)) tokens_[std::string(rest)].ParseFromString(*op.value);
  }
  teams_[name] = team;
  LogInfo("team ", name, ": token rotated (generation ", team.token_generation(), ")");
  v1::TeamToken out;
  *out.mutable_team() = team;
  out.set_token(token);
  return out;
}

absl::StatusOr<int> Authority::RevokeTeamTokens(const std::string& name) {
  absl::MutexLock l(&mu_);
  store::Batch batch;
  KEVO_ASSIGN_OR_RETURN(int n, RevokeTeamLocked(name, "revoked", &batch));
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  for (const auto& op : batch.ops()) {
    absl::string_view rest = op.key;
    if (absl::ConsumePrefix(&rest, kTokenPrefix)) tokens_[std::string(rest)].ParseFromString(*op.value);
  }
  LogInfo("team ", name, ": ", n, " token(s) revoked");
  return n;
}

namespace {

std::string UtcDay(absl::Time t) { return absl::FormatTime("%Y%m%d", t, absl::UTCTimeZone()); }

}  // namespace

std::pair<std::string, int64_t>& Authority::UsageLocked(const std::string& team) const {
  const std::string today = UtcDay(absl::Now());
  auto& u = usage_[team];
  if (u.first != today) {
    u = {today, 0};
    auto stored = store_->Get(store::Family::kAuth, absl::StrCat("auth/usage/", team, "/", today));
    if (stored.ok() && stored->has_value()) {
      int64_t n = 0;
      if (absl::SimpleAtoi(**stored, &n)) u.second = n;
    }
  }
  return u;
}

absl::Status Authority::QuotaErrorLocked(const v1::Team& team) const {
  const absl::Time now = absl::Now();
  const absl::CivilDay tomorrow = absl::ToCivilDay(now, absl::UTCTimeZone()) + 1;
  const absl::Duration left = absl::FromCivil(tomorrow, absl::UTCTimeZone()) - now;
  return absl::ResourceExhaustedError(
      absl::StrCat("team ", team.name(), " has used its ", team.max_evaluations_per_day(),
                   " evaluations for today (max_evaluations_per_day); the quota resets at 00:00 UTC, in ",
                   absl::FormatDuration(absl::Trunc(left, absl::Minutes(1)))));
}

absl::Status Authority::CheckEvaluationQuota(const std::string& name) const {
  absl::MutexLock l(&mu_);
  auto t = teams_.find(name);
  if (t == teams_.end() || t->second.max_evaluations_per_day() <= 0) return absl::OkStatus();
  if (UsageLocked(name).second >= t->second.max_evaluations_per_day()) return QuotaErrorLocked(t->second);
  return absl::OkStatus();
}

absl::Status Authority::ChargeEvaluation(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto t = teams_.find(name);
  if (t == teams_.end() || t->second.max_evaluations_per_day() <= 0) return absl::OkStatus();
  auto& u = UsageLocked(name);
  if (u.second >= t->second.max_evaluations_per_day()) return QuotaErrorLocked(t->second);
  ++u.second;
  // Not synced: a crash may forget the last few charges, never a stored evaluation.
  absl::Status s = store_->Put(store::Family::kAuth, absl::StrCat("auth/usage/", name, "/", u.first),
                               absl::StrCat(u.second), /*sync=*/false);
  if (!s.ok()) LogWarning("team ", name, ": recording usage: ", s.ToString());
  return absl::OkStatus();
}

absl::StatusOr<v1::WorkerToken> Authority::CreateWorkerToken(const std::string& name) {
  KEVO_RETURN_IF_ERROR(CheckName("worker token", name));
  absl::MutexLock l(&mu_);
  v1::TokenRecord r;
  r.set_kind(v1::TOKEN_WORKER);
  r.set_name(name);
  store::Batch batch;
  KEVO_ASSIGN_OR_RETURN(std::string token, IssueLocked(&r, &batch));
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));
  tokens_[Sha256Hex(token)] = r;
  LogInfo("worker token ", name, " created");
  v1::WorkerToken out;
  out.set_name(name);
  out.set_token(token);
  return out;
}

absl::Status Authority::RevokeToken(const std::string& token_hash, const std::string& why) {
  absl::MutexLock l(&mu_);
  auto it = tokens_.find(token_hash);
  if (it == tokens_.end()) return absl::NotFoundError("no such token");
  v1::TokenRecord r = it->second;
  r.set_revoked(true);
  r.set_revoked_unix_micros(NowMicros());
  r.set_revoked_why(why);
  KEVO_RETURN_IF_ERROR(
      store_->Put(store::Family::kAuth, absl::StrCat(kTokenPrefix, token_hash), r.SerializeAsString(), /*sync=*/true));
  it->second = r;
  LogInfo("token ", r.name().empty() ? r.team() : r.name(), " revoked: ", why);
  return absl::OkStatus();
}

absl::StatusOr<v1::TokenRecord> Authority::Token(const std::string& token_hash) const {
  absl::MutexLock l(&mu_);
  auto it = tokens_.find(token_hash);
  if (it == tokens_.end()) return absl::NotFoundError("no such token");
  return it->second;
}

}  // namespace kevo::auth
