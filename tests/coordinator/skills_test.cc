// Tests for skill memory (coordinator/skills): distilling a finished job's
// tree into skills with the right gains and evidence, aggregation across
// jobs, idempotence, filters, the evidence a skill needs before it gives the
// builtin proposer a prior, and how the jobs it seeded weigh it.
#include "coordinator/skills/skills.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/proposer.h"
#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"
#include "tests/coordinator/kernel_harness.h"

namespace kevo::skills {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::Node MakeNode(const std::string& id, const std::string& parent, const std::string& genome, double fitness,
                  int sequence, const std::string& mutation = "") {
  v1::Node n;
  n.set_node_id(id);
  if (!parent.empty()) n.add_parent_ids(parent);
  n.set_genome(genome);
  n.set_fitness(fitness);
  n.set_state(v1::NODE_DONE);
  n.set_status(fitness > 0 ? v1::OK : v1::WRONG_ANSWER);
  n.set_sequence(sequence);
  n.set_mutation(mutation);
  n.set_proposer(genome.empty() ? "llm:test" : "builtin");
  return n;
}

v1::Job MakeJob(const std::string& id, const std::string& best) {
  v1::Job job;
  job.set_job_id(id);
  job.mutable_spec()->set_platform("cpu");
  job.mutable_spec()->mutable_task()->set_name("gelu_tanh");
  job.mutable_spec()->mutable_task()->set_op_family("elementwise");
  job.set_state(v1::JOB_DONE);
  job.set_best_node_id(best);
  return job;
}

// A first job: the default seed (1.0x), a single-threaded seed (1.5x), a
// fast-math child of it (3.0x, the best), a child within noise (1.01x more),
// a failed child, and an LLM child with a label (2.0x over its parent).
std::vector<v1::Node> FirstTree() {
  return {
      MakeNode("n0", "", "elementwise{fast_math=off,threads=all,unroll=4}", 1.0, 0, "seed"),
      MakeNode("n1", "", "elementwise{fast_math=off,threads=1,unroll=4}", 1.5, 1, "seed"),
      MakeNode("n2", "n1", "elementwise{fast_math=on,threads=1,unroll=4}", 3.0, 2, "param:fast_math off->on"),
      MakeNode("n3", "n2", "elementwise{fast_math=on,threads=1,unroll=8}", 3.03, 3, "param:unroll 4->8"),
      MakeNode("n4", "n2", "elementwise{fast_math=on,threads=1,unroll=2}", 0, 4, "param:unroll 4->2"),
      MakeNode("n5", "n1", "", 2.0, 5, "polynomial erf"),
  };
}

const Skill* Find(const std::vector<Skill>& skills, const std::string& transformation) {
  for (const Skill& s : skills) {
    if (s.transformation == transformation) return &s;
  }
  return nullptr;
}

class SkillsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmp = harness::TempDir::Create("kevo_skills_");
    ASSERT_TRUE(tmp.ok()) << tmp.status();
    tmp_ = *std::move(tmp);
    auto store = store::Store::Open(tmp_->path() + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto skills = SkillStore::Create(store_.get());
    ASSERT_TRUE(skills.ok()) << skills.status();
    skills_ = *std::move(skills);
  }

  std::vector<Skill> All(const std::string& platform = "cpu", const std::string& family = "elementwise") {
    auto s = skills_->SkillsFor(platform, family, 0);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : std::vector<Skill>{};
  }

  // The stored skill for (cpu, elementwise, transformation); an empty one
  // (evidence_count 0) and a test failure when there is none.
  Skill Get(const std::string& transformation) {
    const std::vector<Skill> skills = All();
    const Skill* s = Find(skills, transformation);
    if (s == nullptr) ADD_FAILURE() << "no skill " << transformation;
    return s != nullptr ? *s : Skill{};
  }

  std::unique_ptr<harness::TempDir> tmp_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<SkillStore> skills_;
};

