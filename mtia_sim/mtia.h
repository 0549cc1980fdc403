// kevo's MTIA simulator: the kernel API. This is the one header an MTIA
// candidate includes (docs/mtia-simulator.md documents the model and the ABI).
//
// A kernel is an SPMD function `void(Pe&)` launched on every processing
// element (PE) of the 8x8 grid. Inside it, a PE allocates local memory,
// moves data with asynchronous Fabric-Interface DMA between DRAM, the SRAM
// scratchpad (LLS) and its local memory, and computes on local-memory tiles
// with fixed-function units: the Dot Product Engine (DPE), the SIMD engine,
// the Reduction Engine (RE) and the Memory Layout Unit (MLU). Every call
// computes real values at once (functional model) and records a command that
// a deterministic cycle model later times (timing model).
//
// The header depends on the C++ standard library only, and Pe/Grid are pure
// interfaces: a candidate shared object compiled against it has no undefined
// kevo symbols. Kernel-side errors (local-memory overflow, misaligned DMA,
// out-of-range PE, shape mismatches) throw KernelError; the launch catches it
// and reports it as a Status on the host side (mtia_sim/device.h).
//
// Thread-safety: a Grid and the Pe objects it passes are used by one host
// thread; the simulator runs the 64 PE programs as cooperative fibers.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace kevo::mtia {

// ---------------------------------------------------------------------------
// Configuration: the rates the cycle model uses (shared/HARDWARE.md).

struct Config {
  std::string name;
  double clock_hz = 0;
  int grid_rows = 8;
  int grid_cols = 8;
  uint64_t local_memory_bytes = 0;  // per PE
  uint64_t lls_bytes = 0;           // SRAM scratchpad (LLS) available to kernels
  // Dot Product Engine, per PE: multiply-accumulates per cycle.
  double dpe_macs_per_cycle_f16 = 0;  // fp16 and bf16
  double dpe_macs_per_cycle_i8 = 0;
  int dpe_n_block = 32;  // columns of the cached operand processed per pass
  int dpe_k_block = 32;  // reduction depth per pass (fp16/bf16; int8 uses 2x)
  // SIMD engine lanes per cycle, per PE, by element type.
  double simd_lanes_f32 = 0;
  double simd_lanes_f16 = 0;
  double simd_lanes_i8 = 0;
  double re_elements_per_cycle = 0;  // Reduction Engine
  double mlu_bytes_per_cycle = 0;    // Memory Layout Unit
  double local_bytes_per_cycle = 0;  // local-memory bandwidth seen by one unit
  // Shared memories, whole chip, bytes per cycle (split between active DMAs).
  double sram_bytes_per_cycle = 0;
  double dram_bytes_per_cycle = 0;
  double pe_port_bytes_per_cycle = 0;    // one PE's Fabric-Interface port
  double neighbour_bytes_per_cycle = 0;  // reduction network, PE to PE
  // Latencies and overheads, cycles.
  double dram_latency = 0;
  double sram_latency = 0;
  double neighbour_latency = 0;
  double unit_op_overhead = 0;      // fixed cost of each DPE/SIMD/RE/MLU command
  double dma_issue_cycles = 0;      // scalar core cost to program one DMA
  double compute_issue_cycles = 0;  // vector core cost to issue one unit command
  double barrier_cycles = 0;
  double launch_cycles = 0;
  int dma_max_outstanding = 0;  // DMAs one PE keeps in flight

  bool operator==(const Config&) const = default;
  int num_pes() const { return grid_rows * grid_cols; }
  // Dense DPE peak for the whole chip, FLOP per cycle (2 per MAC).
  double dpe_peak_flops_per_cycle(bool int8) const {
    return 2.0 * (int8 ? dpe_macs_per_cycle_i8 : dpe_macs_per_cycle_f16) * num_pes();
  }
};

// MTIA 2i (the default): 1.35 GHz, 384 KiB local memory per PE.
inline Config Mtia2iConfig() {
  Config c;
  c.name = "MTIA 2i";
  c.clock_hz = 1.35e9;
  c.local_memory_bytes = 384 * 1024;
  c.lls_bytes = 128ull << 20;
  c.dpe_macs_per_cycle_f16 = 1024;
  c.dpe_macs_per_cycle_i8 = 2048;
  c.simd_lanes_f32 = 32;
  c.simd_lanes_f16 = 32;
  c.simd_lanes_i8 = 32;
  c.re_elements_per_cycle = 32;
  c.mlu_bytes_per_cycle = 64;
  c.local_bytes_per_cycle = 740;
  c.sram_bytes_per_cycle = 2000;
  c.dram_bytes_per_cycle = 152;
  c.pe_port_bytes_per_cycle = 128;
  c.neighbour_bytes_per_cycle = 64;
  c.dram_latency = 400;
  c.sram_latency = 100;
  c.neighbour_latency = 16;
  c.unit_op_overhead = 8;
  c.dma_issue_cycles = 4;
  c.compute_issue_cycles = 2;
  c.barrier_cycles = 64;
  c.launch_cycles = 700;
  c.dma_max_outstanding = 8;
  return c;
}

