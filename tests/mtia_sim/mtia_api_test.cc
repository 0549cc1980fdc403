// The MTIA simulator's kernel API: every unit computes the right values
// (with lookup-table accuracy where the hardware uses tables), the
// cross-PE features (broadcast reads, neighbour passing, barriers) deliver
// data where they say, and misuse comes back as a specific Status.
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "mtia_sim/device.h"
#include "mtia_sim/examples/kernels.h"
#include "mtia_sim/mtia.h"
#include "mtia_sim/numerics.h"

namespace kevo::mtia {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Device> NewDevice(const Config& c = Mtia2iConfig()) {
  auto d = Device::Create(c);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(d).value();
}

TEST(MtiaNumericsTest, HalfAndBf16RoundToNearestEven) {
  using internal::Bf16ToFloat;
  using internal::FloatToBf16;
  using internal::FloatToHalf;
  using internal::HalfToFloat;
  for (float v : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
  }
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.f + 1.f / 4096)), 1.f);  // halfway: to even
  EXPECT_EQ(HalfToFloat(FloatToHalf(1e6f)), INFINITY);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.f + 1.f / 256)), 1.f);  // halfway: to even
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(3.f)), 3.f);
}

// The table functions are close to libm, but not exact: a kernel tuned on
// the simulator sees the error a lookup-table unit makes.
TEST(MtiaNumericsTest, LookupTablesHaveRealisticAccuracy) {
  double worst_exp = 0, worst_recip = 0, worst_log = 0;
  for (int i = -4000; i <= 4000; ++i) {
    float x = i * 0.01f;
    worst_exp = std::max(worst_exp, std::fabs(internal::LutExp(x) / std::exp(double{x}) - 1));
    if (x != 0) worst_recip = std::max(worst_recip, std::fabs(internal::LutRecip(x) * double{x} - 1));
    if (x > 0) worst_log = std::max(worst_log, std::fabs(internal::LutLog(x) - std::log(double{x})));
  }
  EXPECT_LT(worst_exp, 2e-5);
  EXPECT_GT(worst_exp, 1e-7);
  EXPECT_LT(worst_recip, 1e-6);
  EXPECT_LT(worst_log, 5e-5);
  EXPECT_EQ(internal::LutExp(-200.f), 0.f);
  EXPECT_TRUE(std::isinf(internal::LutExp(200.f)));
}

TEST(MtiaApiTest, MatMulF16AccumulatesInFp32) {
  auto dev = NewDevice();
  const int64_t m = 48, k = 96, n = 80;
  std::vector<uint16_t> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = internal::FloatToHalf(((i * 13) % 29) / 7.f - 2.f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = internal::FloatToHalf(((i * 11) % 23) / 5.f - 2.f);
  std::vector<float> c(m * n);
  Buffer ab = *dev->MapHost(a.data(), a.size() * 2), bb = *dev->MapHost(b.data(), b.size() * 2),
         cb = *dev->MapHost(c.data(), c.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 5) return;
    Buffer la = pe.Alloc(a.size() * 2), lb = pe.Alloc(b.size() * 2), lc = pe.Alloc(c.size() * 4);
    pe.Copy(la, ab);
    pe.Copy(lb, bb);
    // Two halves of K: the second accumulates.
    Tile at = Tile::Of(la, DType::kF16, m, k), bt = Tile::Of(lb, DType::kF16, k, n);
    Tile ct = Tile::Of(lc, DType::kF32, m, n);
    pe.MatMul(ct, at.Sub(0, 0, m, k / 2), bt.Sub(0, 0, k / 2, n), false);
    pe.MatMul(ct, at.Sub(0, k / 2, m, k / 2), bt.Sub(k / 2, 0, k / 2, n), true);
    pe.Copy(cb, lc);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->dpe_flops, 2u * m * n * k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        ref += double{internal::HalfToFloat(a[i * k + kk])} * internal::HalfToFloat(b[kk * n + j]);
      }
      ASSERT_NEAR(c[i * n + j], ref, 1e-4 * (1 + std::fabs(ref))) << i << "," << j;
    }
  }
}

