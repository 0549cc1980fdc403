// Compiles kernel sources (a candidate or a task's reference) together with
// the generated kevo_entry wrapper into a shared object, inside the sandbox
// and under a hard timeout, with a content-addressed cache: the key is the
// SHA-256 of (source, flags, compiler identity, wrapper), and a finished
// build lives in <cache_dir>/<key>/ (published by an atomic rename, so
// concurrent builders of one key never see half a build).
//
// Thread-safe: Build() may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "kevo/v1/evaluation.pb.h"

namespace kevo::worker {

// Checks the flags a candidate asks for. Only code-generation options are
// accepted (-O*, -f*, -m*, -D*, -U*, -std=*, -W* warnings, -g*, --param);
// anything that could read or write files, load plugins or change the
// toolchain (-fplugin, @file, -B, -wrapper, -specs, -I, -include, -Wl/-Wa/-Wp,
// -Xlinker, -fprofile-*, -save-temps, -o, input files, ...) is refused.
// Returns InvalidArgument naming the first refused flag and why.
absl::Status CheckExtraFlags(const std::vector<std::string>& flags);

struct BuildSpec {
  std::string source;
  std::vector<std::string> flags;  // e.g. -O3 -march=native -fopenmp -fPIC [+ extra]
  std::string wrapper_source;      // runner::GenerateWrapperSource
};

struct BuildResult {
  v1::EvalStatus status = v1::EVAL_STATUS_UNSPECIFIED;  // OK, COMPILE_ERROR or COMPILE_TIMEOUT
  std::string message;                                  // one line for humans when not OK
  std::string compiler_output;                          // trimmed; a cache hit's is the build's
  std::string object_path;                              // the source's own object (the wrapper's is separate)
  std::string library_path;                             // the .so with kevo_entry
  bool cache_hit = false;
  double seconds = 0;
};

// How the builder drives its compiler: file names and the fixed parts of the
// two commands (compile the source alone, then link the wrapper and the
// source's object into kernel.so). The defaults are g++'s; the nvidia
// backend uses nvcc with source.cu.
struct CompilerLayout {
  std::string source_file = "source.cc";
  std::string wrapper_file = "wrapper.cc";
  // First in both commands, before BuildSpec::flags.
  std::vector<std::string> leading_flags = {"-fdiagnostics-color=never"};
  // After the flags in the link command.
  std::vector<std::string> link_flags = {"-shared", "-Wl,-z,defs"};
  // Extra NAME=VALUE environment of both commands (hipcc reads its settings
  // from the environment).
  std::vector<std::string> env;

  bool operator==(const CompilerLayout&) const = default;
};

class KernelBuilder {
 public:
  // `compiler_identity` (version, target CPU) goes into every cache key.
  // `visible_paths`: what the compiler may see of the file system (see
  // sandbox::Command::visible_paths); empty: everything, read-only.
  KernelBuilder(const sandbox::Sandbox* sandbox, std::string compiler, std::string compiler_identity,
                std::string cache_dir, absl::Duration timeout, int64_t memory_limit_bytes,
                std::vector<std::string> visible_paths = {}, CompilerLayout layout = {});

  // Builds (or finds in the cache) `spec`. A compile error or timeout is an
  // OK StatusOr with that status in the result; returns Internal only for the
  // worker's own failures (cannot write the cache, cannot start the compiler).
  absl::StatusOr<BuildResult> Build(const BuildSpec& spec) const;

  // Compiles a stand-alone trusted program (the calibration benchmark) into
  // an executable; same cache and limits. Returns Internal on any failure.
  absl::StatusOr<std::string> BuildProgram(const std::string& source, const std::vector<std::string>& flags) const;

  // The sandbox the compiler runs in (for tools that read its output).
  const sandbox::Sandbox* sandbox() const { return sandbox_; }

 private:
  absl::StatusOr<sandbox::Result> RunCompiler(const std::vector<std::string>& args, const std::string& dir,
                                              absl::Time deadline) const;

  const sandbox::Sandbox* sandbox_;
  const std::string compiler_;
  const std::string identity_;
  const std::string cache_dir_;
  const absl::Duration timeout_;
  const int64_t memory_limit_bytes_;
  const std::vector<std::string> visible_paths_;
  const CompilerLayout layout_;
};

// Keeps the first `max_bytes` of compiler output and says how much was cut.
std::string TrimCompilerOutput(const std::string& output, size_t max_bytes = 8000);

}  // namespace kevo::worker
