// kevo-runner-production times PyTorch forms that allocate their result on
// every call; the candidate writes into outputs made once. Without care,
// glibc maps each large result afresh and unmaps it on free, so every timed
// call of the form pays a page fault per page of its result (an OS cost, most
// of `x + y`'s time where faults are dear). The runner keeps freed memory in
// the heap (keep_freed_memory): after warm-up a form's calls fault no pages.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/testing/process.h"

namespace kevo {
namespace {

constexpr long kResultPages = (int64_t{1} << 24) * 4 / 4096;  // a 2^24-float result

// Minor page faults over three calls of `x + y` on 2^24 floats, after eight
// warm-up calls, with or without the runner's keep_freed_memory().
long FaultsOfThreeTimedCalls(const std::string& dir, bool keep) {
  const std::string script =
      "import importlib.util, resource, sys\n"
      "spec = importlib.util.spec_from_file_location('pr', sys.argv[1])\n"
      "pr = importlib.util.module_from_spec(spec); spec.loader.exec_module(pr)\n"
      "if sys.argv[2] == 'keep':\n"
      "    pr.keep_freed_memory()\n"
      "import torch\n"
      "x = torch.ones(1 << 24); y = torch.ones(1 << 24)\n"
      "for _ in range(8):\n"
      "    z = x + y; del z\n"
      "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
      "for _ in range(3):\n"
      "    z = x + y; del z\n"
      "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n";
  testing::WriteTextFile(dir + "/faults.py", script);
  auto r = testing::RunCommand({"/usr/bin/python3", dir + "/faults.py",
                                testing::SourceDir() + "/worker/runner/production_runner.py", keep ? "keep" : "plain"},
                               absl::Minutes(2));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  long faults = -1;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "%ld", &faults), 1) << r.out;
  return faults;
}

TEST(ProductionRunnerMemoryTest, AFormsTimedCallsPayNoPageFaultsForTheirResult) {
  const std::string dir = testing::MakeTempDir("kevo-prod-faults");
  // The hazard is real here: without it, each call faults in its whole result.
  EXPECT_GT(FaultsOfThreeTimedCalls(dir, /*keep=*/false), 3 * kResultPages / 2)
      << "glibc no longer maps large blocks afresh here";
  EXPECT_LT(FaultsOfThreeTimedCalls(dir, /*keep=*/true), kResultPages / 16)
      << "the production runner's forms fault in their results on every call";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kevo
