// The compile stage of the amd platform, which needs no GPU: hipcc flags for
// the CDNA targets, the check of a candidate's extra flags, the import policy
// for HIP host objects, the per-kernel resource report read from the code
// objects' AMDGPU metadata, the occupancy and static score derived from it,
// and CompileHipCandidate, which builds a candidate .so through KernelBuilder.
//
// A candidate is a HIP source (language "hip") that defines the task's
// extern "C" function as a host function taking device pointers; it launches
// its own kernels. It is compiled `hipcc -O3 -fPIC --offload-arch=<each
// target> -c source.hip` (always explicit targets: hipcc would otherwise ask
// rocm_agent_enumerator for the local GPU) and linked with the generated
// kevo_entry wrapper into kernel.so. The device code of every target sits in
// the host object's .hip_fatbin section as a clang offload bundle; each code
// object's NT_AMDGPU_METADATA note (msgpack) lists every kernel's VGPRs,
// AGPRs, SGPRs, LDS, scratch and spills, which this file reads back.
//
// Debian 12's HIP 5.2 / LLVM 15 knows gfx90a (CDNA2: MI210/MI250X) and gfx940
// (CDNA3's first target) but not gfx942 (MI300X) or gfx950: gfx940 stands in
// for gfx942 (same CU: 64 KiB LDS, 512 unified VGPR/AGPR per lane, MFMA).
//
// All functions are thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"

