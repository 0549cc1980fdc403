// kevo-runner-production times PyTorch forms that allocate their result on
// every call; the candidate writes into outputs made once. Without care,
// glibc maps each large result afresh and unmaps it on free, so every timed
// call of the form pays a page fault per page of its result (an OS cost, most
// of `x + y`'s time where faults are dear). The runner keeps freed memory in
// the heap (keep_freed_memory) and reports the faults each series' timed calls
// took (minor_faults_per_call): after warm-up a form's calls fault no pages.
// Keeping what it frees makes the runner's address space grow, so its input
// copies are sized to what the worker's limit leaves.
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

// The runner on `x * 2` at 2^24 floats: a kernel writing into its outputs,
// and PyTorch's form allocating its result on every call. `prefix` runs
// before the runner (prlimit, for the worker's address-space limit).
nlohmann::json RunTwiceAtScale(const std::string& dir, int64_t llc_bytes, int64_t mem_budget_bytes,
                               const std::vector<std::string>& prefix = {}) {
  testing::WriteTextFile(dir + "/k.cc",
                         "#include <cstdint>\nextern \"C\" void kevo_entry(void** a) {\n"
                         "  const float* x = static_cast<const float*>(a[0]); float* y = static_cast<float*>(a[1]);\n"
                         "  int64_t n = *static_cast<int64_t*>(a[2]);\n"
                         "  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n}\n");
  auto cc = testing::RunCommand({"/usr/bin/g++", "-O2", "-shared", "-fPIC", "-o", dir + "/k.so", dir + "/k.cc"},
                                absl::Minutes(1));
  EXPECT_EQ(cc.exit_code, 0) << cc.err;
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
      {"llc_bytes", llc_bytes},
      {"mem_budget_bytes", mem_budget_bytes}};
  testing::WriteTextFile(dir + "/spec.json", spec.dump());
  std::vector<std::string> argv = prefix;
  for (const std::string& a :
       {std::string("/usr/bin/python3"), testing::BinDir() + "/kevo-runner-production", "--spec=" + dir + "/spec.json",
        "--inputs=" + dir + "/inputs.bin", "--kernel=" + dir + "/k.so", std::string("--device=cpu"),
        "--outputs=" + dir + "/out.bin", "--result=" + dir + "/result.json", std::string("--time_cap_s=0.5")}) {
    argv.push_back(a);
  }
  auto run = testing::RunCommand(argv, absl::Minutes(3));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json r =
      nlohmann::json::parse(testing::ReadTextFile(dir + "/result.json"), nullptr, /*allow_exceptions=*/false);
  return r.is_object() ? r : nlohmann::json::object();
}

TEST(ProductionRunnerMemoryTest, AFormsTimedCallsPayNoPageFaultsForTheirResult) {
  const std::string dir = testing::MakeTempDir("kevo-prod-faults");
  // The hazard is real here: without the runner's care each call faults in
  // its whole result.
  EXPECT_GT(FaultsOfThreeCallsWithoutTheRunner(dir), 3 * kResultPages / 2)
      << "glibc no longer maps large blocks afresh here";

  const nlohmann::json r = RunTwiceAtScale(dir, /*llc_bytes=*/1 << 20, /*mem_budget_bytes=*/int64_t{256} << 20);
  ASSERT_EQ(r.value("status", ""), "OK") << r.dump();
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

// Under the worker's address-space limit (RLIMIT_AS, 2 GiB in the backend
// tests) torch alone takes ~800 MiB of it and keeps what it frees, so the
// input copies a large last-level cache asks for must fit what is left: CI
// saw every form time and then fail its checked call with MemoryError. The
// spec here asks for 4 copies of the 128 MiB set (twice a 256 MiB cache):
// without a limit the runner then peaks at ~1.75 GiB here, over 1.6 GiB.
TEST(ProductionRunnerMemoryTest, InputCopiesFitTheWorkersAddressSpaceLimit) {
  const std::string dir = testing::MakeTempDir("kevo-prod-limit");
  const int64_t limit = int64_t{1600} << 20;
  const nlohmann::json r = RunTwiceAtScale(dir, /*llc_bytes=*/int64_t{512} << 20, /*mem_budget_bytes=*/int64_t{1} << 30,
                                           {"/usr/bin/prlimit", absl::StrCat("--as=", limit), "--"});
  ASSERT_EQ(r.value("status", ""), "OK") << r.dump();
  std::printf("copies %d, peak address space %lld MiB\n", r.at("copies").get<int>(),
              static_cast<long long>(r.at("vm_peak_bytes").get<int64_t>() >> 20));
  EXPECT_LT(r.at("copies").get<int>(), 4) << "the copies ignored the address-space limit";
  EXPECT_LT(r.at("vm_peak_bytes").get<int64_t>(), limit);
  for (const nlohmann::json& f : r.at("forms")) {
    // Debian's torch 1.13 has no torch.compile: that form is untimed for that
    // reason alone, never for want of memory.
    const std::string error = f.value("error", "");
    if (f.at("name") == "torch_compile" && error.find("has no torch.compile") != std::string::npos) continue;
    EXPECT_TRUE(f.at("timed").get<bool>()) << f.dump();
    EXPECT_EQ(error.find("MemoryError"), std::string::npos) << f.dump();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kevo
