// The calls of device::Runtime that CUDA and HIP spell alike (cudaMalloc /
// hipMalloc, cudaEventRecord / hipEventRecord, ...), written once for both:
// a runner includes its runtime's header, then this one, and puts
//
//   KEVO_DEVICE_RUNTIME_CALLS(cuda)          (or hip)
//
// in the public part of its Runtime subclass (the runner's own kernels are
// expected in namespace kevo::runner::cuda or ::hip, from
// device_kernels.inc); what differs (names, the L2 size, the device
// properties, named baselines) it writes itself. At file scope, outside any namespace,
//
//   KEVO_DEVICE_STREAM_INTERPOSERS(cuda)
//
// defines the runtime's stream constructors and destructor: the runner
// exports them (its CMakeLists.txt), so a candidate .so's calls bind there
// first; each forwards to the runtime's own (RTLD_NEXT) and reports
// non-blocking streams to device::TrackStream / ForgetStream, for the check
// that a call leaves no work running behind the default stream's back.
#pragma once

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "worker/runner/device/device_runner.h"

namespace kevo::runner::device {
// "name: description", or the name alone where the description repeats it
// (HIP 5.2's hipGetErrorString returns the name).
inline std::string JoinErrorText(const char* name, const char* description) {
  const std::string n = name != nullptr ? name : "unknown error";
  if (description == nullptr || n == description) return n;
  return absl::StrCat(n, ": ", description);
}

// The properties cudaDeviceProp and hipDeviceProp_t name alike, for the
// probe's JSON.
template <typename Prop>
void DescribeCommonProperties(const Prop& p, nlohmann::json* dev) {
  (*dev)["name"] = p.name;
  (*dev)["compute_capability"] = absl::StrCat(p.major, ".", p.minor);
  (*dev)["sm_count"] = p.multiProcessorCount;  // AMD: compute units
  (*dev)["memory_bytes"] = p.totalGlobalMem;
  (*dev)["l2_bytes"] = p.l2CacheSize;
  (*dev)["pci_bus_id"] = absl::StrCat(p.pciDomainID, ":", p.pciBusID, ":", p.pciDeviceID);
}

// The runtime's own definition of an interposed call.
template <typename Fn>
Fn NextDefinition(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}
}  // namespace kevo::runner::device