TEST_F(SkillsTest, DistilsImprovingStepsWithGainAndEvidence) {
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  std::vector<Skill> skills = All();

  const Skill* threads = Find(skills, "param:threads=1");
  ASSERT_NE(threads, nullptr);  // the seed that beat the first seed
  EXPECT_NEAR(threads->mean_gain, 1.5, 1e-9);
  EXPECT_EQ(threads->evidence_count, 1);
  EXPECT_THAT(threads->node_ids, ElementsAre("j1/n1"));
  EXPECT_EQ(threads->platform, "cpu");
  EXPECT_EQ(threads->family, "elementwise");

  const Skill* fast = Find(skills, "param:fast_math=on");
  ASSERT_NE(fast, nullptr);
  EXPECT_NEAR(fast->mean_gain, 2.0, 1e-9);
  EXPECT_THAT(fast->node_ids, ElementsAre("j1/n2"));
  EXPECT_THAT(fast->summary, ::testing::HasSubstr("fast_math=on"));

  const Skill* label = Find(skills, "polynomial erf");
  ASSERT_NE(label, nullptr);  // an LLM node's label
  EXPECT_NEAR(label->mean_gain, 2.0 / 1.5, 1e-9);

  const Skill* best = Find(skills, "genome:elementwise{fast_math=on,threads=1,unroll=4}");
  ASSERT_NE(best, nullptr);  // the best kernel, over the first seed
  EXPECT_NEAR(best->mean_gain, 3.0, 1e-9);
  EXPECT_THAT(best->node_ids, ElementsAre("j1/n2"));

  // Within noise (1.01x) and failed steps teach nothing.
  EXPECT_EQ(Find(skills, "param:unroll=8"), nullptr);
  EXPECT_EQ(Find(skills, "param:unroll=2"), nullptr);
  EXPECT_EQ(skills.size(), 4u);
  // Best first by evidence-weighted gain.
  EXPECT_EQ(skills.front().transformation, best->transformation);
}

TEST_F(SkillsTest, AggregatesAcrossJobsAndIgnoresARepeatedJob) {
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());  // idempotent
  std::vector<v1::Node> second = {
      MakeNode("n0", "", "elementwise{fast_math=off,threads=all,unroll=4}", 2.0, 0, "seed"),
      MakeNode("n1", "n0", "elementwise{fast_math=on,threads=all,unroll=4}", 3.0, 1, "param:fast_math off->on"),
  };
  ASSERT_TRUE(skills_->Distil(MakeJob("j2", "n1"), second).ok());
  const std::vector<Skill> skills = All();
  const Skill* fast = Find(skills, "param:fast_math=on");
  ASSERT_NE(fast, nullptr);
  EXPECT_EQ(fast->evidence_count, 2);
  EXPECT_NEAR(fast->mean_gain, std::sqrt(2.0 * 1.5), 1e-9);    // geometric mean
  EXPECT_THAT(fast->node_ids, ElementsAre("j2/n1", "j1/n2"));  // newest first
}

