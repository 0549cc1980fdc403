#include "worker/backends/nvidia/cuda_build.h"

#include <cctype>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "worker/pipeline/elf_symbols.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

absl::Status Refuse(const std::string& flag, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "extra nvcc flag \"", flag, "\" is not allowed: ", std::string(why),
      ". Allowed: -O*, -D*, -U*, -std=*, --use_fast_math, -ftz=, -prec-div=, -prec-sqrt=, "
      "-fmad=, -maxrregcount=N, -lineinfo, --extra-device-vectorization, --restrict, "
      "-Xptxas=-O*|-v"));
}

}  // namespace

std::string CudaArchFor(std::string_view compute_capability) {
  std::pair<std::string, std::string> mm = absl::StrSplit(std::string(compute_capability), '.');
  int major = 0, minor = 0;
  if (!absl::SimpleAtoi(mm.first, &major) || !absl::SimpleAtoi(mm.second, &minor) || major <= 0) {
    return "";
  }
  // Hopper's arch-specific target enables wgmma and setmaxnreg; the code
  // runs only on 9.0 devices, which is what this worker has.
  if (major == 9 && minor == 0) return "sm_90a";
  return absl::StrCat("sm_", major, minor);
}

std::vector<std::string> NvccCandidateFlags(const std::string& arch) {
  // -gencode rather than -arch=sm_90a: the shorthand also ran a plain sm_90
  // pass that rejects wgmma on some nvcc versions (docs/nvidia.md).
  const std::string virt = "compute_" + arch.substr(3);
  return {"-O3", absl::StrCat("-gencode=arch=", virt, ",code=", arch), "-Xcompiler", "-fPIC",
          "--cudart", "shared", "-Xptxas", "-v"};
}

CompilerLayout NvccLayout() {
  CompilerLayout layout;
  layout.source_file = "source.cu";
  layout.wrapper_file = "wrapper.cc";
  layout.leading_flags = {};
  // No -z defs: an object that calls cuBLAS must link, so that the symbol
  // check (not the linker) refuses it with a message that says why. A .so
  // missing the task's function is caught by CompileCudaCandidate.
  layout.link_flags = {"-shared"};
  return layout;
}

absl::Status CheckNvccExtraFlags(const std::vector<std::string>& flags) {
  if (flags.size() > 32) return absl::InvalidArgumentError("too many extra nvcc flags (> 32)");
  static const std::regex kAllowed(
      R"(-O[0-3]|-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-U[A-Za-z_][A-Za-z0-9_]*|)"
      R"(-std=c\+\+(14|17|20)|--?use_fast_math|--?ftz=(true|false)|--?prec-div=(true|false)|)"
      R"(--?prec-sqrt=(true|false)|--?fmad=(true|false)|--?maxrregcount=[0-9]{1,3}|--?lineinfo|)"
      R"(--extra-device-vectorization|--restrict|-Xptxas=-O[0-3]|-Xptxas=-v)");
  for (const std::string& f : flags) {
    if (f.size() > 120) return Refuse(f.substr(0, 40) + "...", "it is too long");
    if (!std::regex_match(f, kAllowed)) {
      return Refuse(f, "it is not one of the code-generation options (-I, -L, -l, -o, -x, "
                       "-Xcompiler, -Xlinker, -ccbin, --keep, -rdc and the like can read or "
                       "write files or change the toolchain)");
    }
  }
  return absl::OkStatus();
}

bool IsVendorLibrarySymbol(std::string_view name) {
  for (std::string_view prefix : {"cublas", "cudnn", "cufft", "curand", "cusparse", "cusolver",
                                  "nccl", "cutensor", "nvjpeg", "npp"}) {
    if (StartsWith(name, prefix)) return true;
  }
  return false;
}

