#include "coordinator/kb/kb.h"

#include <xapian.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/task_loader.h"
#include "coordinator/store/store.h"

namespace kevo::kb {
namespace {

namespace fs = std::filesystem;

constexpr char kDocPrefix[] = "doc/";
// Xapian boolean-term prefixes of the three filters ("any" matches every value).
constexpr char kPlatformTerm[] = "XP";
constexpr char kFamilyTerm[] = "XF";
constexpr char kBottleneckTerm[] = "XB";
constexpr char kAny[] = "any";
absl::Status CheckFilter(const char* what, const std::string& value, const std::vector<std::string>& known) {
  if (value.empty() || std::find(known.begin(), known.end(), value) != known.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " '", value, "' (known: ", absl::StrJoin(known, ", "), ")"));
}

// A title word counts as much as this many body words.
constexpr int kTitleWeight = 6;
// The ranking score: the document's BM25 score over the query text, scaled so
// that the best match scores 1, plus kLabelBoost times how specifically its
// front matter names the query's bottleneck and op family, plus
// kPlatformBoost times the same for its platform (LabelSpecificity). The
// labels are what a document's author says it is for, which a short query's
// words say less reliably: without them general documents (performance
// guides) that mention everything outrank the one written for the problem.
// The platform weighs less so that the general guidance/ documents on a
// bottleneck (NaNs, crashes) still reach the first three. docs/benchmarks.md
// has the measurements (kb_retrieval_test) these weights come from.
constexpr double kLabelBoost = 0.8;
constexpr double kPlatformBoost = 0.3;
// The words of KbQuery::context weigh this much of those of KbQuery::text.
constexpr double kContextWeight = 0.3;
constexpr int kSnippetChars = 160;

// A document with its front matter parsed, as stored in the kb column family.
struct Stored {
  std::string path, title, text, hash;
  std::vector<std::string> platforms, families, bottlenecks, sources;

  std::string Serialize() const {
    return nlohmann::json{{"path", path},
                          {"title", title},
                          {"text", text},
                          {"hash", hash},
                          {"platforms", platforms},
                          {"families", families},
                          {"bottlenecks", bottlenecks},
                          {"sources", sources}}
        .dump();
  }
  static absl::StatusOr<Stored> Parse(std::string_view value) {
    try {
      auto j = nlohmann::json::parse(value);
      Stored s;
      s.path = j.at("path");
      s.title = j.at("title");
      s.text = j.at("text");
      s.hash = j.at("hash");
      s.platforms = j.at("platforms").get<std::vector<std::string>>();
      s.families = j.at("families").get<std::vector<std::string>>();
      s.bottlenecks = j.at("bottlenecks").get<std::vector<std::string>>();
      // Records imported before sources existed have none.
      s.sources = j.value("sources", std::vector<std::string>{});
      return s;
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(absl::StrCat("kb record unreadable: ", e.what()));
    }
  }
};

std::string Id(const std::string& path) {
  std::string id(path);
  if (absl::EndsWith(id, ".md")) id.resize(id.size() - 3);
  return id;
}

// "cpu, nvidia" or "[cpu, nvidia]" -> {"cpu", "nvidia"}, lower case.
std::vector<std::string> ParseList(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  absl::ConsumePrefix(&value, "[");
  absl::ConsumeSuffix(&value, "]");
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(item));
    if (!v.empty()) out.push_back(v);
  }
  return out;
}

