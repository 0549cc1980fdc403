#!/usr/bin/env bash
# `make demo`: search for a fast softmax kernel on this CPU with the embedded
# coordinator and a local worker (about two minutes on 2 cores after the build).
set -euo pipefail
build_dir="${1:-build}"
budget="${KEVO_DEMO_BUDGET:-20}"
. "$(dirname "$0")/sandbox_env.sh" && kevo_sandbox_env "$build_dir/bin"
exec "$build_dir/bin/kevo" run tasks/softmax --platform cpu --budget "$budget"
