#include "common/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo {
namespace {

using ::testing::HasSubstr;

v1::TensorSpec Spec(const std::string& name, v1::DType dtype) {
  v1::TensorSpec spec;
  spec.set_name(name);
  spec.set_dtype(dtype);
  return spec;
}

TEST(DTypeTest, SizesAndCNames) {
  EXPECT_EQ(DTypeSize(v1::F32), 4u);
  EXPECT_EQ(DTypeSize(v1::F64), 8u);
  EXPECT_EQ(DTypeSize(v1::BF16), 2u);
  EXPECT_EQ(DTypeSize(v1::I64), 8u);
  EXPECT_EQ(DTypeSize(v1::U8), 1u);
  EXPECT_EQ(CTypeName(v1::F32), "float");
  EXPECT_EQ(CTypeName(v1::I32), "int32_t");
  EXPECT_EQ(DTypeName(v1::F16), "f16");
  EXPECT_TRUE(IsFloat(v1::BF16));
  EXPECT_FALSE(IsFloat(v1::I32));
}

// These values are what every host must produce. If this test fails, inputs
// changed: every stored golden tensor and cross-host comparison is invalid.
TEST(RngTest, BitsArePinnedAcrossHostsAndCompilers) {
  EXPECT_EQ(RngBits(0, 0, 0), 7599802497457984696ULL);
  EXPECT_EQ(RngBits(1, 2, 3), 2347870409299617143ULL);
  EXPECT_EQ(TensorStream("x"), 12638214688346347271ULL);
  EXPECT_EQ(RngBits(42, TensorStream("x"), 1000000), 2403837928943131851ULL);
}

TEST(RngTest, IntRangeBoundsFollowTheBindingWhenGivenAsExpressions) {
  v1::TensorSpec idx = Spec("idx", v1::I64);
  auto* range = idx.mutable_distribution()->mutable_int_range();
  range->set_low(0);
  range->set_high(99999);
  range->set_high_expr("V-1");
  std::vector<int64_t> v(20000);
  const SymbolValues small = {{"V", 10}};
  FillTensor(idx, {20000}, 3, v.data(), &small);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 0);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 9);
  // Without the binding's values the constant bounds hold.
  FillTensor(idx, {20000}, 3, v.data());
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 9);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 99999);
}

TEST(RngTest, FilledValuesArePinned) {
  v1::TensorSpec x = Spec("x", v1::F32);
  float f[4];
  FillTensor(x, {4}, 7, f);
  EXPECT_EQ(f[0], 0x1.fb05fap-1f);
  EXPECT_EQ(f[1], -0x1.36d768p-2f);
  EXPECT_EQ(f[2], 0x1.b5370ap-1f);
  EXPECT_EQ(f[3], 0x1.6b6296p-1f);
  x.mutable_distribution()->mutable_normal()->set_stddev(2);
  FillTensor(x, {4}, 7, f);
  EXPECT_EQ(f[0], 0x1.12c8c6p+0f);
  EXPECT_EQ(f[1], 0x1.2386cp+1f);
  EXPECT_EQ(f[2], 0x1.0ef22ep+1f);
  EXPECT_EQ(f[3], -0x1.4124a4p-3f);
  int32_t i[4];
  FillTensor(Spec("idx", v1::I32), {4}, 7, i);
  EXPECT_EQ(std::vector<int32_t>(i, i + 4), (std::vector<int32_t>{20, 79, 78, 45}));
}

TEST(RngTest, SameSeedSameValuesOtherSeedOrNameOtherValues) {
  const v1::TensorSpec x = Spec("x", v1::F32);
  std::vector<float> a(1000), b(1000), c(1000), d(1000);
  FillTensor(x, {1000}, 1, a.data());
  FillTensor(x, {1000}, 1, b.data());
  FillTensor(x, {1000}, 2, c.data());
  FillTensor(Spec("y", v1::F32), {1000}, 1, d.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  // A prefix does not depend on the tensor's length.
  std::vector<float> e(10);
  FillTensor(x, {10}, 1, e.data());
  EXPECT_TRUE(std::equal(e.begin(), e.end(), a.begin()));
}

TEST(FillTensorTest, UniformStaysInHalfOpenRange) {
  v1::TensorSpec x = Spec("x", v1::F64);
  x.mutable_distribution()->mutable_uniform()->set_low(2.5);
  x.mutable_distribution()->mutable_uniform()->set_high(3.0);
  std::vector<double> v(20000);
  FillTensor(x, {20000}, 3, v.data());
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 2.5);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0);
  EXPECT_LT(*std::min_element(v.begin(), v.end()), 2.51);
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 2.99);
}

