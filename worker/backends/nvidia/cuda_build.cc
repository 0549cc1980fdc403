#include "worker/backends/nvidia/cuda_build.h"

#include <cctype>
#include <regex>

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

absl::Status Refuse(const std::string& flag, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("extra nvcc flag \"", flag, "\" is not allowed: ", std::string(why),
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
  return {"-O3",        absl::StrCat("-gencode=arch=", virt, ",code=", arch),
          "-Xcompiler", "-fPIC",
          "--cudart",   "shared",
          "-Xptxas",    "-v"};
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
      return Refuse(f,
                    "it is not one of the code-generation options (-I, -L, -l, -o, -x, "
                    "-Xcompiler, -Xlinker, -ccbin, --keep, -rdc and the like can read or "
                    "write files or change the toolchain)");
    }
  }
  return absl::OkStatus();
}

namespace {

// What a CUDA candidate's host object may import.
const DeviceImportPolicy& CudaImportPolicy() {
  static const auto* policy = new DeviceImportPolicy{
      .language = "CUDA",
      .api_prefix = "cuda",
      .stub_prefix = "__cuda",
      .vendor_prefixes = {"cublas", "cudnn", "cufft", "curand", "cusparse", "cusolver", "nccl", "cutensor", "nvjpeg",
                          "npp"},
      .extra_families = {"Graph"},
      .extra_calls = {"GetDeviceProperties_v2", "GetFuncBySymbol", "CreateTextureObject", "DestroyTextureObject",
                      "ThreadExchangeStreamCaptureMode", "GetDriverEntryPoint", "GetDriverEntryPointByVersion"},
      .vendor_advice = "cuBLAS is the baseline, not a building block"};
  return *policy;
}

}  // namespace

bool IsVendorLibrarySymbol(std::string_view name) { return IsVendorImport(name, CudaImportPolicy()); }

bool IsAllowedCudaImport(std::string_view name) { return IsAllowedDeviceImport(name, CudaImportPolicy()); }

CudaCompileResult CompileCudaCandidate(const KernelBuilder& builder, const v1::Task& task,
                                       const v1::Candidate& candidate, const std::string& arch,
                                       bool skip_symbol_check) {
  CudaCompileResult out;
  if (!BuildCandidate(builder, task, candidate, {"cuda", "cu", "cuda c++"},
                      "nvidia (use cuda: a .cu file defining the task's extern \"C\" function over device "
                      "pointers)",
                      NvccCandidateFlags(arch), &CheckNvccExtraFlags, out)) {
    return out;
  }
  const BuildResult* build = &out.build;

  // ptxas -v: "Used 40 registers, used 1 barriers, 8448 bytes smem" and
  // "N bytes spill stores".
  static const std::regex kRegs(R"(Used (\d+) registers)"), kSmem(R"((\d+) bytes smem)"),
      kSpill(R"((\d+) bytes spill stores)");
  for (const auto* re : {&kRegs, &kSmem, &kSpill}) {
    int* field = re == &kRegs ? &out.max_registers : re == &kSmem ? &out.max_smem_bytes : &out.spill_bytes;
    for (std::sregex_iterator it(build->compiler_output.begin(), build->compiler_output.end(), *re), end; it != end;
         ++it) {
      *field = std::max(*field, std::stoi((*it)[1].str()));
    }
  }

  // ptxas prints no smem or spill figure for kernels that have none.
  if (out.max_registers >= 0) {
    out.max_smem_bytes = std::max(out.max_smem_bytes, 0);
    out.spill_bytes = std::max(out.spill_bytes, 0);
  }

  auto symbols = ReadElfSymbols(build->object_path);
  if (!symbols.ok()) {
    out.Fail(v1::INFRA_ERROR, std::string(symbols.status().message()));
    return out;
  }
  out.imports = UndefinedSymbolNames(*symbols);
  CheckCandidateBuild(task, out.imports, skip_symbol_check ? nullptr : &CudaImportPolicy(), out);
  return out;
}

}  // namespace kevo::worker
