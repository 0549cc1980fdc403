// What every runner process shares (kevo-runner-cpu, kevo-runner-mtia and the
// GPU runners of worker/runner/device): the report file, ending with an exit
// code, the command line of protocol.h and the files it names, and opening
// kernel libraries. Everything that fails here ends the process through Fail
// with the code protocol.h gives, so a runner's set-up reads as a list of
// steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "kevo/v1/task.pb.h"

namespace kevo::runner {

// The report file's descriptor: stderr until ParseCommandLine opens --report.
int ReportFd();
// Writes all of `data` to `fd` with raw write(2), retrying on EINTR; gives up
// silently on errors (it is how failures are reported).
void WriteAll(int fd, const void* data, size_t size);
// Appends "key value" (one line; newlines in value become spaces) to the report.
void ReportLine(absl::string_view key, absl::string_view value);
// Reports "key message", also prints "RUNNER: message" on stderr when the
// report is a file, and ends the process with `code` (no destructors run).
[[noreturn]] void Fail(int code, absl::string_view key, absl::string_view message);

// Steady-clock seconds.
double Now();
// A fast 64-bit content hash (not cryptographic: it only has to notice a
// kernel writing into its inputs).
uint64_t HashBytes(const void* data, size_t n);

// `RUNNER MODE --name=value ... --flag ...`.
struct CommandLine {
  std::string mode;
  std::map<std::string, std::string> flags;  // a bare --flag is "true"

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // The value, or "" when absent.
  std::string Get(const std::string& name) const;
};
// Parses the command line, names the runner for Fail's stderr line, and opens
// --report (appending) as the report file. An argument that is not --name[=value]
// fails with kExitInfra.
CommandLine ParseCommandLine(int argc, char** argv, const char* runner_name);
// Fails with kExitInfra ("missing --NAME") unless every name is given.
void Require(const CommandLine& cl, std::initializer_list<const char*> names);

// The binary-serialised task at `path`.
v1::Task ReadTaskFile(const std::string& path);
// Opens `path` for writing (created, truncated) or reading.
int OpenOut(const std::string& path);
int OpenIn(const std::string& path);
// "1,2,3" as seeds; fails on a bad number or none.
std::vector<uint64_t> ParseSeeds(const std::string& text);
// An absolute path: dlopen of a relative one searches the library path or
// calls getcwd, which the seccomp filter does not allow.
std::string AbsoluteKernelPath(const std::string& path);
// dlopen (RTLD_NOW | RTLD_LOCAL); kExitLoadFailed with dlerror's text. The
// calling thread's floating-point environment (rounding, FTZ/DAZ) is the same
// after as before: loading a -ffast-math kernel does not change it.
void* OpenKernelLibrary(const std::string& path);

// The floating-point environment the runner started in (MXCSR and the x87
// control word, read the first time either function runs) is put back after
// a kernel call that changed it: a candidate that turns on flush-to-zero or
// another rounding mode in its call (ldmxcsr imports nothing a symbol check
// sees) computes in it itself, but the baseline, the reference and the checks
// after it do not. Only the calling thread's: OpenMP's other threads keep
// what the candidate set in them. Cheap when nothing changed (two reads).
void RestoreFpEnvironment();

}  // namespace kevo::runner
