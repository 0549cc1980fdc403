#include "tests/fault/fault_cases.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/testing/generated_doc.h"

namespace kevo::testing {

const std::vector<FaultCase>& FaultCases() {
  static const auto* cases = new std::vector<FaultCase>{
      // tests/fault/worker_kill_test.cc
      {"worker_killed_compiling", "worker_kill_test",
       "kill -9 of a worker while it compiles a job's candidate (its log's `compile started`)",
       "the worker's stream ends, so its lease returns to the queue at once, the loss counted (a second "
       "would quarantine it); the other worker runs the evaluation again; the job ends with its whole "
       "budget, every node evaluated and recorded once",
       "JOB_DONE; the evaluation OK at attempt 2 from the other worker"},
      {"worker_killed_validating", "worker_kill_test",
       "kill -9 of a worker while it validates a job's candidate (`validate started`)", "as for compile",
       "JOB_DONE; the evaluation OK at attempt 2 from the other worker"},
      {"worker_killed_profiling", "worker_kill_test",
       "kill -9 of a worker while it times a job's candidate (`profile started`)", "as for compile",
       "JOB_DONE; the evaluation OK at attempt 2 from the other worker"},
      // tests/fault/coordinator_kill_test.cc
      {"coordinator_killed_repeatedly", "coordinator_kill_test",
       "kill -9 of the coordinator 20 times, at random intervals of 0.1 to 1.5 s, while a job runs on three "
       "workers; restarted on the same port each time",
       "each restart reloads the jobs, their trees and the leases from RocksDB; the workers reconnect, keep "
       "their leases and send again the results a dead coordinator may not have stored, which are dropped "
       "when they were; no node is lost, none evaluated twice, and the store opens and reads cleanly after "
       "the last kill",
       "JOB_DONE with 24 of 24 evaluations, 0 lost to the faults"},
      // tests/fault/network_cut_test.cc
      {"worker_cut_off", "network_cut_test",
       "a worker in its own network namespace has its link cut (`ip link set ... down`) while it times a "
       "candidate; its TCP connection stays open",
       "no heartbeat comes: once its lease lapsed and it said nothing for one and a half heartbeats (2 s "
       "each), the evaluation returns to the queue and goes to the other worker, never back to the silent "
       "one, which is leased nothing more; its stream is cancelled from the coordinator's side",
       "the evaluation OK at attempt 2 from the other worker", "held the lease and sent nothing for"},
      {"worker_link_restored", "network_cut_test", "the link restored",
       "the worker finds its stream ended, reconnects under its own id and sends its late result, which is "
       "dropped; it is leased work again",
       "worker-a connected again, its late result not recorded; the next evaluation OK from worker-a"},
      // tests/fault/slow_worker_test.cc
      {"worker_stopped", "slow_worker_test",
       "a worker stopped (SIGSTOP) while it times a candidate, for longer than the lease, then continued: "
       "its connection stays up, but it says nothing",
       "as for a cut link: the evaluation goes to the other worker; the stopped worker's stream is cancelled; "
       "continued, it finishes its attempt, reconnects and sends the result, which is dropped",
       "the evaluation OK at attempt 2 from the other worker; the stopped worker's late result not recorded",
       "held the lease and sent nothing for"},
      // tests/fault/toolchain_test.cc
      {"toolchain_differs", "toolchain_test",
       "the two workers of a job build with different compilers (g++ 12 and clang++ 14, `--compiler`), "
       "without production timing, so every choice of the job's best after the first compares fitness",
       "each evaluation carries the fingerprint (device, compiler) of the worker that measured it, and its "
       "speedup is over a reference that worker built and timed in the same process; a kernel replaces the "
       "job's best on a side-by-side timing beside it, or on fitness measured with the best's own "
       "toolchain, never on fitness from another",
       "JOB_DONE; 0 of the best-kernel decisions compared fitness across toolchains", "not compared"},
      // tests/fault/disk_full_test.cc
      {"disk_below_reserve", "disk_full_test",
       "the disk holding `--db` has less free space than `--db-reserve-mb` (default 64)",
       "nothing is written, so RocksDB never meets the full disk; "
       "`kevo_coordinator_db_writes_refused_total` counts it and the `KevoCoordinatorWritesRefused` alert "
       "fires; the coordinator stays up and keeps answering reads",
       "SubmitJob: UNAVAILABLE, nothing of the job kept", "MiB kept in reserve (--db-reserve-mb)"},
      {"disk_full_result_waits", "disk_full_test", "a job's result arrives while writes are refused",
       "the result waits in memory, retried every second; the job proposes nothing and does not end",
       "GetJob: JOB_RUNNING, with only what is stored counted"},
      {"disk_space_returns", "disk_full_test", "space returns",
       "writes go ahead; the waiting results are stored in order; the job spends the rest of its budget",
       "GetJob: JOB_DONE with every evaluation; SubmitJob: OK"},
      {"disk_reserve_too_small", "disk_full_test", "`--db-reserve-mb` below 8",
       "refused at start: with less, a full disk reaches RocksDB in the middle of a write, and Debian's "
       "RocksDB 7.8, built with assertions, aborts on a failed WAL append (seen with 0: the first write "
       "after the disk filled killed the coordinator)",
       "the coordinator exits with code 2", "--db-reserve-mb needs a number of MiB >= 8"},
      {"disk_full_then_kill", "disk_full_test", "kill -9 of the coordinator after all that",
       "on restart the jobs, their states, counts and best nodes are those the clients were told; the "
       "refused submit left nothing",
       "GetJob: JOB_DONE with every evaluation and the same best node; ListJobs: the 2 jobs taken"},
  };
  return *cases;
}

const FaultCase& FaultCaseNamed(const std::string& id) {
  for (const FaultCase& c : FaultCases()) {
    if (id == c.id) return c;
  }
  ADD_FAILURE() << "no fault case '" << id << "' in tests/fault/fault_cases.cc";
  static const FaultCase* none = new FaultCase{};
  return *none;
}

void ExpectOutcome(const FaultCase& row, const std::string& client_gets, const std::string& message) {
  EXPECT_EQ(client_gets, row.client_gets) << "fault case " << row.id << " (tests/fault/fault_cases.cc)";
  if (*row.told != '\0') {
    EXPECT_THAT(message, ::testing::HasSubstr(row.told)) << "fault case " << row.id << " (tests/fault/fault_cases.cc)";
  }
}

std::string FaultTable() {
  std::string out = "| fault | what kevo does | what the client gets | test |\n|---|---|---|---|\n";
  for (const FaultCase& c : FaultCases()) {
    std::string gets = MarkdownCell(c.client_gets);
    if (*c.told != '\0') absl::StrAppend(&gets, "; told \"", MarkdownCell(c.told), "\"");
    absl::StrAppend(&out, "| ", MarkdownCell(c.fault), " | ", MarkdownCell(c.kevo_does), " | ", gets, " | `", c.test,
                    "` |\n");
  }
  return out;
}

}  // namespace kevo::testing
