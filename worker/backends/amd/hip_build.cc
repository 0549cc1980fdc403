#include "worker/backends/amd/hip_build.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "worker/pipeline/elf_symbols.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/symbol_policy.h"

namespace kevo::worker {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

int AlignUp(int n, int granule) { return (n + granule - 1) / granule * granule; }

// NT_AMDGPU_METADATA: the code object v3+ metadata, a msgpack map.
constexpr uint32_t kAmdgpuMetadataNote = 32;
constexpr char kBundleMagic[] = "__CLANG_OFFLOAD_BUNDLE__";

template <typename T>
bool ReadAt(std::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

// The kernels of one code object (an AMDGPU ELF) for `target`.
absl::Status ReadCodeObject(std::string_view elf, const std::string& target, std::vector<KernelResources>& out) {
  auto notes = ParseElfNotes(elf);
  if (!notes.ok()) return notes.status();
  for (const ElfNote& note : *notes) {
    if (note.name != "AMDGPU" || note.type != kAmdgpuMetadataNote) continue;
    nlohmann::json meta = nlohmann::json::from_msgpack(note.desc, /*strict=*/true,
                                                       /*allow_exceptions=*/false);
    if (meta.is_discarded() || !meta.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("the ", target, " metadata note does not parse"));
    }
    if (!meta.contains("amdhsa.kernels") || !meta["amdhsa.kernels"].is_array()) return absl::OkStatus();
    auto num = [](const nlohmann::json& k, const char* key, int fallback) {
      auto it = k.find(key);
      return it != k.end() && it->is_number() ? it->get<int>() : fallback;
    };
    for (const nlohmann::json& k : meta["amdhsa.kernels"]) {
      if (!k.is_object()) continue;
      KernelResources r;
      r.target = target;
      r.kernel = k.value(".name", std::string());
      r.vgprs = num(k, ".vgpr_count", 0);
      r.agprs = num(k, ".agpr_count", 0);
      r.sgprs = num(k, ".sgpr_count", 0);
      r.lds_bytes = num(k, ".group_segment_fixed_size", 0);
      r.scratch_bytes = num(k, ".private_segment_fixed_size", 0);
      r.vgpr_spills = num(k, ".vgpr_spill_count", 0);
      r.sgpr_spills = num(k, ".sgpr_spill_count", 0);
      r.max_workgroup_size = std::max(1, num(k, ".max_flat_workgroup_size", 1024));
      r.wavefront_size = std::max(1, num(k, ".wavefront_size", 64));
      if (const AmdTarget* t = FindAmdTarget(target); t != nullptr) r.occupancy = OccupancyWavesPerSimd(*t, r);
      out.push_back(std::move(r));
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();  // a code object without kernels
}

}  // namespace

const AmdTarget* FindAmdTarget(std::string_view name) {
  static const auto* targets = new std::vector<AmdTarget>{
      {"gfx90a", "CDNA2 (MI210, MI250X)"},
      {"gfx940", "CDNA3 (stands in for gfx942, MI300X, which LLVM 15 does not know)"},
  };
  for (const AmdTarget& t : *targets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> ParseAmdTargets(std::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(list.data(), list.size()), ',', absl::SkipWhitespace())) {
    std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
    if (name == "gfx942" || name == "gfx950") {
      return absl::InvalidArgumentError(absl::StrCat("offload target ", name,
                                                     " is unknown to this toolchain (Debian 12's HIP 5.2 / LLVM 15); "
                                                     "use gfx940, which stands in for gfx942's static analysis"));
    }
    if (FindAmdTarget(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown offload target '", name, "' (known: gfx90a, gfx940)"));
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat("offload target ", name, " is listed twice"));
    }
    out.push_back(name);
  }
  if (out.empty()) return absl::InvalidArgumentError("no offload target given");
  return out;
}

std::vector<std::string> HipCandidateFlags(const std::vector<std::string>& targets) {
  std::vector<std::string> flags = {"-O3", "-fPIC"};
  for (const std::string& t : targets) flags.push_back("--offload-arch=" + t);
  return flags;
}

CompilerLayout HipLayout() {
  CompilerLayout layout;
  layout.source_file = "source.hip";
  layout.wrapper_file = "wrapper.cc";
  layout.leading_flags = {"-fno-color-diagnostics"};
  layout.link_flags = {"-shared"};
  // hipcc compiles .cc files as HIP by default: the wrapper is host code, and
  // a device pass per target would only cost time.
  layout.env = {"HIP_COMPILE_CXX_AS_HIP=0"};
  return layout;
}

absl::Status CheckHipExtraFlags(const std::vector<std::string>& flags) {
  if (flags.size() > 32) return absl::InvalidArgumentError("too many extra hipcc flags (> 32)");
  static const std::regex kAllowed(
      R"(-O[0-3s]|-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-U[A-Za-z_][A-Za-z0-9_]*|)"
      R"(-std=c\+\+(14|17|20)|-ffast-math|-fno-fast-math|-fgpu-flush-denormals-to-zero|)"
      R"(-munsafe-fp-atomics|-mcumode|-mno-cumode|-mwavefrontsize64|-ffp-contract=(fast|on|off))");
  for (const std::string& f : flags) {
    if (f.size() > 120 || !std::regex_match(f, kAllowed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("extra hipcc flag \"", f.substr(0, 60),
                       "\" is not allowed: only code-generation options are (-O*, -D*, -U*, -std=c++*, "
                       "-ffast-math, -fgpu-flush-denormals-to-zero, -munsafe-fp-atomics, -mcumode, "
                       "-ffp-contract=*); --offload-arch is the worker's, and -I, -L, -l, -o, -x, -Xclang, "
                       "-mllvm and the like can read or write files or change the toolchain"));
    }
  }
  return absl::OkStatus();
}

namespace {

// What a HIP candidate's host object may import.
const DeviceImportPolicy& HipImportPolicy() {
  static const auto* policy = new DeviceImportPolicy{
      .language = "HIP",
      .api_prefix = "hip",
      .stub_prefix = "__hip",
      .vendor_prefixes = {"rocblas", "hipblas", "miopen", "rocfft", "hipfft", "rocrand", "hiprand", "rocsparse",
                          "hipsparse", "rocsolver", "hipsolver", "rccl", "nccl", "hipcub", "rocprim", "hipdnn"},
      .extra_families = {"ExtLaunch", "ModuleOccupancy"},
      .vendor_advice = "rocBLAS is a baseline, not a building block"};
  return *policy;
}

}  // namespace

bool IsAmdVendorLibrarySymbol(std::string_view name) { return IsVendorImport(name, HipImportPolicy()); }

bool IsAllowedHipImport(std::string_view name) { return IsAllowedDeviceImport(name, HipImportPolicy()); }

namespace {

// Calls `each(target, code_object)` for every device code object in the
// host object's .hip_fatbin bundle, in bundle order; stops at its first error.
absl::Status ForEachHipCodeObject(std::string_view host_object,
                                  const std::function<absl::Status(const std::string&, std::string_view)>& each) {
  auto fatbin = ElfSection(host_object, ".hip_fatbin");
  if (!fatbin.ok()) {
    if (fatbin.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError("the object holds no device code (no .hip_fatbin section)");
    }
    return fatbin.status();
  }
  const std::string_view b = *fatbin;
  // Clang offload bundle: magic, entry count, then per entry offset, size,
  // id length and id ("hipv4-amdgcn-amd-amdhsa--gfx90a[:features]").
  constexpr size_t kMagic = sizeof(kBundleMagic) - 1;
  uint64_t count = 0;
  if (b.size() < kMagic || b.substr(0, kMagic) != kBundleMagic || !ReadAt(b, kMagic, &count) || count > 64) {
    return absl::InvalidArgumentError(".hip_fatbin is not a clang offload bundle");
  }
  uint64_t at = kMagic + 8;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t offset = 0, size = 0, id_len = 0;
    if (!ReadAt(b, at, &offset) || !ReadAt(b, at + 8, &size) || !ReadAt(b, at + 16, &id_len) || at + 24 > b.size() ||
        b.size() - (at + 24) < id_len) {
      return absl::InvalidArgumentError("offload bundle entry out of bounds");
    }
    const std::string id(b.substr(at + 24, id_len));
    at += 24 + id_len;
    const size_t sep = id.find("--");
    if (!StartsWith(id, "hip") || sep == std::string::npos) continue;  // the host entry
    if (offset > b.size() || b.size() - offset < size) {
      return absl::InvalidArgumentError(absl::StrCat("code object of ", id, " out of bounds"));
    }
    std::string target = id.substr(sep + 2);
    target = target.substr(0, target.find(':'));
    if (absl::Status s = each(target, b.substr(offset, size)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Bytes per lane a global/flat memory mnemonic moves: "global_load_dwordx4"
// 16, "global_store_short_d16_hi" 2, "global_atomic_add_f64" 8; 0 for other
// instructions (scratch_* and buffer_* are spills and private arrays).
int GlobalAccessBytes(std::string_view op) {
  if (!StartsWith(op, "global_") && !StartsWith(op, "flat_")) return 0;
  static const std::regex kWidth(R"(dwordx([234])|(dword)|(short)|(byte)|(_x2|64)$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(op.begin(), op.end(), m, kWidth)) return 4;
  if (m[1].matched) return 4 * (*m[1].first - '0');
  if (m[2].matched) return 4;
  if (m[3].matched) return 2;
  if (m[4].matched) return 1;
  return 8;
}

}  // namespace

absl::StatusOr<std::vector<KernelResources>> ReadHipKernelResources(std::string_view host_object) {
  std::vector<KernelResources> out;
  KEVO_RETURN_IF_ERROR(ForEachHipCodeObject(
      host_object, [&](const std::string& target, std::string_view elf) { return ReadCodeObject(elf, target, out); }));
  return out;
}

std::string FindLlvmObjdump() {
  // hipcc drives /usr/lib/llvm-15's clang; its objdump knows the same targets.
  for (const char* path : {"/usr/lib/llvm-15/bin/llvm-objdump", "/usr/bin/llvm-objdump-15"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

void SummarizeHipIsa(std::string_view disassembly, const std::string& target, std::vector<KernelResources>& kernels) {
  KernelResources* current = nullptr;
  for (absl::string_view line : absl::StrSplit(absl::string_view(disassembly.data(), disassembly.size()), '\n')) {
    // "0000000000001700 <_Z1kPf>:" starts a function; instructions are indented.
    if (!line.empty() && line.front() != '\t' && line.front() != ' ') {
      current = nullptr;
      const size_t open = line.find(" <");
      if (open == absl::string_view::npos || !absl::EndsWith(line, ">:")) continue;
      const absl::string_view name = line.substr(open + 2, line.size() - open - 4);
      for (KernelResources& k : kernels) {
        if (k.target == target && k.kernel == name) {
          current = &k;
          current->disassembled = true;
          current->instructions = current->global_accesses = 0;
          current->global_access_bytes = current->mfma_instructions = 0;
        }
      }
      continue;
    }
    const absl::string_view code = absl::StripAsciiWhitespace(line.substr(0, line.find("//")));
    if (current == nullptr || code.empty()) continue;
    const absl::string_view word = code.substr(0, code.find_first_of(" \t"));
    const std::string_view op(word.data(), word.size());
    ++current->instructions;
    if (StartsWith(op, "v_mfma")) ++current->mfma_instructions;
    if (const int bytes = GlobalAccessBytes(op); bytes > 0) {
      ++current->global_accesses;
      current->global_access_bytes += bytes;
    }
  }
}

absl::Status DisassembleHipKernels(const sandbox::Sandbox& sandbox, const std::string& objdump,
                                   std::string_view host_object, const std::string& dir,
                                   std::vector<KernelResources>& kernels) {
  return ForEachHipCodeObject(host_object, [&](const std::string& target, std::string_view elf) -> absl::Status {
    // Written once per build folder; a temporary name and a rename keep
    // concurrent evaluations of one cached build from reading half a file.
    const std::string path = absl::StrCat(dir, "/", target, ".co");
    if (std::error_code ec; !std::filesystem::exists(path, ec)) {
      const std::string tmp = absl::StrCat(path, ".", getpid(), ".", reinterpret_cast<uintptr_t>(&elf));
      KEVO_RETURN_IF_ERROR(WriteFileBytes(tmp, std::string(elf)));
      std::filesystem::rename(tmp, path, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
    }
    sandbox::Command cmd;
    cmd.argv = {objdump, "-d", "--no-show-raw-insn", absl::StrCat("--mcpu=", target), path};
    cmd.cwd = dir;
    cmd.visible_paths = SandboxSystemPaths();
    cmd.visible_paths.push_back(dir);
    cmd.limits.wall_timeout = absl::Seconds(60);
    cmd.limits.address_space_bytes = int64_t{4} << 30;
    cmd.output_cap_bytes = 64 << 20;
    auto r = sandbox.Run(cmd);
    if (!r.ok()) return r.status();
    if (!r->Succeeded() || r->output_truncated) {
      return absl::InternalError(absl::StrCat("llvm-objdump of the ", target, " code object: ", r->Summary(), " ",
                                              r->output_truncated ? "(output truncated) " : "",
                                              r->stderr_data.substr(0, 300)));
    }
    SummarizeHipIsa(r->stdout_data, target, kernels);
    return absl::OkStatus();
  });
}

int OccupancyWavesPerSimd(const AmdTarget& target, const KernelResources& k) {
  int waves = target.max_waves_per_simd;
  // CDNA2/3 share one file of 512 registers per lane between VGPRs and
  // AGPRs; AGPRs start at the next multiple of 4 after the VGPRs, and
  // allocation goes in granules of 8.
  const int regs = k.agprs > 0 ? AlignUp(std::max(k.vgprs, 1), 4) + k.agprs : k.vgprs;
  if (regs > 0) waves = std::min(waves, target.unified_vgprs / AlignUp(regs, 8));
  // gfx9 SGPR limits (LLVM's getOccupancyWithNumSGPRs).
  const int sgpr_waves = k.sgprs <= 80    ? 10
                         : k.sgprs <= 88  ? 9
                         : k.sgprs <= 100 ? 8
                         : k.sgprs <= 112 ? 7
                         : k.sgprs <= 128 ? 6
                                          : 5;
  waves = std::min(waves, sgpr_waves);
  if (k.lds_bytes > 0) {
    if (k.lds_bytes > target.lds_bytes) return 0;
    const int groups = target.lds_bytes / k.lds_bytes;
    const int waves_per_group = (k.max_workgroup_size + k.wavefront_size - 1) / k.wavefront_size;
    const int lds_waves = (groups * waves_per_group + target.simds_per_cu - 1) / target.simds_per_cu;
    waves = std::min(waves, std::max(1, lds_waves));
  }
  return std::max(0, waves);
}

double StaticScore(const std::vector<KernelResources>& kernels) {
  if (kernels.empty()) return 0;
  double occupancy = 1;
  double width = 1;  // the narrowest kernel's mean global access width / 16 bytes
  int spills = 0;
  bool scratch = false;
  for (const KernelResources& k : kernels) {
    const AmdTarget* t = FindAmdTarget(k.target);
    if (t == nullptr) continue;
    if (k.lds_bytes > t->lds_bytes) return 0;
    occupancy = std::min(occupancy, static_cast<double>(OccupancyWavesPerSimd(*t, k)) / t->max_waves_per_simd);
    spills += k.vgpr_spills + k.sgpr_spills;
    scratch = scratch || k.scratch_bytes > 0;
    if (k.global_accesses > 0) {
      width = std::min(width, static_cast<double>(k.global_access_bytes) / k.global_accesses / 16.0);
    }
  }
  double score = occupancy * (0.75 + 0.25 * width);
  if (spills > 0) {
    score *= 0.5 / (1.0 + spills / 64.0);
  } else if (scratch) {
    score *= 0.75;
  }
  return score;
}

std::map<std::string, double> ResourceCounters(const std::vector<KernelResources>& kernels) {
  std::map<std::string, double> c;
  for (const KernelResources& k : kernels) {
    auto worst = [&](const char* what, double v, bool lower_is_worse = false) {
      const std::string key = absl::StrCat(k.target, "_", what);
      auto it = c.find(key);
      if (it == c.end()) {
        c[key] = v;
      } else {
        it->second = lower_is_worse ? std::min(it->second, v) : std::max(it->second, v);
      }
    };
    worst("vgprs", k.vgprs);
    worst("agprs", k.agprs);
    worst("sgprs", k.sgprs);
    worst("lds_bytes", k.lds_bytes);
    worst("scratch_bytes", k.scratch_bytes);
    worst("vgpr_spills", k.vgpr_spills);
    worst("sgpr_spills", k.sgpr_spills);
    worst("occupancy_waves", k.occupancy, /*lower_is_worse=*/true);
    c[absl::StrCat(k.target, "_kernels")] += 1;
    if (k.disassembled) {
      worst("instructions", k.instructions);
      if (k.global_accesses > 0) {
        worst("access_bytes", static_cast<double>(k.global_access_bytes) / k.global_accesses,
              /*lower_is_worse=*/true);
      }
      c[absl::StrCat(k.target, "_mfma")] += k.mfma_instructions;
    }
  }
  return c;
}

std::string PortCudaToHip(std::string_view cuda_source) {
  std::string s(cuda_source);
  static const std::regex kInclude(R"(#include\s*[<"]cuda_runtime(_api)?\.h[>"])");
  s = std::regex_replace(s, kInclude, "#include <hip/hip_runtime.h>");
  static const std::regex kApi(R"(\bcuda([A-Z][A-Za-z0-9_]*))");
  return std::regex_replace(s, kApi, "hip$1");
}

HipCompileResult CompileHipCandidate(const KernelBuilder& builder, const v1::Task& task, const v1::Candidate& candidate,
                                     const std::vector<std::string>& targets, const std::string& objdump) {
  HipCompileResult out;
  auto fail = [&](v1::EvalStatus status, std::string message) {
    out.Fail(status, std::move(message));
    return out;
  };
  if (!BuildCandidate(builder, task, candidate, {"hip", "hip c++"},
                      "amd (use hip: a HIP source defining the task's extern \"C\" function over device "
                      "pointers)",
                      HipCandidateFlags(targets), &CheckHipExtraFlags, out)) {
    return out;
  }
  const BuildResult* build = &out.build;

  auto object = ReadFileBytes(build->object_path);
  if (!object.ok()) return fail(v1::INFRA_ERROR, std::string(object.status().message()));
  auto kernels = ReadHipKernelResources(*object);
  if (!kernels.ok()) {
    return fail(v1::INFRA_ERROR, absl::StrCat("cannot read the kernels' resource use: ", kernels.status().message()));
  }
  out.kernels = *std::move(kernels);
  if (!objdump.empty() && builder.sandbox() != nullptr) {
    const std::string dir = std::filesystem::path(build->object_path).parent_path().string();
    if (absl::Status s = DisassembleHipKernels(*builder.sandbox(), objdump, *object, dir, out.kernels); !s.ok()) {
      LogWarning("amd: no ISA summary for ", task.name(), " (static score without access widths): ", s.message());
    }
  }

  auto symbols = ParseElfSymbols(*object);
  if (!symbols.ok()) return fail(v1::INFRA_ERROR, std::string(symbols.status().message()));
  if (!CheckCandidateBuild(task, UndefinedSymbolNames(*symbols), &HipImportPolicy(), out)) return out;
  for (const KernelResources& k : out.kernels) {
    const AmdTarget* t = FindAmdTarget(k.target);
    if (t != nullptr && k.lds_bytes > t->lds_bytes) {
      return fail(v1::COMPILE_ERROR, absl::StrCat("kernel ", k.kernel, " needs ", k.lds_bytes, " bytes of LDS; ",
                                                  k.target, " has ", t->lds_bytes, " per workgroup"));
    }
  }
  if (out.kernels.empty()) {
    return fail(v1::COMPILE_ERROR, "the candidate defines no __global__ kernel for the GPU");
  }
  out.status = v1::OK;
  return out;
}

}  // namespace kevo::worker
