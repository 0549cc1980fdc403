// The few kernels kevo-runner-cuda launches itself (the candidate's and the
// baseline's come from their .so files): a health check run after a device
// fault or a killed runner, the L2 flush before every timed sample, and the
// FP32 peak measurement of `probe`.
// Each returns the CUDA error of its launch and synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kevo::runner::cuda {

// Writes i*3+1 into n ints at `out`, reads them back on the host and checks
// them; cudaErrorUnknown when a value is wrong.
cudaError_t HealthCheck(int n);

// Reads `bytes` (a multiple of 16) at `buf` on the legacy default stream,
// evicting whatever L2 held (dirty lines are written back now, not during
// the next timed call) and leaving it clean; `sink` is written only when the
// sum is impossible, so the loads stay. Asynchronous: returns the launch's
// error.
cudaError_t ReadToFlushL2(const void* buf, size_t bytes, float* sink);

// Runs a register-resident FMA loop on every SM and returns the achieved
// FP32 rate in GFLOP/s in *gflops.
cudaError_t MeasureFp32Peak(double* gflops);

}  // namespace kevo::runner::cuda