TEST_F(SkillsTest, FiltersByPlatformAndFamily) {
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  EXPECT_THAT(All("nvidia", "elementwise"), IsEmpty());
  EXPECT_THAT(All("cpu", "softmax"), IsEmpty());
  EXPECT_EQ(All("", "elementwise").size(), 4u);
  EXPECT_EQ(All("cpu", "").size(), 4u);
  auto two = skills_->SkillsFor("cpu", "elementwise", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
}

// A second job: its default seed (2.0x) and a fast-math child of it (3.0x).
std::vector<v1::Node> SecondTree() {
  return {
      MakeNode("n0", "", "elementwise{fast_math=off,threads=all,unroll=4}", 2.0, 0, "seed"),
      MakeNode("n1", "n0", "elementwise{fast_math=on,threads=all,unroll=4}", 3.0, 1, "param:fast_math off->on"),
  };
}

TEST_F(SkillsTest, OneJobsWeakSkillsDoNotSeed) {
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  const std::vector<Skill> skills = All();
  ASSERT_EQ(skills.size(), 4u);
  for (const Skill& s : skills) {
    EXPECT_EQ(s.jobs, 1) << s.transformation;
    EXPECT_EQ(PriorWeight(s), 0) << s.transformation;
    if (s.transformation != "polynomial erf") {
      EXPECT_THAT(WhyNoPrior(s), HasSubstr("needs 2 jobs or 3 steps")) << s.transformation;
    }
    EXPECT_THAT(s.summary, HasSubstr("does not seed new jobs")) << s.transformation;
  }
  EXPECT_THAT(PriorsFrom(skills), IsEmpty());
}

TEST_F(SkillsTest, SkillWithEvidenceFromTwoJobsSeeds) {
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  ASSERT_TRUE(skills_->Distil(MakeJob("j2", "n1"), SecondTree()).ok());
  const std::vector<Skill> skills = All();
  const Skill* fast = Find(skills, "param:fast_math=on");
  ASSERT_NE(fast, nullptr);
  EXPECT_EQ(fast->jobs, 2);
  EXPECT_THAT(fast->summary, HasSubstr("seeds new jobs"));
  std::map<std::string, double> priors = PriorsFrom(skills);
  EXPECT_NEAR(priors.at("param:fast_math=on"), 3.0, 1e-9);  // sqrt(2 * 1.5)^2
  EXPECT_FALSE(priors.contains("param:threads=1"));         // still one job's one step
  EXPECT_FALSE(priors.contains("polynomial erf"));          // labels are for prompts, not priors
}

TEST_F(SkillsTest, ThreeStepsInOneJobAreEnoughEvidence) {
  std::vector<v1::Node> tree = {
      MakeNode("n0", "", "elementwise{fast_math=off,threads=all,unroll=4}", 1.0, 0, "seed"),
      MakeNode("n1", "", "elementwise{fast_math=off,threads=1,unroll=4}", 1.0, 1, "seed"),
      MakeNode("n2", "", "elementwise{fast_math=off,threads=all,unroll=8}", 1.0, 2, "seed"),
  };
  for (const char* parent : {"n0", "n1", "n2"}) {
    const v1::Node& p = tree[parent[1] - '0'];
    std::string genome = p.genome();
    genome.replace(genome.find("fast_math=off"), 13, "fast_math=on");
    tree.push_back(MakeNode(absl::StrCat(parent, "f"), parent, genome, 2.0, static_cast<int>(tree.size())));
  }
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n0f"), tree).ok());
  const Skill fast = Get("param:fast_math=on");
  EXPECT_EQ(fast.jobs, 1);
  EXPECT_EQ(fast.evidence_count, 3);
  EXPECT_NEAR(PriorWeight(fast), 8.0, 1e-9);  // 2^3, the cap
}

TEST_F(SkillsTest, SkillWhoseKernelsLostToProductionDoesNotSeed) {
  // Two jobs where fast math doubled a kernel that stayed at half the
  // production baseline's speed.
  for (const char* id : {"j1", "j2"}) {
    std::vector<v1::Node> tree = SecondTree();
    tree[1].set_speedup_vs_production(0.5);
    ASSERT_TRUE(skills_->Distil(MakeJob(id, "n1"), tree).ok());
  }
  const Skill fast = Get("param:fast_math=on");
  EXPECT_EQ(fast.jobs, 2);
  EXPECT_NEAR(fast.vs_production, 0.5, 1e-9);
  EXPECT_EQ(PriorWeight(fast), 0);
  EXPECT_THAT(WhyNoPrior(fast), HasSubstr("production baseline"));
}

// A job that a skill seeded: its own default seed, the skill's seed (labelled
// with `key`) and a child of `best_from` that is the job's best.
std::vector<v1::Node> SeededTree(const std::string& key, double own_fitness, double seed_fitness,
                                 const std::string& best_from) {
  v1::Node seed = MakeNode("s", "", "elementwise{fast_math=on,threads=all,unroll=4}", seed_fitness, 0,
                           proposer::SkillSeedLabel({key}));
  v1::Node own = MakeNode("o", "", "elementwise{fast_math=off,threads=all,unroll=4}", own_fitness, 1, "seed");
  const v1::Node& from = best_from == "s" ? seed : own;
  std::string genome = from.genome();
  genome.replace(genome.find("unroll=4"), 8, "unroll=2");
  v1::Node best = MakeNode("b", best_from, genome, std::max(own_fitness, seed_fitness) * 1.01, 2, "param:unroll 4->2");
  return {seed, own, best};
}

TEST_F(SkillsTest, SkillThatMisledLosesWeightThenStopsSeeding) {
  const std::string key = "param:fast_math=on";
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  ASSERT_TRUE(skills_->Distil(MakeJob("j2", "n1"), SecondTree()).ok());
  ASSERT_NEAR(PriorsFrom(All()).at(key), 3.0, 1e-9);

  // j3: the skill's seed beat the job's own (2x, new evidence measured
  // against the own seed, not the skill's) and led to the best: a hit.
  ASSERT_TRUE(skills_->Distil(MakeJob("j3", "b"), SeededTree(key, 1.0, 2.0, "s")).ok());
  Skill fast = Get(key);
  EXPECT_EQ(fast.hits, 1);
  EXPECT_EQ(fast.misses, 0);
  EXPECT_EQ(fast.jobs, 3);
  const double before = PriorsFrom(All()).at(key);
  EXPECT_NEAR(before, 6.0, 1e-9);  // (2 * 1.5 * 2)^(1/3) ^ 3

  // j4: the job's best came from its own seed, which the skill's seed did not
  // beat: a miss halves the weight.
  ASSERT_TRUE(skills_->Distil(MakeJob("j4", "b"), SeededTree(key, 2.0, 1.0, "o")).ok());
  fast = Get(key);
  EXPECT_EQ(fast.misses, 1);
  EXPECT_NEAR(PriorsFrom(All()).at(key), before / 2, 1e-9);

  // j5: the skill's seed failed: a second miss, more misses than hits, and
  // the skill no longer seeds.
  std::vector<v1::Node> failed = SeededTree(key, 2.0, 1.0, "o");
  failed[0].set_fitness(0);
  failed[0].set_status(v1::WRONG_ANSWER);
  ASSERT_TRUE(skills_->Distil(MakeJob("j5", "b"), failed).ok());
  fast = Get(key);
  EXPECT_EQ(fast.hits, 1);
  EXPECT_EQ(fast.misses, 2);
  EXPECT_FALSE(PriorsFrom(All()).contains(key));
  EXPECT_THAT(WhyNoPrior(fast), HasSubstr("did not help 2 of the 3 jobs"));
  EXPECT_THAT(fast.summary, HasSubstr("it seeded 3 jobs, 1 helped"));
}

TEST_F(SkillsTest, CorrectSkillSeedWithNoOwnSeedToWeighItAgainstIsNotJudged) {
  const std::string key = "param:fast_math=on";
  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  ASSERT_TRUE(skills_->Distil(MakeJob("j2", "n1"), SecondTree()).ok());
  std::vector<v1::Node> tree = SeededTree(key, 2.0, 1.0, "o");
  tree[1].set_state(v1::NODE_EVALUATING);  // the own seed never finished
  tree[1].set_fitness(0);
  ASSERT_TRUE(skills_->Distil(MakeJob("j3", "s"), {tree[0], tree[1]}).ok());
  const Skill fast = Get(key);
  EXPECT_EQ(fast.evidence_count, 2);
  EXPECT_EQ(fast.hits + fast.misses, 0);
}

// The whole loop through the builtin proposer: skill memory's priors seed a
// gelu_erf job only once two jobs taught the skill, the seed names the skill,
// and a job where that seed misled stops it seeding.
TEST_F(SkillsTest, SkillSeedsTheBuiltinProposerUntilItMisleads) {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  auto task = task::LoadTaskDir(absl::StrCat(dir != nullptr && *dir ? dir : ".", "/tasks/gelu_erf"));
  ASSERT_TRUE(task.ok()) << task.status();
  auto propose = [&] {
    proposer::ProposeRequest req;
    req.task = &*task;
    req.platform = "cpu";
    req.count = 2;
    req.seed = 1;
    req.priors = PriorsFrom(All());
    auto out = proposer::BuiltinProposer().Propose(req);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<proposer::Proposal>{};
  };
  const std::string key = "param:fast_math=on";

  ASSERT_TRUE(skills_->Distil(MakeJob("j1", "n2"), FirstTree()).ok());
  std::vector<proposer::Proposal> first = propose();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].mutation, "seed");  // one job's skills do not seed

  ASSERT_TRUE(skills_->Distil(MakeJob("j2", "n1"), SecondTree()).ok());
  std::vector<proposer::Proposal> seeded = propose();
  ASSERT_EQ(seeded.size(), 2u);
  EXPECT_THAT(proposer::SkillSeedKeys(seeded[0].mutation), ElementsAre(key));
  EXPECT_EQ(seeded[0].genome.params.at("fast_math"), "on");
  EXPECT_EQ(seeded[1].mutation, "seed");  // the proposer's own default comes next

  // The job those proposals start: the skill's seed is slower than the own
  // default, whose child is the job's best.
  proposer::Genome child = seeded[1].genome;
  child.params["unroll"] = child.params.at("unroll") == "8" ? "4" : "8";
  std::vector<v1::Node> tree = {
      MakeNode("s", "", seeded[0].genome.ToString(), 1.0, 0, seeded[0].mutation),
      MakeNode("o", "", seeded[1].genome.ToString(), 2.0, 1, seeded[1].mutation),
      MakeNode("b", "o", child.ToString(), 2.5, 2, "param:unroll"),
  };
  ASSERT_TRUE(skills_->Distil(MakeJob("j3", "b"), tree).ok());
  EXPECT_EQ(Get(key).misses, 1);
  std::vector<proposer::Proposal> after = propose();
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after[0].mutation, "seed");
}

TEST(TransformationsTest, RecipeSwitchKeepsChangedSharedParams) {
  v1::Node parent = MakeNode("a", "", "softmax_three_pass{accumulators=4,exp=poly5}", 1, 0);
  v1::Node child = MakeNode("b", "a", "softmax_online{accumulators=8,exp=poly5}", 2, 1);
  EXPECT_THAT(Transformations(parent, child), ElementsAre("recipe:softmax_online", "param:accumulators=8"));
  Skill s{.platform = "cpu",
          .family = "softmax",
          .transformation = "recipe:softmax_online",
          .mean_gain = 1.2,
          .evidence_count = 2,
          .jobs = 2};
  EXPECT_NEAR(PriorsFrom({s}).at("softmax_online"), 1.44, 1e-9);
}

}  // namespace
}  // namespace kevo::skills
