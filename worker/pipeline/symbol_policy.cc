#include "worker/pipeline/symbol_policy.h"

#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kevo::worker {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// libm functions, each also allowed with an "f" or "l" suffix.
constexpr std::string_view kMath[] = {
    "sin",       "cos",          "tan",       "asin",         "acos",         "atan",        "atan2",     "sinh",
    "cosh",      "tanh",         "asinh",     "acosh",        "atanh",        "exp",         "exp2",      "exp10",
    "expm1",     "log",          "log2",      "log10",        "log1p",        "logb",        "pow",       "sqrt",
    "cbrt",      "hypot",        "fabs",      "floor",        "ceil",         "round",       "lround",    "llround",
    "trunc",     "rint",         "lrint",     "llrint",       "nearbyint",    "fmod",        "remainder", "remquo",
    "fmin",      "fmax",         "fdim",      "fma",          "frexp",        "ldexp",       "modf",      "scalbn",
    "scalbln",   "ilogb",        "erf",       "erfc",         "tgamma",       "lgamma",      "lgamma_r",  "copysign",
    "nextafter", "nexttoward",   "nan",       "sincos",       "pow10",        "significand", "__isnan",   "__isinf",
    "__finite",  "__fpclassify", "__signbit", "__exp_finite", "__log_finite", "__pow_finite"};

const std::set<std::string, std::less<>>& ExactAllowlist() {
  static const auto* names = [] {
    auto* s = new std::set<std::string, std::less<>>{
        // Memory and strings a compiler emits for copies and clears.
        "memcpy", "memset", "memmove", "memcmp", "__memcpy_chk", "__memset_chk", "__memmove_chk",
        // Heap.
        "malloc", "free", "calloc", "realloc", "aligned_alloc", "posix_memalign",
        // C++ runtime: statics, exceptions, thread_local.
        "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort", "__cxa_finalize", "__cxa_atexit",
        "__cxa_thread_atexit", "__cxa_thread_atexit_impl", "__dso_handle", "__stack_chk_fail", "__gxx_personality_v0",
        "_Unwind_Resume", "__cxa_begin_catch", "__cxa_end_catch", "__cxa_rethrow", "__cxa_throw",
        "__cxa_allocate_exception", "__cxa_free_exception", "__cxa_pure_virtual", "__cxa_call_unexpected",
        "__tls_get_addr", "_GLOBAL_OFFSET_TABLE_", "_ZSt9terminatev",
        // A kernel may give up on itself; that ends only its own process.
        "abort", "__assert_fail",
        // Weak references the C runtime start files make.
        "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__"};
    for (std::string_view m : kMath) {
      s->emplace(m);
      s->insert(std::string(m) + "f");
      s->insert(std::string(m) + "l");
    }
    return s;
  }();
  return *names;
}

// std::__throw_bad_alloc() and friends: _ZSt<len>__throw_<name>...
bool IsStdThrowHelper(std::string_view name) {
  if (!StartsWith(name, "_ZSt")) return false;
  size_t i = 4;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 4 && StartsWith(name.substr(i), "__throw_");
}

}  // namespace

bool IsAllowedImport(std::string_view name) {
  if (ExactAllowlist().count(name) > 0) return true;
  // Vector math (libmvec), e.g. _ZGVdN8v_expf.
  if (StartsWith(name, "_ZGV")) return true;
  // OpenMP runtime.
  if (StartsWith(name, "GOMP_") || StartsWith(name, "omp_")) return true;
  // Global operator new, new[], delete, delete[] in all their overloads.
  if (StartsWith(name, "_Znw") || StartsWith(name, "_Zna") || StartsWith(name, "_Zdl") || StartsWith(name, "_Zda")) {
    return true;
  }
  if (IsStdThrowHelper(name)) return true;
  // Type information for catching and throwing exceptions.
  if (StartsWith(name, "_ZTI") || StartsWith(name, "_ZTS") || StartsWith(name, "_ZTVN10__cxxabiv1")) {
    return true;
  }
  return false;
}

