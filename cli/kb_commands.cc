// `kevo kb search|import` and `kevo skills`: the knowledge base and skill
// memory. search and skills ask a running coordinator (JobService
// SearchKnowledge / ListSkills, `--coordinator`, the default) or read a
// RocksDB folder offline (`--db`: the folder of `kevo run --db` or of a
// stopped coordinator); `kevo kb search --kb DIR` searches a kb folder in a
// temporary store. import writes into a --db folder.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/kb/kb.h"
#include "coordinator/server/knowledge.h"
#include "coordinator/skills/skills.h"
#include "coordinator/store/store.h"

namespace kevo::cli {
namespace {

constexpr char kKbUsage[] =
    "usage: kevo kb search QUERY... [--platform P] [--family F] [--bottleneck B] [--limit N]\n"
    "                               [--json] [--coordinator ADDR | --kb DIR | --db DIR]\n"
    "       kevo kb import [DIR] --db DIR\n"
    "search: ranked knowledge-base documents (BM25) for QUERY, filtered by platform\n"
    "  (cpu|nvidia|amd|mtia-sim), op family and bottleneck (memory|compute|latency|compile|\n"
    "  wrong-answer|nan|crash|timeout): what the LLM prompts retrieve. --limit: at most N\n"
    "  documents (default 5). Asks the coordinator at ADDR (default 127.0.0.1:50051), which\n"
    "  searches the documents it imported at start. Offline: --kb DIR searches DIR (e.g. the\n"
    "  project's docs/kb) in a temporary store; --db DIR imports --kb (default the project's\n"
    "  docs/kb) into that store first (not while a coordinator runs on it).\n"
    "import: imports DIR (default the project's docs/kb) into the store in --db, as a\n"
    "  coordinator does at start; files whose content changed are re-imported.\n";

constexpr char kSkillsUsage[] =
    "usage: kevo skills [--coordinator ADDR | --db DIR] [--platform P] [--family F] [--limit N]\n"
    "                   [--json]\n"
    "Lists the skills distilled from finished jobs (what raised fitness, by platform and op\n"
    "family), best first, at most N (default 20). From the coordinator at ADDR (default\n"
    "127.0.0.1:50051), or with --db from the folder given to `kevo run --db` or\n"
    "kevo-coordinator --db (not while a coordinator runs on it).\n";

// A temporary folder removed when this goes out of scope.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Create() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kevo-kb-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    }
    return ScratchDir(tmpl);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

absl::StatusOr<std::string> KbDir(const ParsedArgs& args, const std::string& positional) {
  if (!positional.empty()) return positional;
  if (args.Has("kb")) return args.Get("kb");
  return kb::DefaultKbDir();
}

// --coordinator with an offline flag is an error.
absl::Status OneSource(const ParsedArgs& args, std::initializer_list<const char*> offline) {
  if (!args.Has("coordinator")) return absl::OkStatus();
  for (const char* flag : offline) {
    if (args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--coordinator asks a running coordinator, --", flag, " reads offline: give one"));
    }
  }
  return absl::OkStatus();
}

// The documents for `req`, searched offline: the kb folder imported into
// --db, or into a temporary store.
absl::StatusOr<v1::SearchKnowledgeResponse> SearchOffline(const ParsedArgs& args,
                                                          const v1::SearchKnowledgeRequest& req) {
  std::optional<ScratchDir> scratch;
  std::string store_dir;
  if (args.Has("db")) {
    store_dir = StoreDir(args.Get("db"));
  } else {
    KEVO_ASSIGN_OR_RETURN(ScratchDir s, ScratchDir::Create());
    scratch.emplace(std::move(s));
    store_dir = scratch->path();
  }
  KEVO_ASSIGN_OR_RETURN(auto store, store::Store::Open(store_dir));
  KEVO_ASSIGN_OR_RETURN(std::string dir, KbDir(args, ""));
  KEVO_RETURN_IF_ERROR(kb::ImportDirectory(store.get(), dir).status());
  KEVO_ASSIGN_OR_RETURN(auto base, kb::OpenKnowledgeBase(store.get()));
  return coordinator::SearchKnowledge({.kb = base.get()}, req);
}

int KbSearch(const ParsedArgs& args) {
  if (args.positional.size() < 2) {
    std::fputs(kKbUsage, stderr);
    return 2;
  }
  if (absl::Status s = OneSource(args, {"kb", "db"}); !s.ok()) return Fail("kb search", s);
  v1::SearchKnowledgeRequest req;
  req.set_query(absl::StrJoin(args.positional.begin() + 1, args.positional.end(), " "));
  req.set_platform(args.Get("platform"));
  req.set_family(args.Get("family"));
  req.set_bottleneck(args.Get("bottleneck"));
  auto limit = ParseIntFlag(args, "limit", 0);
  if (!limit.ok()) return Fail("kb search", limit.status());
  req.set_limit(static_cast<int32_t>(*limit));

  absl::StatusOr<v1::SearchKnowledgeResponse> hits;
  if (args.Has("kb") || args.Has("db")) {
    hits = SearchOffline(args, req);
  } else {
    hits = CallCoordinator(args.Get("coordinator", kDefaultCoordinator), &v1::JobService::Stub::SearchKnowledge, req);
  }
  if (!hits.ok()) return Fail("kb search", hits.status());

  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::KbDocument& d : hits->documents()) {
      out.push_back(
          {{"id", d.id()}, {"title", d.title()}, {"path", d.path()}, {"score", d.score()}, {"snippet", d.snippet()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (hits->documents().empty()) {
    std::printf("no documents match\n");
    return 0;
  }
  for (int i = 0; i < hits->documents_size(); ++i) {
    const v1::KbDocument& d = hits->documents(i);
    std::printf("%d. %s  (%s, score %.2f)\n   %s\n", i + 1, d.title().c_str(), d.path().c_str(), d.score(),
                d.snippet().c_str());
  }
  return 0;
}

int KbImport(const ParsedArgs& args) {
  if (args.Has("coordinator")) {
    return Fail("kb import",
                absl::InvalidArgumentError("a running coordinator imports its --kb folder when it starts; "
                                           "restart it to re-import (kb import writes into a --db folder)"));
  }
  if (!args.Has("db")) {
    std::fprintf(stderr, "kevo kb import: --db is required\n%s", kKbUsage);
    return 2;
  }
  auto dir = KbDir(args, args.positional.size() > 1 ? args.positional[1] : "");
  if (!dir.ok()) return Fail("kb import", dir.status());
  auto store = store::Store::Open(StoreDir(args.Get("db")));
  if (!store.ok()) return Fail("kb import", store.status());
  auto stats = kb::ImportDirectory(store->get(), *dir);
  if (!stats.ok()) return Fail("kb import", stats.status());
  std::printf("imported %s: %d added, %d updated, %d unchanged, %d removed\n", dir->c_str(), stats->added,
              stats->updated, stats->unchanged, stats->removed);
  return 0;
}

}  // namespace

int KbCommand(const std::vector<std::string>& argv) {
  auto args =
      ParseArgs(argv, {"platform", "family", "bottleneck", "limit", "kb", "db", "coordinator"}, {"json", "help"});
  if (!args.ok()) return Fail("kb", args.status());
  if (args->Has("help") || args->positional.empty()) {
    std::fputs(kKbUsage, args->Has("help") ? stdout : stderr);
    return args->Has("help") ? 0 : 2;
  }
  const std::string& sub = args->positional[0];
  if (sub == "search") return KbSearch(*args);
  if (sub == "import") return KbImport(*args);
  std::fprintf(stderr, "kevo kb: unknown subcommand '%s'\n%s", sub.c_str(), kKbUsage);
  return 2;
}

namespace {

// Skill memory offline, from the store in --db.
absl::StatusOr<v1::ListSkillsResponse> SkillsOffline(const std::string& db, const v1::ListSkillsRequest& req) {
  KEVO_ASSIGN_OR_RETURN(auto store, store::Store::Open(StoreDir(db)));
  KEVO_ASSIGN_OR_RETURN(auto skill_store, skills::SkillStore::Create(store.get()));
  return coordinator::ListSkills({.skills = skill_store.get()}, req);
}

}  // namespace

int SkillsCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"platform", "family", "limit", "db", "coordinator"}, {"json", "help"});
  if (!args.ok()) return Fail("skills", args.status());
  if (args->Has("help")) {
    std::fputs(kSkillsUsage, stdout);
    return 0;
  }
  if (!args->positional.empty()) {
    std::fputs(kSkillsUsage, stderr);
    return 2;
  }
  if (absl::Status s = OneSource(*args, {"db"}); !s.ok()) return Fail("skills", s);
  v1::ListSkillsRequest req;
  req.set_platform(args->Get("platform"));
  req.set_family(args->Get("family"));
  auto limit = ParseIntFlag(*args, "limit", 0);
  if (!limit.ok()) return Fail("skills", limit.status());
  req.set_limit(static_cast<int32_t>(*limit));

