// Tests for the knowledge base (coordinator/kb): importing a folder of
// documents into RocksDB (re-imported by content hash, removed when deleted,
// malformed front matter rejected) and BM25 retrieval through Xapian,
// filtered by platform, op family and bottleneck — on a small fixture and on
// the project's own docs/kb.
#include "coordinator/kb/kb.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "coordinator/store/store.h"
#include "tests/coordinator/kernel_harness.h"

namespace kevo::kb {
namespace {

using ::testing::HasSubstr;

std::string SourceDir() {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  return dir != nullptr && *dir ? dir : ".";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

std::vector<std::string> Paths(const std::vector<KbDoc>& docs) {
  std::vector<std::string> out;
  for (const KbDoc& d : docs) out.push_back(d.path);
  return out;
}

class KbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmp = harness::TempDir::Create("kevo_kb_");
    ASSERT_TRUE(tmp.ok()) << tmp.status();
    tmp_ = *std::move(tmp);
    docs_ = tmp_->path() + "/kb";
    auto store = store::Store::Open(tmp_->path() + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    WriteFile(docs_ + "/hardware/cpu/simd.md",
              "---\ntitle: CPU vector units\nplatforms: cpu\nfamilies: any\n"
              "bottlenecks: compute, memory\n---\n# CPU vector units\n\n"
              "AVX-512 gives sixteen float lanes; vectorise the inner loop with intrinsics.\n");
    WriteFile(docs_ + "/hardware/nvidia/coalescing.md",
              "---\ntitle: Coalesced global memory loads\nplatforms: nvidia\n"
              "bottlenecks: memory\n---\nConsecutive threads read consecutive words; "
              "use float4 loads so that each warp moves full memory transactions.\n");
    WriteFile(docs_ + "/guidance/softmax-overflow.md",
              "---\ntitle: Softmax overflow\nfamilies: [softmax, loss]\nbottlenecks: nan\n---\n"
              "exp overflows above 88: subtract the row max before exp; an online softmax "
              "rescales the running sum when the max grows.\n");
    WriteFile(docs_ + "/guidance/memory.md",
              "---\ntitle: Memory-bound kernels\nbottlenecks: memory\n---\n"
              "Count bytes: fuse passes so each input is read once; vectorise loads.\n");
    // No front matter: title from the heading, platform from the path.
    WriteFile(docs_ + "/hardware/mtia/dma.md",
              "# MTIA DMA\n\nKeep several DMA transfers in flight per PE to hide DRAM latency.\n");
  }

  absl::StatusOr<std::vector<KbDoc>> Search(KbQuery q) {
    auto kb = OpenKnowledgeBase(store_.get());
    if (!kb.ok()) return kb.status();
    return (*kb)->Search(q);
  }

  std::unique_ptr<harness::TempDir> tmp_;
  std::string docs_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(KbTest, ImportCountsAddedThenUnchanged) {
  auto first = ImportDirectory(store_.get(), docs_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->added, 5);
  auto second = ImportDirectory(store_.get(), docs_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->added, 0);
  EXPECT_EQ(second->unchanged, 5);
}

TEST_F(KbTest, ReimportsChangedFileAndRemovesDeletedOne) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  WriteFile(docs_ + "/guidance/memory.md",
            "---\ntitle: Memory-bound kernels\nbottlenecks: memory\n---\n"
            "Non-temporal streaming stores skip the write-allocate read.\n");
  std::filesystem::remove(docs_ + "/hardware/mtia/dma.md");
  auto stats = ImportDirectory(store_.get(), docs_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->updated, 1);
  EXPECT_EQ(stats->removed, 1);
  EXPECT_EQ(stats->unchanged, 3);

  auto hits = Search({.text = "non-temporal streaming stores"});
  ASSERT_TRUE(hits.ok()) << hits.status();
  ASSERT_FALSE(hits->empty());
  EXPECT_EQ(hits->front().path, "guidance/memory.md");
  auto gone = Search({.text = "DMA transfers in flight"});
  ASSERT_TRUE(gone.ok()) << gone.status();
  for (const KbDoc& d : *gone) EXPECT_NE(d.path, "hardware/mtia/dma.md");
}

TEST_F(KbTest, MalformedFrontMatterIsInvalidArgumentNamingTheFile) {
  WriteFile(docs_ + "/guidance/bad.md", "---\ntitle: never closed\n\nbody\n");
  auto stats = ImportDirectory(store_.get(), docs_);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stats.status().message(), HasSubstr("guidance/bad.md"));
}

TEST_F(KbTest, MissingFolderIsNotFound) {
  EXPECT_EQ(ImportDirectory(store_.get(), docs_ + "/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KbTest, RanksMatchingDocumentFirst) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  auto hits = Search({.text = "softmax exp overflow row max"});
  ASSERT_TRUE(hits.ok()) << hits.status();
  ASSERT_FALSE(hits->empty());
  EXPECT_EQ(hits->front().path, "guidance/softmax-overflow.md");
  EXPECT_EQ(hits->front().id, "guidance/softmax-overflow");
  EXPECT_EQ(hits->front().title, "Softmax overflow");
  EXPECT_GT(hits->front().score, 0);
  EXPECT_THAT(hits->front().text, HasSubstr("online softmax"));
  EXPECT_THAT(hits->front().text, ::testing::Not(HasSubstr("title:")));
}

TEST_F(KbTest, PlatformFilterExcludesOtherPlatformsKeepsGeneralDocs) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  // "vectorise loads" matches the cpu doc and the general memory doc, and
  // "loads" the nvidia one: on cpu the nvidia doc must not come back.
  auto hits = Search({.text = "vectorise loads memory", .platform = "cpu"});
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(Paths(*hits), ::testing::UnorderedElementsAre("hardware/cpu/simd.md", "guidance/memory.md"));
  auto nvidia = Search({.text = "vectorise loads memory", .platform = "nvidia"});
  ASSERT_TRUE(nvidia.ok()) << nvidia.status();
  EXPECT_THAT(Paths(*nvidia), ::testing::UnorderedElementsAre("hardware/nvidia/coalescing.md", "guidance/memory.md"));
}

TEST_F(KbTest, PathGivesPlatformWhenFrontMatterIsMissing) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  auto on_cpu = Search({.text = "DMA transfers in flight", .platform = "cpu"});
  ASSERT_TRUE(on_cpu.ok());
  for (const KbDoc& d : *on_cpu) EXPECT_NE(d.path, "hardware/mtia/dma.md");
  auto on_mtia = Search({.text = "DMA transfers in flight", .platform = "mtia-sim"});
  ASSERT_TRUE(on_mtia.ok());
  ASSERT_FALSE(on_mtia->empty());
  EXPECT_EQ(on_mtia->front().path, "hardware/mtia/dma.md");
  EXPECT_EQ(on_mtia->front().title, "MTIA DMA");
}

TEST_F(KbTest, FamilyAndBottleneckFilters) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  // The softmax doc is for softmax and loss families only.
  auto matmul = Search({.text = "softmax exp overflow", .family = "matmul"});
  ASSERT_TRUE(matmul.ok());
  for (const KbDoc& d : *matmul) EXPECT_NE(d.path, "guidance/softmax-overflow.md");
  // Filters alone (no text) list what fits: memory-bound advice for nvidia.
  auto memory = Search({.platform = "nvidia", .bottleneck = "memory", .limit = 10});
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_THAT(Paths(*memory), ::testing::UnorderedElementsAre("hardware/nvidia/coalescing.md", "guidance/memory.md"));
}

