#!/usr/bin/env bash
# `make test-asan` / `make test-tsan`: the tests built with AddressSanitizer
# (+ UndefinedBehaviorSanitizer) or ThreadSanitizer in a build folder of their
# own (build-asan/, build-tsan/), then run with the options and suppressions
# of tests/sanitizers/ (docs/fuzzing.md, "Sanitizers").
#
# The runners that host candidates (kevo-runner-cpu, -mtia) are the plain
# build's: they run in the sandbox under an address-space limit that a
# sanitizer's shadow memory (terabytes of reserved address space) cannot fit
# in, and they interpose malloc themselves. Everything else -- coordinator,
# worker daemon, CLI, libraries, tests -- is instrumented.
#
#   scripts/sanitize.sh address|thread [CTEST_ARGS ...]
# Default tests: all but the gpu, fuzz (make fuzz runs those under ASan) and
# fault (kill -9 loops, minutes each) labels.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kind="${1:?address or thread}"
shift
case "$kind" in
  address) dir="$root/build-asan"; flags="address,undefined" ;;
  thread) dir="$root/build-tsan"; flags="thread" ;;
  *) echo "sanitize: address or thread, not $kind" >&2; exit 2 ;;
esac
ctest_args=("$@")
(( ${#ctest_args[@]} )) || ctest_args=(-LE "gpu|fuzz|fault")
plain="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEVO_SANITIZE="$flags" >/dev/null || exit 2
nice cmake --build "$dir" -j "$jobs" || exit 2
for runner in kevo-runner-cpu kevo-runner-mtia; do
  if [[ ! -x "$plain/bin/$runner" ]]; then
    echo "sanitize: $plain/bin/$runner is missing: run make build first" >&2
    exit 2
  fi
  cp -f "$plain/bin/$runner" "$dir/bin/$runner"
done

sup="$root/tests/sanitizers"
# Debian's gRPC, protobuf and Abseil are not instrumented: containers they
# fill look overflowed to ASan's container checks.
export ASAN_OPTIONS="detect_container_overflow=0:detect_leaks=1:abort_on_error=0:exitcode=66"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$sup/ubsan.supp"
export TSAN_OPTIONS="suppressions=$sup/tsan.supp:halt_on_error=0:exitcode=66:second_deadlock_stack=1:report_signal_unsafe=0:print_suppressions=0"
. "$root/scripts/sandbox_env.sh" && kevo_sandbox_env "$dir/bin"
cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 1800 "${ctest_args[@]}"