// MTIA 1: 800 MHz, 128 KiB local memory per PE, 0.8 TB/s SRAM, 176 GB/s LPDDR.
inline Config Mtia1Config() {
  Config c = Mtia2iConfig();
  c.name = "MTIA 1";
  c.clock_hz = 0.8e9;
  c.local_memory_bytes = 128 * 1024;
  c.lls_bytes = 64ull << 20;
  c.dpe_macs_per_cycle_f16 = 500;  // 51.2 TFLOPS / 64 PEs / 0.8 GHz / 2
  c.dpe_macs_per_cycle_i8 = 1000;  // 102.4 TOPS
  c.simd_lanes_f32 = 8;            // 0.8 TFLOPS FP32 vector
  c.simd_lanes_f16 = 16;           // 1.6 TFLOPS FP16
  c.simd_lanes_i8 = 32;            // 3.2 TOPS INT8
  c.re_elements_per_cycle = 16;
  c.local_bytes_per_cycle = 500;  // 0.4 TB/s / 0.8 GHz
  c.sram_bytes_per_cycle = 1000;  // 0.8 TB/s / 0.8 GHz
  c.dram_bytes_per_cycle = 220;   // 176 GB/s / 0.8 GHz
  c.pe_port_bytes_per_cycle = 64;
  c.dram_latency = 250;
  c.sram_latency = 60;
  c.launch_cycles = 600;
  return c;
}

// MTIA 300 (Meta, March 2026; in production for ranking and recommendation
// training). Meta published chip-level figures only; everything per PE is a
// modelled assumption, chosen so that the derived chip peaks equal the public
// ones. "public" = Meta's announcement of MTIA 300/400/450/500 (2026-03-11)
// and the press reports of its table (Tom's Hardware, 2026-03-12); "modelled"
// = kevo's choice, with the reason. docs/kb/hardware/mtia/mtia-300.md lists
// them all.
//   public, not modelled: 216 GB HBM (the simulator's DRAM is host memory),
//   800 W module TDP, no MX4, the two network chiplets and message engines.
inline Config Mtia300Config() {
  Config c = Mtia2iConfig();
  c.name = "MTIA 300";
  // modelled: the clock and the PE grid are not public. 8 x 8 is kept (Meta
  // says only "a grid of PEs, with some redundant PEs"; the example kernels
  // split 2048-wide blocks over it); 1.875 GHz gives a whole per-PE DPE rate.
  c.clock_hz = 1.875e9;
  c.grid_rows = 8;
  c.grid_cols = 8;
  c.local_memory_bytes = 512 * 1024;  // modelled: not public; above 2i's 384 KiB
  c.lls_bytes = 128ull << 20;         // modelled: on-chip SRAM size not public; as 2i
  // public: 0.6 PFLOPS BF16 dense = 64 PEs x 2,500 MACs x 2 x 1.875 GHz.
  c.dpe_macs_per_cycle_f16 = 2500;
  // public: 1.2 PFLOPS FP8/MX8. The simulator has no FP8 type: the 8-bit rate
  // is its int8 path (kI8 in, kI32 out), 2x the 16-bit rate as on 2i.
  c.dpe_macs_per_cycle_i8 = 5000;
  // modelled: SIMD / Special Function Unit, RE, MLU and neighbour link keep
  // 2i's per-cycle rates (Meta gives no vector figures).
  c.local_bytes_per_cycle = 1024;             // modelled: 1.9 TB/s per PE, feeds the DPE at kt = 32
  c.sram_bytes_per_cycle = 6000;              // modelled: 11.25 TB/s, ~1.8x HBM (SRAM not public)
  c.dram_bytes_per_cycle = 6.1e12 / 1.875e9;  // public: 6.1 TB/s HBM (3,253 B/cycle)
  c.pe_port_bytes_per_cycle = 256;            // modelled: 2x 2i's, with the per-PE DPE 2.4x 2i's
  c.dram_latency = 550;                       // modelled: ~0.29 us, 2i's 400 cycles in time
  c.launch_cycles = 970;                      // modelled: ~0.52 us, 2i's 700 cycles in time
  return c;
}