// "Intel SDM, vol. 1; Agner Fog" -> {"Intel SDM, vol. 1", "Agner Fog"}: a
// source may hold commas, so sources are split on ';' and keep their case.
std::vector<std::string> ParseSources(absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(value, ';', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

// Front matter between "---" lines (title, platforms, families, bottlenecks);
// without one the title is the first "# " heading and the platform comes
// from the path (hardware/<platform>/...).
absl::StatusOr<Stored> ParseDocument(const std::string& rel_path, const std::string& content) {
  Stored d;
  d.path = rel_path;
  d.hash = Sha256Hex(content);
  absl::string_view body = content;
  if (absl::ConsumePrefix(&body, "---\n")) {
    const size_t end = body.find("\n---\n");
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("kb document ", rel_path, ": front matter has no closing '---' line"));
    }
    for (absl::string_view line : absl::StrSplit(body.substr(0, end), '\n', absl::SkipWhitespace())) {
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("kb document ", rel_path, ": front matter line '", line, "' is not 'key: value'"));
      }
      const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)));
      const absl::string_view value = line.substr(colon + 1);
      if (key == "title") {
        d.title = std::string(absl::StripAsciiWhitespace(value));
      } else if (key == "platforms" || key == "platform") {
        d.platforms = ParseList(value);
      } else if (key == "families" || key == "family" || key == "op_families") {
        d.families = ParseList(value);
      } else if (key == "bottlenecks" || key == "bottleneck") {
        d.bottlenecks = ParseList(value);
      } else if (key == "sources" || key == "source") {
        d.sources = ParseSources(value);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("kb document ", rel_path, ": unknown front matter key '", key,
                                                       "' (known: title, platforms, families, bottlenecks, sources)"));
      }
    }
    body = body.substr(end + 5);
  }
  d.text = std::string(absl::StripLeadingAsciiWhitespace(body));
  if (d.title.empty()) {
    std::istringstream in(d.text);
    for (std::string line; std::getline(in, line);) {
      if (absl::StartsWith(line, "# ")) {
        d.title = line.substr(2);
        break;
      }
    }
  }
  if (d.title.empty()) d.title = Id(rel_path);
  if (d.platforms.empty() && absl::StartsWith(rel_path, "hardware/")) {
    std::vector<std::string> parts = absl::StrSplit(rel_path, '/');
    if (parts.size() > 2) d.platforms = {parts[1] == "mtia" ? "mtia-sim" : parts[1]};
  }
  return d;
}

KbDoc ToKbDoc(const Stored& s) {
  KbDoc d;
  d.id = Id(s.path);
  d.title = s.title;
  d.path = s.path;
  d.text = s.text;
  d.platforms = s.platforms;
  d.families = s.families;
  d.bottlenecks = s.bottlenecks;
  d.sources = s.sources;
  return d;
}

