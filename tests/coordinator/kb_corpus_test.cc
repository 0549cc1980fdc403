// Tests for the project's knowledge base corpus (docs/kb): every document has
// complete, valid front matter (platforms, op families and bottlenecks that
// exist, named sources), each platform has at least 25 documents, and every
// code sample is a verbatim excerpt of a source file the build compiles
// (kevo's own recipes, task references and simulator examples), so a sample
// can neither rot nor be someone else's code.
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/kb/kb.h"
#include "tests/testing/process.h"

namespace kevo::kb {
namespace {

namespace fs = std::filesystem;
using ::kevo::testing::ReadTextFile;
using ::kevo::testing::SourceDir;

// Where samples may come from: files the build compiles (the built-in
// recipes' library, the simulator's examples library, the tasks' references,
// which the task suite builds and runs).
const std::vector<std::string>& ExcerptRoots() {
  static const auto* roots =
      new std::vector<std::string>{"coordinator/proposer/builtin/", "mtia_sim/examples/", "tasks/"};
  return *roots;
}

// Languages whose fenced blocks are code and must be excerpts.
bool IsCodeLanguage(const std::string& lang) {
  static const auto* langs = new std::set<std::string>{"c", "c++", "cpp", "cc", "cuda", "cu", "hip", "python", "py"};
  return langs->contains(lang);
}

struct Block {
  std::string info;  // what follows the opening ```
  std::string text;  // the lines between the fences, each ending in '\n'
  int line = 0;      // of the opening fence
};

std::vector<Block> FencedBlocks(const std::string& body) {
  std::vector<Block> out;
  std::vector<std::string> lines = absl::StrSplit(body, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StartsWith(lines[i], "```")) continue;
    Block b{lines[i].substr(3), "", static_cast<int>(i) + 1};
    for (++i; i < lines.size() && lines[i] != "```"; ++i) b.text += lines[i] + "\n";
    out.push_back(std::move(b));
  }
  return out;
}

// The op families the task suite uses.
std::set<std::string> TaskFamilies() {
  std::set<std::string> out;
  const std::regex family("op_family:\\s*\"([^\"]+)\"");
  for (const auto& entry : fs::directory_iterator(SourceDir() + "/tasks")) {
    const fs::path task = entry.path() / "task.textproto";
    if (!fs::exists(task)) continue;
    const std::string text = ReadTextFile(task.string());
    std::smatch m;
    if (std::regex_search(text, m, family)) out.insert(m[1]);
  }
  return out;
}

class KbCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = SourceDir() + "/docs/kb";
    for (const auto& entry : fs::recursive_directory_iterator(root_)) {
      if (entry.is_regular_file() && entry.path().extension() == ".md") {
        files_.push_back(fs::relative(entry.path(), root_).generic_string());
      }
    }
    std::sort(files_.begin(), files_.end());
  }

  std::string root_;
  std::vector<std::string> files_;
};

TEST_F(KbCorpusTest, HasTwentyFiveDocumentsPerPlatformPlusGuidanceAndConstraints) {
  std::map<std::string, int> per_folder;
  for (const std::string& f : files_) {
    std::vector<std::string> parts = absl::StrSplit(f, '/');
    ++per_folder[parts[0] == "hardware" && parts.size() > 2 ? parts[0] + "/" + parts[1] : parts[0]];
  }
  for (const char* p : {"hardware/cpu", "hardware/nvidia", "hardware/amd", "hardware/mtia"}) {
    EXPECT_GE(per_folder[p], 25) << p;
  }
  EXPECT_GE(per_folder["guidance"], 10);
  EXPECT_GE(per_folder["constraints"], 3);
  EXPECT_GE(files_.size(), 110u);
}

TEST_F(KbCorpusTest, EveryDocumentHasValidFrontMatter) {
  const std::set<std::string> families = TaskFamilies();
  ASSERT_FALSE(families.empty());
  std::set<std::string> platforms(task::KnownPlatforms().begin(), task::KnownPlatforms().end());
  std::set<std::string> bottlenecks(KnownBottlenecks().begin(), KnownBottlenecks().end());
  for (const std::string& f : files_) {
    SCOPED_TRACE(f);
    const std::string content = ReadTextFile(root_ + "/" + f);
    ASSERT_TRUE(absl::StartsWith(content, "---\n")) << "no front matter";
    auto doc = ParseKbDocument(f, content);
    ASSERT_TRUE(doc.ok()) << doc.status();
    EXPECT_FALSE(doc->title.empty());
    EXPECT_FALSE(doc->sources.empty()) << "front matter names no sources";
    ASSERT_FALSE(doc->platforms.empty());
    ASSERT_FALSE(doc->families.empty());
    ASSERT_FALSE(doc->bottlenecks.empty());
    for (const std::string& p : doc->platforms) {
      EXPECT_TRUE(p == "any" || platforms.contains(p)) << "unknown platform " << p;
    }
    for (const std::string& v : doc->families) {
      EXPECT_TRUE(v == "any" || families.contains(v)) << "unknown op family " << v;
    }
    for (const std::string& b : doc->bottlenecks) {
      EXPECT_TRUE(b == "any" || bottlenecks.contains(b)) << "unknown bottleneck " << b;
    }
    // A document under hardware/<platform>/ is for that platform only.
    if (absl::StartsWith(f, "hardware/")) {
      const std::string folder = std::vector<std::string>(absl::StrSplit(f, '/'))[1];
      EXPECT_THAT(doc->platforms, ::testing::ElementsAre(folder == "mtia" ? std::string("mtia-sim") : folder));
    }
  }
}

TEST_F(KbCorpusTest, EveryCodeSampleIsAVerbatimExcerptOfACompiledSource) {
  int samples = 0;
  const std::regex excerpt("^([a-z+]+)(?:\\s+excerpt=(\\S+))?\\s*$");
  for (const std::string& f : files_) {
    const std::string content = ReadTextFile(root_ + "/" + f);
    for (const Block& b : FencedBlocks(content)) {
      SCOPED_TRACE(f + ":" + std::to_string(b.line));
      if (b.info.empty() || b.info == "text") continue;  // prose, tables, pseudo-code
      std::smatch m;
      ASSERT_TRUE(std::regex_match(b.info, m, excerpt)) << "fence '```" << b.info << "'";
      const std::string lang = m[1], path = m[2];
      ASSERT_TRUE(IsCodeLanguage(lang)) << "unknown fence language " << lang;
      ASSERT_FALSE(path.empty()) << "a " << lang << " sample must name its source: ```" << lang << " excerpt=<path>";
      EXPECT_TRUE(std::any_of(ExcerptRoots().begin(), ExcerptRoots().end(),
                              [&](const std::string& r) { return absl::StartsWith(path, r); }))
          << path << " is not under " << absl::StrJoin(ExcerptRoots(), ", ");
      ASSERT_TRUE(fs::exists(SourceDir() + "/" + path)) << path;
      const std::string source = "\n" + ReadTextFile(SourceDir() + "/" + path);
      EXPECT_FALSE(b.text.empty());
      EXPECT_TRUE(absl::StrContains(source, "\n" + b.text))
          << "the sample is not a verbatim run of whole lines of " << path << ":\n"
          << b.text;
      ++samples;
    }
  }
  EXPECT_GE(samples, 60);
}

}  // namespace
}  // namespace kevo::kb
