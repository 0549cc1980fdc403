// The compile stage of the nvidia platform, usable without a GPU (CI builds
// candidates with it): nvcc flags for a compute capability, the check of a
// candidate's extra nvcc flags, the import policy for CUDA host objects, and
// CompileCudaCandidate, which builds a candidate .so through KernelBuilder and
// checks what it imports and exports.
//
// A candidate is a .cu file that defines the task's extern "C" function as a
// host function taking device pointers; it launches its own kernels. It is
// compiled `nvcc -O3 -gencode=arch=compute_XY,code=sm_XY -Xcompiler -fPIC
// --cudart shared -c source.cu` and linked with the generated kevo_entry
// wrapper (worker/runner/protocol.h) into kernel.so; `--cudart shared` so the
// candidate and kevo-runner-cuda share one CUDA runtime.
//
// All functions are thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"

namespace kevo::worker {

// "sm_90a" for compute capability "9.0" (Hopper's arch-specific target, for
// wgmma and setmaxnreg), "sm_XY" otherwise. Empty for a malformed value.
std::string CudaArchFor(std::string_view compute_capability);

// nvcc flags of every candidate for `arch` (e.g. "sm_90a").
std::vector<std::string> NvccCandidateFlags(const std::string& arch);

// KernelBuilder's layout for nvcc: source.cu, wrapper.cc, no -z defs (so a
// forbidden import reaches the symbol check instead of failing the link).
CompilerLayout NvccLayout();

// Checks the extra nvcc flags a candidate asks for: -O*, -D*/-U* macros,
// -std=*, --use_fast_math, -ftz/-prec-div/-prec-sqrt/-fmad=*,
// -maxrregcount=N, -lineinfo, --extra-device-vectorization,
// --restrict, -Xptxas=-O*/-v. Anything that names files, changes the
// toolchain or passes options through to the host compiler or linker is
// refused. Returns InvalidArgument naming the first refused flag.
absl::Status CheckNvccExtraFlags(const std::vector<std::string>& flags);

// Whether a CUDA candidate's host object may import `name`: the CPU policy's
// math, memory and C++ runtime, atexit, nvcc's registration and launch stubs
// (__cuda*), and the CUDA runtime calls a kernel launcher needs (launches,
// streams, events, async copies and memsets, device attributes, occupancy,
// function attributes, graphs, errors, plain device allocation).
bool IsAllowedCudaImport(std::string_view name);

// Whether `name` belongs to a vendor library (cuBLAS, cuBLASLt, cuDNN, cuFFT,
// cuRAND, cuSPARSE, cuSOLVER, NCCL, CUTLASS's runtime does not exist): those
// are refused with their own message.
bool IsVendorLibrarySymbol(std::string_view name);

// status, message, build and forbidden as in CandidateBuild.
struct CudaCompileResult : CandidateBuild {
  std::vector<std::string> imports;  // undefined symbols of the source's object
  // From `-Xptxas -v` on a fresh build: the most any kernel uses.
  int max_registers = -1;
  int max_smem_bytes = -1;
  int spill_bytes = -1;
};

// Builds `candidate` for `task` with `builder` (an nvcc KernelBuilder) and
// `arch`, then checks it: its object imports only IsAllowedCudaImport
// symbols (else SANDBOX_VIOLATION), and kernel.so defines the task's
// function (else COMPILE_ERROR). Never fails itself: worker errors come back
// as INFRA_ERROR.
CudaCompileResult CompileCudaCandidate(const KernelBuilder& builder, const v1::Task& task,
                                       const v1::Candidate& candidate, const std::string& arch,
                                       bool skip_symbol_check = false);

}  // namespace kevo::worker
