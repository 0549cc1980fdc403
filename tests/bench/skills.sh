#!/usr/bin/env bash
# Measures what skill memory buys. For each pair FIRST:SECOND of related tasks
# and each seed S of $SEEDS (default "1"): two embedded `kevo run`s of FIRST
# in one store (seeds S and S+100: a skill needs evidence from two jobs before
# it seeds, docs/search.md), then SECOND twice with the same budget and seed —
# once in FIRST's store (its skills set the proposer's priors), once in a
# fresh store (no skills). Prints, per pair and seed, how many evaluations
# each SECOND job needed to reach FIRST's best speedup and 95% of the best
# speedup either SECOND job found, and at the end the mean over seeds per pair
# and over all pairs.
# Usage:
#   SEEDS="1 2 3" tests/bench/skills.sh [BUILD_DIR] [BUDGET] [FIRST:SECOND...]
# OUT=DIR keeps the results folder (a run whose JSON is already there is not
# run again); KEVO_RUN_FLAGS adds flags to every `kevo run` (e.g. --profile-cap 1).
# Not run by ctest: minutes per pair and seed on 2 cores.
set -euo pipefail
build="${1:-build}"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$build/bin"
budget="${2:-30}"
shift 2 || true
pairs=("$@")
if [[ ${#pairs[@]} -eq 0 ]]; then pairs=(gelu_tanh:gelu_erf row_mean:row_sum); fi
seeds="${SEEDS:-1}"
out="${OUT:-$(mktemp -d "${TMPDIR:-/var/tmp}/kevo-skills-XXXXXX")}"
mkdir -p "$out"
kevo="$build/bin/kevo"

# run NAME TASK DB SEED: one job, JSON in $out/NAME.json, progress in NAME.log.
run() {
  local name="$1" task="$2" db="$3" seed="$4"
  if [[ ! -s "$out/$name.json" ]]; then
    "$kevo" run "tasks/$task" --platform cpu --budget "$budget" --seed "$seed" --db "$db" \
      --out "$out/$name.cc" --json ${KEVO_RUN_FLAGS:-} >"$out/$name.json" 2>"$out/$name.log" || true
  fi
}

for pair in "${pairs[@]}"; do
  first="${pair%%:*}" second="${pair##*:}"
  for s in $seeds; do
    echo "$(date -u +%H:%M:%S) $pair seed $s" >&2
    run "$first-s$s" "$first" "$out/with-$pair-s$s" "$s"
    run "$first-s$s-b" "$first" "$out/with-$pair-s$s" "$((s + 100))"
    run "$second-s$s-with" "$second" "$out/with-$pair-s$s" "$s"
    run "$second-s$s-without" "$second" "$out/without-$pair-s$s" "$s"
  done
done

python3 - "$out" "$budget" "$seeds" "${pairs[@]}" <<'PY'
import json, math, re, sys
out, budget, seeds, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]

def trajectory(name):
    """Best speedup after each evaluation, from the run's progress lines."""
    best = {}
    try:
        for line in open(f"{out}/{name}.log", errors="replace"):
            m = re.match(r"(\d+)/\d+ evaluated, .* best ([\d.]+)x", line)
            if m:
                best[int(m.group(1))] = float(m.group(2))
    except OSError:
        pass
    return best

def first_at(t, x):
    """Evaluations until the best reached x; budget + 1 when it never did."""
    hits = [n for n, b in sorted(t.items()) if n > 0 and b >= x]
    return hits[0] if hits else budget + 1

def cell(n):
    return f">{budget}" if n > budget else str(n)

def speedup(name):
    try:
        return float(json.load(open(f"{out}/{name}.json")).get("speedup", 0))
    except (OSError, ValueError):
        return 0.0

print(f"{'pair':<22} {'seed':>4} {'first_x':>8} | {'with: best':>10} {'to_1st':>6} {'to_95%':>6} |"
      f" {'w/o: best':>9} {'to_1st':>6} {'to_95%':>6}")
means = {}
for pair in pairs:
    first, second = pair.split(":")
    per = {"with": [], "without": []}
    for s in seeds:
        target = speedup(f"{first}-s{s}")
        runs = {k: trajectory(f"{second}-s{s}-{k}") for k in ("with", "without")}
        top = max(max(t.values(), default=0) for t in runs.values())
        row = f"{pair:<22} {s:>4} {target:7.2f}x |"
        for k in ("with", "without"):
            t = runs[k]
            to1, to95 = first_at(t, target), first_at(t, 0.95 * top)
            per[k].append(to95)
            row += f" {max(t.values(), default=0):9.2f}x {cell(to1):>6} {cell(to95):>6} |"
        print(row.rstrip("|"))
    means[pair] = {k: sum(v) / len(v) for k, v in per.items()}

print()
print(f"{'pair':<22} {'mean to_95% with':>17} {'without':>8} {'fewer':>7}")
ratios = []
for pair, m in means.items():
    ratio = m["without"] / m["with"]
    ratios.append(ratio)
    print(f"{pair:<22} {m['with']:17.2f} {m['without']:8.2f} {ratio:6.2f}x")
print(f"geomean over {len(ratios)} pairs: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x fewer "
      f"evaluations with skills; worse than without on "
      f"{sum(m['with'] > m['without'] for m in means.values())} pair(s)")
print(f"(a run that never reached a mark counts as {budget + 1} evaluations, shown '>{budget}')")
print(f"raw results in {out}; skills learnt: kevo skills --db {out}/with-PAIR-sSEED")
PY
