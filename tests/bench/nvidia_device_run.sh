#!/usr/bin/env bash
# One batched session on a lent GPU machine (docs/nvidia.md): checks that the
# bundle runs there, runs the nvidia bench (tests/bench/nvidia_h200.sh), the
# `kevo run` searches and the 100-evaluation job (tests/bench/nvidia_search.sh)
# and the GPU tests (nvidia_backend_test, copied into BUNDLE/tests by the
# caller), each within what is left of KEVO_DEVICE_DEADLINE_S (default 560)
# seconds. OUT_DIR gets device_run.txt (what the steps printed) and all.tgz
# (every file they wrote).
#
#   tests/bench/nvidia_device_run.sh [BUNDLE_DIR] [OUT_DIR]
set -uo pipefail
bundle="${1:-bundle}"
out="${2:-${OUT:-/tmp/kevo-nvidia-run}}"
mkdir -p "$out"
log="$out/device_run.txt"
end=$((SECONDS + ${KEVO_DEVICE_DEADLINE_S:-560}))
left() {  # the step's own limit, or what is left before the deadline
  local l=$((end - SECONDS))
  (( l < $1 )) && echo "$l" || echo "$1"
}
{
  echo "== environment"
  date -u; uname -r; nproc
  ls -l /dev/nvidia* 2>&1 | head; command -v bwrap || echo "no bwrap: rlimits + seccomp only"
  ldd "$bundle/libexec/kevo-worker" | grep -i "not found" || echo "kevo-worker: all libraries found"
  ldd "$bundle/libexec/kevo-runner-cuda" | grep -i "not found\|cudart\|cublas" || true
  ls /usr/local/cuda/lib64/libcublas.so* 2>&1 | head -3
} > "$log" 2>&1
cat "$log"

# The bench: coordinator + worker from the bundle, examples and cheats.
KEVO_PROFILE_CAP="${KEVO_PROFILE_CAP:-1.5}" timeout "$(left 200)" bash tests/bench/nvidia_h200.sh "$bundle" "$out" 2>&1 |
  tee -a "$log" | tail -40

# `kevo run` with the built-in CUDA recipes, and the 100-evaluation job.
[[ "${KEVO_SKIP_SEARCH:-0}" == 1 ]] || timeout "$(left 420)" bash tests/bench/nvidia_search.sh "$bundle" "$out" 2>&1 |
  tee -a "$log" | tail -30

# The GPU tests (label gpu), if the caller put the binary in the bundle.
if [[ -x "$bundle/tests/nvidia_backend_test" ]] && (( end - SECONDS > 30 )); then
  mkdir -p /tmp/kevo-gpu-test/bin /tmp/kevo-gpu-test/tests
  # The runners find their libraries through $ORIGIN/../lib.
  ln -sfn "$(cd "$bundle" && pwd)/lib" /tmp/kevo-gpu-test/lib
  cp "$bundle"/libexec/kevo-runner-* /tmp/kevo-gpu-test/bin/
  cp "$bundle/tests/nvidia_backend_test" /tmp/kevo-gpu-test/tests/
  KEVO_SOURCE_DIR="$PWD" KEVO_BIN_DIR=/tmp/kevo-gpu-test/bin LD_LIBRARY_PATH="$PWD/$bundle/lib" \
    timeout "$(left 200)" /tmp/kevo-gpu-test/tests/nvidia_backend_test ${KEVO_GPU_TEST_FILTER:+--gtest_filter="$KEVO_GPU_TEST_FILTER"} 2>&1 |
    tee "$out/gpu_tests.txt" | tail -40 | tee -a "$log"
fi

# The reply may carry only a few files: everything else goes in one archive.
(cd "$out" && tar czf /tmp/kevo-all.tgz --exclude=./device_run.txt . &&
  find . -mindepth 1 ! -name device_run.txt -delete && mv /tmp/kevo-all.tgz all.tgz)
