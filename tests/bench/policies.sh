#!/usr/bin/env bash
# Compares the search policies on the starter tasks: for each (task, policy)
# one embedded `kevo run` with the same budget and seed; prints a table of the
# best speedup, the evaluation at which the final best was first reached, and
# the wall time. Usage:
#   tests/bench/policies.sh [BUILD_DIR] [BUDGET] [TASKS...]
# POLICIES="greedy uct" limits the policies; OUT=DIR reuses a results folder
# (a (task, policy) whose JSON is already there is not run again); RUN_TIMEOUT=S
# is the worker's limit on one candidate run (default 300 s: a loaded host);
# PROFILE_CAP=S the worker's timing cap per candidate (default: the worker's, 3 s);
# CPUS=LIST pins the runs to those cores (taskset -c), so that one policy per
# core group can run side by side on a larger host, all under the same load.
# Not run by ctest: it takes minutes per (task, policy) on 2 cores.
set -euo pipefail
build="${1:-build}"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$build/bin"
budget="${2:-20}"
shift 2 || true
tasks=("$@")
if [[ ${#tasks[@]} -eq 0 ]]; then tasks=(vector_add row_sum softmax bucketize matmul); fi
read -r -a policies <<<"${POLICIES:-greedy uct evolution}"
out="${OUT:-$(mktemp -d "${TMPDIR:-/var/tmp}/kevo-policies-XXXXXX")}"
mkdir -p "$out"
printf "%-12s %-10s %9s %12s %10s %8s\n" task policy best_x first_best_at roofline wall_s
for policy in "${policies[@]}"; do
  for task in "${tasks[@]}"; do
    db="$out/$task-$policy"
    if [[ ! -s "$db.json" ]]; then
      start=$(date +%s)
      ${CPUS:+taskset -c "$CPUS"} "$build/bin/kevo" run "tasks/$task" --platform cpu --budget "$budget" \
        --policy "$policy" --seed 1 --run-timeout "${RUN_TIMEOUT:-300}" ${PROFILE_CAP:+--profile-cap "$PROFILE_CAP"} \
        --db "$db" --out "$db/best.cc" --json >"$db.json" 2>"$db.log" || true
      echo $(( $(date +%s) - start )) >"$db.wall"
    fi
    wall=$(cat "$db.wall" 2>/dev/null || echo 0)
    python3 - "$db.json" "$task" "$policy" "$wall" <<'PY'
import json, sys
path, task, policy, wall = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception:
    print(f"{task:<12} {policy:<10} {'failed':>9}")
    sys.exit(0)
print(f"{task:<12} {policy:<10} {j.get('speedup', 0):9.2f} {j.get('first_best_at', 0):12d} "
      f"{100 * j.get('roofline_fraction', 0):9.1f}% {int(wall):8d}")
PY
  done
done
echo "raw results in $out"