  absl::StatusOr<v1::ListSkillsResponse> found;
  if (args->Has("db")) {
    found = SkillsOffline(args->Get("db"), req);
  } else {
    found = CallCoordinator(args->Get("coordinator", kDefaultCoordinator), &v1::JobService::Stub::ListSkills, req);
  }
  if (!found.ok()) return Fail("skills", found.status());

  if (args->Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Skill& s : found->skills()) {
      out.push_back({{"platform", s.platform()},
                     {"family", s.family()},
                     {"transformation", s.transformation()},
                     {"mean_gain", s.mean_gain()},
                     {"evidence_count", s.evidence_count()},
                     {"node_ids", std::vector<std::string>(s.node_ids().begin(), s.node_ids().end())},
                     {"summary", s.summary()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (found->skills().empty()) {
    std::printf("no skills yet (they are distilled when a job ends)\n");
    return 0;
  }
  std::printf("%-9s %-12s %7s %5s  %s\n", "PLATFORM", "FAMILY", "GAIN", "STEPS", "TRANSFORMATION");
  for (const v1::Skill& s : found->skills()) {
    std::printf("%-9s %-12s %6.2fx %5d  %s\n", s.platform().c_str(), s.family().c_str(), s.mean_gain(),
                s.evidence_count(), s.transformation().c_str());
    // The summary says whether the skill seeds new jobs, and why not.
    if (!s.summary().empty()) std::printf("    %s\n", s.summary().c_str());
  }
  return 0;
}

}  // namespace kevo::cli
