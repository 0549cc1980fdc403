#include "mtia_sim/timing.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kevo::mtia::internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kDram = 0;
constexpr int kSram = 1;
constexpr int kFirstPort = 2;

struct OpState {
  double issue = 0;  // when the command reached its unit's queue
  double start = -1;
  double end = -1;  // < 0: not known yet
};

struct PeState {
  const std::vector<TraceOp>* ops = nullptr;
  std::vector<OpState> st;
  size_t issue_ptr = 0;
  double core[2] = {0, 0};  // 0: scalar (DMA) core, 1: vector (unit) core
  std::deque<int32_t> queue[kNumUnits];
  double unit_free[kNumUnits] = {};
  int dma_inflight = 0;
  double dma_last_start = 0;
  int unknown = 0;  // issued commands whose end is not known yet
  double max_end = 0;
  int barriers_passed = 0;
  bool at_barrier = false;
  std::vector<std::pair<double, double>> busy;  // compute-unit intervals
};

struct Flow {
  double bytes = 0;
  double remaining = 0;
  double rate = 0;
  double data_start = 0;
  double ideal = 0;
  bool frozen = false;
  std::vector<int> resources;
  std::vector<std::pair<int32_t, int32_t>> ops;  // (pe, op) finished by this flow
};

struct Event {
  double time;
  uint64_t seq;
  int flow;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct BarrierState {
  int arrived = 0;
  double max_arrival = 0;
  bool released = false;
  double release = 0;
};

struct BroadcastState {
  size_t armed = 0;
  double ready = 0;
};

class Simulator {
 public:
  Simulator(const Config& config, const Trace& trace) : c_(config), trace_(trace) {
    pes_.resize(trace.pes.size());
    for (size_t p = 0; p < pes_.size(); ++p) {
      pes_[p].ops = &trace.pes[p];
      pes_[p].st.resize(trace.pes[p].size());
    }
    bstate_.resize(trace.broadcasts.size());
    caps_.assign(kFirstPort + pes_.size(), c_.pe_port_bytes_per_cycle);
    caps_[kDram] = c_.dram_bytes_per_cycle;
    caps_[kSram] = c_.sram_bytes_per_cycle;
  }

  absl::StatusOr<Timing> Run() {
    ScanAll();
    while (!active_.empty() || !events_.empty()) {
      double t_event = events_.empty() ? kInf : events_.top().time;
      double t_finish = kInf;
      for (int f : active_) {
        if (flows_[f].rate > 0) t_finish = std::min(t_finish, now_ + flows_[f].remaining / flows_[f].rate);
      }
      double t = std::min(t_event, t_finish);
      if (t == kInf) return absl::InternalError("mtia timing: active transfers with no bandwidth");
      double dt = t - now_;
      for (int f : active_) flows_[f].remaining -= flows_[f].rate * dt;
      now_ = t;
      while (!events_.empty() && events_.top().time <= now_) {
        int f = events_.top().flow;
        events_.pop();
        flows_[f].data_start = now_;
        active_.push_back(f);
      }
      std::vector<int> still;
      std::vector<int> done;
      for (int f : active_) {
        const Flow& fl = flows_[f];
        bool finished = fl.remaining <= 1e-6 || (fl.rate > 0 && now_ + fl.remaining / fl.rate <= now_);
        (finished ? done : still).push_back(f);
      }
      active_ = std::move(still);
      for (int f : done) Complete(f);
      Rates();
      ScanAll();
    }
    Timing out;
    double end = 0;
    for (size_t p = 0; p < pes_.size(); ++p) {
      PeState& s = pes_[p];
      if (s.issue_ptr != s.ops->size() || s.unknown != 0) {
        for (size_t b = 0; b < bstate_.size(); ++b) {
          if (bstate_[b].armed > 0 && bstate_[b].armed < trace_.broadcasts[b].members.size()) {
            return absl::FailedPreconditionError(absl::StrCat(
                "broadcast deadlock: ", bstate_[b].armed, " of the ", trace_.broadcasts[b].members.size(),
                " PEs of a BroadcastCopy group started it, the others wait in their in-order DMA queues behind "
                "another broadcast; issue row and column broadcasts in the same order on every PE"));
          }
        }
        return absl::InternalError(absl::StrCat("mtia timing: PE ", p, " stuck at command ", s.issue_ptr, " of ",
                                                s.ops->size(), " (", s.unknown, " unfinished)"));
      }
      end = std::max({end, s.max_end, s.core[0], s.core[1]});
      std::sort(s.busy.begin(), s.busy.end());
      double covered = 0, lo = -1, hi = -1;
      for (const auto& [a, b] : s.busy) {
        if (a > hi) {
          covered += hi - lo;
          lo = a;
          hi = b;
        } else {
          hi = std::max(hi, b);
        }
      }
      covered += hi - lo;
      out.pe_busy_cycles += covered;
    }
    for (int u = 0; u < kNumUnits; ++u) out.units[u] = units_[u];
    out.dma_contention_cycles = contention_;
    out.wait_cycles = wait_;
    out.barrier_cycles = barrier_wait_;
    out.cycles = static_cast<uint64_t>(std::ceil(end + c_.launch_cycles));
    return out;
  }

