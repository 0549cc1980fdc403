#include "mtia_sim/device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/status.h"
#include "mtia_sim/fiber.h"
#include "mtia_sim/numerics.h"
#include "mtia_sim/timing.h"

namespace kevo::mtia {
namespace internal {
namespace {

// Thrown into the other PEs' fibers once one PE failed, so that they unwind.
// Not a std::exception: a kernel's catch (const std::exception&) lets it pass.
struct AbortLaunch {};

uint64_t RoundUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

const char* SpaceName(Space s) {
  switch (s) {
    case Space::kDram:
      return "DRAM";
    case Space::kSram:
      return "LLS";
    case Space::kLocal:
      return "local memory";
    case Space::kNone:
      break;
  }
  return "an invalid buffer";
}

const char* DirectionName(Direction d) {
  switch (d) {
    case Direction::kNorth:
      return "north";
    case Direction::kSouth:
      return "south";
    case Direction::kEast:
      return "east";
    case Direction::kWest:
      return "west";
  }
  return "?";
}

Direction Opposite(Direction d) {
  switch (d) {
    case Direction::kNorth:
      return Direction::kSouth;
    case Direction::kSouth:
      return Direction::kNorth;
    case Direction::kEast:
      return Direction::kWest;
    case Direction::kWest:
      return Direction::kEast;
  }
  return d;
}

absl::StatusCode ToStatusCode(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ErrorCode::kResourceExhausted:
      return absl::StatusCode::kResourceExhausted;
    case ErrorCode::kOutOfRange:
      return absl::StatusCode::kOutOfRange;
    case ErrorCode::kFailedPrecondition:
      return absl::StatusCode::kFailedPrecondition;
    case ErrorCode::kInternal:
      break;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace

struct Message {
  std::vector<float> values;
  int64_t rows = 0, cols = 0;
  int32_t send_op = -1;
};

struct BroadcastKey {
  Group group;
  int index;  // row or column
  int seq;
  bool operator<(const BroadcastKey& o) const {
    return std::tie(group, index, seq) < std::tie(o.group, o.index, o.seq);
  }
};

struct BroadcastInfo {
  int id;
  uint64_t src_address, rows, row_bytes, src_pitch;
  Space src_space;
};

// Everything one launch records.
struct LaunchState {
  Trace trace;
  std::vector<std::unique_ptr<PeImpl>> pes;
  bool failed = false;
  absl::Status error;
  int barrier_arrived = 0;
  int barrier_gen = 0;
  std::map<std::pair<int, int>, std::deque<Message>> mailboxes;  // (receiver, from-direction)
  std::map<BroadcastKey, BroadcastInfo> broadcasts;
  RunStats bytes;  // the byte and op counters the functional run knows

  void Fail(ErrorCode code, const std::string& message) {
    if (failed) return;
    failed = true;
    error = absl::Status(ToStatusCode(code), message);
  }
};

// One PE as a kernel sees it: validates, computes, records.
class PeImpl final : public Pe {
 public:
  PeImpl(Device* dev, LaunchState* ls, FiberPool* fibers, int id)
      : dev_(dev),
        c_(dev->config()),
        ls_(ls),
        fibers_(fibers),
        id_(id),
        row_(id / c_.grid_cols),
        col_(id % c_.grid_cols),
        ops_(ls->trace.pes[id]) {}

  int id() const override { return id_; }
  int row() const override { return row_; }
  int col() const override { return col_; }
  const Config& config() const override { return c_; }
  int barriers() const { return barriers_; }

  Buffer Alloc(uint64_t bytes) override {
    Alive();
    uint64_t need = RoundUp(std::max<uint64_t>(bytes, 1), kDmaAlignment);
    if (need > c_.local_memory_bytes - top_) {
      Throw(ErrorCode::kResourceExhausted,
            absl::StrFormat("local memory overflow: Alloc(%d) needs %d bytes but only %d of the %d bytes (%d KiB "
                            "on %s) are free; use smaller tiles or fewer buffers",
                            bytes, need, c_.local_memory_bytes - top_, c_.local_memory_bytes,
                            c_.local_memory_bytes / 1024, c_.name));
    }
    Buffer b{Space::kLocal, id_, top_, bytes};
    allocs_.push_back(Allocation{top_, top_ + need, -1, {}});
    top_ += need;
    return b;
  }

  CircularBuffer AllocCircular(uint64_t slot_bytes, int slots) override {
    Alive();
    if (slots <= 0) Throw(ErrorCode::kInvalidArgument, absl::StrCat("AllocCircular: slots must be > 0, got ", slots));
    CircularBuffer cb;
    cb.slot_bytes = slot_bytes;
    cb.slots = slots;
    cb.slot_stride = RoundUp(std::max<uint64_t>(slot_bytes, 1), kDmaAlignment);
    uint64_t total = cb.slot_stride * static_cast<uint64_t>(slots);
    if (total > c_.local_memory_bytes - top_) {
      Throw(ErrorCode::kResourceExhausted,
            absl::StrFormat("local memory overflow: AllocCircular(%d bytes x %d slots) needs %d bytes but only %d of "
                            "the %d bytes (%d KiB on %s) are free",
                            slot_bytes, slots, total, c_.local_memory_bytes - top_, c_.local_memory_bytes,
                            c_.local_memory_bytes / 1024, c_.name));
    }
    for (int i = 0; i < slots; ++i) {
      Buffer b = Alloc(slot_bytes);
      if (i == 0) cb.first = b;
    }
    return cb;
  }

  uint64_t LocalFree() const override { return c_.local_memory_bytes - top_; }

  Token Copy(Buffer dst, Buffer src) override {
    Alive();
    if (dst.valid() && src.valid() && dst.size < src.size) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("Copy: destination holds %d bytes, source has %d", dst.size, src.size));
    }
    return Dma(dst, src.size, src, src.size, /*rows=*/1, src.size, std::nullopt);
  }

  Token Copy2D(Buffer dst, uint64_t dst_pitch, Buffer src, uint64_t src_pitch, uint64_t rows,
               uint64_t row_bytes) override {
    Alive();
    return Dma(dst, dst_pitch, src, src_pitch, rows, row_bytes, std::nullopt);
  }

  Token BroadcastCopy(Group group, Buffer dst, Buffer src) override {
    Alive();
    return Dma(dst, src.size, src, src.size, 1, src.size, group);
  }

  Token BroadcastCopy2D(Group group, Buffer dst, uint64_t dst_pitch, Buffer src, uint64_t src_pitch, uint64_t rows,
                        uint64_t row_bytes) override {
    Alive();
    return Dma(dst, dst_pitch, src, src_pitch, rows, row_bytes, group);
  }

