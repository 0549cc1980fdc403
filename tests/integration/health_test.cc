// grpc.health.v1.Health on both binaries, as a load balancer or a Kubernetes
// grpc probe asks it: the coordinator answers SERVING on its gRPC port and
// on its --health-listen side port; a
// worker started with --health-listen answers NOT_SERVING until it holds a
// stream to the coordinator, SERVING while it does, NOT_SERVING again once
// the coordinator is gone.
#include <signal.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

// grpc.health.v1.HealthCheckResponse.status: 1 SERVING, 2 NOT_SERVING; -1
// when the call failed. The request (service "") encodes as zero bytes; the
// response is field 1, a varint.
int HealthStatus(const std::string& address) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer request(nullptr, 0), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  if (!status.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
  return bytes.empty() ? 0 : -1;  // UNKNOWN (0) encodes as nothing
}

int WaitForHealth(const std::string& address, int want, absl::Duration timeout) {
  int got = -1;
  for (absl::Time until = absl::Now() + timeout; absl::Now() < until; absl::SleepFor(absl::Milliseconds(100))) {
    got = HealthStatus(address);
    if (got == want) break;
  }
  return got;
}

TEST(HealthTest, CoordinatorAndWorkerAnswerTheGrpcHealthService) {
  Cluster cluster(MakeTempDir("kevo-health"));
  const std::string side = absl::StrCat("127.0.0.1:", FreePort());
  ASSERT_TRUE(cluster.StartCoordinator({"--health-listen", side}).ok());
  EXPECT_EQ(HealthStatus(cluster.address()), 1);
  EXPECT_EQ(HealthStatus(side), 1) << "the plaintext side port (--health-listen)";

  const int port = FreePort();
  const std::string health = absl::StrCat("127.0.0.1:", port);
  ASSERT_TRUE(cluster.StartWorker("w", {"--platform", "mtia-sim", "--health-listen", health}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  EXPECT_EQ(WaitForHealth(health, 1, absl::Seconds(10)), 1) << "a connected worker is SERVING";

  cluster.StopCoordinator(SIGKILL);
  EXPECT_EQ(WaitForHealth(health, 2, absl::Seconds(20)), 2) << "a worker without a coordinator is NOT_SERVING";
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  EXPECT_EQ(WaitForHealth(health, 1, absl::Seconds(30)), 1) << "serving again after it reconnects";
}

}  // namespace
}  // namespace kevo::testing
