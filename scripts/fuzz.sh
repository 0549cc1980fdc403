#!/usr/bin/env bash
# `make fuzz`: the fuzz targets (tests/fuzz/) under libFuzzer with
# AddressSanitizer and UndefinedBehaviorSanitizer, built with Debian's clang-14
# in their own build folder, each run for SECONDS (default 600) from the
# committed seed corpus. New inputs go to BUILD_DIR/corpus/<target> (the
# committed corpus is only read); a crash's input to BUILD_DIR/artifacts/.
# Prints one line per target and writes BUILD_DIR/fuzz-summary.md.
#
#   scripts/fuzz.sh [BUILD_DIR] [SECONDS] [TARGET ...]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-build-fuzz}"
seconds="${2:-600}"
shift 2 2>/dev/null || shift $#
targets=("$@")
(( ${#targets[@]} )) || targets=(fuzz_task_text fuzz_kernelbench fuzz_llm_answer fuzz_campaign fuzz_worker_stream)
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: installing clang-14 (libFuzzer)"
  apt-get install -y -q clang-14 >/dev/null || { echo "fuzz: clang-14 is needed (apt-get install clang-14)"; exit 2; }
fi
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEVO_FUZZ=ON >/dev/null || exit 2
nice cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target fuzz_all || exit 2
mkdir -p "$dir/artifacts" "$dir/logs"
# Debian's gRPC, protobuf and Abseil are not instrumented: containers they
# fill look overflowed to ASan's container checks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_container_overflow=0:detect_leaks=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
parallel="${FUZZ_PARALLEL:-$(nproc)}"
# Test data a target also starts from (as tests/fuzz/CMakeLists.txt's EXTRA_CORPUS).
extra() {
  case "$1" in
    fuzz_kernelbench) echo "$root/tests/data/kernelbench $root/tests/data/kernelbench/candidates" ;;
  esac
}
run() {
  local t="$1"
  mkdir -p "$dir/corpus/$t"
  # shellcheck disable=SC2046 # the folders are words
  "$dir/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
    "$dir/corpus/$t" "$root/tests/fuzz/corpus/$t" $(extra "$t") > "$dir/logs/$t.log" 2>&1
  echo "$?" > "$dir/logs/$t.rc"
}
i=0
for t in "${targets[@]}"; do
  run "$t" &
  (( ++i % parallel == 0 )) && wait
done
wait
status=0
{
  echo "| target | seconds | result | runs | coverage (edges) | corpus |"
  echo "|---|---:|---|---:|---:|---:|"
  for t in "${targets[@]}"; do
    rc="$(cat "$dir/logs/$t.rc")"
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/logs/$t.log" | grep -o '[0-9]*$')"
    cov="$(grep -o 'cov: [0-9]*' "$dir/logs/$t.log" | tail -1 | grep -o '[0-9]*')"
    result="clean"
    (( rc != 0 )) && { result="CRASH (rc $rc, see $dir/logs/$t.log)"; status=1; }
    echo "| $t | $seconds | $result | ${runs:-?} | ${cov:-?} | $(ls "$dir/corpus/$t" | wc -l) |"
  done
} | tee "$dir/fuzz-summary.md"
exit $status
