#include "tests/coordinator/kernel_harness.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/status.h"

#if defined(KEVO_TSAN_HARNESS)
// ThreadSanitizer's defaults for a test that runs kernels in its own process:
// the kernels are plain g++ -fopenmp builds on libgomp's threads, neither
// instrumented, so TSan saw their memcpy calls but not the fork and join that
// order them with the test's thread (false races in every OpenMP recipe of
// RecipeCorrectnessTest). Interceptors called from uninstrumented modules
// are not race-checked; TSAN_OPTIONS (scripts/sanitize.sh) keeps the rest.
// Whether a kernel itself races is the determinism check's to find. And
// GCC 12's TSan, intercepting __tls_get_addr for a loaded kernel's
// thread_local (the gemm recipes' packing scratch, gemm.cc), reset the shadow of a 544 TB
// range and died (ENOMEM): the interception is off.
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1:intercept_tls_get_addr=0"; }
#endif

#if defined(__SANITIZE_ADDRESS__)
// LeakSanitizer's check at exit walks every thread's TLS. In a test that has
// loaded hundreds of OpenMP kernels (RecipeCorrectnessTest's GEMMs, whose
// packing scratch is thread_local) that walk faulted ("Tracer caught signal
// 11 ... LeakSanitizer has encountered a fatal error") after every assertion
// had passed. Without TLS among its roots the check is stricter, not looser
// (a block only a thread_local points to would be reported as leaked), and it
// runs to the end. LSAN_OPTIONS (scripts/sanitize.sh) keeps the rest.
extern "C" const char* __lsan_default_options() { return "use_tls=0"; }
#endif

namespace kevo::harness {

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/", prefix, "XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, " failed"));
  }
  return std::unique_ptr<TempDir>(new TempDir(pattern));
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> CandidateFlags(const v1::Candidate& candidate) {
  std::vector<std::string> flags = {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared"};
  for (const std::string& f : candidate.extra_flags()) flags.push_back(f);
  return flags;
}

std::vector<std::string> ReferenceFlags() { return {"-O2", "-fPIC", "-shared"}; }

absl::StatusOr<std::unique_ptr<CompiledKernel>> CompiledKernel::Compile(const std::string& source,
                                                                        const std::vector<std::string>& flags,
                                                                        const std::string& function,
                                                                        const std::string& dir,
                                                                        const std::string& name) {
  const std::string src = absl::StrCat(dir, "/", name, ".cc");
  const std::string so = absl::StrCat(dir, "/", name, ".so");
  {
    std::ofstream out(src);
    out << source;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", src));
  }
  const std::string cmd = absl::StrCat("g++ ", absl::StrJoin(flags, " "), " -o '", so, "' '", src, "' 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen failed: ", cmd));
  std::string output;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, got);
  const int rc = pclose(pipe);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("compile failed (", cmd, "):\n", output.substr(0, 4000)));
  }
  // RTLD_NODELETE: unloading a kernel would unload libgomp under its idle
  // worker threads, which then crash.
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) return absl::InternalError(absl::StrCat("dlopen: ", dlerror()));
  void* fn = dlsym(handle, function.c_str());
  if (fn == nullptr) {
    dlclose(handle);
    return absl::NotFoundError(absl::StrCat(so, " exports no '", function, "'"));
  }
  return std::unique_ptr<CompiledKernel>(new CompiledKernel(handle, fn));
}

CompiledKernel::~CompiledKernel() { dlclose(handle_); }

namespace {

template <size_t>
using Arg = intptr_t;

// Calls `fn` as a function of sizeof...(I) intptr_t arguments a[0], a[1], ...
template <size_t... I>
void CallWith(void* fn, const intptr_t* a, std::index_sequence<I...>) {
  reinterpret_cast<void (*)(Arg<I>...)>(fn)(a[I]...);
}

template <size_t... N>
void CallN(void* fn, const std::vector<intptr_t>& a, std::index_sequence<N...>) {
  // One entry per arity 1..kMaxParams.
  static constexpr void (*kCalls[])(void*, const intptr_t*) = {
      [](void* f, const intptr_t* x) { CallWith(f, x, std::make_index_sequence<N + 1>()); }...};
  if (a.empty() || a.size() > sizeof...(N)) std::abort();  // MakeTaskCall refuses these
  kCalls[a.size() - 1](fn, a.data());
}

}  // namespace

