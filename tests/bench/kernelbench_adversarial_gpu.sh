#!/usr/bin/env bash
# The adversarial KernelBench candidates of tests/data/kernelbench/adversarial/
# (the set kernelbench_adversarial_test judges on the cpu worker in
# `make test`) and the native memoizing vector_add candidate, judged on a GPU host by
# one coordinator and one worker of the bundle:
#
#   tests/bench/kernelbench_adversarial_gpu.sh [BUNDLE_DIR] [OUT_DIR]
#
# Run from the repository root. A candidate's header says what it must get
# (`# expect: rejected | honest | slow`, see kernelbench_adversarial_test.cc);
# on the GPU the bar is the same: a `rejected` one any status but OK, a
# `slow` one OK and slower than eager (its trick bought nothing), an `honest`
# one OK. A `# expect on a GPU: ...` line replaces `# expect:` there, for a
# trick that plays out differently on a GPU (its header says why). OUT_DIR
# gets adversarial_gpu.jsonl (one `kevo eval --json` a line),
# adversarial_gpu.md (the table for docs/reliability.md) and the logs.
# KEVO_GPU_PLATFORM (default nvidia; cpu tries the script on a host without a
# GPU), KEVO_DEADLINE_S (default 560).
set -uo pipefail
bundle="$(cd "${1:-bundle}" && pwd)"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
out="${2:-${OUT:-/tmp/kevo-adversarial-gpu}}"
mkdir -p "$out"
platform="${KEVO_GPU_PLATFORM:-nvidia}"
end=$((SECONDS + ${KEVO_DEADLINE_S:-560}))
kevo="$bundle/bin/kevo"
db="$(mktemp -d /tmp/kevo-adv-gpu.XXXXXX)"
addr=127.0.0.1:50171
"$bundle/bin/kevo-coordinator" --db "$db/db" --listen "$addr" > "$out/coordinator.log" 2>&1 &
coord=$!
"$bundle/bin/kevo-worker" --coordinator "$addr" --platform "$platform" --work-dir "$db/work" \
  --profile-cap 1 > "$out/worker.log" 2>&1 &
worker=$!
trap 'kill $worker $coord 2>/dev/null; rm -rf "$db"' EXIT
for _ in $(seq 120); do
  "$kevo" workers --coordinator "$addr" 2>/dev/null | grep -q "$platform" && break
  sleep 1
done
"$kevo" workers --coordinator "$addr" > "$out/workers.txt" 2>&1
# name problem candidate expect
cases=()
for f in tests/data/kernelbench/adversarial/*.py; do
  problem="$(sed -n 's/^# problem: //p' "$f" | head -1)"
  expect="$(sed -n '1s/^# expect: //p' "$f")"
  # A candidate whose trick plays out differently on a GPU says so.
  on_gpu="$(sed -n 's/^# expect on a GPU: //p' "$f" | head -1)"
  [[ "$platform" != cpu && -n "$on_gpu" ]] && expect="$on_gpu"
  cases+=("$(basename "$f" .py) tests/data/kernelbench/${problem:-relu.py} $f $expect")
done
ext=cu; [[ "$platform" == cpu ]] && ext=cc
cases+=("vector_add_memoize tasks/vector_add tasks/vector_add/examples/memoize.$ext rejected")
: > "$out/adversarial_gpu.jsonl"
for c in "${cases[@]}"; do
  read -r name problem file expect <<< "$c"
  (( end - SECONDS > 30 )) || { echo "deadline: $name not evaluated" | tee -a "$out/eval.log"; continue; }
  t0=$SECONDS
  timeout $((end - SECONDS)) "$kevo" eval "$problem" "$file" --platform "$platform" --coordinator "$addr" --json \
    2>> "$out/eval.log" > "$db/one.json"
  python3 - "$db/one.json" "$name" "$expect" $((SECONDS - t0)) >> "$out/adversarial_gpu.jsonl" <<'PY'
import json, sys
path, name, expect, wall = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception as e:
    j = {"status": "NO_RESULT", "diagnosis": f"kevo eval gave no JSON: {e}"}
print(json.dumps({"name": name, "expect": expect, "wall_s": int(wall), "status": j.get("status", ""),
                  "speedup": j.get("speedup", 0), "message": j.get("diagnostics", {}).get("message", j.get("diagnosis", "")),
                  "result": j}))
PY
  tail -1 "$out/adversarial_gpu.jsonl" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["name"], r["expect"], r["status"], round(r["speedup"],3), r["wall_s"], "s", r["message"][:120])'
done
python3 - "$out/adversarial_gpu.jsonl" "$platform" > "$out/adversarial_gpu.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def held(r):
    ok = r["status"] == "OK"
    if r["expect"] == "rejected": return not ok
    if r["expect"] == "slow": return ok and 0 < r["speedup"] < 1
    return ok
print(f"| candidate ({sys.argv[2]}) | must get | status | speedup vs eager | held | message |")
print("|---|---|---|---:|---|---|")
for r in rows:
    msg = r["message"].replace("|", "/").replace("\n", " ")[:140]
    print(f"| `{r['name']}` | {r['expect']} | {r['status']} | {r['speedup']:.3g}x | {'yes' if held(r) else '**no**'} | {msg} |")
n = sum(held(r) for r in rows)
print(f"\n{n} of {len(rows)} held; accepted though they must not be: "
      + (", ".join(r["name"] for r in rows if r["expect"] == "rejected" and r["status"] == "OK") or "none"))
PY
cat "$out/adversarial_gpu.md"