TEST(FillTensorTest, DefaultsAreMinusOneToOneAndZeroToHundred) {
  std::vector<float> f(20000);
  FillTensor(Spec("f", v1::F32), {20000}, 3, f.data());
  EXPECT_GE(*std::min_element(f.begin(), f.end()), -1.0f);
  EXPECT_LT(*std::max_element(f.begin(), f.end()), 1.0f);
  EXPECT_LT(*std::min_element(f.begin(), f.end()), -0.99f);
  std::vector<int64_t> n(20000);
  FillTensor(Spec("n", v1::I64), {20000}, 3, n.data());
  EXPECT_EQ(*std::min_element(n.begin(), n.end()), 0);
  EXPECT_EQ(*std::max_element(n.begin(), n.end()), 100);
}

TEST(FillTensorTest, IntRangeIsInclusiveAtBothEnds) {
  v1::TensorSpec x = Spec("x", v1::I32);
  x.mutable_distribution()->mutable_int_range()->set_low(-3);
  x.mutable_distribution()->mutable_int_range()->set_high(4);
  std::vector<int32_t> v(5000);
  FillTensor(x, {5000}, 9, v.data());
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), -3);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 4);
}

TEST(FillTensorTest, NormalHasRequestedMeanAndStddev) {
  v1::TensorSpec x = Spec("x", v1::F64);
  x.mutable_distribution()->mutable_normal()->set_mean(1.5);
  x.mutable_distribution()->mutable_normal()->set_stddev(4);
  const int n = 200000;
  std::vector<double> v(n);
  FillTensor(x, {n}, 5, v.data());
  double sum = 0, sq = 0;
  for (double d : v) sum += d, sq += d * d;
  const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 1.5, 0.05);
  EXPECT_NEAR(stddev, 4.0, 0.05);
  // Irwin-Hall of 12 uniforms is bounded by 6 standard deviations.
  for (double d : v) ASSERT_LE(std::fabs(d - 1.5), 24.0);
}

TEST(FillTensorTest, SortedUniformSortsEachRowOfTheLastDimension) {
  v1::TensorSpec x = Spec("b", v1::F32);
  x.mutable_distribution()->mutable_sorted_uniform()->set_low(-10);
  x.mutable_distribution()->mutable_sorted_uniform()->set_high(10);
  std::vector<float> v(3 * 50);
  FillTensor(x, {3, 50}, 11, v.data());
  for (int row = 0; row < 3; ++row) {
    auto begin = v.begin() + row * 50;
    EXPECT_TRUE(std::is_sorted(begin, begin + 50)) << row;
    EXPECT_GE(*begin, -10.0f);
    EXPECT_LT(*(begin + 49), 10.0f);
  }
  // Rows are sorted separately, not as one array.
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
}

TEST(PoisonTensorTest, FloatsBecomeNaNIntegersAPattern) {
  std::vector<float> f(5, 1.0f);
  PoisonTensor(v1::F32, 5, f.data());
  for (float x : f) EXPECT_TRUE(std::isnan(x));
  std::vector<uint16_t> h(3, 0);
  PoisonTensor(v1::F16, 3, h.data());
  for (uint16_t x : h) EXPECT_TRUE(std::isnan(HalfToFloat(x)));
  std::vector<int32_t> i(4, 0);
  PoisonTensor(v1::I32, 4, i.data());
  for (int32_t x : i) EXPECT_EQ(x, 0x5A5A5A5A);
}

TEST(HalfTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << h;
    }
  }
}

TEST(HalfTest, KnownValuesRoundingAndOverflow) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);         // largest finite
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);         // rounds up to infinity
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-26f), 0x0000);         // underflows to zero
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3C00);  // tie: to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(HalfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0xFC00)));
}

TEST(Bf16Test, RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f), 0x3F80);  // tie: to even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToBf16(f), b) << b;
    }
  }
}