#define KEVO_DEVICE_RUNTIME_CALLS(P)                                                                           \
  using Error = ::kevo::runner::device::Error;                                                                 \
  std::string ErrorText(Error e) const override {                                                              \
    return ::kevo::runner::device::JoinErrorText(P##GetErrorName(static_cast<P##Error_t>(e)),                  \
                                                 P##GetErrorString(static_cast<P##Error_t>(e)));               \
  }                                                                                                            \
  bool IsOutOfMemory(Error e) const override { return e == P##ErrorMemoryAllocation; }                         \
  bool IsNotReady(Error e) const override { return e == P##ErrorNotReady; }                                    \
  Error InitContext() override { return P##Free(nullptr); }                                                    \
  Error SetDevice(int device) override { return P##SetDevice(device); }                                        \
  Error Malloc(void** p, size_t bytes) override { return P##Malloc(p, bytes); }                                \
  void Free(void* p) override { (void)P##Free(p); }                                                            \
  Error Memset(void* p, int byte, size_t bytes) override { return P##Memset(p, byte, bytes); }                 \
  Error CopyToHost(void* dst, const void* src, size_t bytes) override {                                        \
    return P##Memcpy(dst, src, bytes, P##MemcpyDeviceToHost);                                                  \
  }                                                                                                            \
  Error CopyToDevice(void* dst, const void* src, size_t bytes) override {                                      \
    return P##Memcpy(dst, src, bytes, P##MemcpyHostToDevice);                                                  \
  }                                                                                                            \
  Error CopyOnDevice(void* dst, const void* src, size_t bytes) override {                                      \
    return P##Memcpy(dst, src, bytes, P##MemcpyDeviceToDevice);                                                \
  }                                                                                                            \
  Error Synchronize() override { return P##DeviceSynchronize(); }                                              \
  Error TakeLastError() override { return P##GetLastError(); }                                                 \
  Error EventCreate(void** event, bool timing) override {                                                      \
    return P##EventCreateWithFlags(reinterpret_cast<P##Event_t*>(event),                                       \
                                   timing ? P##EventDefault : P##EventDisableTiming);                          \
  }                                                                                                            \
  void EventDestroy(void* event) override { (void)P##EventDestroy(static_cast<P##Event_t>(event)); }           \
  Error EventRecord(void* event, void* stream) override {                                                      \
    return P##EventRecord(static_cast<P##Event_t>(event), static_cast<P##Stream_t>(stream));                   \
  }                                                                                                            \
  Error EventQuery(void* event) override { return P##EventQuery(static_cast<P##Event_t>(event)); }             \
  Error EventSynchronize(void* event) override { return P##EventSynchronize(static_cast<P##Event_t>(event)); } \
  Error EventElapsedMs(float* ms, void* start, void* stop) override {                                          \
    return P##EventElapsedTime(ms, static_cast<P##Event_t>(start), static_cast<P##Event_t>(stop));             \
  }                                                                                                            \
  Error StreamQuery(void* stream) override { return P##StreamQuery(static_cast<P##Stream_t>(stream)); }        \
  Error DeviceCount(int* count) override { return P##GetDeviceCount(count); }                                  \
  Error DriverVersion(int* version) override { return P##DriverGetVersion(version); }                          \
  Error RuntimeVersion(int* version) override { return P##RuntimeGetVersion(version); }                        \
  /* The runner's kernels: kevo::runner::P (device_kernels.inc). */                                            \
  Error FlushL2(const void* buf, size_t bytes, float* sink) override {                                         \
    return ::kevo::runner::P::ReadToFlushL2(buf, bytes, sink);                                                 \
  }                                                                                                            \
  Error HealthCheck() override { return ::kevo::runner::P::HealthCheck(1 << 20); }                             \
  Error MeasureFp32Peak(double* gflops) override { return ::kevo::runner::P::MeasureFp32Peak(gflops); }

#define KEVO_DEVICE_STREAM_INTERPOSERS(P)                                                             \
  extern "C" __attribute__((visibility("default")))                                                   \
  P##Error_t P##StreamCreateWithFlags(P##Stream_t* stream, unsigned int flags) {                      \
    using Fn = P##Error_t (*)(P##Stream_t*, unsigned int);                                            \
    static const Fn next = ::kevo::runner::device::NextDefinition<Fn>(#P "StreamCreateWithFlags");    \
    if (next == nullptr) return P##ErrorNotSupported;                                                 \
    const P##Error_t e = next(stream, flags);                                                         \
    if (e == P##Success && stream != nullptr && (flags & P##StreamNonBlocking) != 0) {                \
      ::kevo::runner::device::TrackStream(*stream);                                                   \
    }                                                                                                 \
    return e;                                                                                         \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default")))                                                   \
  P##Error_t P##StreamCreateWithPriority(P##Stream_t* stream, unsigned int flags, int priority) {     \
    using Fn = P##Error_t (*)(P##Stream_t*, unsigned int, int);                                       \
    static const Fn next = ::kevo::runner::device::NextDefinition<Fn>(#P "StreamCreateWithPriority"); \
    if (next == nullptr) return P##ErrorNotSupported;                                                 \
    const P##Error_t e = next(stream, flags, priority);                                               \
    if (e == P##Success && stream != nullptr && (flags & P##StreamNonBlocking) != 0) {                \
      ::kevo::runner::device::TrackStream(*stream);                                                   \
    }                                                                                                 \
    return e;                                                                                         \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) P##Error_t P##StreamDestroy(P##Stream_t stream) { \
    using Fn = P##Error_t (*)(P##Stream_t);                                                           \
    static const Fn next = ::kevo::runner::device::NextDefinition<Fn>(#P "StreamDestroy");            \
    if (next == nullptr) return P##ErrorNotSupported;                                                 \
    ::kevo::runner::device::ForgetStream(stream);                                                     \
    return next(stream);                                                                              \
  }
