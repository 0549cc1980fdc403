// kevo-runner-production times PyTorch forms that allocate their result on
// every call; the candidate writes into outputs made once. Without care,
// glibc maps each large result afresh and unmaps it on free, so every timed
// call of the form pays a page fault per page of its result (an OS cost, most
// of `x + y`'s time where faults are dear). The runner keeps freed memory in
// the heap (keep_freed_memory) and reports the faults each series' timed calls
// took (minor_faults_per_call): after warm-up a form's calls fault no pages.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo {
namespace {

constexpr int64_t kElements = int64_t{1} << 24;
constexpr double kResultPages = kElements * 4 / 4096;  // a 2^24-float result

// The hazard itself, in plain Python beside the runner: minor page faults
// over three calls of `x + y` on 2^24 floats after eight warm-up calls.
long FaultsOfThreeCallsWithoutTheRunner(const std::string& dir) {
  const std::string script =
      "import resource, torch\n"
      "x = torch.ones(1 << 24); y = torch.ones(1 << 24)\n"
      "for _ in range(8):\n"
      "    z = x + y; del z\n"
      "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
      "for _ in range(3):\n"
      "    z = x + y; del z\n"
      "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n";
  testing::WriteTextFile(dir + "/faults.py", script);
  auto r = testing::RunCommand({"/usr/bin/python3", dir + "/faults.py"}, absl::Minutes(2));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  long faults = -1;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "%ld", &faults), 1) << r.out;
  return faults;
}

TEST(ProductionRunnerMemoryTest, AFormsTimedCallsPayNoPageFaultsForTheirResult) {
  const std::string dir = testing::MakeTempDir("kevo-prod-faults");
  // The hazard is real here: without the runner's care each call faults in
  // its whole result.
  EXPECT_GT(FaultsOfThreeCallsWithoutTheRunner(dir), 3 * kResultPages / 2)
      << "glibc no longer maps large blocks afresh here";

  // The runner on `x * 2` at 2^24 floats: a kernel writing into its outputs,
  // and PyTorch's form allocating its result on every call.
  testing::WriteTextFile(dir + "/k.cc",
                         "#include <cstdint>\nextern \"C\" void kevo_entry(void** a) {\n"
                         "  const float* x = static_cast<const float*>(a[0]); float* y = static_cast<float*>(a[1]);\n"
                         "  int64_t n = *static_cast<int64_t*>(a[2]);\n"
                         "  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n}\n");
  auto cc = testing::RunCommand({"/usr/bin/g++", "-O2", "-shared", "-fPIC", "-o", dir + "/k.so", dir + "/k.cc"},
                                absl::Minutes(1));
  ASSERT_EQ(cc.exit_code, 0) << cc.err;
  {
    std::vector<float> x(kElements, 1.5f);
    std::ofstream(dir + "/inputs.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(x.data()), kElements * sizeof(float));
  }
  const nlohmann::json spec = {
      {"task", "twice"},
      {"inputs", {{{"name", "x"}, {"dtype", "F32"}, {"shape", {kElements}}}}},
      {"outputs", {{{"name", "y"}, {"dtype", "F32"}, {"shape", {kElements}}}}},
      {"params",
       {{{"name", "x"}, {"kind", "input"}}, {{"name", "y"}, {"kind", "output"}}, {{"name", "n"}, {"kind", "symbol"}}}},
      {"symbols", {{"n", kElements}}},
      {"torch", "x * 2"},
      {"vendor", ""},
      {"threads", {1}},
      {"llc_bytes", 1 << 20},
      {"mem_budget_bytes", int64_t{256} << 20}};
  testing::WriteTextFile(dir + "/spec.json", spec.dump());
  auto run = testing::RunCommand(
      {"/usr/bin/python3", testing::BinDir() + "/kevo-runner-production", "--spec=" + dir + "/spec.json",
       "--inputs=" + dir + "/inputs.bin", "--kernel=" + dir + "/k.so", "--device=cpu", "--outputs=" + dir + "/out.bin",
       "--result=" + dir + "/result.json", "--time_cap_s=0.5"},
      absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = nlohmann::json::parse(testing::ReadTextFile(dir + "/result.json"));
  ASSERT_EQ(r.at("status"), "OK") << r.dump();
  int timed = 0;
  for (const nlohmann::json& f : r.at("forms")) {
    if (!f.at("timed").get<bool>()) continue;
    ++timed;
    const double faults = f.at("series").at("minor_faults_per_call").get<double>();
    EXPECT_LT(faults, kResultPages / 16) << f.at("name")
                                         << ": the production runner's form faults in its result on every call";
  }
  EXPECT_GE(timed, 1);
  EXPECT_LT(r.at("candidate").at("minor_faults_per_call").get<double>(), kResultPages / 16);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kevo
