// The MTIA candidate ABI (docs/mtia-simulator.md): a candidate compiled with
// only mtia_sim/mtia.h into a shared object loads with RTLD_NOW into a
// process that exports no kevo symbols, and its kevo_mtia_launch computes the
// task's result into host buffers through a Device it sees as a Grid.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "mtia_sim/device.h"
#include "mtia_sim/mtia.h"

namespace kevo::mtia {
namespace {

TEST(MtiaCandidateAbiTest, SharedObjectBuiltAgainstTheHeaderRunsSoftmax) {
  const char* src_dir = std::getenv("KEVO_SOURCE_DIR");
  ASSERT_NE(src_dir, nullptr) << "ctest sets KEVO_SOURCE_DIR";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kevo_mtia_abi_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path so = dir / "candidate.so";
  std::string cmd = std::string("g++ -std=c++20 -O2 -shared -fPIC -Wl,--no-undefined -I") + src_dir + " " + src_dir +
                    "/mtia_sim/examples/softmax_candidate.cc -o " + so.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;  // --no-undefined: nothing from kevo needed at link time

  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto launch = reinterpret_cast<LaunchFn>(dlsym(handle, kLaunchSymbol));
  ASSERT_NE(launch, nullptr);

  auto dev = Device::Create();
  ASSERT_TRUE(dev.ok());
  int64_t rows = 33, cols = 1001;
  std::vector<float> x(rows * cols), y(rows * cols, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 100.f + static_cast<float>((i * 31) % 97) / 12.f;
  Buffer xb = *(*dev)->MapHost(x.data(), x.size() * 4), yb = *(*dev)->MapHost(y.data(), y.size() * 4);
  void* args[] = {&xb, &yb, &rows, &cols};
  launch(**dev, args);
  ASSERT_TRUE((*dev)->ok()) << (*dev)->error();
  EXPECT_EQ((*dev)->stats().launches, 1u);
  EXPECT_GT((*dev)->stats().cycles, 0u);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double{x[r * cols + c]});
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c) {
      double ref = std::exp(x[r * cols + c] - mx) / sum;
      ASSERT_NEAR(y[r * cols + c], ref, 1e-7 + 1e-4 * ref) << r << "," << c;
    }
  }
  dlclose(handle);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kevo::mtia
