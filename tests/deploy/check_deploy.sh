#!/usr/bin/env bash
# The deployment files as the tools that run them read them:
#   tests/deploy/check_deploy.sh BIN_DIR
# promtool checks deploy/prometheus (config and alert rules); systemd-analyze
# verifies the units with ExecStart pointed at BIN_DIR's binaries (it checks
# that they exist and are executable); any warning fails too.
set -uo pipefail
bin="$(cd "$1" && pwd)"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d /tmp/kevo-deploy.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail=0
if command -v promtool > /dev/null; then
  promtool check config "$root/deploy/prometheus/prometheus.yml" > "$tmp/promtool.log" 2>&1 || fail=1
  promtool check rules "$root/deploy/prometheus/alerts.yml" >> "$tmp/promtool.log" 2>&1 || fail=1
  # The one warning allowed: the example file_sd folder, which an operator's inventory fills.
  if grep -v 'workers.d/\*.yml' "$tmp/promtool.log" | grep -qiE 'warning|error|failed'; then fail=1; fi
  cat "$tmp/promtool.log"
else
  echo "promtool not installed (scripts/install-deps.sh installs prometheus)"; fail=1
fi
if command -v systemd-analyze > /dev/null; then
  for f in "$root"/deploy/systemd/*.service; do
    sed "s#/usr/local/bin/#$bin/#g" "$f" > "$tmp/$(basename "$f")"
  done
  cp "$tmp/kevo-worker@.service" "$tmp/kevo-worker@cpu.service"
  (cd "$tmp" && systemd-analyze verify --man=no ./kevo-coordinator.service ./kevo-worker@cpu.service) \
    > "$tmp/verify.log" 2>&1 || fail=1
  if [[ -s "$tmp/verify.log" ]]; then cat "$tmp/verify.log"; fail=1; fi
  echo "systemd-analyze verify: $( [[ $fail == 0 ]] && echo ok || echo FAILED )"
else
  echo "systemd-analyze not installed"; fail=1
fi
exit $fail