  Token MatMul(Tile c, Tile a, Tile b, bool accumulate) override {
    Alive();
    uint8_t* pa = TilePtr(a, "MatMul a");
    uint8_t* pb = TilePtr(b, "MatMul b");
    uint8_t* pc = TilePtr(c, "MatMul c");
    bool int8 = a.dtype == DType::kI8;
    bool floaty = a.dtype == DType::kF16 || a.dtype == DType::kBF16;
    if (a.dtype != b.dtype || !(int8 || floaty)) {
      Throw(ErrorCode::kInvalidArgument,
            "MatMul: the Dot Product Engine takes a and b both fp16, both bf16 or both int8");
    }
    if (c.dtype != (int8 ? DType::kI32 : DType::kF32)) {
      Throw(ErrorCode::kInvalidArgument, int8 ? "MatMul: int8 inputs accumulate into an int32 tile c"
                                              : "MatMul: fp16/bf16 inputs accumulate "
                                                "into an fp32 tile c");
    }
    if (a.cols != b.rows || c.rows != a.rows || c.cols != b.cols) {
      Throw(ErrorCode::kInvalidArgument, absl::StrFormat("MatMul: shapes do not chain: c %dx%d = a %dx%d * b %dx%d",
                                                         c.rows, c.cols, a.rows, a.cols, b.rows, b.cols));
    }
    const int64_t m = a.rows, k = a.cols, n = b.cols;
    if (dev_->options().compute_values) {
      if (int8) {
        std::vector<int32_t> bb(k * n), acc(n);
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) bb[kk * n + j] = static_cast<int8_t>(pb[kk * b.stride + j]);
        for (int64_t i = 0; i < m; ++i) {
          int32_t* crow = reinterpret_cast<int32_t*>(pc) + i * c.stride;
          for (int64_t j = 0; j < n; ++j) acc[j] = accumulate ? crow[j] : 0;
          for (int64_t kk = 0; kk < k; ++kk) {
            int32_t av = static_cast<int8_t>(pa[i * a.stride + kk]);
            const int32_t* brow = &bb[kk * n];
            for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
          }
          std::memcpy(crow, acc.data(), n * 4);
        }
      } else {
        std::vector<float> af = LoadTile(a), bf = LoadTile(b), acc(n);
        for (int64_t i = 0; i < m; ++i) {
          float* crow = reinterpret_cast<float*>(pc) + i * c.stride;
          for (int64_t j = 0; j < n; ++j) acc[j] = accumulate ? crow[j] : 0.f;
          MatRow(af.data() + i * k, bf.data(), acc.data(), k, n);
          std::memcpy(crow, acc.data(), n * 4);
        }
      }
    }
    const double kq = c_.dpe_k_block * (int8 ? 2.0 : 1.0), nq = c_.dpe_n_block;
    const double macs = static_cast<double>(m) * std::ceil(k / kq) * kq * std::ceil(n / nq) * nq;
    const double rate = int8 ? c_.dpe_macs_per_cycle_i8 : c_.dpe_macs_per_cycle_f16;
    const double local = Bytes(a) + Bytes(b) + Bytes(c) * (accumulate ? 2 : 1);
    const uint64_t ops = 2ull * m * n * k;
    (int8 ? ls_->bytes.dpe_int8_ops : ls_->bytes.dpe_flops) += ops;
    ls_->bytes.local_bytes += static_cast<uint64_t>(local);
    return Compute(Unit::kDpe, std::max(macs / rate, local / c_.local_bytes_per_cycle), {a.buffer, b.buffer},
                   accumulate ? std::vector<Buffer>{c.buffer} : std::vector<Buffer>{}, {c.buffer});
  }

  Token Unary(UnaryOp op, Tile dst, Tile src) override {
    Alive();
    Same(dst, src, "Unary");
    Elementwise(dst, {&src}, [&](const std::vector<const float*>& in, float* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = ApplyUnary(op, in[0][i]);
    });
    return Simd(dst, {src}, UnaryPasses(op));
  }

  Token Binary(BinaryOp op, Tile dst, Tile a, Tile b) override {
    Alive();
    Same(dst, a, "Binary");
    Same(dst, b, "Binary");
    Elementwise(dst, {&a, &b}, [&](const std::vector<const float*>& in, float* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = ApplyBinary(op, in[0][i], in[1][i]);
    });
    return Simd(dst, {a, b}, op == BinaryOp::kDiv ? 3 : 1);
  }

  Token BinaryRow(BinaryOp op, Tile dst, Tile a, Tile v) override {
    Alive();
    Same(dst, a, "BinaryRow");
    TilePtr(v, "BinaryRow v");
    if (v.rows != a.rows || v.cols != 1) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("BinaryRow: v must be %dx1 (one value per row), got %dx%d", a.rows, v.rows, v.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> x = LoadTile(a), vv = LoadTile(v), out(x.size());
      for (int64_t r = 0; r < a.rows; ++r)
        for (int64_t cc = 0; cc < a.cols; ++cc) out[r * a.cols + cc] = ApplyBinary(op, x[r * a.cols + cc], vv[r]);
      StoreTile(dst, out.data());
    }
    return Simd(dst, {a, v}, op == BinaryOp::kDiv ? 3 : 1);
  }

  Token BinaryCol(BinaryOp op, Tile dst, Tile a, Tile v) override {
    Alive();
    Same(dst, a, "BinaryCol");
    TilePtr(v, "BinaryCol v");
    if (v.rows != 1 || v.cols != a.cols) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("BinaryCol: v must be 1x%d (one value per column), got %dx%d", a.cols, v.rows, v.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> x = LoadTile(a), vv = LoadTile(v), out(x.size());
      for (int64_t r = 0; r < a.rows; ++r)
        for (int64_t cc = 0; cc < a.cols; ++cc) out[r * a.cols + cc] = ApplyBinary(op, x[r * a.cols + cc], vv[cc]);
      StoreTile(dst, out.data());
    }
    return Simd(dst, {a, v}, op == BinaryOp::kDiv ? 3 : 1);
  }

  Token BinaryScalar(BinaryOp op, Tile dst, Tile a, float s) override {
    Alive();
    Same(dst, a, "BinaryScalar");
    Elementwise(dst, {&a}, [&](const std::vector<const float*>& in, float* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = ApplyBinary(op, in[0][i], s);
    });
    return Simd(dst, {a}, op == BinaryOp::kDiv ? 3 : 1);
  }

