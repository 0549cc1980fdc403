// `kevo kb search|import` and `kevo skills`: the knowledge base and skill
// memory read straight from a RocksDB folder (the --db of `kevo run`, or a
// stopped coordinator's --db); `kevo kb search` without --db searches the
// project's docs/kb in a temporary store.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include "common/status.h"
#include "coordinator/kb/kb.h"
#include "coordinator/skills/skills.h"
#include "coordinator/store/store.h"

namespace kevo::cli {
namespace {

constexpr char kKbUsage[] =
    "usage: kevo kb search QUERY... [--platform P] [--family F] [--bottleneck B] [--limit N]\n"
    "                               [--json] [--kb DIR] [--db DIR]\n"
    "       kevo kb import [DIR] --db DIR\n"
    "search: ranked knowledge-base documents (BM25) for QUERY, filtered by platform\n"
    "  (cpu|nvidia|amd|mtia-sim), op family and bottleneck (memory|compute|latency|compile|\n"
    "  wrong-answer|nan|crash|timeout). The documents (--kb, default the project's docs/kb)\n"
    "  are imported first, into --db when given, else into a temporary store.\n"
    "import: imports DIR (default the project's docs/kb) into the store in --db, as a\n"
    "  coordinator does at start; files whose content changed are re-imported.\n";

constexpr char kSkillsUsage[] =
    "usage: kevo skills --db DIR [--platform P] [--family F] [--limit N] [--json]\n"
    "Lists the skills distilled from finished jobs (what raised fitness, by platform and op\n"
    "family), best first. DIR is the folder given to `kevo run --db` or kevo-coordinator --db\n"
    "(a running coordinator holds its store: stop it first).\n";

// The RocksDB folder under --db: `kevo run --db D` keeps it in D/db, a
// coordinator in D itself.
std::string StoreDir(const std::string& db) {
  std::error_code ec;
  return std::filesystem::is_directory(db + "/db", ec) ? db + "/db" : db;
}

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

int KbSearch(const ParsedArgs& args) {
  if (args.positional.size() < 2) {
    std::fputs(kKbUsage, stderr);
    return 2;
  }
  kb::KbQuery q;
  q.text = absl::StrJoin(args.positional.begin() + 1, args.positional.end(), " ");
  q.platform = args.Get("platform");
  q.family = args.Get("family");
  q.bottleneck = args.Get("bottleneck");
  auto limit = ParseIntFlag(args, "limit", 5);
  if (!limit.ok()) return Fail("kb search", limit.status());
  q.limit = static_cast<int>(*limit);

  std::optional<ScratchDir> scratch;
  std::string store_dir;
  if (args.Has("db")) {
    store_dir = StoreDir(args.Get("db"));
  } else {
    auto s = ScratchDir::Create();
    if (!s.ok()) return Fail("kb search", s.status());
    scratch.emplace(*std::move(s));
    store_dir = scratch->path();
  }
  auto store = store::Store::Open(store_dir);
  if (!store.ok()) return Fail("kb search", store.status());
  auto dir = KbDir(args, "");
  if (!dir.ok()) return Fail("kb search", dir.status());
  auto imported = kb::ImportDirectory(store->get(), *dir);
  if (!imported.ok()) return Fail("kb search", imported.status());
  auto base = kb::OpenKnowledgeBase(store->get());
  if (!base.ok()) return Fail("kb search", base.status());
  auto hits = (*base)->Search(q);
  if (!hits.ok()) return Fail("kb search", hits.status());

  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const kb::KbDoc& d : *hits) {
      out.push_back({{"id", d.id}, {"title", d.title}, {"path", d.path}, {"score", d.score},
                     {"snippet", kb::Snippet(d)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (hits->empty()) {
    std::printf("no documents match\n");
    return 0;
  }
  for (size_t i = 0; i < hits->size(); ++i) {
    const kb::KbDoc& d = (*hits)[i];
    std::printf("%zu. %s  (%s, score %.2f)\n   %s\n", i + 1, d.title.c_str(), d.path.c_str(),
                d.score, kb::Snippet(d).c_str());
  }
  return 0;
}

int KbImport(const ParsedArgs& args) {
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
  std::printf("imported %s: %d added, %d updated, %d unchanged, %d removed\n", dir->c_str(),
              stats->added, stats->updated, stats->unchanged, stats->removed);
  return 0;
}

}  // namespace

int KbCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"platform", "family", "bottleneck", "limit", "kb", "db"},
                        {"json", "help"});
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

int SkillsCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"platform", "family", "limit", "db"}, {"json", "help"});
  if (!args.ok()) return Fail("skills", args.status());
  if (args->Has("help")) {
    std::fputs(kSkillsUsage, stdout);
    return 0;
  }
  if (!args->Has("db")) {
    std::fprintf(stderr, "kevo skills: --db is required\n%s", kSkillsUsage);
    return 2;
  }
  auto limit = ParseIntFlag(*args, "limit", 20);
  if (!limit.ok()) return Fail("skills", limit.status());
  auto store = store::Store::Open(StoreDir(args->Get("db")));
  if (!store.ok()) return Fail("skills", store.status());
  auto skill_store = skills::SkillStore::Create(store->get());
  if (!skill_store.ok()) return Fail("skills", skill_store.status());
  auto found = (*skill_store)->SkillsFor(args->Get("platform"), args->Get("family"),
                                         static_cast<int>(*limit));
  if (!found.ok()) return Fail("skills", found.status());

  if (args->Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const skills::Skill& s : *found) {
      out.push_back({{"platform", s.platform}, {"family", s.family},
                     {"transformation", s.transformation}, {"mean_gain", s.mean_gain},
                     {"evidence_count", s.evidence_count}, {"node_ids", s.node_ids},
                     {"summary", s.summary}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (found->empty()) {
    std::printf("no skills yet (they are distilled when a job ends)\n");
    return 0;
  }
  std::printf("%-9s %-12s %7s %5s  %s\n", "PLATFORM", "FAMILY", "GAIN", "STEPS", "TRANSFORMATION");
  for (const skills::Skill& s : *found) {
    std::printf("%-9s %-12s %6.2fx %5d  %s\n", s.platform.c_str(), s.family.c_str(), s.mean_gain,
                s.evidence_count, s.transformation.c_str());
  }
  return 0;
}

}  // namespace kevo::cli
