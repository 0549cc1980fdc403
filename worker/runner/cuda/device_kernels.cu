// The kernels are shared with kevo-runner-hip: worker/runner/device/device_kernels.inc.
#include <vector>

#include "worker/runner/cuda/device_kernels.h"

#define KEVO_GPU_SM_COUNT_ATTR cudaDevAttrMultiProcessorCount

namespace kevo::runner::cuda {
#include "worker/runner/device/device_kernels.inc"
}  // namespace kevo::runner::cuda
