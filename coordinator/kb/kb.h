// The knowledge base: short documents about hardware, optimisation and
// debugging guidance, and the constraints candidates must respect (docs/kb/
// in the repository). Imported into the coordinator's RocksDB (column family
// `kb`, re-imported when a file's content hash changes) and indexed with
// Xapian (BM25) for retrieval filtered by platform, op family and bottleneck.
// The LLM proposer retrieves documents for its prompts; `kevo kb search`
// shows what it would get.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kevo::store {
class Store;
}
namespace prometheus {
class Registry;
}

namespace kevo::kb {

struct KbDoc {
  std::string id;     // stable: the path below the kb root without ".md", e.g. "hardware/cpu/simd"
  std::string title;  // from the front matter
  std::string path;   // relative to the kb root, e.g. "hardware/cpu/simd.md"
  std::string text;   // the body, front matter removed
  // The front matter's filters (lower case; empty = any) and the public
  // sources the document was written from ("sources: a; b", split on ';').
  std::vector<std::string> platforms, families, bottlenecks, sources;
  double score = 0;  // retrieval score (higher is better); 0 outside Search
};

// The bottleneck labels a query and a document's front matter may name
// (besides "any").
const std::vector<std::string>& KnownBottlenecks();

struct KbQuery {
  std::string text;  // free text: the kernel's op, what its evaluation said, ...
  // Free text that weighs less than `text` (a fraction of it, see kb.cc):
  // background such as the task's description, whose words ("float32 vector
  // of length n") say little about which document helps.
  std::string context;
  std::string platform;  // cpu | nvidia | amd | mtia-sim; empty = any
  std::string family;    // op family (task.family), e.g. "softmax"; empty = any
  // memory | compute | latency | compile | wrong-answer | nan | crash | timeout
  // (the LLM proposer's labels for an evaluation); empty = any.
  std::string bottleneck;
  int limit = 4;
};

class KnowledgeBase {
 public:
  virtual ~KnowledgeBase() = default;
  // Ranked documents for `query`, best first, at most query.limit: BM25 over
  // the text (and the context, weighed less) plus a boost for a document whose
  // front matter names the query's platform, bottleneck or family among few
  // labels (coordinator/kb/kb.cc says how much). A document
  // whose front matter lists platforms / families / bottlenecks is returned
  // only when the query's value is among them (or the document says "any");
  // a document that lists none matches every value. InvalidArgument for an
  // empty query text with no filter, and for a platform or bottleneck that is
  // not one of those listed in KbQuery. Thread-safe.
  virtual absl::StatusOr<std::vector<KbDoc>> Search(const KbQuery& query) const = 0;
};

struct ImportStats {
  int added = 0, updated = 0, unchanged = 0, removed = 0;
};

// Parses one document (`rel_path` below the kb root, e.g.
// "hardware/cpu/simd.md") as ImportDirectory does: front matter between
// "---" lines with the keys title, platforms, families, bottlenecks and
// sources (lists are comma-separated, sources ';'-separated); without front
// matter the title is the first "# " heading and the platform comes from the
// path. InvalidArgument, naming the file, for front matter without a closing
// line, a line that is not "key: value", or an unknown key.
absl::StatusOr<KbDoc> ParseKbDocument(const std::string& rel_path, const std::string& content);

// Imports every *.md under `dir` (front matter + body) into `store`'s kb
// column family: new and changed files (by content hash) are written, files
// that disappeared are removed. InvalidArgument for a file whose front matter
// is malformed (the message names the file), NotFound when `dir` does not
// exist.
absl::StatusOr<ImportStats> ImportDirectory(store::Store* store, const std::string& dir);

// Opens the knowledge base stored in `store` (it builds its Xapian index in
// memory from the kb column family, so documents imported later need a new
// one). The store is not used after this returns. An empty kb is valid (every
// search returns nothing). Registers kevo_kb_* metrics in `registry` when it
// is not null (it must outlive the knowledge base). Internal for a Xapian
// error.
absl::StatusOr<std::unique_ptr<KnowledgeBase>> OpenKnowledgeBase(store::Store* store,
                                                                 prometheus::Registry* registry = nullptr);

// The document's first paragraph that is not a heading or a table, on one
// line, shortened to about 160 characters (for listings).
std::string Snippet(const KbDoc& doc);

// The project's docs/kb folder, found from KEVO_KB_DIR, then next to the
// running binary (../share/kevo/kb, ../../docs/kb), then ./docs/kb. NotFound
// when none exists.
absl::StatusOr<std::string> DefaultKbDir();

}  // namespace kevo::kb