TEST(MtiaApiTest, MatMulInt8IsExactInInt32) {
  auto dev = NewDevice();
  const int64_t m = 16, k = 64, n = 32;
  std::vector<int8_t> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>((i * 37) % 256 - 128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>((i * 53) % 256 - 128);
  std::vector<int32_t> c(m * n);
  Buffer ab = *dev->MapHost(a.data(), a.size()), bb = *dev->MapHost(b.data(), b.size()),
         cb = *dev->MapHost(c.data(), c.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 0) return;
    Buffer la = pe.Alloc(a.size()), lb = pe.Alloc(b.size()), lc = pe.Alloc(c.size() * 4);
    pe.Copy(la, ab);
    pe.Copy(lb, bb);
    pe.MatMul(Tile::Of(lc, DType::kI32, m, n), Tile::Of(la, DType::kI8, m, k), Tile::Of(lb, DType::kI8, k, n), false);
    pe.Copy(cb, lc);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int32_t ref = 0;
      for (int64_t kk = 0; kk < k; ++kk) ref += a[i * k + kk] * b[kk * n + j];
      ASSERT_EQ(c[i * n + j], ref);
    }
  }
}

TEST(MtiaApiTest, MatMulRejectsFp32Inputs) {
  auto dev = NewDevice();
  auto s = dev->Run([](Pe& pe) {
    Buffer x = pe.Alloc(64 * 4);
    pe.MatMul(Tile::Of(x, DType::kF32, 8, 8), Tile::Of(x, DType::kF32, 8, 8), Tile::Of(x, DType::kF32, 8, 8), false);
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("Dot Product Engine"));
}

// Softmax at the task's shapes, including an odd one with unaligned rows,
// within the task's tolerance (rtol 1e-4) despite the table exp.
TEST(MtiaApiTest, SoftmaxExampleMatchesReference) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{4, 64}, {33, 1001}, {257, 7}}) {
    auto dev = NewDevice();
    std::vector<float> x(rows * cols), y(rows * cols, NAN);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 100.f + static_cast<float>((i * 7919) % 1000) / 125.f - 4.f;
    Buffer xb = *dev->MapHost(x.data(), x.size() * 4), yb = *dev->MapHost(y.data(), y.size() * 4);
    auto s = dev->Run(examples::SoftmaxF32(xb, yb, rows, cols));
    ASSERT_TRUE(s.ok()) << s.status();
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double{x[r * cols + c]});
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - mx);
      for (int64_t c = 0; c < cols; ++c) {
        double ref = std::exp(x[r * cols + c] - mx) / sum;
        ASSERT_NEAR(y[r * cols + c], ref, 1e-7 + 1e-4 * ref) << rows << "x" << cols << " at " << r << "," << c;
      }
    }
  }
}

TEST(MtiaApiTest, SimdReduceAndLayoutUnits) {
  auto dev = NewDevice();
  const int64_t r = 6, c = 10;
  std::vector<float> x(r * c), out(r * c + r + c + r * c);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 20.f;
  Buffer xb = *dev->MapHost(x.data(), x.size() * 4), ob = *dev->MapHost(out.data(), out.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 63) return;
    Buffer lx = pe.Alloc(r * c * 4), lt = pe.Alloc(r * c * 4), rows = pe.Alloc(r * 4), cols = pe.Alloc(c * 4),
           relu = pe.Alloc(r * c * 4);
    pe.Copy(lx, xb);
    Tile xt = Tile::Of(lx, DType::kF32, r, c);
    pe.Transpose(Tile::Of(lt, DType::kF32, c, r), xt);
    pe.ReduceRows(ReduceOp::kSum, Tile::Of(rows, DType::kF32, r, 1), xt, false);
    pe.ReduceCols(ReduceOp::kMax, Tile::Of(cols, DType::kF32, 1, c), xt, false);
    pe.Unary(UnaryOp::kRelu, Tile::Of(relu, DType::kF32, r, c), xt);
    pe.Copy(ob.Slice(0, r * c * 4), lt);
    pe.Copy(ob.Slice(r * c * 4, r * 4), rows);
    pe.Copy(ob.Slice((r * c + r) * 4, c * 4), cols);  // offset 264: not 32-byte aligned
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("misaligned DMA"));

  auto ok = dev->Run([&](Pe& pe) {
    if (pe.id() != 63) return;
    Buffer lx = pe.Alloc(r * c * 4), lt = pe.Alloc(r * c * 4), rows = pe.Alloc(r * 4), cols = pe.Alloc(c * 4);
    pe.Copy(lx, xb);
    Tile xt = Tile::Of(lx, DType::kF32, r, c);
    pe.Transpose(Tile::Of(lt, DType::kF32, c, r), xt);
    pe.ReduceRows(ReduceOp::kSum, Tile::Of(rows, DType::kF32, r, 1), xt, false);
    pe.ReduceCols(ReduceOp::kMax, Tile::Of(cols, DType::kF32, 1, c), xt, false);
    pe.Copy(ob.Slice(0, r * c * 4), lt);
    pe.Copy(ob.Slice(256, r * 4), rows);  // 32-byte aligned offsets
    pe.Copy(ob.Slice(288, c * 4), cols);
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) EXPECT_EQ(out[j * r + i], x[i * c + j]);
  for (int64_t i = 0; i < r; ++i) {
    float sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += x[i * c + j];
    EXPECT_EQ(out[64 + i], sum);
  }
  for (int64_t j = 0; j < c; ++j) EXPECT_EQ(out[72 + j], x[(r - 1) * c + j]);
  EXPECT_GT(ok->mlu.busy_cycles, 0);
  EXPECT_GT(ok->re.busy_cycles, 0);
}