  Token Convert(Tile dst, Tile src, float scale) override {
    Alive();
    Same(dst, src, "Convert");
    Elementwise(dst, {&src}, [&](const std::vector<const float*>& in, float* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * scale;
    });
    return Simd(dst, {src}, 1);
  }

  Token Fill(Tile dst, float value) override {
    Alive();
    TilePtr(dst, "Fill dst");
    if (dev_->options().compute_values) {
      std::vector<float> out(dst.elements(), value);
      StoreTile(dst, out.data());
    }
    return Simd(dst, {}, 1);
  }

  Token Gather(Tile dst, Tile table, Tile index) override {
    Alive();
    Same(dst, index, "Gather");
    TilePtr(table, "Gather table");
    if (table.rows != 1) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("Gather: table must be 1xT (one row), got %dx%d", table.rows, table.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> t = LoadTile(table), idx = LoadTile(index), out(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) {
        const float k = idx[i];
        if (!(k >= 0 && k < static_cast<float>(table.cols)) || k != std::floor(k)) {
          Throw(ErrorCode::kOutOfRange, absl::StrFormat("Gather: index %g at element %d is not a whole number in "
                                                        "[0, %d) (the table's columns)",
                                                        k, i, table.cols));
        }
        out[i] = t[static_cast<size_t>(k)];
      }
      StoreTile(dst, out.data());
    }
    return Simd(dst, {index, table}, 2);
  }

  Token ReduceRows(ReduceOp op, Tile dst, Tile src, bool accumulate) override {
    Alive();
    TilePtr(src, "ReduceRows src");
    TilePtr(dst, "ReduceRows dst");
    if (dst.rows != src.rows || dst.cols != 1) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("ReduceRows: dst must be %dx1, got %dx%d", src.rows, dst.rows, dst.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> x = LoadTile(src), out = accumulate ? LoadTile(dst) : std::vector<float>(src.rows);
      for (int64_t r = 0; r < src.rows; ++r) {
        float acc = Reduce(op, &x[r * src.cols], src.cols, 1);
        out[r] = accumulate ? Combine2(op, out[r], acc) : acc;
      }
      StoreTile(dst, out.data());
    }
    return Re(dst, src, accumulate);
  }

  Token ReduceCols(ReduceOp op, Tile dst, Tile src, bool accumulate) override {
    Alive();
    TilePtr(src, "ReduceCols src");
    TilePtr(dst, "ReduceCols dst");
    if (dst.rows != 1 || dst.cols != src.cols) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("ReduceCols: dst must be 1x%d, got %dx%d", src.cols, dst.rows, dst.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> x = LoadTile(src), out = accumulate ? LoadTile(dst) : std::vector<float>(src.cols);
      for (int64_t cc = 0; cc < src.cols; ++cc) {
        float acc = Reduce(op, &x[cc], src.rows, src.cols);
        out[cc] = accumulate ? Combine2(op, out[cc], acc) : acc;
      }
      StoreTile(dst, out.data());
    }
    return Re(dst, src, accumulate);
  }

  Token SendToNeighbour(Direction to, Tile src) override {
    Alive();
    TilePtr(src, "SendToNeighbour src");
    int peer = Neighbour(to);
    Message m;
    m.rows = src.rows;
    m.cols = src.cols;
    m.values = LoadTile(src, /*always=*/true);
    double bytes = Bytes(src);
    ls_->bytes.neighbour_bytes += static_cast<uint64_t>(bytes);
    ls_->bytes.local_bytes += static_cast<uint64_t>(bytes);
    Token t = Compute(Unit::kRe, c_.neighbour_latency + bytes / c_.neighbour_bytes_per_cycle, {src.buffer}, {}, {});
    m.send_op = t.op;
    ls_->mailboxes[{peer, static_cast<int>(Opposite(to))}].push_back(std::move(m));
    return t;
  }

  Token ReceiveFromNeighbour(Direction from, Tile dst, Combine combine) override {
    Alive();
    TilePtr(dst, "ReceiveFromNeighbour dst");
    int peer = Neighbour(from);
    auto& box = ls_->mailboxes[{id_, static_cast<int>(from)}];
    fibers_->Block([&box] { return !box.empty(); });
    Alive();
    Message m = std::move(box.front());
    box.pop_front();
    if (m.rows != dst.rows || m.cols != dst.cols) {
      Throw(ErrorCode::kInvalidArgument, absl::StrFormat("ReceiveFromNeighbour: PE %d sent a %dx%d tile, dst is %dx%d",
                                                         peer, m.rows, m.cols, dst.rows, dst.cols));
    }
    if (dev_->options().compute_values) {
      std::vector<float> out = combine == Combine::kReplace ? std::move(m.values) : LoadTile(dst);
      if (combine != Combine::kReplace) {
        ReduceOp op = combine == Combine::kSum   ? ReduceOp::kSum
                      : combine == Combine::kMax ? ReduceOp::kMax
                                                 : ReduceOp::kMin;
        for (size_t i = 0; i < out.size(); ++i) out[i] = Combine2(op, out[i], m.values[i]);
      }
      StoreTile(dst, out.data());
    }
    TraceOp op;
    op.kind = OpKind::kRecv;
    op.unit = Unit::kRe;
    op.cycles = std::ceil(dst.elements() / c_.re_elements_per_cycle) + c_.unit_op_overhead;
    op.remote_pe = peer;
    op.remote_op = m.send_op;
    ls_->bytes.local_bytes += static_cast<uint64_t>(Bytes(dst) * (combine == Combine::kReplace ? 1 : 2));
    return Record(std::move(op), combine == Combine::kReplace ? std::vector<Buffer>{} : std::vector<Buffer>{dst.buffer},
                  {dst.buffer});
  }

  Token Transpose(Tile dst, Tile src) override {
    Alive();
    TilePtr(src, "Transpose src");
    TilePtr(dst, "Transpose dst");
    if (dst.rows != src.cols || dst.cols != src.rows || dst.dtype != src.dtype) {
      Throw(ErrorCode::kInvalidArgument, absl::StrFormat("Transpose: dst must be %dx%d of the same dtype, got %dx%d",
                                                         src.cols, src.rows, dst.rows, dst.cols));
    }
    if (dev_->options().compute_values) {
      const uint64_t es = SizeOf(src.dtype);
      uint8_t* s = TilePtr(src, "");
      uint8_t* d = TilePtr(dst, "");
      std::vector<uint8_t> tmp(src.elements() * es);  // src and dst may overlap
      for (int64_t r = 0; r < src.rows; ++r)
        for (int64_t cc = 0; cc < src.cols; ++cc)
          std::memcpy(&tmp[(cc * src.rows + r) * es], s + (r * src.stride + cc) * es, es);
      for (int64_t r = 0; r < dst.rows; ++r)
        std::memcpy(d + r * dst.stride * es, &tmp[r * dst.cols * es], dst.cols * es);
    }
    return Mlu(dst, src);
  }