// The chips the simulator models, by the name --mtia-config / --mtia_config
// take: "2i" (MTIA 2i, the default), "1" (MTIA 1) and "300" (MTIA 300).
// Sets *config and returns true for a known name; returns false otherwise.
inline constexpr const char* kChipNames = "2i, 1 or 300";
inline bool ConfigForChip(const std::string& chip, Config* config) {
  if (chip == "2i") {
    *config = Mtia2iConfig();
  } else if (chip == "1") {
    *config = Mtia1Config();
  } else if (chip == "300") {
    *config = Mtia300Config();
  } else {
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Memory.

enum class DType : uint8_t { kF32, kF16, kBF16, kI8, kI32 };

inline uint64_t SizeOf(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI8:
      return 1;
  }
  return 0;
}

enum class Space : uint8_t { kNone, kDram, kSram, kLocal };

// DMA transfers must start on this boundary (source, destination, pitches).
inline constexpr uint64_t kDmaAlignment = 32;

// A byte range in one memory space: DRAM (host memory the host mapped), the
// SRAM scratchpad (LLS), or one PE's local memory. A plain value; Slice()
// narrows it. An out-of-range slice gives an invalid buffer (valid() false)
// and any command that uses it fails with a clear error.
struct Buffer {
  Space space = Space::kNone;
  int pe = -1;           // owning PE for kLocal, -1 otherwise
  uint64_t address = 0;  // byte address within the space
  uint64_t size = 0;     // bytes

  bool valid() const { return space != Space::kNone; }
  Buffer Slice(uint64_t offset, uint64_t bytes) const {
    if (!valid() || offset > size || bytes > size - offset) return Buffer{};
    return Buffer{space, pe, address + offset, bytes};
  }
};

// A 2-D view of local memory that compute units read and write: `rows` x
// `cols` elements of `dtype`, consecutive rows `stride` elements apart.
struct Tile {
  Buffer buffer;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;

  static Tile Of(Buffer b, DType t, int64_t rows, int64_t cols, int64_t stride = 0) {
    return Tile{b, t, rows, cols, stride == 0 ? cols : stride};
  }
  // The sub-tile at (r0, c0) of size rows x cols (bounds checked on use).
  Tile Sub(int64_t r0, int64_t c0, int64_t r, int64_t c) const {
    uint64_t off = static_cast<uint64_t>(r0 * stride + c0) * SizeOf(dtype);
    Buffer b = buffer.valid() && off <= buffer.size ? buffer.Slice(off, buffer.size - off) : Buffer{};
    return Tile{b, dtype, r, c, stride};
  }
  int64_t elements() const { return rows * cols; }
};

// N slots of equal size in local memory, each its own allocation, so that a
// DMA into slot i+1 overlaps compute on slot i (dependencies are tracked per
// allocation). Slot(i) wraps around.
struct CircularBuffer {
  Buffer first;  // slot 0; slots follow at `slot_stride`
  uint64_t slot_bytes = 0;
  uint64_t slot_stride = 0;
  int slots = 0;
  Buffer Slot(int64_t i) const {
    if (slots <= 0) return Buffer{};
    uint64_t k = static_cast<uint64_t>(((i % slots) + slots) % slots);
    return Buffer{first.space, first.pe, first.address + k * slot_stride, slot_bytes};
  }
};

// Handle of an issued command, for Pe::Wait.
struct Token {
  int32_t op = -1;
};

enum class Group : uint8_t { kRow, kColumn };  // broadcast reads
enum class Direction : uint8_t { kNorth, kSouth, kEast, kWest };
enum class UnaryOp : uint8_t { kCopy, kNeg, kAbs, kRelu, kExp, kLog, kRecip, kRsqrt, kSqrt, kSigmoid, kTanh };
// The comparisons give 1.0 where `a op b` holds and 0.0 elsewhere (0.0 when
// either operand is NaN), so a mask multiplies like any other value.
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin, kLe, kLt, kGe, kGt };
enum class ReduceOp : uint8_t { kSum, kMax, kMin };
enum class Combine : uint8_t { kReplace, kSum, kMax, kMin };

// Errors a kernel can cause. Thrown by Pe methods; the launch turns the first
// one into a Status (and keeps it even if the kernel catches the exception).
enum class ErrorCode : uint8_t {
  kInvalidArgument,     // misaligned DMA, bad shape or dtype, invalid buffer
  kResourceExhausted,   // local memory or LLS overflow
  kOutOfRange,          // PE or neighbour outside the grid, access outside a buffer
  kFailedPrecondition,  // wrong memory space, mismatched collectives, deadlock
  kInternal,
};

