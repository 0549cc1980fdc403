#include "worker/pipeline/kernel_builder.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "common/hash.h"
#include "common/status.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxFlags = 64;
constexpr size_t kMaxFlagLength = 200;

bool StartsWith(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

absl::Status Refuse(const std::string& flag, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("extra flag \"", flag, "\" is not allowed: ", std::string(why),
                   ". Allowed: -O*, -f*, -m*, -D*, -U*, -std=*, -W<warning>, -g*, --param"));
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string UniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(getpid(), "-", counter.fetch_add(1), "-", absl::ToUnixNanos(absl::Now()) % 1000000007);
}

// The first line of compiler output that says "error" (or the first line).
std::string FirstErrorLine(const std::string& output) {
  std::string first;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    if (first.empty()) first = std::string(line);
    if (absl::StrContains(line, "error")) {
      first = std::string(line);
      break;
    }
  }
  if (first.size() > 300) first = first.substr(0, 300) + "...";
  return first;
}

// Publishes a finished build directory under its key; another builder may
// have won the race, in which case theirs is used and ours removed.
absl::Status Publish(const std::string& tmp, const std::string& final_dir) {
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!fs::exists(final_dir)) {
      return absl::InternalError(absl::StrCat("cannot publish build ", final_dir));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExtraFlags(const std::vector<std::string>& flags) {
  if (flags.size() > kMaxFlags) {
    return absl::InvalidArgumentError(absl::StrCat("too many extra flags (", flags.size(), " > ", kMaxFlags, ")"));
  }
  for (const std::string& f : flags) {
    if (f.size() > kMaxFlagLength) return Refuse(f.substr(0, 40) + "...", "it is too long");
    for (unsigned char c : f) {
      if (c < 0x20 || c == 0x7f) return Refuse(f, "it contains control characters");
    }
    if (f.empty() || f[0] != '-') return Refuse(f, "only options are accepted (no input files or @files)");
    // Families that read or write files, load code, or change the toolchain.
    static constexpr std::string_view kRefused[] = {"-fplugin",
                                                    "-fprofile",
                                                    "-fauto-profile",
                                                    "-fcreate-profile",
                                                    "-fbranch-probabilities",
                                                    "-fdump",
                                                    "-fopt-info",
                                                    "-fcallgraph-info",
                                                    "-fstack-usage",
                                                    "-fsave-optimization-record",
                                                    "-fdiagnostics-format",
                                                    "-flto",
                                                    "-fuse-ld",
                                                    "-fdebug-prefix-map",
                                                    "-ffile-prefix-map",
                                                    "-fmacro-prefix-map",
                                                    "-gsplit-dwarf",
                                                    "-Wl,",
                                                    "-Wa,",
                                                    "-Wp,"};
    for (std::string_view bad : kRefused) {
      if (StartsWith(f, bad)) {
        return Refuse(f, "it can read or write files, load code or change the toolchain");
      }
    }
    // Compile-only options: a short, explicit set of families.
    const bool code_gen = StartsWith(f, "-O") || StartsWith(f, "-f") || StartsWith(f, "-m") || StartsWith(f, "-std=") ||
                          f == "-g" || StartsWith(f, "-g") || StartsWith(f, "--param");
    const bool macro = (StartsWith(f, "-D") || StartsWith(f, "-U")) && f.size() > 2 &&
                       (std::isalpha(static_cast<unsigned char>(f[2])) || f[2] == '_');
    const bool warning = StartsWith(f, "-W") && f.find(',') == std::string::npos;
    if (!code_gen && !macro && !warning) {
      return Refuse(f,
                    "it is not a code-generation option (-B, -wrapper, -specs, -I, -include, "
                    "-L, -l, -o, -x, -X*, -save-temps and the like can read files, run other "
                    "programs or change the toolchain)");
    }
  }
  return absl::OkStatus();
}

std::string TrimCompilerOutput(const std::string& output, size_t max_bytes) {
  if (output.size() <= max_bytes) return output;
  return absl::StrCat(output.substr(0, max_bytes), "\n[... ", output.size() - max_bytes,
                      " more bytes of compiler output trimmed]\n");
}

KernelBuilder::KernelBuilder(const sandbox::Sandbox* sandbox, std::string compiler, std::string compiler_identity,
                             std::string cache_dir, absl::Duration timeout, int64_t memory_limit_bytes,
                             std::vector<std::string> visible_paths, CompilerLayout layout)
    : sandbox_(sandbox),
      compiler_(std::move(compiler)),
      identity_(std::move(compiler_identity)),
      cache_dir_(std::move(cache_dir)),
      timeout_(timeout),
      memory_limit_bytes_(memory_limit_bytes),
      visible_paths_(std::move(visible_paths)),
      layout_(std::move(layout)) {}

absl::StatusOr<sandbox::Result> KernelBuilder::RunCompiler(const std::vector<std::string>& args, const std::string& dir,
                                                           absl::Time deadline) const {
  sandbox::Command cmd;
  cmd.argv.push_back(compiler_);
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  cmd.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", absl::StrCat("TMPDIR=", dir), absl::StrCat("HOME=", dir)};
  cmd.env.insert(cmd.env.end(), layout_.env.begin(), layout_.env.end());
  cmd.cwd = dir;
  cmd.writable_dirs = {dir};
  cmd.visible_paths = visible_paths_;
  cmd.limits.wall_timeout = std::max(deadline - absl::Now(), absl::Milliseconds(1));
  cmd.limits.cpu_seconds = absl::ToDoubleSeconds(timeout_) + 1;
  cmd.limits.address_space_bytes = memory_limit_bytes_;
  cmd.limits.file_size_bytes = int64_t{512} << 20;
  cmd.output_cap_bytes = 256 * 1024;
  return sandbox_->Run(cmd);
}

absl::StatusOr<BuildResult> KernelBuilder::Build(const BuildSpec& spec) const {
  const absl::Time start = absl::Now();
  // The default layout adds nothing, so g++ builds keep their keys.
  const std::string layout_key =
      layout_ == CompilerLayout{}
          ? ""
          : absl::StrCat("layout\n", layout_.source_file, "\x1f", layout_.wrapper_file, "\x1f",
                         absl::StrJoin(layout_.leading_flags, "\x1f"), "\x1e",
                         absl::StrJoin(layout_.link_flags, "\x1f"), "\x1e", absl::StrJoin(layout_.env, "\x1f"), "\n");
  const std::string key =
      Sha256Hex(absl::StrCat("kevo-kernel-v2\n", identity_.size(), ":", identity_, compiler_.size(), ":", compiler_,
                             absl::StrJoin(spec.flags, "\x1f"), "\n", spec.source.size(), ":", spec.source,
                             spec.wrapper_source.size(), ":", spec.wrapper_source, layout_key));
  const std::string final_dir = absl::StrCat(cache_dir_, "/", key);
  BuildResult result;
  result.object_path = final_dir + "/source.o";
  result.library_path = final_dir + "/kernel.so";
  std::error_code ec;
  // What the compiler printed (ptxas's resource report, warnings) is kept
  // beside the objects, so a cache hit reports what the build did.
  const std::string output_path = final_dir + "/compiler_output.txt";
  if (fs::exists(result.library_path, ec) && fs::exists(result.object_path, ec)) {
    std::ifstream saved(output_path, std::ios::binary);
    result.compiler_output.assign(std::istreambuf_iterator<char>(saved), std::istreambuf_iterator<char>());
    result.status = v1::OK;
    result.cache_hit = true;
    result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return result;
  }

  const std::string tmp = absl::StrCat(cache_dir_, "/tmp-", key.substr(0, 16), "-", UniqueSuffix());
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{tmp};
  KEVO_RETURN_IF_ERROR(WriteFile(tmp + "/" + layout_.source_file, spec.source));
  KEVO_RETURN_IF_ERROR(WriteFile(tmp + "/" + layout_.wrapper_file, spec.wrapper_source));

  const absl::Time deadline = start + timeout_;
  std::vector<std::string> common = layout_.leading_flags;
  common.insert(common.end(), spec.flags.begin(), spec.flags.end());
  // The source's own object first: the symbol check reads it alone, so the
  // wrapper's reference to the task's function does not count. Then the
  // wrapper and the link; -z defs turns a missing function into a link error.
  std::vector<std::string> compile = common;
  compile.insert(compile.end(), {"-c", layout_.source_file, "-o", "source.o"});
  std::vector<std::string> link = common;
  link.insert(link.end(), layout_.link_flags.begin(), layout_.link_flags.end());
  link.insert(link.end(), {layout_.wrapper_file, "source.o", "-o", "kernel.so"});
  std::string output;
  for (const auto* args : {&compile, &link}) {
    KEVO_ASSIGN_OR_RETURN(sandbox::Result run, RunCompiler(*args, tmp, deadline));
    output += run.stderr_data;
    output += run.stdout_data;
    result.compiler_output = TrimCompilerOutput(output);
    if (run.timed_out || run.term_signal == SIGXCPU || run.term_signal == SIGKILL) {
      result.status = v1::COMPILE_TIMEOUT;
      result.message =
          absl::StrCat("compilation did not finish within ", absl::FormatDuration(timeout_), " (", run.Summary(), ")");
      result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return result;
    }
    if (!run.Succeeded()) {
      result.status = v1::COMPILE_ERROR;
      result.message = run.term_signal != 0 ? absl::StrCat("the compiler crashed: ", run.Summary())
                                            : absl::StrCat("compilation failed: ", FirstErrorLine(output));
      result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return result;
    }
  }
  KEVO_RETURN_IF_ERROR(WriteFile(tmp + "/compiler_output.txt", result.compiler_output));
  KEVO_RETURN_IF_ERROR(Publish(tmp, final_dir));
  cleanup.dir.clear();
  result.status = v1::OK;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::StatusOr<std::string> KernelBuilder::BuildProgram(const std::string& source,
                                                        const std::vector<std::string>& flags) const {
  const std::string key = Sha256Hex(
      absl::StrCat("kevo-program-v1\n", identity_, "\n", compiler_, "\n", absl::StrJoin(flags, "\x1f"), "\n", source));
  const std::string final_dir = absl::StrCat(cache_dir_, "/", key);
  const std::string program = final_dir + "/program";
  std::error_code ec;
  if (fs::exists(program, ec)) return program;
  const std::string tmp = absl::StrCat(cache_dir_, "/tmp-", key.substr(0, 16), "-", UniqueSuffix());
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  KEVO_RETURN_IF_ERROR(WriteFile(tmp + "/program.cc", source));
  std::vector<std::string> args = {"-fdiagnostics-color=never"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"program.cc", "-o", "program"});
  auto run = RunCompiler(args, tmp, absl::Now() + timeout_);
  if (!run.ok() || !run->Succeeded()) {
    std::string why = run.ok() ? absl::StrCat(run->Summary(), ": ", TrimCompilerOutput(run->stderr_data, 2000))
                               : std::string(run.status().message());
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot compile a helper program: ", why));
  }
  KEVO_RETURN_IF_ERROR(Publish(tmp, final_dir));
  return program;
}

}  // namespace kevo::worker
