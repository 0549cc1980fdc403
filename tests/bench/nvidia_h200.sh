#!/usr/bin/env bash
# The NVIDIA worker end to end on a GPU host, from a bundle (scripts/bundle.sh):
# starts a coordinator and `kevo-worker --platform nvidia`, evaluates the CUDA
# examples (fast.cu for softmax, vector_add, matmul) and the cheat candidates
# through `kevo eval --coordinator` (the last, vector_add/fast.cu again, shows
# the worker serving candidates after all the cheats), then the KernelBench test
# problems (tests/data/kernelbench: plain PyTorch, load_inline CUDA and Triton
# ModelNew candidates, timed against PyTorch eager and torch.compile), and prints
# a table. Run from the repository root (it reads tasks/ and tests/data/):
#
#   tests/bench/nvidia_h200.sh [BUNDLE_DIR] [OUT_DIR]
#
# KEVO_BENCH_CASES: all (default), cuda (the .cu examples) or kernelbench.
#
# OUT_DIR (default $OUT, else /tmp/kevo-nvidia-bench) gets at most 6 files:
# table.txt, results.json (every evaluation as `kevo eval --json` prints it),
# probe.json, logs.txt (coordinator, worker, nvidia-smi), metrics.txt.
set -uo pipefail

bundle="${1:-bundle}"
out="${2:-${OUT:-/tmp/kevo-nvidia-bench}}"
mkdir -p "$out"
bundle="$(cd "$bundle" && pwd)"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
work="$(mktemp -d /tmp/kevo-nvidia-bench.XXXXXX)"
logs="$out/logs.txt"
: > "$logs"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

{
  echo "== host"; uname -a; (. /etc/os-release && echo "$PRETTY_NAME"); nproc
  echo "== nvidia-smi (before)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1
  echo "== nvcc"; (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>&1; /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
  echo "== bundle"; head -3 "$bundle/MANIFEST"
} >> "$logs" 2>&1

echo "== probe" | tee -a "$logs"
"$bundle/libexec/kevo-runner-cuda" probe --measure > "$out/probe.json" 2>> "$logs"
echo "probe exit $?" | tee -a "$logs"
cat "$out/probe.json"

# Coordinator on a free port; its first stdout line says which.
"$bundle/bin/kevo-coordinator" --db "$work/db" --listen 127.0.0.1:0 > "$work/coord.out" 2> "$work/coord.log" &
pids+=($!)
addr=""
for _ in $(seq 1 100); do
  addr="$(sed -n 's/^listening //p' "$work/coord.out" | head -1)"
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "coordinator did not start"; cat "$work/coord.log"; exit 1; }
echo "coordinator at $addr"

"$bundle/bin/kevo-worker" --platform nvidia --coordinator "$addr" --work-dir "$work/worker" \
  --metrics 127.0.0.1:0 --profile-cap "${KEVO_PROFILE_CAP:-2}" > "$work/worker.out" 2> "$work/worker.log" &
pids+=($!)
metrics_port=""
for _ in $(seq 1 300); do
  metrics_port="$(sed -n 's/^metrics //p' "$work/worker.out" | head -1)"
  [[ -n "$metrics_port" ]] && break
  if ! kill -0 "${pids[1]}" 2>/dev/null; then echo "worker exited:"; cat "$work/worker.log"; exit 1; fi
  sleep 0.2
done
echo "worker metrics on port $metrics_port"
# What the worker offers (KernelBench: which Python and torch, or why not).
"$bundle/bin/kevo" workers --coordinator "$addr" 2>&1 | tee -a "$logs"

# task file expected-status
cases=(
  "softmax fast.cu OK"
  "vector_add fast.cu OK"
  "matmul fast.cu OK"
  "vector_add side_stream.cu UNFINISHED_ON_RETURN"
  "vector_add no_write.cu NONFINITE"
  "vector_add zero_inputs.cu INPUT_MODIFIED"
  "vector_add oob_write.cu RUNTIME_ERROR"
  "vector_add memoize.cu WRONG_ANSWER"
  "vector_add cublas.cu SANDBOX_VIOLATION"
  "vector_add fast.cu OK"
)
# KernelBench problems: problem.py candidate.py expected-status
kb_cases=(
  "relu.py relu_new.py OK"
  "relu.py relu_cuda.py OK"
  "relu.py relu_triton.py OK"
  "matmul.py matmul_new.py OK"
  "relu.py relu_wrong.py WRONG_ANSWER"
  "relu.py relu_inplace.py INPUT_MODIFIED"
)
case "${KEVO_BENCH_CASES:-all}" in
  cuda) kb_cases=() ;;
  kernelbench) cases=() ;;
