// The few kernels kevo-runner-cuda launches itself (the candidate's and the
// baseline's come from their .so files): a health check run after a device
// fault or a killed runner, and the FP32 peak measurement of `probe`.
// Each returns the CUDA error of its launch and synchronisation.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace kevo::runner::cuda {

// Writes i*3+1 into n ints at `out`, reads them back on the host and checks
// them; cudaErrorUnknown when a value is wrong.
cudaError_t HealthCheck(int n);

// Runs a register-resident FMA loop on every SM and returns the achieved
// FP32 rate in GFLOP/s in *gflops.
cudaError_t MeasureFp32Peak(double* gflops);

}  // namespace kevo::runner::cuda