  Token LayoutCopy(Tile dst, Tile src) override {
    Alive();
    TilePtr(src, "LayoutCopy src");
    TilePtr(dst, "LayoutCopy dst");
    if (dst.elements() != src.elements() || dst.dtype != src.dtype) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("LayoutCopy: dst (%dx%d) must hold the %d elements of src in the same dtype", dst.rows,
                            dst.cols, src.elements()));
    }
    if (dev_->options().compute_values) {
      const uint64_t es = SizeOf(src.dtype);
      uint8_t* s = TilePtr(src, "");
      uint8_t* d = TilePtr(dst, "");
      std::vector<uint8_t> tmp(src.elements() * es);
      for (int64_t r = 0; r < src.rows; ++r)
        std::memcpy(&tmp[r * src.cols * es], s + r * src.stride * es, src.cols * es);
      for (int64_t r = 0; r < dst.rows; ++r)
        std::memcpy(d + r * dst.stride * es, &tmp[r * dst.cols * es], dst.cols * es);
    }
    return Mlu(dst, src);
  }

  void Wait(Token t) override {
    Alive();
    if (t.op < 0 || t.op >= static_cast<int32_t>(ops_.size())) {
      Throw(ErrorCode::kInvalidArgument, absl::StrCat("Wait: token ", t.op, " was not issued by this PE"));
    }
    TraceOp op;
    op.kind = OpKind::kWait;
    op.deps = {t.op};
    ops_.push_back(std::move(op));
  }

  void ReadLocal(Buffer src, void* dst) override {
    Alive();
    if (!src.valid() || src.space != Space::kLocal || src.pe != id_) {
      Throw(ErrorCode::kFailedPrecondition,
            absl::StrCat("ReadLocal: the scalar core reads this PE's local memory only, not ",
                         src.valid() ? SpaceName(src.space) : "an invalid buffer"));
    }
    std::memcpy(dst, LocalPtr(src, src.size, "ReadLocal"), src.size);
    // A wait on the allocation's last writer that also charges the load.
    TraceOp op;
    op.kind = OpKind::kWait;
    op.cycles = c_.compute_issue_cycles + std::ceil(src.size / 8.0);
    ls_->bytes.local_bytes += src.size;
    Record(std::move(op), {src}, {});
  }

  void Sync() override {
    Alive();
    TraceOp op;
    op.kind = OpKind::kSync;
    ops_.push_back(std::move(op));
  }

  void Barrier() override {
    Alive();
    TraceOp op;
    op.kind = OpKind::kBarrier;
    ops_.push_back(std::move(op));
    ++barriers_;
    int gen = ls_->barrier_gen;
    if (++ls_->barrier_arrived == c_.num_pes()) {
      ls_->barrier_arrived = 0;
      ++ls_->barrier_gen;
    } else {
      LaunchState* ls = ls_;
      fibers_->Block([ls, gen] { return ls->barrier_gen != gen; });
    }
    Alive();
  }

 private:
  struct Allocation {
    uint64_t lo, hi;
    int32_t last_writer;
    std::vector<int32_t> readers;  // since the last write
  };

  std::string Where() const { return absl::StrFormat("PE %d (row %d, col %d): ", id_, row_, col_); }

  [[noreturn]] void Throw(ErrorCode code, const std::string& message) {
    std::string full = Where() + message;
    ls_->Fail(code, full);
    throw KernelError(code, full);
  }

  void Alive() {
    if (ls_->failed || fibers_->aborting()) throw AbortLaunch{};
  }

  int Neighbour(Direction d) {
    int r = row_, cc = col_;
    if (d == Direction::kNorth) --r;
    if (d == Direction::kSouth) ++r;
    if (d == Direction::kEast) ++cc;
    if (d == Direction::kWest) --cc;
    if (r < 0 || r >= c_.grid_rows || cc < 0 || cc >= c_.grid_cols) {
      Throw(ErrorCode::kOutOfRange, absl::StrFormat("no %s neighbour: PE (%d, %d) is outside the %dx%d grid",
                                                    DirectionName(d), r, cc, c_.grid_rows, c_.grid_cols));
    }
    return r * c_.grid_cols + cc;
  }

  // Host pointer of a tile in this PE's local memory, after checking it.
  uint8_t* TilePtr(const Tile& t, const char* what) {
    if (!t.buffer.valid()) Throw(ErrorCode::kInvalidArgument, absl::StrCat(what, ": invalid buffer (bad Slice/Sub?)"));
    if (t.buffer.space != Space::kLocal || t.buffer.pe != id_) {
      Throw(ErrorCode::kFailedPrecondition,
            absl::StrCat(what, ": compute units work on this PE's local memory, not ", SpaceName(t.buffer.space),
                         t.buffer.space == Space::kLocal ? absl::StrCat(" of PE ", t.buffer.pe) : ""));
    }
    if (t.rows < 1 || t.cols < 1 || t.stride < t.cols) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("%s: bad tile %dx%d with stride %d", what, t.rows, t.cols, t.stride));
    }
    uint64_t extent = static_cast<uint64_t>((t.rows - 1) * t.stride + t.cols) * SizeOf(t.dtype);
    if (extent > t.buffer.size) {
      Throw(ErrorCode::kOutOfRange, absl::StrFormat("%s: a %dx%d tile (stride %d) needs %d bytes, its buffer has %d",
                                                    what, t.rows, t.cols, t.stride, extent, t.buffer.size));
    }
    return LocalPtr(t.buffer, extent, what);
  }

  uint8_t* LocalPtr(const Buffer& b, uint64_t bytes, const char* what) {
    if (b.address + bytes > top_) {
      Throw(ErrorCode::kOutOfRange, absl::StrFormat("%s: local range [%d, %d) is outside this PE's allocations "
                                                    "(allocate with Alloc)",
                                                    what, b.address, b.address + bytes));
    }
    return dev_->HostPointer(b, bytes);
  }

  void Same(const Tile& dst, const Tile& src, const char* what) {
    TilePtr(dst, what);
    TilePtr(src, what);
    if (dst.rows != src.rows || dst.cols != src.cols) {
      Throw(ErrorCode::kInvalidArgument, absl::StrFormat("%s: shapes differ: dst %dx%d, operand %dx%d", what, dst.rows,
                                                         dst.cols, src.rows, src.cols));
    }
  }

  static double Bytes(const Tile& t) { return static_cast<double>(t.elements() * SizeOf(t.dtype)); }

  std::vector<float> LoadTile(const Tile& t, bool always = false) {
    std::vector<float> out;
    if (!dev_->options().compute_values && !always) return out;
    out.resize(t.elements());
    const uint8_t* p = dev_->HostPointer(t.buffer, 0);
    for (int64_t r = 0; r < t.rows; ++r) {
      if (t.dtype == DType::kF32) {
        std::memcpy(&out[r * t.cols], p + r * t.stride * 4, t.cols * 4);
      } else {
        for (int64_t cc = 0; cc < t.cols; ++cc) out[r * t.cols + cc] = LoadAsFloat(p, t.dtype, r * t.stride + cc);
      }
    }
    return out;
  }

  void StoreTile(const Tile& t, const float* v) {
    uint8_t* p = dev_->HostPointer(t.buffer, 0);
    for (int64_t r = 0; r < t.rows; ++r) {
      if (t.dtype == DType::kF32) {
        std::memcpy(p + r * t.stride * 4, &v[r * t.cols], t.cols * 4);
      } else {
        for (int64_t cc = 0; cc < t.cols; ++cc) StoreFromFloat(p, t.dtype, r * t.stride + cc, v[r * t.cols + cc]);
      }
    }
  }

  template <typename Fn>
  void Elementwise(const Tile& dst, std::vector<const Tile*> srcs, Fn fn) {
    if (!dev_->options().compute_values) return;
    std::vector<std::vector<float>> in;
    std::vector<const float*> ptrs;
    for (const Tile* s : srcs) in.push_back(LoadTile(*s));
    for (auto& v : in) ptrs.push_back(v.data());
    std::vector<float> out(dst.elements());
    fn(ptrs, out.data(), dst.elements());
    StoreTile(dst, out.data());
  }

  static float Combine2(ReduceOp op, float a, float b) {
    switch (op) {
      case ReduceOp::kSum:
        return a + b;
      case ReduceOp::kMax:
        return ApplyBinary(BinaryOp::kMax, a, b);
      case ReduceOp::kMin:
        return ApplyBinary(BinaryOp::kMin, a, b);
    }
    return a;
  }

  static float Reduce(ReduceOp op, const float* x, int64_t n, int64_t step) {
    float acc = x[0];
    for (int64_t i = 1; i < n; ++i) acc = Combine2(op, acc, x[i * step]);
    return acc;
  }

  // One row of C += a_row (1 x k) * B (k x n): written so that -O3 vectorises
  // the inner loop.
  static void MatRow(const float* __restrict a_row, const float* __restrict b, float* __restrict acc, int64_t k,
                     int64_t n) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a_row[kk];
      const float* __restrict brow = b + kk * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
    }
  }

  double Lanes(const std::vector<Tile>& tiles) const {
    double lanes = c_.simd_lanes_i8;
    for (const Tile& t : tiles) {
      if (t.dtype == DType::kF32 || t.dtype == DType::kI32) lanes = std::min(lanes, c_.simd_lanes_f32);
      if (t.dtype == DType::kF16 || t.dtype == DType::kBF16) lanes = std::min(lanes, c_.simd_lanes_f16);
    }
    return lanes;
  }

  Token Simd(const Tile& dst, const std::vector<Tile>& srcs, int passes) {
    std::vector<Tile> all = srcs;
    all.push_back(dst);
    double bytes = 0;
    for (const Tile& t : all) bytes += Bytes(t);
    const double n = static_cast<double>(dst.elements());
    ls_->bytes.simd_elements += static_cast<uint64_t>(n);
    ls_->bytes.local_bytes += static_cast<uint64_t>(bytes);
    std::vector<Buffer> reads;
    for (const Tile& t : srcs) reads.push_back(t.buffer);
    return Compute(Unit::kSimd, std::max(passes * std::ceil(n / Lanes(all)), bytes / c_.local_bytes_per_cycle), reads,
                   {}, {dst.buffer});
  }

  Token Re(const Tile& dst, const Tile& src, bool accumulate) {
    double bytes = Bytes(src) + Bytes(dst) * (accumulate ? 2 : 1);
    ls_->bytes.local_bytes += static_cast<uint64_t>(bytes);
    return Compute(Unit::kRe,
                   std::max(std::ceil(src.elements() / c_.re_elements_per_cycle), bytes / c_.local_bytes_per_cycle),
                   {src.buffer}, accumulate ? std::vector<Buffer>{dst.buffer} : std::vector<Buffer>{}, {dst.buffer});
  }

  Token Mlu(const Tile& dst, const Tile& src) {
    double bytes = Bytes(src);
    ls_->bytes.local_bytes += static_cast<uint64_t>(2 * bytes);
    return Compute(Unit::kMlu, bytes / c_.mlu_bytes_per_cycle, {src.buffer}, {}, {dst.buffer});
  }

  Token Compute(Unit unit, double cycles, const std::vector<Buffer>& reads, const std::vector<Buffer>& reads2,
                const std::vector<Buffer>& writes) {
    TraceOp op;
    op.kind = OpKind::kCompute;
    op.unit = unit;
    op.cycles = std::ceil(cycles) + c_.unit_op_overhead;
    std::vector<Buffer> r = reads;
    r.insert(r.end(), reads2.begin(), reads2.end());
    return Record(std::move(op), r, writes);
  }

  // Adds the dependencies of an op that reads `reads` and writes `writes`
  // (local buffers; others are ignored), appends it, returns its token.
  Token Record(TraceOp op, const std::vector<Buffer>& reads, const std::vector<Buffer>& writes) {
    const int32_t self = static_cast<int32_t>(ops_.size());
    auto each = [&](const Buffer& b, auto fn) {
      if (b.space != Space::kLocal || b.pe != id_) return;
      uint64_t lo = b.address, hi = b.address + std::max<uint64_t>(b.size, 1);
      auto it = std::upper_bound(allocs_.begin(), allocs_.end(), lo,
                                 [](uint64_t v, const Allocation& a) { return v < a.lo; });
      if (it != allocs_.begin()) --it;
      for (; it != allocs_.end() && it->lo < hi; ++it) {
        if (it->hi > lo) fn(*it);
      }
    };
    for (const Buffer& b : reads) {
      each(b, [&](Allocation& a) {
        if (a.last_writer >= 0) op.deps.push_back(a.last_writer);
      });
    }
    for (const Buffer& b : writes) {
      each(b, [&](Allocation& a) {
        if (a.last_writer >= 0) op.deps.push_back(a.last_writer);
        op.deps.insert(op.deps.end(), a.readers.begin(), a.readers.end());
      });
    }
    for (const Buffer& b : reads) {
      each(b, [&](Allocation& a) {
        if (a.readers.empty() || a.readers.back() != self) a.readers.push_back(self);
      });
    }
    for (const Buffer& b : writes) {
      each(b, [&](Allocation& a) {
        a.last_writer = self;
        a.readers.clear();
      });
    }
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    op.deps.erase(std::remove(op.deps.begin(), op.deps.end(), self), op.deps.end());
    ops_.push_back(std::move(op));
    return Token{self};
  }

  // Resolves one end of a DMA: host pointer, after the checks.
  uint8_t* DmaEnd(const Buffer& b, uint64_t pitch, uint64_t rows, uint64_t row_bytes, const char* what) {
    if (!b.valid()) Throw(ErrorCode::kInvalidArgument, absl::StrCat("DMA ", what, " is an invalid buffer"));
    if (b.space == Space::kLocal && b.pe != id_) {
      Throw(ErrorCode::kFailedPrecondition,
            absl::StrFormat("DMA %s is the local memory of PE %d: a PE's DMA reaches only its own local memory "
                            "(pass data with SendToNeighbour or through LLS)",
                            what, b.pe));
    }
    if (b.address % kDmaAlignment != 0) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("misaligned DMA: %s address 0x%x in %s is not a multiple of %d bytes (Fabric-Interface "
                            "transfers start on 32-byte boundaries; align the offset down and skip the head in "
                            "local memory)",
                            what, b.address, SpaceName(b.space), kDmaAlignment));
    }
    if (rows > 1 && pitch % kDmaAlignment != 0) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("misaligned DMA: %s pitch %d is not a multiple of %d bytes, so rows after the first "
                            "start unaligned",
                            what, pitch, kDmaAlignment));
    }
    if (rows > 1 && pitch < row_bytes) {
      Throw(ErrorCode::kInvalidArgument,
            absl::StrFormat("DMA %s pitch %d is smaller than the row (%d bytes)", what, pitch, row_bytes));
    }
    uint64_t extent = rows == 0 ? 0 : (rows - 1) * pitch + row_bytes;
    if (extent > b.size) {
      Throw(ErrorCode::kOutOfRange,
            absl::StrFormat("DMA %s: %d rows of %d bytes (pitch %d) span %d bytes, the buffer has %d", what, rows,
                            row_bytes, pitch, extent, b.size));
    }
    uint8_t* p = b.space == Space::kLocal ? LocalPtr(b, extent, what) : dev_->HostPointer(b, extent);
    if (p == nullptr) {
      Throw(ErrorCode::kOutOfRange, absl::StrFormat("DMA %s [0x%x, +%d) is outside every %s buffer", what, b.address,
                                                    extent, SpaceName(b.space)));
    }
    return p;
  }

  Token Dma(Buffer dst, uint64_t dst_pitch, Buffer src, uint64_t src_pitch, uint64_t rows, uint64_t row_bytes,
            std::optional<Group> group) {
    uint8_t* d = DmaEnd(dst, dst_pitch, rows, row_bytes, "destination");
    uint8_t* s = DmaEnd(src, src_pitch, rows, row_bytes, "source");
    if (dst.space == Space::kLocal && src.space == Space::kLocal) {
      Throw(ErrorCode::kInvalidArgument, "DMA from local memory to local memory: use LayoutCopy (the MLU)");
    }
    if (group && (dst.space != Space::kLocal || src.space == Space::kLocal)) {
      Throw(ErrorCode::kInvalidArgument, "BroadcastCopy reads DRAM or LLS into local memory");
    }
    if (dst.space != Space::kLocal && src.space != Space::kLocal && group) {
      Throw(ErrorCode::kInvalidArgument, "BroadcastCopy needs a local-memory destination");
    }
    if (dev_->options().compute_values || dst.space != Space::kLocal) {
      for (uint64_t r = 0; r < rows; ++r) std::memmove(d + r * dst_pitch, s + r * src_pitch, row_bytes);
    }
    const double granules = static_cast<double>(rows * RoundUp(row_bytes, kDmaAlignment));
    TraceOp op;
    op.kind = OpKind::kTransfer;
    op.unit = Unit::kDma;
    op.bytes = granules;
    op.ideal_cycles = granules / c_.pe_port_bytes_per_cycle;
    const bool dram = dst.space == Space::kDram || src.space == Space::kDram;
    const bool sram = dst.space == Space::kSram || src.space == Space::kSram;
    op.memories = static_cast<uint8_t>((dram ? kUsesDram : 0) | (sram ? kUsesSram : 0));
    op.latency = dram ? c_.dram_latency : c_.sram_latency;
    const uint64_t moved = rows * row_bytes;
    bool count_shared = true;
    if (group) {
      int& seq = *group == Group::kRow ? row_seq_ : col_seq_;
      BroadcastKey key{*group, *group == Group::kRow ? row_ : col_, seq++};
      auto it = ls_->broadcasts.find(key);
      if (it == ls_->broadcasts.end()) {
        BroadcastInfo info{
            static_cast<int>(ls_->trace.broadcasts.size()), src.address, rows, row_bytes, src_pitch, src.space};
        ls_->trace.broadcasts.emplace_back();
        it = ls_->broadcasts.emplace(key, info).first;
      } else {
        const BroadcastInfo& info = it->second;
        count_shared = false;
        if (info.src_address != src.address || info.rows != rows || info.row_bytes != row_bytes ||
            info.src_pitch != src_pitch || info.src_space != src.space) {
          Throw(ErrorCode::kFailedPrecondition,
                absl::StrFormat("BroadcastCopy #%d of %s %d: this PE reads a different source than the first PE of "
                                "the group; every PE of the group must read the same range in the same order",
                                key.seq, *group == Group::kRow ? "row" : "column", key.index));
        }
        ls_->bytes.broadcast_saved_bytes += moved;
      }
      op.broadcast = it->second.id;
      ls_->trace.broadcasts[op.broadcast].members.emplace_back(id_, static_cast<int32_t>(ops_.size()));
    }
    if (count_shared) {
      if (src.space == Space::kDram) ls_->bytes.dram_read_bytes += moved;
      if (src.space == Space::kSram) ls_->bytes.sram_read_bytes += moved;
    }
    if (dst.space == Space::kDram) ls_->bytes.dram_write_bytes += moved;
    if (dst.space == Space::kSram) ls_->bytes.sram_write_bytes += moved;
    if (dst.space == Space::kLocal || src.space == Space::kLocal) ls_->bytes.local_bytes += moved;
    std::vector<Buffer> reads, writes;
    if (src.space == Space::kLocal) reads.push_back(src.Slice(0, (rows - 1) * src_pitch + row_bytes));
    if (dst.space == Space::kLocal) writes.push_back(dst.Slice(0, (rows - 1) * dst_pitch + row_bytes));
    return Record(std::move(op), reads, writes);
  }

  Device* dev_;
  const Config& c_;
  LaunchState* ls_;
  FiberPool* fibers_;
  const int id_, row_, col_;
  std::vector<TraceOp>& ops_;
  uint64_t top_ = 0;
  std::vector<Allocation> allocs_;
  int row_seq_ = 0, col_seq_ = 0;
  int barriers_ = 0;
};

}  // namespace internal