class KernelError : public std::runtime_error {
 public:
  KernelError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// ---------------------------------------------------------------------------
// The PE: what a kernel calls. All commands are asynchronous in the timing
// model: they return at once and the units run them when their inputs are
// ready. Dependencies are tracked automatically per local allocation
// (read-after-write, write-after-read, write-after-write), so Wait is needed
// only to order DRAM/SRAM traffic or to stall on purpose. DMA commands issue
// from the PE's scalar core, unit commands from its vector core, so the two
// overlap; Wait, Sync and Barrier stall both.
class Pe {
 public:
  virtual ~Pe() = default;

  virtual int id() const = 0;  // row * grid cols + col
  virtual int row() const = 0;
  virtual int col() const = 0;
  virtual const Config& config() const = 0;

  // Local memory: `bytes` rounded up to 32, 32-byte aligned. Throws
  // kResourceExhausted past the PE's local memory (384 KiB on MTIA 2i).
  virtual Buffer Alloc(uint64_t bytes) = 0;
  virtual CircularBuffer AllocCircular(uint64_t slot_bytes, int slots) = 0;
  // Bytes of local memory still free.
  virtual uint64_t LocalFree() const = 0;

  // Fabric-Interface DMA of src.size bytes into dst (dst.size >= src.size),
  // between DRAM, LLS and this PE's local memory. Addresses must be 32-byte
  // aligned (kInvalidArgument otherwise); the length may be anything.
  virtual Token Copy(Buffer dst, Buffer src) = 0;
  // 2-D DMA: `rows` rows of `row_bytes`, row i at src + i*src_pitch and
  // dst + i*dst_pitch. Addresses and pitches must be 32-byte aligned.
  virtual Token Copy2D(Buffer dst, uint64_t dst_pitch, Buffer src, uint64_t src_pitch, uint64_t rows,
                       uint64_t row_bytes) = 0;
  // Broadcast read: collective over this PE's row or column. Every PE of the
  // group calls it with the same source (DRAM or LLS) in the same order; the
  // bytes cross the shared memory once and land in each PE's `dst`.
  virtual Token BroadcastCopy(Group group, Buffer dst, Buffer src) = 0;
  virtual Token BroadcastCopy2D(Group group, Buffer dst, uint64_t dst_pitch, Buffer src, uint64_t src_pitch,
                                uint64_t rows, uint64_t row_bytes) = 0;

  // Dot Product Engine: c (M x N) = [c +] a (M x K) * b (K x N). a and b are
  // both kF16, both kBF16 (c kF32, fp32 accumulate) or both kI8 (c kI32).
  virtual Token MatMul(Tile c, Tile a, Tile b, bool accumulate) = 0;

  // SIMD engine, elementwise, computed in fp32 and rounded to dst's dtype.
  // Non-linear functions go through lookup tables (about 1e-5 relative error).
  virtual Token Unary(UnaryOp op, Tile dst, Tile src) = 0;
  virtual Token Binary(BinaryOp op, Tile dst, Tile a, Tile b) = 0;
  // dst[r][c] = a[r][c] op v[r][0]; v is rows x 1.
  virtual Token BinaryRow(BinaryOp op, Tile dst, Tile a, Tile v) = 0;
  // dst[r][c] = a[r][c] op v[0][c]; v is 1 x cols.
  virtual Token BinaryCol(BinaryOp op, Tile dst, Tile a, Tile v) = 0;
  // dst = a op s.
  virtual Token BinaryScalar(BinaryOp op, Tile dst, Tile a, float s) = 0;
  // dst = round(src * scale) in dst's dtype (quantise / dequantise / cast).
  virtual Token Convert(Tile dst, Tile src, float scale) = 0;
  virtual Token Fill(Tile dst, float value) = 0;
  // Table lookup on the SIMD engine: dst[r][c] = table[0][index[r][c]], where
  // `table` is a 1 x T tile and `index` (dst's shape, any dtype) holds whole
  // numbers in [0, T); anything else is kOutOfRange. Costs 2 passes.
  virtual Token Gather(Tile dst, Tile table, Tile index) = 0;

  // Reduction Engine. ReduceRows: dst (rows x 1) [op]= reduce over each row;
  // ReduceCols: dst (1 x cols) [op]= reduce over each column.
  virtual Token ReduceRows(ReduceOp op, Tile dst, Tile src, bool accumulate) = 0;
  virtual Token ReduceCols(ReduceOp op, Tile dst, Tile src, bool accumulate) = 0;
  // Passes a tile to the neighbouring PE over the reduction network. The
  // neighbour takes it with ReceiveFromNeighbour(opposite direction) and
  // combines it into its own tile. kOutOfRange if there is no neighbour.
  virtual Token SendToNeighbour(Direction to, Tile src) = 0;
  virtual Token ReceiveFromNeighbour(Direction from, Tile dst, Combine combine) = 0;

