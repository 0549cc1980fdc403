#!/usr/bin/env bash
# Every job's search tree (genome, status, time of each node) of a `kevo suite`
# run, one `kevo nodes` after another, from the suite's results.json and its
# RocksDB (--db). Prints to stdout.
#
#   tests/bench/suite_nodes.sh KEVO_BINARY RESULTS_JSON DB_DIR
set -uo pipefail
kevo="${1:?kevo binary}"
python3 -c 'import json, sys; print("\n".join(t["job_id"] + " " + t["task"] for t in json.load(open(sys.argv[1]))["tasks"] if t.get("job_id")))' \
  "${2:?results.json}" 2>/dev/null | while read -r job task; do
  echo "== $task ($job)"
  "$kevo" nodes "$job" --db "${3:?db folder}" 2>&1
done
