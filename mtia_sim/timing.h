// The MTIA simulator's cycle model. The functional run records, per PE, the
// commands a kernel issued (a trace with dependencies); Simulate() then times
// all PEs together with a deterministic discrete-event model:
//   - two in-order issuing cores per PE (scalar: DMA, vector: unit commands);
//   - per-PE units (DPE, SIMD, RE, MLU) that run one command at a time, each
//     starting when its inputs are ready (dependencies from the trace);
//   - DMAs as flows over shared resources (DRAM, SRAM, each PE's port) whose
//     rates are the max-min fair share of the resources' bandwidth, recomputed
//     whenever a flow starts or ends;
//   - barriers and broadcast reads as joins across PEs.
// Same trace, same cycles: no wall clock, no threads, no unordered containers.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

#include "mtia_sim/mtia.h"

namespace kevo::mtia::internal {

enum class Unit : uint8_t { kDma, kDpe, kSimd, kRe, kMlu, kNone };
inline constexpr int kNumUnits = 5;

enum class OpKind : uint8_t {
  kTransfer,  // DMA (unit kDma): latency, then a flow over shared resources
  kCompute,   // fixed duration on a unit
  kRecv,      // fixed duration on the RE once the sender's kSend has finished
  kWait,      // stalls both cores until deps have finished, then `cycles` more (a scalar read)
  kSync,      // stalls both cores until every earlier command has finished
  kBarrier,   // kSync, then a join of all PEs
};

// Shared resources a transfer's flow uses (bit mask); PE ports are implied by
// the participants.
inline constexpr uint8_t kUsesDram = 1;
inline constexpr uint8_t kUsesSram = 2;

struct TraceOp {
  OpKind kind = OpKind::kCompute;
  Unit unit = Unit::kNone;
  double cycles = 0;  // kCompute / kRecv duration
  // kTransfer:
  double bytes = 0;  // bytes crossing the shared resources (32-byte granules)
  double latency = 0;
  uint8_t memories = 0;    // kUsesDram | kUsesSram
  int32_t broadcast = -1;  // index into Trace::broadcasts, or -1
  // kRecv: the sender's op.
  int32_t remote_pe = -1;
  int32_t remote_op = -1;
  std::vector<int32_t> deps;  // earlier ops of the same PE
  double ideal_cycles = 0;    // kTransfer: bytes / port rate (for contention counters)
};

struct Broadcast {
  std::vector<std::pair<int32_t, int32_t>> members;  // (pe, op)
};

struct Trace {
  std::vector<std::vector<TraceOp>> pes;
  std::vector<Broadcast> broadcasts;
};

struct Timing {
  uint64_t cycles = 0;  // launch overhead included
  UnitCounters units[kNumUnits];
  double dma_contention_cycles = 0;
  double pe_busy_cycles = 0;
  double wait_cycles = 0;
  double barrier_cycles = 0;
};

// Times `trace` under `config`. Fails with kInternal only if the trace is
// inconsistent (a bug in the recorder, e.g. a dependency on a later op).
absl::StatusOr<Timing> Simulate(const Config& config, const Trace& trace);

}  // namespace kevo::mtia::internal
