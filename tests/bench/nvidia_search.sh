#!/usr/bin/env bash
# `kevo run --platform nvidia` (embedded: coordinator + nvidia worker from a
# bundle) with the built-in CUDA recipes on a GPU host, then one
# 100-evaluation job whose GPU timing-slot utilisation `kevo run` reports.
# Run from the repository root (it reads tasks/):
#
#   tests/bench/nvidia_search.sh [BUNDLE_DIR] [OUT_DIR]
#
# KEVO_SEARCH_TASKS (default: softmax layer_norm gelu_erf matmul_bf16) picks
# the searched tasks (folder names under tasks/, or KernelBench problems'
# paths such as tests/data/kernelbench/relu.py); KEVO_UTIL_BUDGET=0 skips the long job.
# OUT_DIR gets search.json (every `kevo run --json` result, one a line),
# search.txt (a table) and search_logs.txt (stderr and the workers' logs). KEVO_SEARCH_BUDGET (default 10)
# and KEVO_UTIL_BUDGET (default 100) set the budgets; KEVO_UTIL_TASK the
# task of the long job (default gelu_erf).
set -uo pipefail
bundle="${1:-bundle}"
out="${2:-${OUT:-/tmp/kevo-nvidia-search}}"
mkdir -p "$out"
bundle="$(cd "$bundle" && pwd)"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
budget="${KEVO_SEARCH_BUDGET:-10}"
util_budget="${KEVO_UTIL_BUDGET:-100}"
util_task="${KEVO_UTIL_TASK:-gelu_erf}"
: > "$out/search.json"
logs="$out/search_logs.txt"
: > "$logs"

run() {  # TASK BUDGET CAP
  local task="$1" b="$2" cap="$3" db
  db="$(mktemp -d /tmp/kevo-search.XXXXXX)"
  # A task folder's name, or a KernelBench problem's path (ends in .py).
  local path="tasks/$task"
  [[ "$task" == *.py ]] && path="$task"
  echo "== kevo run $path --platform nvidia --budget $b --profile-cap $cap" | tee -a "$logs"
  local start end json
  start=$(date +%s.%N)
  json="$(timeout 420 "$bundle/bin/kevo" run "$path" --platform nvidia --budget "$b" \
            --profile-cap "$cap" --db "$db" --out "$db/best.cu" --json 2>> "$logs")"
  end=$(date +%s.%N)
  [[ -n "$json" ]] || json='{"status": "NO_RESULT"}'
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["wall_s"]=round(float(sys.argv[3])-float(sys.argv[2]),1); print(json.dumps(j))' \
    "$json" "$start" "$end" >> "$out/search.json"
  { echo "-- worker log"; tail -30 "$db/worker.log"; } >> "$logs" 2>&1
  rm -rf "$db"
}

for task in ${KEVO_SEARCH_TASKS-softmax layer_norm gelu_erf matmul_bf16}; do
  run "$task" "$budget" 1
done
[[ "$util_budget" -gt 0 ]] && run "$util_task" "$util_budget" 1

python3 - "$out/search.json" > "$out/search.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hdr = f"{'task':12} {'evals':>5} {'by status':34} {'best us':>9} {'baseline':>14} {'base us':>9} {'speedup':>8} {'GB/s':>6} {'% bw':>5} {'TFLOP/s':>8} {'GPU use':>7} {'wall s':>7}  best genome"
print(hdr)
print("-" * len(hdr))
for r in rows:
    e = r.get("best_evaluation", {})
    p = e.get("profile", {})
    kind = e.get("baseline_kind", "")
    by = ",".join(f"{k} {v}" for k, v in sorted(r.get("evaluations", {}).items()))
    print(f"{r.get('task', '?'):12} {r.get('evaluations_total', 0):5d} {by:34} {r.get('best_time_s', 0)*1e6:9.1f} "
          f"{kind:>14} {r.get('baseline_time_s', 0)*1e6:9.1f} {r.get('speedup', 0):8.2f} "
          f"{p.get('achieved_bandwidth_gbs', 0):6.0f} {100*p.get('bandwidth_fraction', 0):5.0f} "
          f"{p.get('achieved_gflops', 0)/1000:8.1f} {100*r.get('device_utilisation', 0):6.1f}% {r.get('wall_s', 0):7.1f}  "
          f"{r.get('best_genome', '')}")
PY
cat "$out/search.txt"
