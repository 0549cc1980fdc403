// The few kernels kevo-runner-hip launches itself, built by hipcc for
// gfx90a and gfx940; one source with kevo-runner-cuda's,
// worker/runner/device/device_kernels_decl.inc says what each does. On a GPU
// of another architecture they fail with hipErrorNoBinaryForGpu.
#pragma once

#include <cstddef>

#include <hip/hip_runtime_api.h>

#ifndef KEVO_GPU
#define KEVO_GPU(name) hip##name
#endif

namespace kevo::runner::hip {
#include "worker/runner/device/device_kernels_decl.inc"
}  // namespace kevo::runner::hip
