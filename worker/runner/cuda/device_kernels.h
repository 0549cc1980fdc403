// The few kernels kevo-runner-cuda launches itself (the candidate's and the
// baseline's come from their .so files); one source with kevo-runner-hip's,
// worker/runner/device/device_kernels_decl.inc says what each does.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#ifndef KEVO_GPU
#define KEVO_GPU(name) cuda##name
#endif

namespace kevo::runner::cuda {
#include "worker/runner/device/device_kernels_decl.inc"
}  // namespace kevo::runner::cuda
