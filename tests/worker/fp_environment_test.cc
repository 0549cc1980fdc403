// Loading a kernel built with -ffast-math (GCC links crtfastmath, whose
// constructor sets flush-to-zero and denormals-are-zero) must not change the
// floating-point environment the runners' reference and baselines compute in:
// kevo-runner-cpu's OpenKernelLibrary and kevo-runner-production's loader both
// put it back.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <cfenv>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/testing/process.h"
#include "worker/runner/runner_io.h"

namespace kevo {
namespace {

constexpr unsigned kFtzDaz = 0x8040;  // MXCSR flush-to-zero (bit 15) | denormals-are-zero (bit 6)

// A shared object built with -ffast-math at compile and link time.
std::string FastMathLibrary(const std::string& dir) {
  const std::string src = dir + "/fast.cc", so = dir + "/fast.so";
  testing::WriteTextFile(src, "extern \"C\" float kevo_scale(float x) { return x * 0.5f; }\n");
  auto r =
      testing::RunCommand({"/usr/bin/g++", "-O2", "-ffast-math", "-fPIC", "-shared", src, "-o", so}, absl::Minutes(1));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return so;
}

// MXCSR after a plain dlopen of `so`, in a child process.
unsigned MxcsrAfterPlainDlopen(const std::string& so) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    unsigned csr = _mm_getcsr();
    (void)!write(fds[1], &csr, sizeof(csr));
    _exit(0);
  }
  unsigned csr = 0;
  EXPECT_EQ(read(fds[0], &csr, sizeof(csr)), static_cast<ssize_t>(sizeof(csr)));
  close(fds[0]);
  close(fds[1]);
  waitpid(pid, nullptr, 0);
  return csr;
}

TEST(FpEnvironmentTest, LoadingAFastMathKernelLeavesTheRunnersFpEnvironmentAlone) {
  const std::string dir = testing::MakeTempDir("kevo-fenv");
  const std::string so = FastMathLibrary(dir);
  ASSERT_EQ(_mm_getcsr() & kFtzDaz, 0u);
  // The hazard is real on this toolchain: a plain dlopen turns FTZ/DAZ on.
  EXPECT_EQ(MxcsrAfterPlainDlopen(so) & kFtzDaz, kFtzDaz) << "crtfastmath no longer sets FTZ/DAZ here";
  runner::OpenKernelLibrary(so);
  EXPECT_EQ(_mm_getcsr() & kFtzDaz, 0u) << "OpenKernelLibrary left FTZ/DAZ on";
  std::filesystem::remove_all(dir);
}

// A candidate that sets flush-to-zero, denormals-are-zero and round toward
// zero by ldmxcsr in its call (the adversarial set's sets_mxcsr_for_baseline)
// or changes the x87 rounding: what kevo-runner-cpu does after every kernel
// call puts the starting environment back.
TEST(FpEnvironmentTest, WhatAKernelCallChangedIsPutBackAfterIt) {
  const unsigned start = _mm_getcsr();
  ASSERT_EQ(start & kFtzDaz, 0u);
  runner::RestoreFpEnvironment();  // reads the starting environment
  _mm_setcsr(start | kFtzDaz | 0x6000);
  runner::RestoreFpEnvironment();
  EXPECT_EQ(_mm_getcsr(), start);
  fesetround(FE_UPWARD);
  runner::RestoreFpEnvironment();
  EXPECT_EQ(fegetround(), FE_TONEAREST);
  EXPECT_EQ(_mm_getcsr(), start);
}

TEST(FpEnvironmentTest, TheProductionRunnerLoadsAFastMathKernelWithoutChangingItsFpEnvironment) {
  const std::string dir = testing::MakeTempDir("kevo-fenv-py");
  const std::string so = FastMathLibrary(dir);
  // fenv_t on x86-64 glibc: the x87 environment (28 bytes), then MXCSR.
  const std::string script =
      "import ctypes, importlib.util, struct, sys\n"
      "spec = importlib.util.spec_from_file_location('pr', sys.argv[1])\n"
      "pr = importlib.util.module_from_spec(spec); spec.loader.exec_module(pr)\n"
      "def mxcsr():\n"
      "    env = ctypes.create_string_buffer(64); pr._LIBM.fegetenv(env)\n"
      "    return struct.unpack_from('<I', env.raw, 28)[0]\n"
      "before = mxcsr(); pr.load_keeping_fp_environment(sys.argv[2]); after = mxcsr()\n"
      "print(f'{before:#x} {after:#x}')\n";
  testing::WriteTextFile(dir + "/probe.py", script);
  auto r = testing::RunCommand(
      {"/usr/bin/python3", dir + "/probe.py", testing::SourceDir() + "/worker/runner/production_runner.py", so},
      absl::Minutes(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  unsigned before = 0, after = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "%x %x", &before, &after), 2) << r.out;
  EXPECT_EQ(before & kFtzDaz, 0u);
  EXPECT_EQ(after, before) << "the production runner's loader changed MXCSR: " << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kevo
