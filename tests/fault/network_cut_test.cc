// A worker cut off from the network: it runs in its own network namespace,
// joined to the coordinator's by a veth pair, and the link is cut with
// `ip link set ... down` while it runs an evaluation, its TCP connection left
// open. Its lease must lapse and the evaluation go to the other worker,
// recorded once from it; once the link is restored the worker reconnects
// under its own id, its late result is not recorded, and it is given work
// again. Needs root (ip netns); skips, saying why, without it.
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/status.h"
#include "tests/fault/fault_cases.h"
#include "tests/fault/fault_testing.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

// A network namespace joined to this one by a veth pair, 10.A.B.(4k+1) on
// this side and .(4k+2) inside, from this process's id (so that two runs on
// one host do not collide). Removed, with its link, when destroyed.
class NetNamespace {
 public:
  // Unavailable saying why when it cannot be made (not root, no iproute2,
  // no network namespaces).
  static absl::StatusOr<std::unique_ptr<NetNamespace>> Create() {
    if (::geteuid() != 0) return absl::UnavailableError("needs root (ip netns add)");
    if (IpCommand().empty()) return absl::UnavailableError("needs iproute2's ip command");
    const int pid = static_cast<int>(::getpid());
    auto ns = std::unique_ptr<NetNamespace>(new NetNamespace(pid));
    const std::string base = absl::StrFormat("10.%d.%d.", 100 + (pid >> 14) % 100, (pid >> 6) % 256);
    ns->host_address_ = absl::StrCat(base, 4 * (pid % 64) + 1);
    const std::string inside = absl::StrCat(base, 4 * (pid % 64) + 2);
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"ip", "netns", "add", ns->name_},
             {"ip", "link", "add", ns->host_link_, "type", "veth", "peer", "name", ns->inner_link_},
             {"ip", "link", "set", ns->inner_link_, "netns", ns->name_},
             {"ip", "addr", "add", ns->host_address_ + "/30", "dev", ns->host_link_},
             {"ip", "link", "set", ns->host_link_, "up"},
             {"ip", "-n", ns->name_, "addr", "add", inside + "/30", "dev", ns->inner_link_},
             {"ip", "-n", ns->name_, "link", "set", ns->inner_link_, "up"},
             {"ip", "-n", ns->name_, "link", "set", "lo", "up"}}) {
      KEVO_RETURN_IF_ERROR(Ip(argv));
    }
    return ns;
  }
  ~NetNamespace() {
    // Deleting one end of the pair deletes both; the namespace goes when the
    // last process in it (the worker, killed by the cluster) has.
    (void)Ip({"ip", "link", "del", host_link_});
    (void)Ip({"ip", "netns", "del", name_});
  }

  // Starts a command inside the namespace (Cluster::StartWorker's launcher).
  std::vector<std::string> Launcher() const { return {IpCommand(), "netns", "exec", name_}; }
  // This side's address: what the coordinator listens on.
  const std::string& host_address() const { return host_address_; }
  absl::Status Cut() { return Ip({"ip", "link", "set", host_link_, "down"}); }
  absl::Status Restore() { return Ip({"ip", "link", "set", host_link_, "up"}); }

 private:
  explicit NetNamespace(int pid)
      : name_(absl::StrCat("kevo-fault-", pid)),
        host_link_(absl::StrCat("kvh", pid)),
        inner_link_(absl::StrCat("kvn", pid)) {
    // A namespace left by an earlier process of the same id (killed by a
    // test timeout) would make `ip netns add` fail.
    (void)Ip({"ip", "netns", "del", name_});
    (void)Ip({"ip", "link", "del", host_link_});
  }
  // The ip command's path (RunCommand does not search PATH); "" when none.
  static std::string IpCommand() {
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(path, X_OK) == 0) return path;
    }
    return "";
  }
  // Runs `ip` with argv[1:].
  static absl::Status Ip(std::vector<std::string> argv) {
    argv[0] = IpCommand();
    CommandResult r = RunCommand(argv, absl::Seconds(10));
    if (r.exit_code == 0) return absl::OkStatus();
    std::string command;
    for (const std::string& a : argv) absl::StrAppend(&command, command.empty() ? "" : " ", a);
    return absl::UnavailableError(absl::StrCat(command, ": exit ", r.exit_code, ": ", r.err));
  }

  std::string name_, host_link_, inner_link_, host_address_;
};