TEST(CompareTensorsTest, FloatsWithinAbsPlusRelTolerancePass) {
  const float want[3] = {1.0f, 100.0f, 0.0f};
  const float got[3] = {1.0f + 1.5e-4f, 100.0f + 0.009f, 9e-5f};
  CompareResult r = CompareTensors(v1::F32, got, want, 3, {1e-4, 1e-4});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.first_bad_index, -1);
  EXPECT_EQ(r.bad_count, 0);
  EXPECT_NEAR(r.max_abs_err, 0.009, 1e-5);
}

TEST(CompareTensorsTest, ReportsFirstBadIndexAndCount) {
  const float want[5] = {1, 2, 3, 4, 5};
  const float got[5] = {1, 2.1f, 3, 4.5f, 5};
  CompareResult r = CompareTensors(v1::F32, got, want, 5, {1e-4, 1e-4});
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.nonfinite);
  EXPECT_EQ(r.first_bad_index, 1);
  EXPECT_EQ(r.bad_count, 2);
  EXPECT_NEAR(r.max_abs_err, 0.5, 1e-6);
  EXPECT_NEAR(r.max_rel_err, 0.125, 1e-6);
}

TEST(CompareTensorsTest, NaNWhereFiniteExpectedIsNonfinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float want[3] = {1, 2, 3};
  const float got[3] = {1, nan, 3};
  CompareResult r = CompareTensors(v1::F32, got, want, 3, {1.0, 1.0});
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.nonfinite);
  EXPECT_EQ(r.first_bad_index, 1);
  const float inf_got[1] = {std::numeric_limits<float>::infinity()};
  r = CompareTensors(v1::F32, inf_got, want, 1, {1e9, 1e9});
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.nonfinite);
}

TEST(CompareTensorsTest, NaNAndInfMatchOnlyThemselves) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float want[2] = {nan, inf};
  const float same[2] = {nan, inf};
  EXPECT_TRUE(CompareTensors(v1::F32, same, want, 2, {1e-4, 1e-4}).ok);
  const float other[2] = {0, 1e30f};
  CompareResult r = CompareTensors(v1::F32, other, want, 2, {1e-4, 1e-4});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_count, 2);
}

TEST(CompareTensorsTest, IntegersCompareExactlyWhateverTheTolerance) {
  const int32_t want[3] = {5, 6, 7};
  const int32_t got[3] = {5, 7, 7};
  CompareResult r = CompareTensors(v1::I32, got, want, 3, {10, 10});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_index, 1);
  // 2^53 and 2^53+1 are equal as doubles but not as int64.
  const int64_t want64[1] = {int64_t{1} << 53};
  const int64_t got64[1] = {(int64_t{1} << 53) + 1};
  EXPECT_FALSE(CompareTensors(v1::I64, got64, want64, 1, {}).ok);
  EXPECT_TRUE(CompareTensors(v1::I64, want64, want64, 1, {}).ok);
}

TEST(ToleranceTest, DefaultsPerDTypeAndTaskOverride) {
  v1::Task task;
  EXPECT_EQ(ToleranceFor(task, v1::F32).atol, 1e-4);
  EXPECT_EQ(ToleranceFor(task, v1::F32).rtol, 1e-4);
  EXPECT_EQ(ToleranceFor(task, v1::F64).atol, 1e-9);
  EXPECT_EQ(ToleranceFor(task, v1::BF16).rtol, 1e-2);
  EXPECT_EQ(ToleranceFor(task, v1::I32).atol, 0);
  auto* t = task.add_tolerances();
  t->set_dtype(v1::F32);
  t->set_atol(1e-6);
  t->set_rtol(2e-6);
  EXPECT_EQ(ToleranceFor(task, v1::F32).atol, 1e-6);
  EXPECT_EQ(ToleranceFor(task, v1::F32).rtol, 2e-6);
  EXPECT_EQ(ToleranceFor(task, v1::F64).atol, 1e-9);
}

