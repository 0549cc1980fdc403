#!/usr/bin/env bash
# `make campaign-demo`: campaigns/demo.textproto (10 tasks x cpu and mtia-sim, with
# the example ranker's model profile) on an embedded coordinator with one local
# worker per platform; prints the status table and the model throughput gains,
# writes the report and the ship list under kevo-out/campaign-demo/.
set -euo pipefail
build_dir="${1:-build}"
out="${KEVO_CAMPAIGN_OUT:-kevo-out/campaign-demo}"
rm -rf "$out/db"
mkdir -p "$out"
. "$(dirname "$0")/sandbox_env.sh" && kevo_sandbox_env "$build_dir/bin"
exec "$build_dir/bin/kevo" campaign run campaigns/demo.textproto --db "$out/db" \
  --report "$out/report.html" --export "$out/ship"
