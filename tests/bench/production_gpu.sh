#!/usr/bin/env bash
# kevo's best CUDA kernels against what users run on the GPU (PyTorch eager,
# torch.compile, cuBLAS), at each task's timed_gpu shape, on one GPU host:
#
#   tests/bench/production_gpu.sh [BUNDLE_DIR] [OUT_DIR]
#
# One coordinator and one nvidia worker from the bundle run as a service.
# First every task is searched (`kevo submit --budget B`, all jobs at once,
# the worker timing no production baseline so the searches stay quick: fitness
# over the task's reference); then a second worker, timing the production
# baselines, replaces it and `kevo eval` evaluates each job's best kernel:
# the candidate and every production form interleaved in one process on the
# same inputs (docs/task-format.md, "Production baselines"). Run from the
# repository root. KEVO_GPU_TASKS (default: every task with a CUDA recipe),
# KEVO_GPU_BUDGET (default 8), KEVO_GPU_DEADLINE_S (default 520),
# KEVO_GPU_FITNESS (reference, the default, or production: the searches time
# the production baselines too and pick by the speedup over them, as
# `kevo run` does by default; slower, but a 1% faster kernel is chosen
# side by side instead of through a noisy host-side reference).
# OUT_DIR gets production_gpu.json (one `kevo eval --json` a line, with the
# job's search result), production_gpu.txt (the table) and the logs.
set -uo pipefail
bundle="$(cd "${1:-bundle}" && pwd)"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
out="${2:-${OUT:-/tmp/kevo-production-gpu}}"
mkdir -p "$out"
budget="${KEVO_GPU_BUDGET:-8}"
platform="${KEVO_GPU_PLATFORM:-nvidia}"  # cpu: to try the script on a host without a GPU
end=$((SECONDS + ${KEVO_GPU_DEADLINE_S:-520}))
tasks="${KEVO_GPU_TASKS:-softmax layer_norm matmul_bf16 relu gelu_erf gelu_tanh silu sigmoid tanh elu selu leaky_relu hardtanh hardsigmoid softplus softsign vector_add}"
kevo="$bundle/bin/kevo"
db="$(mktemp -d /tmp/kevo-prod-gpu.XXXXXX)"
addr=127.0.0.1:50161
"$bundle/bin/kevo-coordinator" --db "$db/db" --listen "$addr" > "$out/coordinator.log" 2>&1 &
coord=$!
start_worker() {  # PRODUCTION(on|off)
  "$bundle/bin/kevo-worker" --coordinator "$addr" --platform "$platform" --work-dir "$db/work" \
    --profile-cap 1 --production "$1" >> "$out/worker.log" 2>&1 &
  worker=$!
  for _ in $(seq 120); do
    "$kevo" workers --coordinator "$addr" 2>/dev/null | grep -q "$platform" && return 0
    sleep 1
  done
  echo "the nvidia worker did not connect" >&2
  return 1
}
fitness="${KEVO_GPU_FITNESS:-reference}"
fitness_flag=(--fitness-vs-reference)
if [[ "$fitness" == production ]]; then start_worker on || exit 1; fitness_flag=(); else start_worker off || exit 1; fi
declare -A job=()
for t in $tasks; do
  job[$t]="$("$kevo" submit "tasks/$t" --platform "$platform" --budget "$budget" "${fitness_flag[@]}" \
              --coordinator "$addr" 2>> "$out/search.log" | tail -1)"
  echo "submitted $t: ${job[$t]}" | tee -a "$out/search.log"
done
ext=cu; [[ "$platform" == cpu ]] && ext=cc
mkdir -p "$db/best"
for t in $tasks; do
  (( end - SECONDS > 60 )) || { echo "deadline: $t not waited for" | tee -a "$out/search.log"; continue; }
  timeout $((end - SECONDS - 60)) "$kevo" watch "${job[$t]}" --coordinator "$addr" >> "$out/search.log" 2>&1
  "$kevo" best "${job[$t]}" --coordinator "$addr" -o "$db/best/$t.$ext" >> "$out/search.log" 2>&1 ||
    echo "$t: no best kernel" | tee -a "$out/search.log"
done
kill "$worker"; wait "$worker" 2>/dev/null
start_worker on || exit 1
: > "$out/production_gpu.json"
for t in $tasks; do
  [[ -f "$db/best/$t.$ext" ]] || continue
  (( end - SECONDS > 20 )) || { echo "deadline: $t not evaluated" | tee -a "$out/search.log"; continue; }
  timeout $((end - SECONDS)) "$kevo" eval "tasks/$t" "$db/best/$t.$ext" --platform "$platform" --coordinator "$addr" --json \
    2>> "$out/eval.log" | python3 -c 'import json,sys; j=json.load(sys.stdin); j["task_dir"]=sys.argv[1]; print(json.dumps(j))' "$t" \
    >> "$out/production_gpu.json"
done
kill "$worker" "$coord" 2>/dev/null
python3 - "$out/production_gpu.json" > "$out/production_gpu.txt" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def us(s): return f"{s*1e6:.1f}" if s else "-"
print(f"{'task':12} {'kevo us':>9} {'eager us':>9} {'compile us':>10} {'cuBLAS us':>9} {'vs eager':>8} {'vs compile':>10} {'vs better':>9} {'vs cuBLAS':>9} {'% copy bw':>9} {'ref us':>9} {'vs ref':>8}")
logs = []
for r in rows:
    forms = {p["name"]: p for p in r.get("production", [])}
    def t(n): p = forms.get(n); return p["time_s"] if p and not p["error"] else 0
    def sp(n): p = forms.get(n); return p["speedup"] if p and not p["error"] else 0
    better = [sp(n) for n in ("torch_eager", "torch_compile") if sp(n) > 0]
    vb = min(better) if better else 0
    if vb: logs.append(math.log(vb))
    cand = next((p["candidate_time_s"] for p in r.get("production", []) if p["candidate_time_s"]), 0)
    bw = r.get("profile", {}).get("bandwidth_fraction", 0)
    print(f"{r['task_dir']:12} {us(cand):>9} {us(t('torch_eager')):>9} {us(t('torch_compile')):>10} {us(t('vendor')):>9} "
          f"{sp('torch_eager'):>7.2f}x {sp('torch_compile'):>9.2f}x {vb:>8.2f}x {sp('vendor'):>8.2f}x {100*bw:>8.0f}% "
          f"{us(r.get('baseline_time_s', 0)):>9} {r.get('speedup', 0):>7.2f}x   {r['status']}")
    for p in r.get("production", []):
        if p["error"]: print(f"    {p['name']}: {p['error'][:160]}")
if logs: print(f"geomean vs the better of eager and torch.compile: {math.exp(sum(logs)/len(logs)):.3f}x over {len(logs)} tasks")
PY
cat "$out/production_gpu.txt"
rm -rf "$db"