TEST(ResolveShapeTest, EvaluatesEachDimension) {
  v1::TensorSpec t = Spec("w", v1::F32);
  t.add_shape("2*k+1");
  t.add_shape("n");
  t.add_shape("64");
  auto shape = ResolveShape(t, {{"k", 3}, {"n", 10}});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(*shape, (std::vector<int64_t>{7, 10, 64}));
  EXPECT_EQ(NumElements(*shape), 7 * 10 * 64);
  auto unbound = ResolveShape(t, {{"k", 3}});
  EXPECT_EQ(unbound.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unbound.status().message()), HasSubstr("tensor 'w'"));
  auto negative = ResolveShape(t, {{"k", -3}, {"n", 1}});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("negative"));
}

TEST(TensorBytesTest, IsElementsTimesTheDTypeSize) {
  v1::TensorSpec t = Spec("w", v1::F64);
  t.add_shape("rows");
  t.add_shape("2*cols+1");
  auto bytes = TensorBytes(t, {{"rows", 33}, {"cols", 500}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 33 * 1001 * 8);
  EXPECT_EQ(*CheckedNumElements({}), 1);  // a scalar
  EXPECT_EQ(*CheckedNumElements({3, 0, 7}), 0);
}

// The shapes that once reached a worker: 10^6 four times wraps NumElements,
// and 2^32 x 2^32 wraps it to exactly 0. Each must be an error naming the
// tensor, never a size.
TEST(TensorBytesTest, ShapesWhoseSizeOverflowsInt64AreInvalidArgument) {
  v1::TensorSpec t = Spec("x", v1::F32);
  for (int i = 0; i < 4; ++i) t.add_shape("n");
  auto elements = TensorBytes(t, {{"n", 1000000}});
  EXPECT_EQ(elements.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(elements.status().message()),
              HasSubstr("tensor 'x': shape [1000000 x 1000000 x 1000000 x 1000000] has more elements than "
                        "int64 holds"));
  EXPECT_EQ(CheckedNumElements({int64_t{1} << 32, int64_t{1} << 32}).status().code(),
            absl::StatusCode::kInvalidArgument);

  v1::TensorSpec wide = Spec("y", v1::F64);
  wide.add_shape("n");
  wide.add_shape("n");
  auto bytes = TensorBytes(wide, {{"n", int64_t{1} << 31}});  // 2^62 elements fit; 2^65 bytes do not
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bytes.status().message()),
              HasSubstr("tensor 'y': 4611686018427387904 elements of f64 are more bytes than int64 holds"));

  v1::TensorSpec wraps = Spec("z", v1::F32);
  wraps.add_shape("n*n");  // the expression itself overflows
  auto expr = TensorBytes(wraps, {{"n", int64_t{1} << 32}});
  EXPECT_EQ(expr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(expr.status().message()), HasSubstr("tensor 'z'"));
  EXPECT_THAT(std::string(expr.status().message()), HasSubstr("overflows int64"));
}

TEST(FormatBytesTest, PicksTheLargestBinaryUnit) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{16} << 30), "16 GiB");
  EXPECT_EQ(FormatBytes(4000000000000), "3.6 TiB");
}

v1::Task SoftmaxLikeTask() {
  v1::Task task;
  task.mutable_signature()->set_function("softmax");
  for (const char* p : {"x", "y", "rows", "cols"}) task.mutable_signature()->add_params(p);
  auto* x = task.add_inputs();
  *x = Spec("x", v1::F32);
  x->add_shape("rows");
  x->add_shape("cols");
  auto* y = task.add_outputs();
  *y = Spec("y", v1::F32);
  y->add_shape("rows");
  y->add_shape("cols");
  return task;
}

TEST(RenderSignatureTest, InputsConstOutputsMutableSymbolsInt64) {
  auto sig = RenderSignature(SoftmaxLikeTask());
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(*sig, "extern \"C\" void softmax(const float* x, float* y, int64_t rows, int64_t cols);");
  v1::Task task = SoftmaxLikeTask();
  task.mutable_outputs(0)->set_dtype(v1::I32);
  EXPECT_EQ(*RenderSignature(task),
            "extern \"C\" void softmax(const float* x, int32_t* y, int64_t rows, int64_t cols);");
}

TEST(RenderSignatureTest, ParameterNamingNothingIsInvalidArgument) {
  v1::Task task = SoftmaxLikeTask();
  task.mutable_signature()->add_params("depth");
  auto sig = RenderSignature(task);
  EXPECT_EQ(sig.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sig.status().message()), HasSubstr("'depth'"));
}

}  // namespace
}  // namespace kevo
