#!/usr/bin/env bash
# One batched session on a lent GPU machine (docs/nvidia.md): checks that the
# bundle runs there, runs the nvidia bench (tests/bench/nvidia_h200.sh) and the
# GPU tests (nvidia_backend_test, copied into BUNDLE/tests by the caller).
# Everything goes to OUT_DIR (at most 7 files).
#
#   tests/bench/nvidia_device_run.sh [BUNDLE_DIR] [OUT_DIR]
set -uo pipefail
bundle="${1:-bundle}"
out="${2:-${OUT:-/tmp/kevo-nvidia-run}}"
mkdir -p "$out"
log="$out/device_run.txt"
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
timeout 330 bash tests/bench/nvidia_h200.sh "$bundle" "$out" 2>&1 | tee -a "$log" | tail -40

# The GPU tests (label gpu), if the caller put the binary in the bundle.
if [[ -x "$bundle/tests/nvidia_backend_test" ]]; then
  mkdir -p /tmp/kevo-gpu-test/bin /tmp/kevo-gpu-test/tests
  # The runners find their libraries through $ORIGIN/../lib.
  ln -sfn "$(cd "$bundle" && pwd)/lib" /tmp/kevo-gpu-test/lib
  cp "$bundle"/libexec/kevo-runner-* /tmp/kevo-gpu-test/bin/
  cp "$bundle/tests/nvidia_backend_test" /tmp/kevo-gpu-test/tests/
  KEVO_SOURCE_DIR="$PWD" KEVO_BIN_DIR=/tmp/kevo-gpu-test/bin LD_LIBRARY_PATH="$PWD/$bundle/lib" \
    timeout 300 /tmp/kevo-gpu-test/tests/nvidia_backend_test 2>&1 | tee "$out/gpu_tests.txt" | tail -30
fi
