// The kernels are shared with kevo-runner-cuda: worker/runner/device/device_kernels.inc.
#include <hip/hip_runtime.h>

#include "worker/runner/hip/device_kernels.h"

#include <vector>

#define KEVO_GPU_SM_COUNT_ATTR hipDeviceAttributeMultiprocessorCount

namespace kevo::runner::hip {
#include "worker/runner/device/device_kernels.inc"
}  // namespace kevo::runner::hip