 private:
  void ScanAll() {
    bool any = true;
    while (any) {
      any = false;
      for (size_t p = 0; p < pes_.size(); ++p) any |= Scan(static_cast<int>(p));
    }
  }

  BarrierState& BarrierAt(int k) {
    if (static_cast<int>(barriers_.size()) <= k) barriers_.resize(k + 1);
    return barriers_[k];
  }

  // Issues and starts what PE p can; returns whether anything changed.
  bool Scan(int p) {
    PeState& s = pes_[p];
    const auto& ops = *s.ops;
    bool any = false, changed = true;
    while (changed) {
      changed = false;
      while (s.issue_ptr < ops.size()) {
        const TraceOp& op = ops[s.issue_ptr];
        if (op.kind == OpKind::kWait) {
          double t = 0;
          bool known = true;
          for (int32_t d : op.deps) {
            if (s.st[d].end < 0) {
              known = false;
              break;
            }
            t = std::max(t, s.st[d].end);
          }
          if (!known) break;
          wait_ += std::max(0.0, t - std::max(s.core[0], s.core[1]));
          s.core[0] = s.core[1] = std::max({s.core[0], s.core[1], t}) + op.cycles;
          // A scalar read is recorded as a reader of its allocation, so a later
          // write may depend on it: give it an end.
          s.st[s.issue_ptr].start = s.st[s.issue_ptr].end = s.core[0];
        } else if (op.kind == OpKind::kSync) {
          if (s.unknown > 0) break;
          wait_ += std::max(0.0, s.max_end - std::max(s.core[0], s.core[1]));
          s.core[0] = s.core[1] = std::max({s.core[0], s.core[1], s.max_end});
        } else if (op.kind == OpKind::kBarrier) {
          if (s.unknown > 0) break;
          BarrierState& b = BarrierAt(s.barriers_passed);
          if (!s.at_barrier) {
            s.at_barrier = true;
            ++b.arrived;
            b.max_arrival = std::max({b.max_arrival, s.max_end, s.core[0], s.core[1]});
            if (b.arrived == static_cast<int>(pes_.size())) {
              b.released = true;
              b.release = b.max_arrival + c_.barrier_cycles;
            }
            any = true;
          }
          if (!b.released) break;
          barrier_wait_ += b.release - std::max({s.max_end, s.core[0], s.core[1]});
          s.core[0] = s.core[1] = b.release;
          s.at_barrier = false;
          ++s.barriers_passed;
        } else {
          int core = op.unit == Unit::kDma ? 0 : 1;
          double cost = op.unit == Unit::kDma ? c_.dma_issue_cycles : c_.compute_issue_cycles;
          s.core[core] += cost;
          s.st[s.issue_ptr].issue = s.core[core];
          s.queue[static_cast<int>(op.unit)].push_back(static_cast<int32_t>(s.issue_ptr));
          ++s.unknown;
        }
        ++s.issue_ptr;
        changed = true;
      }
      for (int u = 0; u < kNumUnits; ++u) {
        while (!s.queue[u].empty()) {
          int32_t i = s.queue[u].front();
          const TraceOp& op = ops[i];
          double ready = s.st[i].issue;
          bool known = true;
          for (int32_t d : op.deps) {
            if (s.st[d].end < 0) {
              known = false;
              break;
            }
            ready = std::max(ready, s.st[d].end);
          }
          if (known && op.kind == OpKind::kRecv) {
            double e = pes_[op.remote_pe].st[op.remote_op].end;
            if (e < 0) known = false;
            ready = std::max(ready, e);
          }
          if (!known) break;
          if (u == static_cast<int>(Unit::kDma)) {
            if (s.dma_inflight >= c_.dma_max_outstanding) break;
            double free = std::max(s.st[i].issue, s.dma_last_start);
            double start = std::max({ready, s.dma_last_start, now_});
            units_[u].stall_cycles += std::max(0.0, start - free);
            units_[u].ops += 1;
            s.dma_last_start = start;
            ++s.dma_inflight;
            s.st[i].start = start;
            if (op.broadcast >= 0) {
              BroadcastState& b = bstate_[op.broadcast];
              ++b.armed;
              b.ready = std::max(b.ready, start);
              const Broadcast& members = trace_.broadcasts[op.broadcast];
              if (b.armed == members.members.size()) AddFlow(b.ready + op.latency, op, members.members);
            } else {
              AddFlow(start + op.latency, op, {{p, i}});
            }
          } else {
            double free = std::max(s.st[i].issue, s.unit_free[u]);
            double start = std::max(ready, free);
            units_[u].stall_cycles += start - free;
            units_[u].busy_cycles += op.cycles;
            units_[u].ops += 1;
            double end = start + op.cycles;
            s.unit_free[u] = end;
            s.st[i].start = start;
            s.st[i].end = end;
            --s.unknown;
            s.max_end = std::max(s.max_end, end);
            s.busy.emplace_back(start, end);
          }
          s.queue[u].pop_front();
          changed = true;
        }
      }
      any |= changed;
    }
    return any;
  }