esac
for c in "${kb_cases[@]}"; do cases+=("kb:$c"); done
echo "[" > "$out/results.json"
first=1
for c in "${cases[@]}"; do
  read -r task file expect <<< "$c"
  echo "== $task/$file (expect $expect)"
  if [[ "$task" == kb:* ]]; then
    task="${task#kb:}"
    paths=("tests/data/kernelbench/$task" "tests/data/kernelbench/candidates/$file" --platform nvidia)
  else
    paths=("tasks/$task" "tasks/$task/examples/$file")
  fi
  start=$(date +%s.%N)
  json="$("$bundle/bin/kevo" eval "${paths[@]}" --coordinator "$addr" --json 2> "$work/eval.err")"
  rc=$?
  cat "$work/eval.err"
  end=$(date +%s.%N)
  if [[ -z "$json" ]]; then json='{"status": "NO_RESULT"}'; fi
  [[ $first == 1 ]] || echo "," >> "$out/results.json"
  first=0
  printf '{"task": "%s", "file": "%s", "expect": "%s", "exit": %d, "wall_s": %s, "evaluation": %s}\n' \
    "$task" "$file" "$expect" "$rc" "$(python3 -c "print(round($end - $start, 2))")" "$json" >> "$out/results.json"
done
echo "]" >> "$out/results.json"

python3 - "$metrics_port" > "$out/metrics.txt" 2>&1 <<'EOF'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
print("\n".join(l for l in text.splitlines() if l.startswith("kevo_worker")))
EOF

python3 - "$out/results.json" "$out/probe.json" > "$out/table.txt" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
probe = json.load(open(sys.argv[2]))
dev = probe["devices"][0]
print(f"GPU: {dev['name']} (cc {dev['compute_capability']}, {dev['sm_count']} SMs, L2 {dev['l2_bytes']>>20} MiB), "
      f"driver CUDA {probe['driver_version']}, runtime {probe['runtime_version']}; measured copy "
      f"{dev.get('copy_bandwidth_gbs', 0):.0f} GB/s, FP32 FMA {dev.get('fp32_gflops', 0)/1000:.1f} TFLOP/s")
print()
hdr = f"{'candidate':28} {'expected':18} {'status':18} {'time us':>9} {'baseline':>16} {'base us':>9} {'speedup':>8} {'GB/s':>7} {'% bw':>5} {'esc':>4}"
print(hdr)
print("-" * len(hdr))
ok = True
for r in rows:
    e = r["evaluation"]
    p = e.get("profile", {})
    status = e.get("status", "?")
    ok &= status == r["expect"]
    t = e.get("time_s", 0) * 1e6
    b = e.get("baseline_time_s", 0) * 1e6
    kind = e.get("baseline_kind", "")
    print(f"{r['task'] + '/' + r['file']:28} {r['expect']:18} {status:18} "
          f"{t:9.1f} {kind:>16} {b:9.1f} {e.get('speedup', 0):8.2f} "
          f"{p.get('achieved_bandwidth_gbs', 0):7.0f} {100 * p.get('bandwidth_fraction', 0):5.0f} "
          f"{int(p.get('escaped_samples', 0)):4d}")
    if status != "OK":
        print(f"    {e.get('diagnostics', {}).get('message', '')[:200]}")
    elif kind == "pytorch_eager":
        n = e.get("notes", {})
        tc = p.get("torch_compile_median_s", 0) * 1e6
        print(f"    torch.compile {tc:.1f} us (candidate {p.get('speedup_vs_torch_compile', 0):.2f}x over it)" if tc
              else f"    {n.get('baseline_torch_compile', '')}")
print()
print("all statuses as expected" if ok else "SOME STATUSES DIFFER FROM THE EXPECTED ONES")
EOF
cat "$out/table.txt"
cat "$out/metrics.txt"
{
  echo "== coordinator"; cat "$work/coord.log"
  echo "== worker"; cat "$work/worker.log"
  echo "== nvidia-smi (after)"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1
} >> "$logs"