  // Memory Layout Unit: dst (C x R) = transpose of src (R x C); LayoutCopy
  // copies a tile into another shape/stride of the same element count order.
  virtual Token Transpose(Tile dst, Tile src) = 0;
  virtual Token LayoutCopy(Tile dst, Tile src) = 0;

  // Scalar-core load: copies the src.size bytes of `src` (this PE's local
  // memory) into host memory at `dst`, so that a kernel can compute DMA
  // addresses or loop bounds from data (embedding indices, bag lengths).
  // Both cores stall until every command writing `src` has finished, then
  // pay 1 cycle per 8 bytes (plus the issue cost of one command).
  virtual void ReadLocal(Buffer src, void* dst) = 0;

  // Stalls this PE until the command behind `t` has finished.
  virtual void Wait(Token t) = 0;
  // Stalls this PE until all its commands have finished.
  virtual void Sync() = 0;
  // Sync, then wait for every PE of the grid to arrive.
  virtual void Barrier() = 0;
};

using Kernel = std::function<void(Pe&)>;

// What a launch cost in the cycle model, summed over PEs where it says so.
struct UnitCounters {
  uint64_t ops = 0;
  double busy_cycles = 0;   // sum over PEs of cycles the unit worked
  double stall_cycles = 0;  // sum over PEs of cycles a ready command waited for its inputs
  bool operator==(const UnitCounters&) const = default;
};

struct RunStats {
  uint64_t launches = 0;
  uint64_t cycles = 0;  // end to end, launch overhead included
  double seconds = 0;   // cycles / clock
  UnitCounters dma, dpe, simd, re, mlu;
  double dma_contention_cycles = 0;  // DMA time beyond the PE port's rate (shared bandwidth)
  double wait_cycles = 0;            // sum over PEs of cycles the cores sat in Wait/Sync
  double barrier_cycles = 0;         // sum over PEs of cycles spent waiting in Barrier
  uint64_t dram_read_bytes = 0, dram_write_bytes = 0;
  uint64_t sram_read_bytes = 0, sram_write_bytes = 0;
  uint64_t local_bytes = 0;            // read + written in local memory by units and DMA
  uint64_t neighbour_bytes = 0;        // over the reduction network
  uint64_t broadcast_saved_bytes = 0;  // shared-memory reads a broadcast avoided
  uint64_t dpe_flops = 0;              // fp16/bf16 (2 per MAC)
  uint64_t dpe_int8_ops = 0;           // int8 (2 per MAC)
  uint64_t simd_elements = 0;
  double pe_busy_cycles = 0;  // sum over PEs of cycles any compute unit worked
  // Derived (filled by the simulator):
  double pe_utilization = 0;    // pe_busy_cycles / (PEs * cycles)
  double dpe_utilization = 0;   // dpe_flops / fp16 peak + dpe_int8_ops / int8 peak, per cycle
  double dram_utilization = 0;  // DRAM bytes / (DRAM bytes per cycle * cycles)
  double sram_utilization = 0;
  bool operator==(const RunStats&) const = default;
};

// The device as a candidate sees it: launch kernels, allocate scratch.
class Grid {
 public:
  virtual ~Grid() = default;
  virtual const Config& config() const = 0;
  // Runs `kernel` on every PE. A failure (KernelError or any exception from
  // the kernel) is recorded: ok() turns false, error() says why, and later
  // launches do nothing.
  virtual void Launch(const Kernel& kernel) = 0;
  // Device scratch that outlives one launch: DRAM or the LLS scratchpad.
  // Returns an invalid Buffer and records kResourceExhausted when full.
  virtual Buffer AllocDram(uint64_t bytes) = 0;
  virtual Buffer AllocSram(uint64_t bytes) = 0;
  virtual bool ok() const = 0;
  virtual std::string error() const = 0;
  // Totals over the launches so far.
  virtual const RunStats& stats() const = 0;
};

// Candidate ABI (docs/mtia-simulator.md): a candidate shared object exports
//
//   extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void** args);
//
// with args in the task signature's order: a tensor parameter points to a
// kevo::mtia::Buffer (the tensor in DRAM), an integer parameter to an int64_t.
inline constexpr const char* kLaunchSymbol = "kevo_mtia_launch";
using LaunchFn = void (*)(Grid&, void**);

}  // namespace kevo::mtia
