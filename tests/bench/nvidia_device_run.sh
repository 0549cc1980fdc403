#!/usr/bin/env bash
# One batched session on a lent GPU machine (docs/nvidia.md): checks that the
# bundle runs there, runs the nvidia bench (tests/bench/nvidia_h200.sh), the
# `kevo run` searches and the 100-evaluation job (tests/bench/nvidia_search.sh)
# and the GPU tests (KEVO_GPU_TESTS, default nvidia_kernelbench_test,
# nvidia_backend_test and adversarial_test's nvidia cases: whichever the
# caller copied into BUNDLE/tests, in that order; KEVO_GPU_TEST_FILTER is a
# --gtest_filter for all of them), each within what is
# left of KEVO_DEVICE_DEADLINE_S (default 560) seconds. KEVO_SKIP_BENCH=1 and
# KEVO_SKIP_SEARCH=1 skip steps, KEVO_GPU_TESTS_FIRST=1 runs the tests first
# (each binary for at most KEVO_GPU_TEST_LIMIT_S, default 240);
# the other KEVO_* variables go to the steps' scripts. OUT_DIR gets
# device_run.txt (what the steps printed) and all.tgz (every file they wrote).
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
  command -v python3; python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1
} > "$log" 2>&1
cat "$log"

# The bench: coordinator + worker from the bundle, examples and cheats.
# The GPU tests (label gpu), if the caller put the binaries in the bundle.
gpu_tests() {
  mkdir -p /tmp/kevo-gpu-test/bin /tmp/kevo-gpu-test/tests
  # The runners find their libraries through $ORIGIN/../lib.
  ln -sfn "$(cd "$bundle" && pwd)/lib" /tmp/kevo-gpu-test/lib
  cp "$bundle"/libexec/kevo-runner-* /tmp/kevo-gpu-test/bin/
  for t in ${KEVO_GPU_TESTS:-nvidia_kernelbench_test nvidia_backend_test adversarial_test}; do
    [[ -x "$bundle/tests/$t" ]] && (( end - SECONDS > 30 )) || continue
    cp "$bundle/tests/$t" /tmp/kevo-gpu-test/tests/
    # adversarial_test: its nvidia cases (the others need runners the bundle leaves out).
    filter="${KEVO_GPU_TEST_FILTER:-}"
    [[ -z "$filter" && "$t" == adversarial_test ]] && filter='*nvidia*'
    KEVO_SOURCE_DIR="$PWD" KEVO_BIN_DIR=/tmp/kevo-gpu-test/bin LD_LIBRARY_PATH="$PWD/$bundle/lib" \
      timeout "$(left "${KEVO_GPU_TEST_LIMIT_S:-240}")" /tmp/kevo-gpu-test/tests/$t ${filter:+--gtest_filter="$filter"} 2>&1 |
      tee "$out/$t.txt" | grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED|RUN) *\]|Failure|Expected|Which is|Value of" | tail -60 | tee -a "$log"
  done
}
[[ "${KEVO_GPU_TESTS_FIRST:-0}" == 1 ]] && gpu_tests

[[ "${KEVO_SKIP_BENCH:-0}" == 1 ]] || KEVO_PROFILE_CAP="${KEVO_PROFILE_CAP:-1.5}" timeout "$(left 200)" bash tests/bench/nvidia_h200.sh "$bundle" "$out" 2>&1 |
  tee -a "$log" | tail -40

# `kevo run` with the built-in CUDA recipes, and the 100-evaluation job.
[[ "${KEVO_SKIP_SEARCH:-0}" == 1 ]] || timeout "$(left 420)" bash tests/bench/nvidia_search.sh "$bundle" "$out" 2>&1 |
  tee -a "$log" | tail -30

[[ "${KEVO_GPU_TESTS_FIRST:-0}" == 1 ]] || gpu_tests

# The reply may carry only a few files: everything else goes in one archive.
(cd "$out" && tar czf /tmp/kevo-all.tgz --exclude=./device_run.txt . &&
  find . -mindepth 1 ! -name device_run.txt -delete && mv /tmp/kevo-all.tgz all.tgz)