// `text` with the parts of each identifier added after it: "log_softmax" is
// followed by "log softmax", "atomicAdd" by "atomic Add", "__syncthreads" by
// "syncthreads". Xapian keeps '_' inside a word and does not split case
// changes, so without this a query naming a task ("row_argmax") or an API
// ("cudaMemcpyAsync") would not match a document that says "argmax" or
// "memcpy", and the other way round. Applied to documents and queries alike.
std::string WithIdentifierParts(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  auto is_word = [](char c) { return absl::ascii_isalnum(c) || c == '_'; };
  size_t i = 0;
  while (i < text.size()) {
    if (!is_word(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    size_t end = i;
    while (end < text.size() && is_word(text[end])) ++end;
    const absl::string_view word = text.substr(i, end - i);
    out.append(word.data(), word.size());
    // Split on '_' and on a lower-case letter followed by an upper-case one.
    std::vector<std::string> parts(1);
    for (size_t k = 0; k < word.size(); ++k) {
      const char c = word[k];
      if (c == '_') {
        if (!parts.back().empty()) parts.emplace_back();
        continue;
      }
      if (k > 0 && absl::ascii_isupper(c) && absl::ascii_islower(word[k - 1]) && !parts.back().empty()) {
        parts.emplace_back();
      }
      parts.back().push_back(c);
    }
    if (parts.back().empty()) parts.pop_back();
    if (parts.size() > 1 || (parts.size() == 1 && parts[0].size() != word.size())) {
      out.append(" ");
      out.append(absl::StrJoin(parts, " "));
    }
    i = end;
  }
  return out;
}

// How specifically a document's front matter names `value` (a query's
// platform, bottleneck or op family): 1 / the number of labels it lists when
// `value` is among them, 0 when it is not or the document is for any value.
// A document written for one bottleneck answers a query with that label
// better than one that lists all eight.
double LabelSpecificity(const std::vector<std::string>& labels, const std::string& value) {
  if (value.empty() || labels.empty()) return 0;
  if (std::find(labels.begin(), labels.end(), value) == labels.end()) return 0;
  return 1.0 / static_cast<double>(labels.size());
}

void AddFilterTerms(Xapian::Document& doc, const char* prefix, const std::vector<std::string>& values) {
  if (values.empty()) doc.add_boolean_term(absl::StrCat(prefix, kAny));
  for (const std::string& v : values) doc.add_boolean_term(absl::StrCat(prefix, v));
}

// (prefix+value OR prefix+any), or MatchAll when `value` is empty.
Xapian::Query FilterQuery(const char* prefix, const std::string& value) {
  if (value.empty()) return Xapian::Query::MatchAll;
  return Xapian::Query(Xapian::Query::OP_OR, Xapian::Query(absl::StrCat(prefix, absl::AsciiStrToLower(value))),
                       Xapian::Query(absl::StrCat(prefix, kAny)));
}

// The first paragraph of `text` that is not a heading, shortened.
std::string FirstParagraph(const std::string& text) {
  for (absl::string_view para : absl::StrSplit(text, "\n\n", absl::SkipWhitespace())) {
    para = absl::StripAsciiWhitespace(para);
    if (para.empty() || para[0] == '#' || para[0] == '|') continue;
    std::string s(para);
    std::replace(s.begin(), s.end(), '\n', ' ');
    if (s.size() > kSnippetChars) s = s.substr(0, kSnippetChars - 3) + "...";
    return s;
  }
  return "";
}

class XapianKnowledgeBase final : public KnowledgeBase {
 public:
  explicit XapianKnowledgeBase(prometheus::Registry* registry) : db_(std::string(), Xapian::DB_BACKEND_INMEMORY) {
    if (registry == nullptr) return;
    searches_ = &prometheus::BuildCounter()
                     .Name("kevo_kb_searches_total")
                     .Help("Knowledge-base searches")
                     .Register(*registry)
                     .Add({});
    latency_ = &prometheus::BuildHistogram()
                    .Name("kevo_kb_search_seconds")
                    .Help("Knowledge-base search latency")
                    .Register(*registry)
                    .Add({}, prometheus::Histogram::BucketBoundaries{1e-4, 1e-3, 1e-2, 0.1, 1});
  }

  absl::Status Add(const Stored& s) {
    try {
      Xapian::Document doc;
      Xapian::TermGenerator gen;
      gen.set_stemmer(Xapian::Stem("en"));
      gen.set_document(doc);
      gen.index_text(WithIdentifierParts(s.title), kTitleWeight);
      gen.increase_termpos();
      gen.index_text(WithIdentifierParts(s.text));
      AddFilterTerms(doc, kPlatformTerm, s.platforms);
      AddFilterTerms(doc, kFamilyTerm, s.families);
      AddFilterTerms(doc, kBottleneckTerm, s.bottlenecks);
      doc.set_data(std::to_string(docs_.size()));
      db_.add_document(doc);
    } catch (const Xapian::Error& e) {
      return absl::InternalError(absl::StrCat("kb: indexing ", s.path, ": ", e.get_msg()));
    }
    docs_.push_back(s);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<KbDoc>> Search(const KbQuery& q) const override {
    if (absl::StripAsciiWhitespace(q.text).empty() && absl::StripAsciiWhitespace(q.context).empty() &&
        q.platform.empty() && q.family.empty() && q.bottleneck.empty()) {
      return absl::InvalidArgumentError("kb search: the query has no text and no filter");
    }
    KEVO_RETURN_IF_ERROR(CheckFilter("platform", q.platform, task::KnownPlatforms()));
    KEVO_RETURN_IF_ERROR(CheckFilter("bottleneck", q.bottleneck, KnownBottlenecks()));
    const absl::Time start = absl::Now();
    std::vector<KbDoc> out;
    absl::MutexLock l(&mu_);  // a Xapian database is not safe for concurrent use
    try {
      Xapian::QueryParser parser;
      parser.set_stemmer(Xapian::Stem("en"));
      parser.set_stemming_strategy(Xapian::QueryParser::STEM_SOME);
      parser.set_default_op(Xapian::Query::OP_OR);
      const bool has_text = !absl::StripAsciiWhitespace(q.text).empty();
      const bool has_context = !absl::StripAsciiWhitespace(q.context).empty();
      Xapian::Query text = has_text ? parser.parse_query(WithIdentifierParts(q.text), 0) : Xapian::Query();
      if (has_context) {
        text = Xapian::Query(Xapian::Query::OP_OR, text,
                             Xapian::Query(Xapian::Query::OP_SCALE_WEIGHT,
                                           parser.parse_query(WithIdentifierParts(q.context), 0), kContextWeight));
      }
      if (!has_text && !has_context) text = Xapian::Query::MatchAll;
      Xapian::Query filter(Xapian::Query::OP_AND,
                           Xapian::Query(Xapian::Query::OP_AND, FilterQuery(kPlatformTerm, q.platform),
                                         FilterQuery(kFamilyTerm, q.family)),
                           FilterQuery(kBottleneckTerm, q.bottleneck));
      Xapian::Enquire enquire(db_);
      enquire.set_query(Xapian::Query(Xapian::Query::OP_FILTER, text, filter));
      enquire.set_weighting_scheme(Xapian::BM25Weight());
      // Every match, re-ranked below: the corpus is small (about a hundred
      // documents), so this costs nothing worth a cut-off.
      Xapian::MSet mset = enquire.get_mset(0, db_.get_doccount());
      double best = 0;
      for (auto it = mset.begin(); it != mset.end(); ++it) best = std::max(best, it.get_weight());
      const std::string family = absl::AsciiStrToLower(q.family);
      for (auto it = mset.begin(); it != mset.end(); ++it) {
        const Stored& s = docs_.at(std::stoul(it.get_document().get_data()));
        KbDoc doc = ToKbDoc(s);
        doc.score =
            (best > 0 ? it.get_weight() / best : 0) + kPlatformBoost * LabelSpecificity(s.platforms, q.platform) +
            kLabelBoost * (LabelSpecificity(s.bottlenecks, q.bottleneck) + LabelSpecificity(s.families, family));
        out.push_back(std::move(doc));
      }
      // Ties (equal scores) keep Xapian's order.
      std::stable_sort(out.begin(), out.end(), [](const KbDoc& a, const KbDoc& b) { return a.score > b.score; });
      if (out.size() > static_cast<size_t>(std::max(1, q.limit))) out.resize(std::max(1, q.limit));
    } catch (const Xapian::Error& e) {
      return absl::InvalidArgumentError(absl::StrCat("kb search '", q.text, "': ", e.get_type(), ": ", e.get_msg()));
    }
    if (searches_ != nullptr) searches_->Increment();
    if (latency_ != nullptr) latency_->Observe(absl::ToDoubleSeconds(absl::Now() - start));
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  mutable Xapian::WritableDatabase db_ ABSL_GUARDED_BY(mu_);
  std::vector<Stored> docs_;  // by Xapian document data (its index here)
  prometheus::Counter* searches_ = nullptr;
  prometheus::Histogram* latency_ = nullptr;
};

}  // namespace

// The filter values a query may name (the LLM proposer's bottleneck labels);
// anything else is a typo that would match nothing.
const std::vector<std::string>& KnownBottlenecks() {
  static const auto* known = new std::vector<std::string>{"memory",       "compute", "latency", "compile",
                                                          "wrong-answer", "nan",     "crash",   "timeout"};
  return *known;
}

std::string Snippet(const KbDoc& doc) { return FirstParagraph(doc.text); }

absl::StatusOr<KbDoc> ParseKbDocument(const std::string& rel_path, const std::string& content) {
  KEVO_ASSIGN_OR_RETURN(Stored s, ParseDocument(rel_path, content));
  return ToKbDoc(s);
}

absl::StatusOr<ImportStats> ImportDirectory(store::Store* store, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("kb folder ", dir, " does not exist"));
  }
  std::map<std::string, std::string> stored_hash;  // path -> hash
  KEVO_RETURN_IF_ERROR(store->Scan(store::Family::kKb, kDocPrefix, [&](std::string_view key, std::string_view value) {
    auto s = Stored::Parse(value);
    stored_hash[std::string(key.substr(4))] = s.ok() ? s->hash : "";
    return true;
  }));
  ImportStats stats;
  store::Batch batch;
  std::set<std::string> seen;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".md") files.push_back(it->path());
  }
  if (ec) return absl::InternalError(absl::StrCat("kb: listing ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const std::string rel = fs::relative(file, dir).generic_string();
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::InternalError(absl::StrCat("kb: cannot read ", file.string()));
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    seen.insert(rel);
    auto old = stored_hash.find(rel);
    const std::string hash = Sha256Hex(content);
    if (old != stored_hash.end() && old->second == hash) {
      ++stats.unchanged;
      continue;
    }
    KEVO_ASSIGN_OR_RETURN(Stored doc, ParseDocument(rel, content));
    batch.Put(store::Family::kKb, absl::StrCat(kDocPrefix, rel), doc.Serialize());
    ++(old == stored_hash.end() ? stats.added : stats.updated);
  }
  for (const auto& [path, hash] : stored_hash) {
    if (seen.contains(path)) continue;
    batch.Delete(store::Family::kKb, absl::StrCat(kDocPrefix, path));
    ++stats.removed;
  }
  if (!batch.ops().empty()) KEVO_RETURN_IF_ERROR(store->Write(batch, /*sync=*/true));
  LogInfo("kb: imported ", dir, ": ", stats.added, " added, ", stats.updated, " updated, ", stats.unchanged,
          " unchanged, ", stats.removed, " removed");
  return stats;
}

