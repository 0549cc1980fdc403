#!/usr/bin/env bash
# Measures what skill memory buys: for each pair FIRST:SECOND of related
# tasks, two embedded `kevo run`s of FIRST (seeds 1 and 2: a skill needs
# evidence from two jobs before it seeds, docs/search.md), then SECOND twice
# with the same budget and seed — once in FIRST's store (its skills set the
# proposer's priors), once in a fresh store (no skills) — each stopping as
# soon as it reaches FIRST's best speedup (seed 1). Prints how many
# evaluations each needed.
# Usage:
#   tests/bench/skills.sh [BUILD_DIR] [BUDGET] [FIRST:SECOND...]
# OUT=DIR keeps the results folder (a run whose JSON is already there is not
# run again). Not run by ctest: minutes per pair on 2 cores.
set -euo pipefail
build="${1:-build}"
. "$(dirname "$0")/../../scripts/sandbox_env.sh" && kevo_sandbox_env "$build/bin"
budget="${2:-30}"
shift 2 || true
pairs=("$@")
if [[ ${#pairs[@]} -eq 0 ]]; then pairs=(gelu_tanh:gelu_erf row_mean:row_sum); fi
out="${OUT:-$(mktemp -d "${TMPDIR:-/var/tmp}/kevo-skills-XXXXXX")}"
mkdir -p "$out"
kevo="$build/bin/kevo"

# run NAME TASK DB [FLAGS...]: one job (seed $SEED, default 1), JSON in $out/NAME.json.
run() {
  local name="$1" task="$2" db="$3"
  shift 3
  if [[ ! -s "$out/$name.json" ]]; then
    "$kevo" run "tasks/$task" --platform cpu --budget "$budget" --seed "${SEED:-1}" --db "$db" \
      --out "$out/$name.cc" --json "$@" >"$out/$name.json" 2>"$out/$name.log" || true
  fi
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], 0))' "$@"; }

printf "%-22s %8s | %-30s | %-30s\n" "" "" "with skills" "without skills"
printf "%-22s %8s | %6s %7s %7s %7s | %6s %7s %7s %7s\n" pair first_x \
  best_x to_1st to_95% to_w/o best_x to_1st to_95% to_w/o
for pair in "${pairs[@]}"; do
  first="${pair%%:*}" second="${pair##*:}"
  run "$first" "$first" "$out/with-$pair"
  SEED=2 run "$first-2" "$first" "$out/with-$pair"
  target=$(field "$out/$first.json" speedup)
  run "$second-with" "$second" "$out/with-$pair" --target-speedup "$target"
  run "$second-without" "$second" "$out/without-$pair" --target-speedup "$target"
  python3 - "$out" "$pair" "$second" "$target" <<'PY'
import json, re, sys
out, pair, second, target = sys.argv[1:]
target = float(target)
# Best speedup after each evaluation, from the progress lines of the log.
def trajectory(name):
    best = {}
    for line in open(f"{out}/{name}.log", errors="replace"):
        m = re.match(r"(\d+)/\d+ evaluated, .* best ([\d.]+)x", line)
        if m:
            best[int(m.group(1))] = float(m.group(2))
    return best
runs = {k: trajectory(f"{second}-{k}") for k in ("with", "without")}
top = max([max(t.values(), default=0) for t in runs.values()])
plain = max(runs["without"].values(), default=0)
def first_at(t, x):
    hits = [n for n, b in sorted(t.items()) if n > 0 and b >= x]
    return str(hits[0]) if hits else f">{max(t, default=0)}"
cells = []
for k in ("with", "without"):
    t = runs[k]
    cells.append(f"{max(t.values(), default=0):5.1f}x {first_at(t, target):>7} "
                 f"{first_at(t, 0.95 * top):>7} {first_at(t, plain):>7}")
print(f"{pair:<22} {target:7.1f}x | " + " | ".join(cells))
PY
done
echo "to_1st: evaluations until the second task reached the first task's best speedup;"
echo "to_95%: until it reached 95% of the best speedup either run found on it;"
echo "to_w/o: until it reached the best speedup the run without skills found."
echo "raw results in $out; skills learnt: $kevo skills --db $out/with-PAIR"