// Each PE passes its running row sum east; the last column holds the total.
TEST(MtiaApiTest, NeighbourPassingReducesAlongARow) {
  auto dev = NewDevice();
  std::vector<float> out(8 * 8, NAN);
  Buffer ob = *dev->MapHost(out.data(), out.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    Buffer v = pe.Alloc(32);
    Tile t = Tile::Of(v, DType::kF32, 1, 1);
    pe.Fill(t, static_cast<float>(pe.id()));
    if (pe.col() > 0) pe.ReceiveFromNeighbour(Direction::kWest, t, Combine::kSum);
    if (pe.col() < 7) pe.SendToNeighbour(Direction::kEast, t);
    if (pe.col() == 7) pe.Copy(ob.Slice(pe.row() * 32, 32), v);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  for (int row = 0; row < 8; ++row) {
    float want = 0;
    for (int col = 0; col < 8; ++col) want += row * 8 + col;
    EXPECT_EQ(out[row * 8], want);
  }
  EXPECT_EQ(s->neighbour_bytes, 8u * 7 * 4);
}

TEST(MtiaApiTest, NeighbourOutsideTheGridIsOutOfRange) {
  auto dev = NewDevice();
  auto s = dev->Run([](Pe& pe) {
    Buffer v = pe.Alloc(32);
    if (pe.row() == 0) pe.SendToNeighbour(Direction::kNorth, Tile::Of(v, DType::kF32, 1, 1));
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.status().message(), HasSubstr("no north neighbour"));
}

TEST(MtiaApiTest, UnreceivedNeighbourDataIsAnError) {
  auto dev = NewDevice();
  auto s = dev->Run([](Pe& pe) {
    Buffer v = pe.Alloc(32);
    if (pe.id() == 0) pe.SendToNeighbour(Direction::kEast, Tile::Of(v, DType::kF32, 1, 1));
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("never received"));
}

TEST(MtiaApiTest, BroadcastDeliversOneReadToTheWholeRow) {
  auto dev = NewDevice();
  std::vector<float> w(8 * 64), out(64 * 64, NAN);
  std::iota(w.begin(), w.end(), 0.f);
  Buffer wb = *dev->MapHost(w.data(), w.size() * 4), ob = *dev->MapHost(out.data(), out.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    Buffer l = pe.Alloc(256);
    pe.BroadcastCopy(Group::kRow, l, wb.Slice(pe.row() * 256, 256));
    pe.Copy(ob.Slice(pe.id() * 256, 256), l);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  for (int p = 0; p < 64; ++p)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[p * 64 + i], w[(p / 8) * 64 + i]);
  EXPECT_EQ(s->dram_read_bytes, 8u * 256);  // once per row, not once per PE
  EXPECT_EQ(s->broadcast_saved_bytes, 56u * 256);
}

TEST(MtiaApiTest, BroadcastWithDifferentSourcesIsFailedPrecondition) {
  auto dev = NewDevice();
  std::vector<float> w(64 * 64);
  Buffer wb = *dev->MapHost(w.data(), w.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    Buffer l = pe.Alloc(256);
    pe.BroadcastCopy(Group::kColumn, l, wb.Slice(pe.id() * 256, 256));
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("different source"));
}

// A checkerboard of PEs issue their column broadcasts first, the others
// their row broadcasts first, more than the DMA queue holds: each group waits
// for a PE stuck behind a broadcast of the other kind.
TEST(MtiaApiTest, BroadcastsInConflictingOrderAreFailedPrecondition) {
  auto dev = NewDevice();
  std::vector<float> w(64 * 64);
  Buffer wb = *dev->MapHost(w.data(), w.size() * 4);
  const int n = Mtia2iConfig().dma_max_outstanding + 1;
  auto s = dev->Run([&](Pe& pe) {
    CircularBuffer a = pe.AllocCircular(256, n), b = pe.AllocCircular(256, n);
    auto rows = [&] {
      for (int i = 0; i < n; ++i) pe.BroadcastCopy(Group::kRow, a.Slot(i), wb.Slice(pe.row() * 256, 256));
    };
    auto cols = [&] {
      for (int i = 0; i < n; ++i) pe.BroadcastCopy(Group::kColumn, b.Slot(i), wb.Slice(4096 + pe.col() * 256, 256));
    };
    if ((pe.row() + pe.col()) % 2 == 0) {
      cols();
      rows();
    } else {
      rows();
      cols();
    }
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("broadcast deadlock"));
}

// Phase 1 writes DRAM, the barrier orders it before phase 2's reads of
// another PE's data.
TEST(MtiaApiTest, BarrierOrdersDramTrafficAcrossPes) {
  auto dev = NewDevice();
  std::vector<float> slots(64 * 8, 0.f), out(64 * 8, NAN);
  Buffer sb = *dev->MapHost(slots.data(), slots.size() * 4), ob = *dev->MapHost(out.data(), out.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    Buffer l = pe.Alloc(32);
    Tile t = Tile::Of(l, DType::kF32, 1, 8);
    pe.Fill(t, static_cast<float>(pe.id() + 1));
    pe.Copy(sb.Slice(pe.id() * 32, 32), l);
    pe.Barrier();
    pe.Copy(l, sb.Slice(((pe.id() + 1) % 64) * 32, 32));
    pe.Copy(ob.Slice(pe.id() * 32, 32), l);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  for (int p = 0; p < 64; ++p) EXPECT_EQ(out[p * 8], static_cast<float>((p + 1) % 64 + 1)) << p;
}

TEST(MtiaApiTest, UnbalancedBarrierIsFailedPrecondition) {
  auto dev = NewDevice();
  auto s = dev->Run([](Pe& pe) {
    if (pe.id() == 3) return;
    pe.Barrier();
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("PE 3 returned after 0 barrier"));
}

TEST(MtiaApiTest, DmaIntoAnotherPesLocalMemoryIsFailedPrecondition) {
  auto dev = NewDevice();
  std::vector<float> x(64);
  Buffer xb = *dev->MapHost(x.data(), x.size() * 4);
  auto s = dev->Run([&](Pe& pe) {
    Buffer l = pe.Alloc(256);
    l.pe = (pe.id() + 1) % 64;
    pe.Copy(l, xb);
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("its own local memory"));
}

// A kernel that swallows the exception still fails: the error is recorded.
TEST(MtiaApiTest, CaughtKernelErrorsStillFailTheLaunch) {
  auto dev = NewDevice();
  Grid& grid = *dev;
  grid.Launch([](Pe& pe) {
    try {
      pe.Alloc(1 << 30);
    } catch (const KernelError&) {
    }
  });
  EXPECT_FALSE(grid.ok());
  EXPECT_THAT(grid.error(), HasSubstr("local memory overflow"));
  EXPECT_EQ(dev->status().code(), absl::StatusCode::kResourceExhausted);
  uint64_t launches = grid.stats().launches;
  grid.Launch([](Pe&) {});  // later launches do nothing
  EXPECT_EQ(grid.stats().launches, launches);
}

TEST(MtiaApiTest, LaunchCostsUnderAMicrosecondAndCountsLaunches) {
  auto dev = NewDevice();
  auto s = dev->Run([](Pe&) {});
  ASSERT_TRUE(s.ok());
  EXPECT_GT(s->cycles, 0u);
  EXPECT_LT(s->seconds, 1e-6);
  Grid& grid = *dev;
  grid.Launch([](Pe&) {});
  EXPECT_EQ(grid.stats().launches, 2u);
  EXPECT_EQ(grid.stats().cycles, 2 * s->cycles);
}

// What the simulator reports is what it counted: totals a kernel rewrote
// through the reference stats() hands out, or a clock it raised through
// pe.config(), are refused, naming what changed; the honest totals stand.
TEST(MtiaApiTest, RewrittenTotalsOrConfigurationAreRefused) {
  auto dev = NewDevice();
  Grid& grid = *dev;
  grid.Launch([](Pe&) {});
  auto honest = dev->CheckedStats();
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_EQ(*honest, grid.stats());
  const_cast<RunStats&>(grid.stats()).seconds /= 10;
  auto forged = dev->CheckedStats();
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(forged.status().message(), HasSubstr("rewrote the simulator's run statistics"));

  auto dev2 = NewDevice();
  const double clock = dev2->config().clock_hz;
  auto run = dev2->Run([](Pe& pe) {
    if (pe.id() == 0) const_cast<Config&>(pe.config()).clock_hz *= 4;
  });
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(), HasSubstr("changed the simulated chip's configuration"));
  EXPECT_EQ(dev2->CheckedStats().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(dev2->config().clock_hz, clock);  // the rewrite happened; it was not believed
}

TEST(MtiaApiTest, ComparisonsGiveMasksAndGatherLooksUpATable) {
  auto dev = NewDevice();
  std::vector<float> x = {-1.f, 0.5f, 2.f, NAN, 3.f, 0.f, 1.f, 7.f};
  std::vector<float> table = {10.f, 11.f, 12.f, 13.f}, idx = {3, 0, 1, 2, 2, 1, 0, 3};
  std::vector<float> le(8), gt(8), g(8);
  Buffer xb = *dev->MapHost(x.data(), 32), tb = *dev->MapHost(table.data(), 16), ib = *dev->MapHost(idx.data(), 32);
  Buffer leb = *dev->MapHost(le.data(), 32), gtb = *dev->MapHost(gt.data(), 32), gb = *dev->MapHost(g.data(), 32);
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 0) return;
    Buffer lx = pe.Alloc(32), lt = pe.Alloc(16), li = pe.Alloc(32), o1 = pe.Alloc(32), o2 = pe.Alloc(32),
           o3 = pe.Alloc(32);
    pe.Copy(lx, xb);
    pe.Copy(lt, tb);
    pe.Copy(li, ib);
    const Tile tx = Tile::Of(lx, DType::kF32, 1, 8);
    pe.BinaryScalar(BinaryOp::kLe, Tile::Of(o1, DType::kF32, 1, 8), tx, 1.f);
    pe.BinaryScalar(BinaryOp::kGt, Tile::Of(o2, DType::kF32, 1, 8), tx, 0.f);
    pe.Gather(Tile::Of(o3, DType::kF32, 1, 8), Tile::Of(lt, DType::kF32, 1, 4), Tile::Of(li, DType::kF32, 1, 8));
    pe.Copy(leb, o1);
    pe.Copy(gtb, o2);
    pe.Copy(gb, o3);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(le, (std::vector<float>{1, 1, 0, 0, 0, 1, 1, 0}));  // NaN compares false
  EXPECT_EQ(gt, (std::vector<float>{0, 1, 1, 0, 1, 0, 1, 1}));
  EXPECT_EQ(g, (std::vector<float>{13, 10, 11, 12, 12, 11, 10, 13}));
}

TEST(MtiaApiTest, GatherOutsideTheTableIsOutOfRange) {
  auto dev = NewDevice();
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 0) return;
    Buffer t = pe.Alloc(16), i = pe.Alloc(32), o = pe.Alloc(32);
    pe.Fill(Tile::Of(t, DType::kF32, 1, 4), 1.f);
    pe.Fill(Tile::Of(i, DType::kF32, 1, 8), 4.f);
    pe.Gather(Tile::Of(o, DType::kF32, 1, 8), Tile::Of(t, DType::kF32, 1, 4), Tile::Of(i, DType::kF32, 1, 8));
  });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.status().message(), HasSubstr("Gather: index 4"));
}

// The scalar core sees the values a DMA brought in, and waits for that DMA:
// reading right after a DRAM load costs at least the DRAM latency.
TEST(MtiaApiTest, ReadLocalWaitsForTheDmaAndReturnsItsBytes) {
  auto dev = NewDevice();
  std::vector<int64_t> v = {5, -7, 1LL << 40, 3};
  Buffer vb = *dev->MapHost(v.data(), 32);
  int64_t seen[4] = {};
  auto s = dev->Run([&](Pe& pe) {
    if (pe.id() != 0) return;
    Buffer l = pe.Alloc(32);
    pe.Copy(l, vb);
    pe.ReadLocal(l, seen);
  });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::vector<int64_t>(seen, seen + 4), v);
  EXPECT_GE(s->cycles, Mtia2iConfig().dram_latency + Mtia2iConfig().launch_cycles);
  EXPECT_GT(s->wait_cycles, 0);
  auto bad = dev->Run([&](Pe& pe) {
    if (pe.id() == 0) pe.ReadLocal(vb, seen);
  });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kevo::mtia