namespace kevo::worker {

// What the static analysis needs to know about one offload target.
struct AmdTarget {
  std::string name;         // "gfx90a"
  std::string description;  // "CDNA2 (MI210, MI250X)"
  int lds_bytes = 65536;    // LDS per workgroup (and per CU)
  int max_waves_per_simd = 8;
  int simds_per_cu = 4;
  int unified_vgprs = 512;  // VGPR + AGPR file per lane per SIMD
  bool mfma = true;
};
// The targets this build knows (gfx90a, gfx940), or null for another name.
const AmdTarget* FindAmdTarget(std::string_view name);
// Parses "gfx90a,gfx940". InvalidArgument naming an unknown or repeated
// target (gfx942/gfx950 get a message saying gfx940 stands in for them).
absl::StatusOr<std::vector<std::string>> ParseAmdTargets(std::string_view list);

// hipcc flags of every candidate for `targets`.
std::vector<std::string> HipCandidateFlags(const std::vector<std::string>& targets);

// KernelBuilder's layout for hipcc: source.hip, wrapper.cc compiled as plain
// C++ (HIP_COMPILE_CXX_AS_HIP=0), no -z defs (so a forbidden import reaches
// the symbol check instead of failing the link).
CompilerLayout HipLayout();

// Checks the extra hipcc flags a candidate asks for: -O*, -D*/-U* macros,
// -std=c++*, -ffast-math, -fgpu-flush-denormals-to-zero, -munsafe-fp-atomics,
// -mcumode/-mno-cumode, -mwavefrontsize64. InvalidArgument naming the first
// refused flag.
absl::Status CheckHipExtraFlags(const std::vector<std::string>& flags);

// Whether a HIP candidate's host object may import `name`: the CPU policy,
// the HIP registration stubs (__hip*), and the runtime calls a launcher needs
// (launches, streams, events, async copies and memsets, device attributes,
// occupancy, errors, plain device allocation).
bool IsAllowedHipImport(std::string_view name);
// rocBLAS, hipBLAS, MIOpen, rocFFT, RCCL, ...: refused with their own message.
bool IsAmdVendorLibrarySymbol(std::string_view name);

// One kernel's resource use on one target, from the code object's metadata.
struct KernelResources {
  std::string target;
  std::string kernel;  // mangled name
  int vgprs = 0, agprs = 0, sgprs = 0;
  int lds_bytes = 0;      // .group_segment_fixed_size (static LDS)
  int scratch_bytes = 0;  // .private_segment_fixed_size, per lane
  int vgpr_spills = 0, sgpr_spills = 0;
  int max_workgroup_size = 1024;
  int wavefront_size = 64;
  int occupancy = 0;  // waves per SIMD (OccupancyWavesPerSimd)
  // From the disassembly (SummarizeHipIsa); all 0 when it was not read.
  bool disassembled = false;
  int instructions = 0;         // static count, not executed instructions
  int global_accesses = 0;      // global_/flat_ loads, stores and atomics (not scratch)
  int global_access_bytes = 0;  // summed width per lane of those
  int mfma_instructions = 0;    // v_mfma_*
};

// The kernels of every target in a host object's .hip_fatbin bundle, in
// target order. InvalidArgument when the bundle or a note is malformed,
// NotFound when the object holds no device code.
absl::StatusOr<std::vector<KernelResources>> ReadHipKernelResources(std::string_view host_object);

// llvm-objdump from the LLVM hipcc uses (Debian's hipcc depends on llvm-15),
// or "" when none is found.
std::string FindLlvmObjdump();

// Reads `llvm-objdump -d` output of one code object for `target` into the
// kernels of that target (matched by symbol name): their static instruction
// count, global memory accesses and the bytes they move per lane (from the
// mnemonic: dword = 4, dwordx4 = 16, short = 2, ...), and MFMA instructions.
// Pure; kernels the text does not name are left as they are.
void SummarizeHipIsa(std::string_view disassembly, const std::string& target, std::vector<KernelResources>& kernels);

// Disassembles every code object in `host_object` with `objdump` (run in
// `sandbox`, the code objects written to `dir`) and summarizes it into
// `kernels`. Internal when the tool fails.
absl::Status DisassembleHipKernels(const sandbox::Sandbox& sandbox, const std::string& objdump,
                                   std::string_view host_object, const std::string& dir,
                                   std::vector<KernelResources>& kernels);

// Waves per SIMD one kernel can keep resident on `target`: the least of the
// target's maximum and the limits from unified VGPR/AGPR use (granule 8),
// SGPRs (gfx9: more than 100 leaves 7), and LDS (workgroups of
// max_workgroup_size threads sharing the CU's LDS).
int OccupancyWavesPerSimd(const AmdTarget& target, const KernelResources& k);

// The static score of a candidate whose kernels are `kernels` (every target):
// 0 when a kernel needs more LDS than its target has; otherwise the worst
// kernel's occupancy as a fraction of the target's maximum, halved and
// shrunk further by the number of spilled registers when anything spills,
// x0.75 for scratch without spills (private arrays), and x(0.75 + 0.25 w)
// where w is the narrowest kernel's mean global access width per lane over
// 16 bytes (1 when nothing was disassembled or a kernel has no global
// access). In (0, 1]; higher is better. A static estimate from the
// compiler's report, never a measured speedup.
double StaticScore(const std::vector<KernelResources>& kernels);

// Profile counters for the Evaluation: per target the worst kernel's
// "<target>_vgprs", "_agprs", "_sgprs", "_lds_bytes", "_scratch_bytes",
// "_vgpr_spills", "_sgpr_spills", "_occupancy_waves", and "<target>_kernels";
// where the kernels were disassembled also "<target>_instructions" (the
// largest kernel's), "_access_bytes" (the narrowest kernel's mean global
// access width per lane) and "_mfma" (MFMA instructions of all kernels).
std::map<std::string, double> ResourceCounters(const std::vector<KernelResources>& kernels);

// The CUDA reference mechanically ported to HIP (cuda_runtime.h ->
// hip/hip_runtime.h, cudaXxx -> hipXxx; <<<...>>> launches are HIP too), for
// tasks that ship reference.cu and no HIP reference.
std::string PortCudaToHip(std::string_view cuda_source);

// status, message, build and forbidden as in CandidateBuild.
struct HipCompileResult : CandidateBuild {
  std::vector<KernelResources> kernels;  // every kernel x target (also on LDS overflow)
};

// Builds `candidate` for `task` with `builder` (a hipcc KernelBuilder) for
// `targets`, then checks it: its object imports only IsAllowedHipImport
// symbols (else SANDBOX_VIOLATION), kernel.so defines the task's function
// (else COMPILE_ERROR), no kernel needs more LDS than its target has (else
// COMPILE_ERROR; hipcc usually refuses first, and its message is kept).
// With `objdump` (FindLlvmObjdump) the kernels are also disassembled
// (DisassembleHipKernels, in the build's folder); a failure there is logged
// and leaves them without the ISA summary.
// Never fails itself: worker errors come back as INFRA_ERROR.
HipCompileResult CompileHipCandidate(const KernelBuilder& builder, const v1::Task& task, const v1::Candidate& candidate,
                                     const std::vector<std::string>& targets, const std::string& objdump = "");

}  // namespace kevo::worker