bool IsAllowedCudaImport(std::string_view name) {
  if (IsAllowedImport(name)) return true;
  // nvcc's generated registration and launch stubs.
  if (StartsWith(name, "__cuda")) return true;
  // The generated module destructor.
  if (name == "atexit") return true;
  if (IsVendorLibrarySymbol(name)) return false;
  // Runtime API families a launcher needs.
  for (std::string_view prefix :
       {"cudaLaunch", "cudaStream", "cudaEvent", "cudaMemcpy", "cudaMemset", "cudaFunc",
        "cudaOccupancy", "cudaGraph"}) {
    if (StartsWith(name, prefix)) return true;
  }
  static const auto* exact = new std::set<std::string, std::less<>>{
      "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName",
      "cudaDeviceSynchronize", "cudaDeviceGetAttribute", "cudaGetDevice",
      "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaGetDeviceCount",
      "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocPitch",
      "cudaDeviceGetLimit", "cudaDriverGetVersion", "cudaRuntimeGetVersion",
      "cudaGetFuncBySymbol", "cudaGetSymbolAddress", "cudaGetSymbolSize",
      "cudaCreateTextureObject", "cudaDestroyTextureObject", "cudaThreadExchangeStreamCaptureMode",
      "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion"};
  // Not allowed on purpose: cudaDeviceReset and cudaSetDevice (they would
  // pull the context or the device from under the runner), managed memory
  // (a big enough cudaMallocManaged can hang the GPU), IPC, host
  // registration, profiler control, peer access.
  return exact->count(name) > 0;
}

CudaCompileResult CompileCudaCandidate(const KernelBuilder& builder, const v1::Task& task,
                                       const v1::Candidate& candidate, const std::string& arch,
                                       bool skip_symbol_check) {
  CudaCompileResult out;
  auto fail = [&](v1::EvalStatus status, std::string message) {
    out.status = status;
    out.message = std::move(message);
    return out;
  };
  const std::string language = absl::AsciiStrToLower(candidate.language());
  if (language != "cuda" && language != "cu" && language != "cuda c++") {
    return fail(v1::COMPILE_ERROR,
                absl::StrCat("language '", candidate.language(),
                             "' is not supported on nvidia (use cuda: a .cu file defining the "
                             "task's extern \"C\" function over device pointers)"));
  }
  CandidateBuild built =
      BuildCandidate(builder, task, candidate, NvccCandidateFlags(arch), &CheckNvccExtraFlags);
  out.build = built.build;
  if (built.status != v1::OK) return fail(built.status, built.message);
  const BuildResult* build = &out.build;

  // ptxas -v: "Used 40 registers, used 1 barriers, 8448 bytes smem" and
  // "N bytes spill stores".
  static const std::regex kRegs(R"(Used (\d+) registers)"), kSmem(R"((\d+) bytes smem)"),
      kSpill(R"((\d+) bytes spill stores)");
  for (const auto* re : {&kRegs, &kSmem, &kSpill}) {
    int* field = re == &kRegs ? &out.max_registers : re == &kSmem ? &out.max_smem_bytes : &out.spill_bytes;
    for (std::sregex_iterator it(build->compiler_output.begin(), build->compiler_output.end(), *re), end;
         it != end; ++it) {
      *field = std::max(*field, std::stoi((*it)[1].str()));
    }
  }

  // ptxas prints no smem or spill figure for kernels that have none.
  if (out.max_registers >= 0) {
    out.max_smem_bytes = std::max(out.max_smem_bytes, 0);
    out.spill_bytes = std::max(out.spill_bytes, 0);
  }

  auto symbols = ReadElfSymbols(build->object_path);
  if (!symbols.ok()) return fail(v1::INFRA_ERROR, std::string(symbols.status().message()));
  out.imports = UndefinedSymbolNames(*symbols);
  if (!skip_symbol_check) {
    static constexpr DeviceImportPolicy kCudaImports{
        &IsAllowedCudaImport, &IsVendorLibrarySymbol,
        "cuBLAS is the baseline, not a building block",
        "CUDA candidates may use kernel launches, streams, events, async copies/memsets, device "
        "attributes, math, memory and the C++ runtime"};
    ImportVerdict verdict = CheckDeviceImports(out.imports, kCudaImports);
    out.forbidden = verdict.forbidden;
    if (!verdict.ok) return fail(v1::SANDBOX_VIOLATION, verdict.message);
  }
  auto defines = DefinesGlobalSymbol(build->library_path, task.signature().function());
  if (!defines.ok()) return fail(v1::INFRA_ERROR, std::string(defines.status().message()));
  if (!*defines) {
    return fail(v1::COMPILE_ERROR,
                absl::StrCat("the candidate does not define extern \"C\" ",
                             task.signature().function(),
                             "(...) (a C++ function without extern \"C\", a typo, or a "
                             "__global__ kernel instead of the host function that launches it)"));
  }
  out.status = v1::OK;
  return out;
}

}  // namespace kevo::worker