using internal::LaunchState;
using internal::PeImpl;

Device::Device(const Config& config, const DeviceOptions& options)
    : config_(config), options_(options), sealed_(std::make_unique<Sealed>(Sealed{config, RunStats{}})) {}
Device::~Device() = default;

absl::StatusOr<std::unique_ptr<Device>> Device::Create(const Config& config, const DeviceOptions& options) {
  if (config.grid_rows < 1 || config.grid_cols < 1 || config.clock_hz <= 0 || config.local_memory_bytes == 0 ||
      config.dram_bytes_per_cycle <= 0 || config.sram_bytes_per_cycle <= 0 || config.pe_port_bytes_per_cycle <= 0 ||
      config.dma_max_outstanding < 1) {
    return absl::InvalidArgumentError(absl::StrCat("mtia config '", config.name, "' is incomplete"));
  }
  std::unique_ptr<Device> d(new Device(config, options));
  for (int i = 0; i < config.num_pes(); ++i) {
    d->local_.push_back(std::make_unique<uint8_t[]>(config.local_memory_bytes));
  }
  d->fibers_ = std::make_unique<internal::FiberPool>(config.num_pes(), options.fiber_stack_bytes);
  return d;
}

absl::StatusOr<Buffer> Device::AddRegion(Space space, uint8_t* host, uint64_t bytes, bool owned) {
  auto& map = space == Space::kDram ? dram_ : sram_;
  uint64_t& next = space == Space::kDram ? next_dram_ : next_sram_;
  Region r;
  if (owned) {
    r.owned = std::make_unique<uint8_t[]>(std::max<uint64_t>(bytes, 1));
    host = r.owned.get();
  }
  r.host = host;
  r.size = bytes;
  uint64_t base = next;
  next += (bytes + 4095) / 4096 * 4096 + 4096;  // a gap: one buffer never runs into the next
  map.emplace(base, std::move(r));
  return Buffer{space, -1, base, bytes};
}

