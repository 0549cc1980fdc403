#!/usr/bin/env bash
# The KernelBench judge (kevo-runner-kernelbench evaluate) on real problems at
# their shipped sizes, on one GPU, without the service around it: for each
# problem, a candidate that is the problem's own Model (ModelNew = Model) is
# judged against eager and torch.compile, so every figure is the judge's cost
# and overhead on that problem, and the speedup should read about 1.0x.
# Prints one line per problem and writes OUT_DIR/judge.jsonl (one result per
# problem) and OUT_DIR/judge.md (the table for docs/benchmarks.md).
#
#   tests/bench/kernelbench_judge.sh KERNELBENCH_DIR OUT_DIR [DEVICE] [PROBLEM ...]
#
# KERNELBENCH_DIR holds level1/, level2/ (an unmodified KernelBench checkout's
# KernelBench/ folder). PROBLEMs are paths under it (level1/19_ReLU.py); none:
# the first 30 of level 1 and the first 10 of level 2 by number. The
# environment: KEVO_PYTHON (default python3), KEVO_TIME_CAP_S (1),
# KEVO_BASELINES (eager,compile), KEVO_JUDGE_LIMIT_S (per problem, 240),
# KEVO_DEADLINE_S (all problems, 540).
set -uo pipefail
kb="${1:?KernelBench folder}"
out="${2:?output folder}"
device="${3:-cuda}"
shift 3 2>/dev/null || shift $#
python="${KEVO_PYTHON:-python3}"
runner="$(cd "$(dirname "$0")/../.." && pwd)/worker/runner/kernelbench_runner.py"
mkdir -p "$out/runs"
end=$((SECONDS + ${KEVO_DEADLINE_S:-540}))
problems=("$@")
if (( ${#problems[@]} == 0 )); then
  for level in level1:30 level2:10; do
    dir="${level%%:*}"
    mapfile -t found < <(cd "$kb" && ls "$dir" | sort -n | head -"${level##*:}")
    for f in "${found[@]}"; do problems+=("$dir/$f"); done
  done
fi
: > "$out/judge.jsonl"
for p in "${problems[@]}"; do
  (( end - SECONDS > 20 )) || { echo "deadline: stopped before $p"; break; }
  name="$(echo "$p" | tr '/' '_' | sed 's/\.py$//')"
  w="$out/runs/$name"
  mkdir -p "$w"
  cp "$kb/$p" "$w/problem.py"
  { cat "$kb/$p"; printf '\n\nModelNew = Model\n'; } > "$w/candidate.py"
  limit=${KEVO_JUDGE_LIMIT_S:-240}
  (( end - SECONDS < limit )) && limit=$((end - SECONDS))
  t0=$(date +%s.%N)
  (cd "$w" && timeout "$limit" "$python" "$runner" evaluate --problem=problem.py --candidate=candidate.py \
      --device="$device" --result="$w/result.json" --phase="$w/phase" \
      --tolerances="F32=1e-4,1e-4;F64=1e-9,1e-9;F16=1e-2,1e-2;BF16=1e-2,1e-2;I32=0,0;I64=0,0;U8=0,0;I8=0,0" \
      --time_cap_s="${KEVO_TIME_CAP_S:-1}" --baselines="${KEVO_BASELINES:-eager,compile}" \
      > "$w/stdout.txt" 2> "$w/stderr.txt")
  rc=$?
  t1=$(date +%s.%N)
  "$python" - "$p" "$w" "$rc" "$t0" "$t1" >> "$out/judge.jsonl" <<'EOF'
import json, sys
p, w, rc, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
try:
    r = json.load(open(w + "/result.json"))
except Exception as e:  # noqa: BLE001
    r = {"status": "NO_RESULT", "message": f"rc {rc}: " + open(w + "/stderr.txt").read()[-300:]}
s = r.get("series", {})
row = {"problem": p, "rc": rc, "wall_s": t1 - t0, "status": r.get("status"), "stage": r.get("stage"),
       "message": (r.get("message") or "")[:300], "cases": [c.get("status") for c in r.get("cases", [])],
       "medians": {k: v.get("median_s") for k, v in s.items()}, "spreads": {k: v.get("spread") for k, v in s.items()},
       "samples": len(s.get("candidate", {}).get("samples_s", [])), "ipc_overhead_s": r.get("ipc_overhead_s"),
       "timed_calls_checked": r.get("timed_calls_checked"), "fresh_inputs": r.get("fresh_inputs"),
       "input_generation_s": r.get("input_generation_s"), "working_set_bytes": r.get("working_set_bytes"),
       "torch_compile_warmup_s": r.get("torch_compile_warmup_s"), "notes": r.get("notes"), "seconds": r.get("seconds"),
       "stage_seconds": r.get("stage_seconds"), "device_copy_gbs": r.get("device_copy_gbs")}
print(json.dumps(row))
m = row["medians"]
print(f"{p}: {row['status']} {row['cases']} wall {row['wall_s']:.1f}s cand {m.get('candidate')} eager {m.get('eager')} "
      f"compile {m.get('torch_compile')} ipc {row['ipc_overhead_s']} {row['message'][:160]}", file=sys.stderr)
EOF
done
"$python" - "$out/judge.jsonl" > "$out/judge.md" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| problem | status | wall s | eager ms | torch.compile ms | ModelNew=Model ms | vs eager | IPC us | inputs |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    m = r["medians"]
    ok = r["status"] == "OK" and all(c == "OK" for c in r["cases"]) and m.get("candidate")
    ratio = f"{m['eager'] / m['candidate']:.2f}x" if ok and m.get("eager") else ""
    f = lambda v: f"{v * 1e3:.3f}" if v else ""
    print(f"| {r['problem']} | {r['status'] if ok or r['status'] != 'OK' else 'case ' + ','.join(r['cases'])} "
          f"{'' if ok else r['message'][:80]} | {r['wall_s']:.1f} | {f(m.get('eager'))} | {f(m.get('torch_compile'))} | "
          f"{f(m.get('candidate'))} | {ratio} | {(r['ipc_overhead_s'] or 0) * 1e6:.0f} | {r['fresh_inputs'] or ''} |")
EOF
cat "$out/judge.md"
