// recipe_source: writes the candidate source that a built-in recipe generates
// for a task and a genome, without a coordinator (for benches that compile
// and time recipe points by hand, e.g. tests/bench/cuda_gemm_bf16.sh).
//
//   recipe_source TASK_DIR OUT_DIR GENOME...
//   recipe_source TASK_DIR OUT_DIR defaults:cpu   (every recipe that applies, at its defaults)
//
// Each genome (Genome::ToString form, e.g. "cuda_gemm_wgmma{stages=4,tile=128x256}";
// parameters it leaves out take their defaults)
// goes to OUT_DIR/<index>.<ext>, .cu for cuda, .cc otherwise; the index
// follows the order of the arguments. Prints a line for each, "path<TAB>genome
// <TAB>flags": the compiler flags the recipe asks for beside the source
// (-fno-math-errno for libmvec calls, say), which `kevo eval --flags` takes;
// the source compiled without them is another kernel. Exits 1 naming the
// first genome that does not parse or that the recipe refuses.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/recipe.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TASK_DIR OUT_DIR GENOME...\n", argv[0]);
    return 2;
  }
  absl::StatusOr<kevo::v1::Task> task = kevo::task::LoadTaskDir(argv[1]);
  if (!task.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], std::string(task.status().message()).c_str());
    return 1;
  }
  std::filesystem::create_directories(argv[2]);
  // "defaults:PLATFORM": every recipe that applies to the task on PLATFORM,
  // at its default genome.
  std::vector<std::string> genomes(argv + 3, argv + argc);
  if (genomes.size() == 1 && genomes[0].rfind("defaults:", 0) == 0) {
    const std::string platform = genomes[0].substr(9);
    genomes.clear();
    for (const auto& recipe : kevo::proposer::AllRecipes()) {
      if (!recipe->Applies(*task, platform)) continue;
      genomes.push_back(kevo::proposer::Genome{recipe->name(), recipe->space().Defaults()}.ToString());
    }
  }
  for (int i = 3; i < 3 + static_cast<int>(genomes.size()); ++i) {
    const char* arg = genomes[i - 3].c_str();
    absl::StatusOr<kevo::proposer::Genome> genome = kevo::proposer::Genome::FromString(arg);
    const kevo::proposer::Recipe* recipe = genome.ok() ? kevo::proposer::FindRecipe(genome->recipe) : nullptr;
    if (recipe == nullptr) {
      std::fprintf(stderr, "%s: not a genome of a built-in recipe\n", arg);
      return 1;
    }
    // Parameters the genome leaves out (one written before they existed) take their defaults.
    for (const auto& [key, value] : recipe->space().Defaults()) genome->params.emplace(key, value);
    absl::StatusOr<kevo::v1::Candidate> candidate = recipe->Generate(*task, *genome);
    if (!candidate.ok()) {
      std::fprintf(stderr, "%s: %s\n", arg, std::string(candidate.status().message()).c_str());
      return 1;
    }
    const std::string path =
        absl::StrFormat("%s/%02d.%s", argv[2], i - 3, candidate->language() == "cuda" ? "cu" : "cc");
    std::ofstream(path) << candidate->source();
    std::printf("%s\t%s\t%s\n", path.c_str(), arg, absl::StrJoin(candidate->extra_flags(), " ").c_str());
  }
  return 0;
}