void CompiledKernel::Call(const std::vector<intptr_t>& a) const {
  CallN(fn_, a, std::make_index_sequence<kMaxParams>());
}

AlignedBuffer::AlignedBuffer(size_t bytes) : size(bytes) { data = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

AlignedBuffer::~AlignedBuffer() { std::free(data); }

void TaskCall::PoisonOutputs(const v1::Task& task) {
  for (int i = 0; i < task.outputs_size(); ++i) {
    PoisonTensor(task.outputs(i).dtype(), output_counts[i], outputs[i]->data);
  }
}

absl::StatusOr<std::unique_ptr<TaskCall>> MakeTaskCall(const v1::Task& task, const v1::Binding& binding,
                                                       uint64_t seed) {
  auto call = std::make_unique<TaskCall>();
  const SymbolValues symbols = BindingValues(binding);
  for (const auto& spec : task.inputs()) {
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(spec, symbols));
    auto buf = std::make_unique<AlignedBuffer>(NumElements(shape) * DTypeSize(spec.dtype()));
    FillTensor(spec, shape, seed, buf->data, &symbols);
    call->inputs.push_back(std::move(buf));
  }
  for (const auto& spec : task.outputs()) {
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(spec, symbols));
    const int64_t count = NumElements(shape);
    call->outputs.push_back(std::make_unique<AlignedBuffer>(count * DTypeSize(spec.dtype())));
    call->output_counts.push_back(count);
  }
  call->PoisonOutputs(task);
  if (task.signature().params_size() > static_cast<int>(CompiledKernel::kMaxParams)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the harness calls functions of at most ", CompiledKernel::kMaxParams, " parameters"));
  }
  for (const std::string& p : task.signature().params()) {
    bool found = false;
    for (int i = 0; i < task.inputs_size() && !found; ++i) {
      if (task.inputs(i).name() == p) {
        call->args.push_back(reinterpret_cast<intptr_t>(call->inputs[i]->data));
        found = true;
      }
    }
    for (int i = 0; i < task.outputs_size() && !found; ++i) {
      if (task.outputs(i).name() == p) {
        call->args.push_back(reinterpret_cast<intptr_t>(call->outputs[i]->data));
        found = true;
      }
    }
    if (found) continue;
    auto it = symbols.find(p);
    if (it == symbols.end()) {
      return absl::InvalidArgumentError(absl::StrCat("binding '", binding.name(), "' gives no value for '", p, "'"));
    }
    call->args.push_back(static_cast<intptr_t>(it->second));
  }
  return call;
}

absl::Status CompareOutputs(const v1::Task& task, const TaskCall& got, const TaskCall& want) {
  for (int i = 0; i < task.outputs_size(); ++i) {
    const v1::DType dtype = task.outputs(i).dtype();
    CompareResult r = CompareTensors(dtype, got.outputs[i]->data, want.outputs[i]->data, got.output_counts[i],
                                     ToleranceFor(task, dtype));
    if (!r.ok) {
      const int64_t at = r.first_bad_index;
      return absl::FailedPreconditionError(
          absl::StrCat("output '", task.outputs(i).name(), "': ", r.bad_count, " bad of ", got.output_counts[i],
                       ", first at ", at, " (got ", at >= 0 ? ElementAsDouble(dtype, got.outputs[i]->data, at) : 0.0,
                       ", want ", at >= 0 ? ElementAsDouble(dtype, want.outputs[i]->data, at) : 0.0, "), max abs err ",
                       r.max_abs_err, ", max rel err ", r.max_rel_err, r.nonfinite ? ", non-finite values" : ""));
    }
  }
  return absl::OkStatus();
}

}  // namespace kevo::harness
