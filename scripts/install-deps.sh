#!/usr/bin/env bash
# Installs the Debian 12 packages kevo needs to build, test and run, and only those
# that are missing. Idempotent: runs `apt-get update` only when something must be
# installed and the package lists are missing or stale.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  librocksdb-dev prometheus-cpp-dev nlohmann-json3-dev libboost-dev libssl-dev
  openssl  # the TLS tests make their certificates with it
  libgtest-dev libgmock-dev libseccomp-dev libxapian-dev
  bubblewrap libopenblas-dev binutils
  python3-torch
  python3-grpcio python3-protobuf  # the Python client (clients/python) and its test
  prometheus
  systemd  # systemd-analyze verify checks deploy/systemd (tests/deploy)
  python3-yaml  # tests/deploy/check_manifests.py parses deploy/k8s and the Grafana provisioning
  libjs-d3  # the campaign report draws its charts with d3, inlined (cli/campaign_report.cc)
  chromium fonts-dejavu-core  # the report's test renders it in headless Chromium
  # amd worker: HIP 5.2 / LLVM 15; pulls clang-15, lld-15, rocm-device-libs and
  # libamdhip64-dev, all that compiling device code for gfx90a/gfx940 needs.
  hipcc
)
# Extra packages for the optional parts, named by KEVO_EXTRA_PACKAGES (space separated).
if [[ -n "${KEVO_EXTRA_PACKAGES:-}" ]]; then
  read -r -a extra <<<"${KEVO_EXTRA_PACKAGES}"
  packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
lists=(/var/lib/apt/lists/*_Packages)
if [[ ! -e "${lists[0]}" ]] || [[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages' -mtime +1 -print -quit)" ]]; then
  "${sudo_cmd[@]}" apt-get update -qq
fi
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
