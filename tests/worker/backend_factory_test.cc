// The worker's backend factory (worker/backends/factory.h): the platform name
// picks the backend, an unknown one is refused naming the platforms this
// build has, the shared options reach the platform's own, and each platform's
// default slots. The cases refused by the options fail before any compiler or
// runner is looked for, so they need neither.
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "worker/backends/factory.h"

namespace kevo::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Says what a GPU backend's Hello says about its GPUs.
class FakeGpuBackend final : public Backend {
 public:
  FakeGpuBackend(std::string gpus, bool compile_only) : gpus_(std::move(gpus)), compile_only_(compile_only) {}
  absl::StatusOr<v1::Hello> Describe() override {
    v1::Hello hello;
    if (!gpus_.empty()) (*hello.mutable_capabilities())["gpus"] = gpus_;
    hello.set_compile_only(compile_only_);
    return hello;
  }
  v1::Evaluation Evaluate(const v1::Task&, const v1::Candidate&, const EventSink&) override { return {}; }

 private:
  const std::string gpus_;
  const bool compile_only_;
};

TEST(BackendFactoryTest, ListsEveryPlatformOfThisBuild) {
  EXPECT_THAT(BackendPlatforms(), ElementsAre("cpu", "nvidia", "amd", "mtia-sim"));
}

TEST(BackendFactoryTest, UnknownPlatformIsInvalidArgumentNamingThePlatforms) {
  auto backend = CreateBackend("tpu", BackendOptions());
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("unknown platform 'tpu'"));
  EXPECT_THAT(backend.status().message(), HasSubstr("cpu, nvidia, amd, mtia-sim"));
}

TEST(BackendFactoryTest, CpuGetsTheSharedOptions) {
  BackendOptions options;
  options.profile_time_cap_s = 0;  // the cpu backend refuses it before anything starts
  auto backend = CreateBackend("cpu", options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("cpu backend: profile_time_cap_s must be > 0"));
}

TEST(BackendFactoryTest, MtiaGetsTheSharedOptionsAndItsChip) {
  BackendOptions options;
  options.mtia_chip = "9000";
  auto backend = CreateBackend("mtia-sim", options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("unknown chip '9000'"));

  options.mtia_chip = "2i";
  options.memory_limit_bytes = int64_t{64} << 20;
  backend = CreateBackend("mtia-sim", options);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("memory_limit_bytes must be at least 512 MiB"));
}

TEST(BackendFactoryTest, NvidiaGetsTheSharedOptions) {
  BackendOptions options;
  options.profile_time_cap_s = -1;
  auto backend = CreateBackend("nvidia", options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("nvidia backend: profile_time_cap_s must be > 0"));
}

TEST(BackendFactoryTest, DefaultSlotsFollowThePlatform) {
  FakeGpuBackend three_gpus("3", /*compile_only=*/false);
  EXPECT_EQ(DefaultSlots("cpu", three_gpus), 1);
  EXPECT_EQ(DefaultSlots("mtia-sim", three_gpus), 1);
  EXPECT_EQ(DefaultSlots("nvidia", three_gpus), 5);
  EXPECT_EQ(DefaultSlots("amd", three_gpus), 5);
  FakeGpuBackend compile_only("", /*compile_only=*/true);
  EXPECT_EQ(DefaultSlots("amd", compile_only), 2);
  FakeGpuBackend unsaid("", /*compile_only=*/false);
  EXPECT_EQ(DefaultSlots("nvidia", unsaid), 3);
}

}  // namespace
}  // namespace kevo::worker
