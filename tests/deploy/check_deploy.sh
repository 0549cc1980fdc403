#!/usr/bin/env bash
# The deployment files as the tools that run them read them:
#   tests/deploy/check_deploy.sh BIN_DIR
# promtool checks deploy/prometheus (config and alert rules); systemd-analyze
# verifies the units with ExecStart pointed at BIN_DIR's binaries (it checks
# that they exist and are executable); any warning fails too.
# tests/deploy/check_manifests.py parses deploy/k8s, deploy/docker and
# deploy/grafana and checks the fields they must have, the binaries' flags
# against BIN_DIR's --help; `kubectl kustomize` renders deploy/k8s where
# kubectl is installed (it is not a Debian package).
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
  # Debian builds Prometheus without kubernetes_sd; check_manifests.py then
  # checks prometheus-kubernetes.yml's relabelling, and promtool its rules.
  k8s_config="$root/deploy/prometheus/prometheus-kubernetes.yml"
  if ! promtool check config "$k8s_config" > "$tmp/promtool-k8s.log" 2>&1; then
    if grep -q 'field kubernetes_sd_configs not found' "$tmp/promtool-k8s.log"; then
      echo "promtool: this build has no kubernetes_sd; $(basename "$k8s_config") left to check_manifests.py"
    else
      cat "$tmp/promtool-k8s.log"; fail=1
    fi
  elif grep -qiE 'warning|error|failed' "$tmp/promtool-k8s.log"; then
    cat "$tmp/promtool-k8s.log"; fail=1
  fi
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
if /usr/bin/python3 -c 'import yaml' 2> /dev/null; then
  /usr/bin/python3 "$root/tests/deploy/check_manifests.py" "$root" "$bin" || fail=1
else
  echo "python3-yaml not installed (scripts/install-deps.sh installs it)"; fail=1
fi
if command -v kubectl > /dev/null; then
  if kubectl kustomize "$root/deploy/k8s" > "$tmp/k8s.yaml" 2> "$tmp/kustomize.log"; then
    echo "kubectl kustomize deploy/k8s: $(grep -c '^kind:' "$tmp/k8s.yaml") objects"
  else
    cat "$tmp/kustomize.log"; fail=1
  fi
fi
exit $fail