absl::StatusOr<Buffer> Device::MapHost(void* host, uint64_t bytes) {
  if (host == nullptr && bytes > 0) return absl::InvalidArgumentError("MapHost: null host pointer");
  return AddRegion(Space::kDram, static_cast<uint8_t*>(host), bytes, /*owned=*/false);
}

absl::StatusOr<Buffer> Device::NewDram(uint64_t bytes) { return AddRegion(Space::kDram, nullptr, bytes, true); }

absl::StatusOr<Buffer> Device::NewSram(uint64_t bytes) {
  uint64_t need = (bytes + 4095) / 4096 * 4096;
  if (need > config_.lls_bytes - sram_used_) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("LLS scratchpad overflow: %d bytes requested, %d of %d free on %s", bytes,
                        config_.lls_bytes - sram_used_, config_.lls_bytes, config_.name));
  }
  sram_used_ += need;
  return AddRegion(Space::kSram, nullptr, bytes, true);
}

uint8_t* Device::HostPointer(const Buffer& b, uint64_t bytes) {
  if (b.space == Space::kLocal) {
    if (b.pe < 0 || b.pe >= config_.num_pes() || b.address + bytes > config_.local_memory_bytes) return nullptr;
    return local_[b.pe].get() + b.address;
  }
  if (b.space != Space::kDram && b.space != Space::kSram) return nullptr;
  auto& map = b.space == Space::kDram ? dram_ : sram_;
  auto it = map.upper_bound(b.address);
  if (it == map.begin()) return nullptr;
  --it;
  uint64_t off = b.address - it->first;
  if (off > it->second.size || bytes > it->second.size - off) return nullptr;
  return it->second.host + off;
}