  void AddFlow(double at, const TraceOp& op, const std::vector<std::pair<int32_t, int32_t>>& members) {
    Flow f;
    f.bytes = f.remaining = op.bytes;
    f.ideal = op.ideal_cycles;
    if (op.memories & kUsesDram) f.resources.push_back(kDram);
    if (op.memories & kUsesSram) f.resources.push_back(kSram);
    for (const auto& [pe, i] : members) f.resources.push_back(kFirstPort + pe);
    f.ops = members;
    flows_.push_back(std::move(f));
    events_.push(Event{std::max(at, now_), seq_++, static_cast<int>(flows_.size()) - 1});
  }

  void Complete(int f) {
    const Flow& fl = flows_[f];
    contention_ += std::max(0.0, (now_ - fl.data_start) - fl.ideal) * static_cast<double>(fl.ops.size());
    for (const auto& [pe, i] : fl.ops) {
      PeState& s = pes_[pe];
      s.st[i].end = now_;
      --s.dma_inflight;
      --s.unknown;
      s.max_end = std::max(s.max_end, now_);
      units_[static_cast<int>(Unit::kDma)].busy_cycles += now_ - s.st[i].start;
    }
  }

  // Max-min fair rates by progressive filling.
  void Rates() {
    residual_ = caps_;
    count_.assign(caps_.size(), 0);
    for (int f : active_) {
      flows_[f].rate = 0;
      flows_[f].frozen = false;
      for (int r : flows_[f].resources) ++count_[r];
    }
    size_t unfrozen = active_.size();
    while (unfrozen > 0) {
      double delta = kInf;
      for (size_t r = 0; r < caps_.size(); ++r) {
        if (count_[r] > 0) delta = std::min(delta, residual_[r] / count_[r]);
      }
      for (int f : active_) {
        if (flows_[f].frozen) continue;
        flows_[f].rate += delta;
        for (int r : flows_[f].resources) residual_[r] -= delta;
      }
      for (int f : active_) {
        Flow& fl = flows_[f];
        if (fl.frozen) continue;
        bool saturated = false;
        for (int r : fl.resources) saturated |= residual_[r] <= 1e-9 * caps_[r];
        if (!saturated) continue;
        fl.frozen = true;
        --unfrozen;
        for (int r : fl.resources) --count_[r];
      }
    }
  }

  const Config& c_;
  const Trace& trace_;
  std::vector<PeState> pes_;
  std::vector<BroadcastState> bstate_;
  std::vector<BarrierState> barriers_;
  std::vector<Flow> flows_;
  std::vector<int> active_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<double> caps_, residual_;
  std::vector<int> count_;
  UnitCounters units_[kNumUnits];
  double contention_ = 0;
  double wait_ = 0;
  double barrier_wait_ = 0;
  double now_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace

absl::StatusOr<Timing> Simulate(const Config& config, const Trace& trace) {
  for (size_t p = 0; p < trace.pes.size(); ++p) {
    for (size_t i = 0; i < trace.pes[p].size(); ++i) {
      for (int32_t d : trace.pes[p][i].deps) {
        if (d < 0 || static_cast<size_t>(d) >= i) {
          return absl::InternalError(absl::StrCat("mtia timing: PE ", p, " op ", i, " depends on op ", d));
        }
      }
    }
  }
  Simulator sim(config, trace);
  return sim.Run();
}

}  // namespace kevo::mtia::internal