absl::StatusOr<std::unique_ptr<KnowledgeBase>> OpenKnowledgeBase(store::Store* store, prometheus::Registry* registry) {
  std::unique_ptr<XapianKnowledgeBase> kb;
  try {
    kb = std::make_unique<XapianKnowledgeBase>(registry);
  } catch (const Xapian::Error& e) {
    return absl::InternalError(absl::StrCat("kb: cannot create the index: ", e.get_msg()));
  }
  absl::Status add = absl::OkStatus();
  KEVO_RETURN_IF_ERROR(store->Scan(store::Family::kKb, kDocPrefix, [&](std::string_view key, std::string_view value) {
    auto s = Stored::Parse(value);
    if (!s.ok()) {
      LogWarning("kb: ", std::string(key), ": ", s.status().message());
      return true;
    }
    add = kb->Add(*s);
    return add.ok();
  }));
  KEVO_RETURN_IF_ERROR(add);
  return std::unique_ptr<KnowledgeBase>(std::move(kb));
}

absl::StatusOr<std::string> DefaultKbDir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KEVO_KB_DIR"); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / "../share/kevo/kb").string());
    candidates.push_back((exe.parent_path() / "../../docs/kb").string());
  }
  candidates.push_back("docs/kb");
  for (const std::string& c : candidates) {
    if (fs::is_directory(c, ec)) return fs::weakly_canonical(c, ec).string();
  }
  return absl::NotFoundError("no knowledge-base folder found: set KEVO_KB_DIR to the project's docs/kb");
}

}  // namespace kevo::kb
