#!/usr/bin/env bash
# `kevo suite` over every task with a CUDA recipe, at its timed_gpu shape, on
# one GPU host: each job searched against the production baselines (PyTorch
# eager, torch.compile, cuBLAS where the task names it), picked side by side
# as `kevo run` does by default (the production-baseline issue's must-show 2).
# Resumable across machines: STATE_DIR holds the suite's results.json and
# RocksDB; run it again with the same STATE_DIR (carried back from an earlier
# call) and the finished tasks are skipped, an interrupted job continued.
#
#   tests/bench/production_gpu_suite.sh BUNDLE_DIR STATE_DIR
#
# Run from the repository root. The environment: KEVO_PLATFORM (nvidia; cpu
# to try the script on a host without a GPU), KEVO_GPU_TASKS (default:
# every task with a CUDA recipe), KEVO_SUITE_BUDGET (4), KEVO_SUITE_JOBS (3: jobs
# at a time, so one compiles while another times), KEVO_SUITE_FLAGS
# (more flags for kevo suite), KEVO_PROFILE_CAP (1), KEVO_SUITE_DEADLINE_S
# (wall limit of this run, 540; the suite is stopped with SIGINT at the limit
# and resumes next time). STATE_DIR/production_gpu.md gets the table: each
# task's best kernel against every production form, and the geomean over the
# better of eager and torch.compile. Each form's column is from the best
# kernel's evaluation; "kept" is the job's figure over its yardstick (the
# fastest form) after the best was re-timed (the lower of the two stands).
set -uo pipefail
bundle="$(cd "${1:?bundle}" && pwd)"
state="${2:?state folder}"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$bundle/bin"
tasks="${KEVO_GPU_TASKS:-softmax log_softmax layer_norm row_sum row_max row_mean matmul_bf16 relu leaky_relu \
gelu_erf gelu_tanh silu sigmoid tanh elu selu hardtanh hardsigmoid softplus softsign vector_add mse_loss cross_entropy}"
mkdir -p "$state/tasks"
for t in $tasks; do
  [[ -d "$state/tasks/$t" ]] || cp -r "tasks/$t" "$state/tasks/$t"
done
echo "$(ls "$state/tasks" | wc -l) tasks in $state/tasks"
timeout -s INT "${KEVO_SUITE_DEADLINE_S:-540}" "$bundle/bin/kevo" suite "$state/tasks" --platform "${KEVO_PLATFORM:-nvidia}" \
  --budget "${KEVO_SUITE_BUDGET:-4}" --profile-cap "${KEVO_PROFILE_CAP:-1}" --jobs "${KEVO_SUITE_JOBS:-3}" \
  --out "$state/results.json" --db "$state/db" --markdown ${KEVO_SUITE_FLAGS:-}
rc=$?
echo "kevo suite exit status $rc"
bash "$(dirname "$0")/suite_nodes.sh" "$bundle/bin/kevo" "$state/results.json" "$state/db" > "$state/nodes.txt"
python3 - "$state/results.json" > "$state/production_gpu.md" <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))["tasks"]
def us(s): return f"{s*1e6:.1f} us" if s else "-"
def x(v): return f"{v:.2f}x" if v else "-"
print("| task | kevo best | PyTorch eager | torch.compile | cuBLAS | vs eager | vs compile | **vs better** | vs cuBLAS | kept (yardstick) | % roofline | evals | best genome |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
logs = []
for r in sorted(rows, key=lambda r: r["task"]):
    forms = r.get("production_times_s", {})
    eager, compiled, vendor = forms.get("torch_eager", 0), forms.get("torch_compile", 0), forms.get("vendor", 0)
    # Each form's speedup over the candidate's calls interleaved with it, on
    # the same inputs; the candidate's time is the yardstick form's.
    sp = r.get("production_speedups", {}) if r.get("correct") else {}
    ok = r.get("correct") and r.get("speedup_vs_production", 0) > 0
    cand = r["production_time_s"] / r["speedup_vs_production"] if ok else 0
    vs = lambda name: sp.get(name, 0)
    better = min([v for v in (vs("torch_eager"), vs("torch_compile")) if v], default=0)
    if better: logs.append(math.log(better))
    print(f"| {r['task']} | {us(cand) if ok else r.get('status', '?')} | {us(eager)} | {us(compiled)} | {us(vendor)} | "
          f"{x(vs('torch_eager'))} | {x(vs('torch_compile'))} | **{x(better)}** | {x(vs('vendor'))} | {x(r.get('speedup_vs_production', 0))} {r.get('production_yardstick', '')} | "
          f"{100 * r.get('roofline_fraction', 0):.0f}% | {r.get('evaluations', 0)} | `{r.get('best_genome', '')}` |")
if logs:
    print(f"\nGeomean over the better of eager and torch.compile: **{math.exp(sum(logs) / len(logs)):.2f}x** over {len(logs)} tasks")
PY
cat "$state/production_gpu.md"
exit $rc