TEST_F(KbTest, EmptyQueryIsInvalidArgument) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  EXPECT_EQ(Search({.text = "  "}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KbTest, UnknownPlatformOrBottleneckIsInvalidArgument) {
  ASSERT_TRUE(ImportDirectory(store_.get(), docs_).ok());
  auto platform = Search({.text = "vectorise loads", .platform = "cuda"});
  EXPECT_EQ(platform.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(platform.status().message(), ::testing::HasSubstr("unknown platform 'cuda'"));
  auto bottleneck = Search({.text = "vectorise loads", .bottleneck = "bandwidth"});
  EXPECT_EQ(bottleneck.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bottleneck.status().message(), ::testing::HasSubstr("known: memory, compute"));
  EXPECT_TRUE(Search({.text = "vectorise loads", .platform = "mtia-sim", .bottleneck = "wrong-answer"}).ok());
}

// The project's own knowledge base: every document imports, and the questions
// the LLM proposer asks find the document written for them among the three
// it puts in a prompt (kb_retrieval_test measures this over many more).
TEST_F(KbTest, ProjectKnowledgeBaseAnswersTypicalQuestions) {
  auto stats = ImportDirectory(store_.get(), SourceDir() + "/docs/kb");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->added, 110);
  struct Case {
    KbQuery query;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{.text = "softmax NaN exp overflow", .platform = "cpu", .family = "softmax", .bottleneck = "nan"},
       "guidance/nans.md"},
      {{.text = "first bad index tail odd sizes mismatch", .platform = "cpu", .bottleneck = "wrong-answer"},
       "guidance/wrong-answers.md"},
      {{.text = "undefined symbol extern C signature", .platform = "cpu", .bottleneck = "compile"},
       "guidance/compile-errors.md"},
      {{.text = "register spills tile too big, slow on odd shapes",
        .platform = "cpu",
        .family = "matmul",
        .bottleneck = "compute"},
       "guidance/compute-bound.md"},
      {{.text = "tensor cores shared memory occupancy", .platform = "nvidia", .family = "matmul"},
       "hardware/nvidia/performance-guide.md"},
      {{.text = "wavefront 64 LDS VGPR occupancy", .platform = "amd"}, "hardware/amd/performance-guide.md"},
      {{.text = "AVX-512 vector extensions accumulators", .platform = "cpu", .family = "reduction"},
       "hardware/cpu/performance-guide.md"},
      {{.text = "vendor library cuBLAS modify inputs", .platform = "nvidia"}, "constraints/candidate-rules.md"},
  };
  for (Case c : cases) {
    c.query.limit = 3;
    auto hits = Search(c.query);
    ASSERT_TRUE(hits.ok()) << hits.status();
    EXPECT_THAT(Paths(*hits), ::testing::Contains(c.want)) << c.query.text;
  }
}

}  // namespace
}  // namespace kevo::kb