TEST(NetworkCutTest, ACutOffWorkersEvaluationGoesElsewhereAndItServesAgainOnceReconnected) {
  auto ns = NetNamespace::Create();
  if (!ns.ok()) GTEST_SKIP() << "a worker in its own network namespace: " << ns.status().message();
  Cluster cluster(MakeTempDir("kevo-fault-netcut"), (*ns)->host_address());
  // Heartbeats every 2 s: a worker silent for 3 s after its lease lapsed, at
  // the latest 5 s after its last heartbeat, is cut off. The veth address is
  // not loopback: plaintext needs saying so.
  absl::Status started = cluster.StartCoordinator({"--lease-seconds", "5", "--insecure-plaintext"});
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_TRUE(cluster.StartWorker("worker-a", {"--production", "off"}, (*ns)->Launcher()).ok());
  ASSERT_TRUE(cluster.StartWorker("worker-b", {"--production", "off"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());

  // Both idle: worker-a, first in id order, takes it. Cut its link while it
  // times the candidate.
  EvaluationStream first(cluster, VectorAddRequest());
  const std::string log_a = cluster.dir() + "/worker-worker-a.log";
  auto running = WaitForStageStart(log_a, "profile", absl::Minutes(3));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE((*ns)->Cut().ok());
  const EvaluationStream::Heard heard = first.Wait();
  ASSERT_TRUE(heard.final.has_value());
  ASSERT_FALSE(heard.requeues.empty());
  ExpectOutcome(FaultCaseNamed("worker_cut_off"),
                absl::StrCat("the evaluation ", EvaluationOutcome(*heard.final, "worker-b")), heard.requeues.back());
  EXPECT_EQ(*running, absl::StrCat(heard.eval_id, "/1")) << "worker-a was running another evaluation";

  // The link back: worker-a reconnects (its old stream was ended by the
  // coordinator), sends its late result again, and it is not recorded.
  const int64_t restored_micros = absl::ToUnixMicros(absl::Now());
  ASSERT_TRUE((*ns)->Restore().ok());
  absl::Status back = WaitForReconnect(cluster, "worker-a", restored_micros, absl::Minutes(2));
  ASSERT_TRUE(back.ok()) << back << "; see " << log_a;
  const bool late_seen =
      WaitForText(cluster.dir() + "/coordinator.log",
                  absl::StrCat(" result for ", heard.eval_id, " attempt=1 from worker-a"), absl::Minutes(2));
  EXPECT_TRUE(late_seen) << "worker-a's late result never reached the coordinator";
  auto stored = GetEvaluation(cluster, heard.eval_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->worker_id(), "worker-b") << "the late result replaced the one recorded";
  EXPECT_EQ(stored->attempt(), 2);

  // It serves again: with worker-b gone, the next evaluation is worker-a's.
  cluster.worker("worker-b")->Kill(SIGTERM);
  ASSERT_TRUE(cluster.worker("worker-b")->Wait(absl::Seconds(30)).ok());
  EvaluationStream second(cluster, VectorAddRequest());
  const EvaluationStream::Heard next = second.Wait();
  ASSERT_TRUE(next.final.has_value());
  ExpectOutcome(FaultCaseNamed("worker_link_restored"),
                absl::StrCat("worker-a connected again", late_seen ? ", its late result not recorded" : "",
                             "; the next evaluation ", v1::EvalStatus_Name(next.final->status()), " from ",
                             next.final->worker_id()));
}

}  // namespace
}  // namespace kevo::testing
