// The host side of kevo's MTIA simulator: a simulated device that owns the
// memories (DRAM mapped onto host buffers, the LLS scratchpad, per-PE local
// memory), runs kernels on the PE grid (mtia_sim/mtia.h) and returns
// what each launch cost in the cycle model (mtia_sim/timing.h).
//
// Errors a kernel causes come back as a Status with a specific code:
// kResourceExhausted (local memory or LLS overflow), kInvalidArgument
// (misaligned DMA, bad shape or dtype), kOutOfRange (no such PE or
// neighbour, access outside a buffer), kFailedPrecondition (unmatched
// broadcast, barrier or neighbour transfer). Not thread-safe: one thread
// drives a Device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "mtia_sim/mtia.h"

namespace kevo::mtia {

namespace internal {
class FiberPool;
struct LaunchState;
class PeImpl;
}  // namespace internal

struct DeviceOptions {
  // Compute real values. Off, kernels are timed but produce no results (for
  // simulator calibration only; evaluations always compute).
  bool compute_values = true;
  size_t fiber_stack_bytes = 512 * 1024;
};

class Device final : public Grid {
 public:
  static absl::StatusOr<std::unique_ptr<Device>> Create(const Config& config = Mtia2iConfig(),
                                                        const DeviceOptions& options = {});
  ~Device() override;

  // Maps `bytes` of host memory as a DRAM buffer: kernels read and write the
  // host memory itself. `host` must outlive the device's use of it.
  absl::StatusOr<Buffer> MapHost(void* host, uint64_t bytes);
  // Device-owned DRAM, or LLS scratchpad (kResourceExhausted past lls_bytes).
  absl::StatusOr<Buffer> NewDram(uint64_t bytes);
  absl::StatusOr<Buffer> NewSram(uint64_t bytes);
  // Untimed host copies into / out of a DRAM or LLS buffer (staging).
  absl::Status Write(Buffer dst, const void* src, uint64_t bytes);
  absl::Status Read(Buffer src, void* dst, uint64_t bytes);

  // Runs `kernel` on every PE and returns this launch's statistics, or the
  // error the kernel caused. Statistics also accumulate into stats().
  absl::StatusOr<RunStats> Run(const Kernel& kernel);
  // The first error a Grid::Launch or Grid::Alloc* recorded (OK if none).
  absl::Status status() const { return status_; }
  // Clears the accumulated statistics and the recorded error.
  void ResetStats();
  // stats() as the simulator counted them, or FAILED_PRECONDITION if a
  // kernel rewrote what the simulator reports (the run totals, or the chip's
  // configuration the times are computed at): the runner reads this, never
  // stats(), which a kernel is handed by reference.
  absl::StatusOr<RunStats> CheckedStats() const;

  // Grid.
  const Config& config() const override { return config_; }
  void Launch(const Kernel& kernel) override;
  Buffer AllocDram(uint64_t bytes) override;
  Buffer AllocSram(uint64_t bytes) override;
  bool ok() const override { return status_.ok(); }
  std::string error() const override { return std::string(status_.message()); }
  const RunStats& stats() const override { return total_; }

  // For the simulator's PEs: host address of [b.address, b.address + bytes)
  // or nullptr if that range is not inside one buffer of b's space.
  uint8_t* HostPointer(const Buffer& b, uint64_t bytes);
  const DeviceOptions& options() const { return options_; }

 private:
  struct Region {
    uint8_t* host = nullptr;
    uint64_t size = 0;
    std::unique_ptr<uint8_t[]> owned;
  };
  Device(const Config& config, const DeviceOptions& options);
  absl::StatusOr<Buffer> AddRegion(Space space, uint8_t* host, uint64_t bytes, bool owned);
  // OK while config_ and total_ match the sealed copies.
  absl::Status CheckSealed() const;

  Config config_;
  DeviceOptions options_;
  std::map<uint64_t, Region> dram_, sram_;
  uint64_t next_dram_ = 1 << 16, next_sram_ = 1 << 16;
  uint64_t sram_used_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> local_;
  std::unique_ptr<internal::FiberPool> fibers_;
  absl::Status status_;
  RunStats total_;
  // The configuration Run simulates with and the totals it counted, kept
  // apart from config_ and total_: a kernel gets those by reference
  // (config(), stats(), pe.config()) and could const_cast and rewrite them
  // to report a faster run. A kernel in this process could still find these
  // too; this stops the rewrite through the API's own references.
  struct Sealed {
    Config config;
    RunStats total;
  };
  std::unique_ptr<Sealed> sealed_;
};

// Adds `b` into `a` (counters summed, utilisations recomputed).
void Accumulate(const Config& config, RunStats& a, const RunStats& b);

}  // namespace kevo::mtia