std::vector<std::string> ForbiddenImports(const std::vector<std::string>& imports) {
  std::vector<std::string> forbidden;
  for (const std::string& name : imports) {
    if (!IsAllowedImport(name)) forbidden.push_back(name);
  }
  return forbidden;
}

bool IsVendorImport(std::string_view name, const DeviceImportPolicy& policy) {
  for (std::string_view prefix : policy.vendor_prefixes) {
    if (StartsWith(name, prefix)) return true;
  }
  return false;
}

bool IsAllowedDeviceImport(std::string_view name, const DeviceImportPolicy& policy) {
  if (IsAllowedImport(name)) return true;
  if (StartsWith(name, policy.stub_prefix)) return true;
  // nvcc and hipcc give every non-inline __device__ function a host stub
  // that calls exit() (unreachable: host code cannot call a device
  // function), so most hand-written kernels import it. A candidate that
  // calls it itself ends only its runner, before the results that runner
  // writes last: the worker reports RUNTIME_ERROR ("ended the process").
  if (name == "atexit" || name == "exit") return true;
  if (IsVendorImport(name, policy)) return false;
  if (!StartsWith(name, policy.api_prefix)) return false;
  const std::string_view call = name.substr(policy.api_prefix.size());
  // The API families a launcher needs, without the runtime's prefix.
  for (std::string_view family : {"Launch", "Stream", "Event", "Memcpy", "Memset", "Func", "Occupancy"}) {
    if (StartsWith(call, family)) return true;
  }
  for (std::string_view family : policy.extra_families) {
    if (StartsWith(call, family)) return true;
  }
  // Single calls. Not allowed on purpose: DeviceReset and SetDevice (they
  // would pull the context or the device from under the runner), managed
  // memory (a big enough cudaMallocManaged can hang the GPU), IPC, host
  // registration, profiler control, peer access.
  static const auto* calls = new std::set<std::string, std::less<>>{"GetLastError",
                                                                    "PeekAtLastError",
                                                                    "GetErrorString",
                                                                    "GetErrorName",
                                                                    "DeviceSynchronize",
                                                                    "DeviceGetAttribute",
                                                                    "GetDevice",
                                                                    "GetDeviceProperties",
                                                                    "GetDeviceCount",
                                                                    "Malloc",
                                                                    "Free",
                                                                    "MallocAsync",
                                                                    "FreeAsync",
                                                                    "MallocPitch",
                                                                    "DeviceGetLimit",
                                                                    "DriverGetVersion",
                                                                    "RuntimeGetVersion",
                                                                    "GetSymbolAddress",
                                                                    "GetSymbolSize"};
  return calls->count(call) > 0 || policy.extra_calls.count(call) > 0;
}

ImportVerdict CheckDeviceImports(const std::vector<std::string>& imports, const DeviceImportPolicy& policy) {
  ImportVerdict v;
  std::vector<std::string> vendor;
  for (const std::string& name : imports) {
    if (IsAllowedDeviceImport(name, policy)) continue;
    v.forbidden.push_back(name);
    if (IsVendorImport(name, policy)) vendor.push_back(name);
  }
  if (v.forbidden.empty()) return v;
  v.ok = false;
  if (!vendor.empty()) {
    v.message = absl::StrCat("the candidate calls a vendor library (", absl::StrJoin(vendor, ", "),
                             "): no vendor-library calls inside the kernel; write the kernel "
                             "itself (",
                             std::string(policy.vendor_advice), ")");
  } else {
    v.message = absl::StrCat("the candidate imports forbidden symbol(s): ", absl::StrJoin(v.forbidden, ", "), ". ",
                             std::string(policy.language),
                             " candidates may use kernel launches, streams, events, async copies/memsets, device "
                             "attributes, math, memory and the C++ runtime");
  }
  return v;
}

}  // namespace kevo::worker
