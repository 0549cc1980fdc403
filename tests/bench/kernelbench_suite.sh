#!/usr/bin/env bash
# `kevo suite` over real KernelBench problems at their shipped sizes
# (issue 23's must-show 1): the first L1 problems of level 1 and the first L2
# of level 2 by number, copied unmodified from a KernelBench checkout into one
# folder, searched with the built-in proposer on one platform. Resumable across
# machines: STATE_DIR holds the suite's results.json and RocksDB; run it again
# with the same STATE_DIR (carried back from a previous session) and the
# finished problems are skipped, the interrupted job continued.
#
#   tests/bench/kernelbench_suite.sh BUNDLE_DIR KERNELBENCH_DIR STATE_DIR
#
# KERNELBENCH_DIR holds level1/ and level2/. The environment: KEVO_PLATFORM
# (nvidia), KEVO_KB_L1 (30), KEVO_KB_L2 (10), KEVO_KB_L1_PICK (problem numbers
# of level 1 to take instead of the first KEVO_KB_L1, e.g. "19 23 40"),
# KEVO_SUITE_BUDGET (3), KEVO_SUITE_FLAGS (more flags for kevo suite, e.g.
# "--jobs 2 --no-skills"),
# KEVO_PROFILE_CAP (1), KEVO_SUITE_DEADLINE_S (wall limit of this run, 540;
# the suite is stopped with SIGINT at the limit and resumes next time).
set -uo pipefail
bundle="${1:?bundle}"
kb="${2:?KernelBench folder}"
state="${3:?state folder}"
platform="${KEVO_PLATFORM:-nvidia}"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
problems="$state/problems"
mkdir -p "$problems"
# A problem file copied once (a resumed run keeps what it has).
take() { [[ -e "$2" ]] || cp "$1" "$2"; }
for level in "level1:${KEVO_KB_L1:-30}" "level2:${KEVO_KB_L2:-10}"; do
  dir="${level%%:*}"
  if [[ "$dir" == level1 && -n "${KEVO_KB_L1_PICK:-}" ]]; then
    for n in $KEVO_KB_L1_PICK; do
      for f in "$kb/$dir/${n}_"*.py; do take "$f" "$problems/${dir}_$(basename "$f")"; done
    done
    continue
  fi
  (( ${level##*:} > 0 )) || continue
  (cd "$kb/$dir" && ls | sort -n | head -"${level##*:}") | while read -r f; do
    take "$kb/$dir/$f" "$problems/${dir}_$f"
  done
done
echo "$(ls "$problems" | wc -l) problems in $problems"
timeout -s INT "${KEVO_SUITE_DEADLINE_S:-540}" "$bundle/bin/kevo" suite "$problems" --platform "$platform" \
  --budget "${KEVO_SUITE_BUDGET:-3}" --profile-cap "${KEVO_PROFILE_CAP:-1}" \
  --out "$state/results.json" --db "$state/db" --markdown ${KEVO_SUITE_FLAGS:-}
rc=$?
echo "kevo suite exit status $rc"
# Every job's search tree (genome, status, time of each node) beside the results.
bash "$(dirname "$0")/suite_nodes.sh" "$bundle/bin/kevo" "$state/results.json" "$state/db" > "$state/nodes.txt"
exit $rc
