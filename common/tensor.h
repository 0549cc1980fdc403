// Tensors as kevo's workers see them: dtype sizes, deterministic input
// generation (identical on every host for a seed), and the comparison that
// decides whether a candidate's output matches the reference's.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "common/expr.h"
#include "kevo/v1/task.pb.h"

namespace kevo {

size_t DTypeSize(v1::DType dtype);
bool IsFloat(v1::DType dtype);
// The C type a kernel sees: "float", "double", "_Float16", "uint16_t" (bf16
// bits), "int32_t", ...
std::string_view CTypeName(v1::DType dtype);
std::string_view DTypeName(v1::DType dtype);  // "f32", "i64", ...

SymbolValues BindingValues(const v1::Binding& binding);
// The task's declared bytes moved and flops at its timed binding ({bytes,
// flops}; 0 for one not given or not evaluable).
std::pair<double, double> WorkAtTimedBinding(const v1::Task& task);
absl::StatusOr<std::vector<int64_t>> ResolveShape(const v1::TensorSpec& spec, const SymbolValues& symbols);
// The product of `shape` (1 for a scalar). Wraps on overflow: use it only on
// shapes a checked path (CheckedNumElements, TensorBytes, a validated task)
// has already accepted.
int64_t NumElements(const std::vector<int64_t>& shape);
// The product of `shape`, or InvalidArgument ("shape [a x b x c] has more
// elements than int64 holds") when it overflows.
absl::StatusOr<int64_t> CheckedNumElements(const std::vector<int64_t>& shape);
// The bytes tensor `spec` takes at `symbols` (a binding's values): its
// resolved shape's elements times its dtype's size. ResolveShape's errors, or
// InvalidArgument naming the tensor and its shape when the elements or the
// bytes overflow int64; never a wrapped size.
absl::StatusOr<int64_t> TensorBytes(const v1::TensorSpec& spec, const SymbolValues& symbols);
// A byte count for messages: "512 B", "1.5 KiB", "16 GiB", "3.6 TiB".
std::string FormatBytes(int64_t bytes);

// Counter-based random bits: a pure function of (seed, stream, index).
uint64_t RngBits(uint64_t seed, uint64_t stream, uint64_t index);
// Stream id of a tensor: a stable hash of its name, so adding a tensor to a
// task never changes the values of the others.
uint64_t TensorStream(std::string_view name);

// Fills `data` (NumElements(shape) values of spec.dtype) from spec's
// distribution. Uses integer and IEEE arithmetic only, no libm.
// `symbols` (the binding's values) resolve an int_range's low_expr/high_expr;
// without them, or when an expression does not evaluate (the loader rejects
// such tasks), the constant bounds are used.
void FillTensor(const v1::TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed, void* data,
                const SymbolValues* symbols = nullptr);
// Fills a float tensor with quiet NaNs, an integer one with a 0x5A pattern.
void PoisonTensor(v1::DType dtype, int64_t count, void* data);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);
// Value i of a tensor as double (for reports and comparisons).
double ElementAsDouble(v1::DType dtype, const void* data, int64_t i);

struct Tolerances {
  double atol = 0;
  double rtol = 0;
};
// The task's tolerance for `dtype`, or kevo's default for it.
Tolerances ToleranceFor(const v1::Task& task, v1::DType dtype);

struct CompareResult {
  bool ok = true;
  bool nonfinite = false;  // got NaN/Inf where want is finite
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t first_bad_index = -1;
  int64_t bad_count = 0;
};
// Compares `count` values: floats pass when |got - want| <= atol + rtol*|want|
// (and NaN where want is NaN); integers must be equal.
CompareResult CompareTensors(v1::DType dtype, const void* got, const void* want, int64_t count, Tolerances tol);

// The C declaration a candidate must export, e.g.
// extern "C" void softmax(const float* x, float* y, int64_t rows, int64_t cols);
// Returns InvalidArgument when a parameter names nothing in the task.
absl::StatusOr<std::string> RenderSignature(const v1::Task& task);

}  // namespace kevo