absl::Status Device::Write(Buffer dst, const void* src, uint64_t bytes) {
  if (dst.space == Space::kLocal || bytes > dst.size) return absl::InvalidArgumentError("Write: bad destination");
  uint8_t* p = HostPointer(dst, bytes);
  if (p == nullptr) return absl::OutOfRangeError("Write: destination is outside every device buffer");
  std::memcpy(p, src, bytes);
  return absl::OkStatus();
}

absl::Status Device::Read(Buffer src, void* dst, uint64_t bytes) {
  if (src.space == Space::kLocal || bytes > src.size) return absl::InvalidArgumentError("Read: bad source");
  uint8_t* p = HostPointer(src, bytes);
  if (p == nullptr) return absl::OutOfRangeError("Read: source is outside every device buffer");
  std::memcpy(dst, p, bytes);
  return absl::OkStatus();
}

absl::StatusOr<RunStats> Device::Run(const Kernel& kernel) {
  LaunchState ls;
  const int n = config_.num_pes();
  ls.trace.pes.resize(n);
  for (int i = 0; i < n; ++i) ls.pes.push_back(std::make_unique<PeImpl>(this, &ls, fibers_.get(), i));
  std::function<void(int)> body = [&](int i) {
    try {
      kernel(*ls.pes[i]);
    } catch (const internal::AbortLaunch&) {
    } catch (const KernelError& e) {
      ls.Fail(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      ls.Fail(ErrorCode::kResourceExhausted, absl::StrCat("PE ", i, ": the kernel ran out of host memory"));
    } catch (const std::exception& e) {
      ls.Fail(ErrorCode::kInternal, absl::StrCat("PE ", i, ": the kernel threw: ", e.what()));
    } catch (...) {
      ls.Fail(ErrorCode::kInternal, absl::StrCat("PE ", i, ": the kernel threw a non-std exception"));
    }
  };
  std::vector<int> stuck;
  if (!fibers_->Run(body, &stuck)) {
    std::vector<std::string> waiting;
    int max_barriers = 0;
    for (int i = 0; i < n; ++i) max_barriers = std::max(max_barriers, ls.pes[i]->barriers());
    for (int i : stuck) waiting.push_back(absl::StrCat(i));
    std::string why = absl::StrCat("deadlock: PEs {", absl::StrJoin(waiting, ","),
                                   "} wait for a barrier or neighbour data that never comes");
    for (int i = 0; i < n; ++i) {
      if (std::find(stuck.begin(), stuck.end(), i) == stuck.end() && ls.pes[i]->barriers() < max_barriers) {
        absl::StrAppend(&why, "; PE ", i, " returned after ", ls.pes[i]->barriers(),
                        " barrier(s): every PE must call Barrier() the same number of times");
        break;
      }
    }
    ls.Fail(ErrorCode::kFailedPrecondition, why);
    fibers_->Abort();
  }
  if (!ls.failed) {
    for (const auto& [key, info] : ls.broadcasts) {
      size_t want = key.group == Group::kRow ? config_.grid_cols : config_.grid_rows;
      size_t got = ls.trace.broadcasts[info.id].members.size();
      if (got != want) {
        ls.Fail(ErrorCode::kFailedPrecondition,
                absl::StrFormat("BroadcastCopy #%d of %s %d was called by %d of its %d PEs: every PE of the group "
                                "must call it",
                                key.seq, key.group == Group::kRow ? "row" : "column", key.index, got, want));
        break;
      }
    }
  }
  if (!ls.failed) {
    for (const auto& [key, box] : ls.mailboxes) {
      if (!box.empty()) {
        ls.Fail(ErrorCode::kFailedPrecondition,
                absl::StrFormat("PE %d never received %d tile(s) its %s neighbour sent it", key.first, box.size(),
                                internal::DirectionName(static_cast<Direction>(key.second))));
        break;
      }
    }
  }
  if (ls.failed) return ls.error;
  KEVO_RETURN_IF_ERROR(CheckSealed());
  KEVO_ASSIGN_OR_RETURN(internal::Timing t, internal::Simulate(sealed_->config, ls.trace));
  RunStats s = ls.bytes;
  s.launches = 1;
  s.cycles = t.cycles;
  s.dma = t.units[static_cast<int>(internal::Unit::kDma)];
  s.dpe = t.units[static_cast<int>(internal::Unit::kDpe)];
  s.simd = t.units[static_cast<int>(internal::Unit::kSimd)];
  s.re = t.units[static_cast<int>(internal::Unit::kRe)];
  s.mlu = t.units[static_cast<int>(internal::Unit::kMlu)];
  s.dma_contention_cycles = t.dma_contention_cycles;
  s.pe_busy_cycles = t.pe_busy_cycles;
  s.wait_cycles = t.wait_cycles;
  s.barrier_cycles = t.barrier_cycles;
  RunStats derived;
  Accumulate(sealed_->config, derived, s);
  Accumulate(sealed_->config, total_, s);
  Accumulate(sealed_->config, sealed_->total, s);
  return derived;
}

absl::Status Device::CheckSealed() const {
  const Config& c = sealed_->config;
  if (!(config_ == c)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a kernel changed the simulated chip's configuration (%s: clock %.6g Hz, DRAM %.6g B/cycle; simulated "
        "at %.6g Hz, %.6g B/cycle)",
        c.name, config_.clock_hz, config_.dram_bytes_per_cycle, c.clock_hz, c.dram_bytes_per_cycle));
  }
  const RunStats& t = sealed_->total;
  if (!(total_ == t)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a kernel rewrote the simulator's run statistics (it reports %.6g s, %d cycles; the simulator counted "
        "%.6g s, %d cycles)",
        total_.seconds, total_.cycles, t.seconds, t.cycles));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunStats> Device::CheckedStats() const {
  if (!status_.ok()) return status_;
  KEVO_RETURN_IF_ERROR(CheckSealed());
  return sealed_->total;
}

void Accumulate(const Config& c, RunStats& a, const RunStats& b) {
  a.launches += b.launches;
  a.cycles += b.cycles;
  for (auto [x, y] :
       {std::pair{&a.dma, &b.dma}, {&a.dpe, &b.dpe}, {&a.simd, &b.simd}, {&a.re, &b.re}, {&a.mlu, &b.mlu}}) {
    x->ops += y->ops;
    x->busy_cycles += y->busy_cycles;
    x->stall_cycles += y->stall_cycles;
  }
  a.dma_contention_cycles += b.dma_contention_cycles;
  a.dram_read_bytes += b.dram_read_bytes;
  a.dram_write_bytes += b.dram_write_bytes;
  a.sram_read_bytes += b.sram_read_bytes;
  a.sram_write_bytes += b.sram_write_bytes;
  a.local_bytes += b.local_bytes;
  a.neighbour_bytes += b.neighbour_bytes;
  a.broadcast_saved_bytes += b.broadcast_saved_bytes;
  a.dpe_flops += b.dpe_flops;
  a.dpe_int8_ops += b.dpe_int8_ops;
  a.simd_elements += b.simd_elements;
  a.pe_busy_cycles += b.pe_busy_cycles;
  a.wait_cycles += b.wait_cycles;
  a.barrier_cycles += b.barrier_cycles;
  const double cyc = static_cast<double>(a.cycles);
  a.seconds = cyc / c.clock_hz;
  if (cyc > 0) {
    a.pe_utilization = a.pe_busy_cycles / (c.num_pes() * cyc);
    a.dpe_utilization =
        (a.dpe_flops / c.dpe_peak_flops_per_cycle(false) + a.dpe_int8_ops / c.dpe_peak_flops_per_cycle(true)) / cyc;
    a.dram_utilization = (a.dram_read_bytes + a.dram_write_bytes) / (c.dram_bytes_per_cycle * cyc);
    a.sram_utilization = (a.sram_read_bytes + a.sram_write_bytes) / (c.sram_bytes_per_cycle * cyc);
  }
}

void Device::Launch(const Kernel& kernel) {
  if (!status_.ok()) return;
  absl::StatusOr<RunStats> r = Run(kernel);
  if (!r.ok()) status_ = r.status();
}

Buffer Device::AllocDram(uint64_t bytes) {
  absl::StatusOr<Buffer> b = NewDram(bytes);
  if (!b.ok()) {
    if (status_.ok()) status_ = b.status();
    return Buffer{};
  }
  return *b;
}

Buffer Device::AllocSram(uint64_t bytes) {
  absl::StatusOr<Buffer> b = NewSram(bytes);
  if (!b.ok()) {
    if (status_.ok()) status_ = b.status();
    return Buffer{};
  }
  return *b;
}

void Device::ResetStats() {
  total_ = RunStats{};
  sealed_->total = RunStats{};
  status_ = absl::OkStatus();
}

}  // namespace kevo::mtia
