#!/usr/bin/env bash
# `make bundle` / scripts/bundle.sh [BUILD_DIR] [OUT_DIR]: a self-contained copy
# of kevo's programs for another Linux x86-64 host that lacks Debian's gRPC,
# Protobuf, Abseil, RocksDB, prometheus-cpp, ... (e.g. a GPU machine with a
# different distribution). Layout:
#
#   OUT_DIR/bin/kevo, kevo-coordinator, kevo-worker  launchers (set LD_LIBRARY_PATH, exec)
#   OUT_DIR/libexec/                                  the real programs and every kevo-runner-*
#   OUT_DIR/lib/                                      the shared libraries they need
#   OUT_DIR/MANIFEST                                  what was copied, and what was left to the host
#
# The workers start runners next to their own executable (libexec/), with a
# scrubbed environment; the binaries find lib/ through their RPATH
# ($ORIGIN/../lib, set by cmake/KevoHelpers.cmake), so the runners need no
# LD_LIBRARY_PATH.
#
# Left to the target host: the C and C++ runtimes (glibc, libstdc++, libgcc_s,
# libm, ld-linux; any host with a newer glibc runs these binaries), the NVIDIA
# driver (libcuda, libnvidia-*: they must match the host's kernel module) and
# cuBLAS (hundreds of MB; the CUDA runner loads it at run time from the host's
# CUDA installation when a task wants a cuBLAS baseline).
set -euo pipefail

build_dir="${1:-build}"
out_dir="${2:-bundle}"
max_mb="${KEVO_BUNDLE_MAX_MB:-50}"

bin="$build_dir/bin"
for p in kevo kevo-coordinator kevo-worker; do
  [[ -x "$bin/$p" ]] || { echo "bundle: $bin/$p is missing; build first (make build)" >&2; exit 1; }
done

# Shared libraries that every target host provides itself, by soname prefix.
is_host_library() {
  case "$1" in
    linux-vdso.so*|ld-linux*.so*|libc.so*|libm.so*|libmvec.so*|libpthread.so*|libdl.so*|\
    librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnsl.so*|libstdc++.so*|libgcc_s.so*|\
    libcuda.so*|libnvidia-*|libcublas.so*|libcublasLt.so*)
      return 0 ;;
  esac
  return 1
}

rm -rf "$out_dir"
mkdir -p "$out_dir/bin" "$out_dir/libexec" "$out_dir/lib"

programs=(kevo kevo-coordinator kevo-worker)
for r in "$bin"/kevo-runner-*; do
  [[ -x "$r" ]] && programs+=("$(basename "$r")")
done

declare -A copied=() left=()
for p in "${programs[@]}"; do
  cp -L "$bin/$p" "$out_dir/libexec/$p"
  # ldd lists the whole closure; "name => path (addr)" or "path (addr)".
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then
      echo "bundle: $p needs $name, which is not found on this host" >&2
      exit 1
    fi
    if is_host_library "$name"; then
      left[$name]=1
      continue
    fi
    if [[ -z "${copied[$name]:-}" ]]; then
      cp -L "$path" "$out_dir/lib/$name"
      copied[$name]="$path"
    fi
  done < <(ldd "$bin/$p")
done

# Launchers: LD_LIBRARY_PATH as a second line of defence (the RPATH is the
# first), then the real program, whose /proc/self/exe is in libexec/ so it
# finds its siblings (runners, coordinator and worker for `kevo run`).
for p in kevo kevo-coordinator kevo-worker; do
  cat > "$out_dir/bin/$p" <<EOF
#!/bin/sh
here="\$(cd "\$(dirname "\$0")" && pwd)"
export LD_LIBRARY_PATH="\$here/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$here/../libexec/$p" "\$@"
EOF
  chmod +x "$out_dir/bin/$p"
done

# Strip debug info from the copies (RelWithDebInfo builds are several times
# larger); keep the symbol tables for backtraces.
if command -v strip >/dev/null; then
  strip --strip-debug "$out_dir"/libexec/* "$out_dir"/lib/* 2>/dev/null || true
fi

{
  echo "# kevo bundle from $build_dir ($(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo unknown)), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# built on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "programs: ${programs[*]}"
  for n in $(printf '%s\n' "${!copied[@]}" | sort); do echo "lib/$n <- ${copied[$n]}"; done
  echo "left to the host: $(printf '%s\n' "${!left[@]}" | sort | tr '\n' ' ')"
} > "$out_dir/MANIFEST"

size_kb=$(du -sk "$out_dir" | cut -f1)
echo "bundle: $out_dir: ${#programs[@]} programs, ${#copied[@]} libraries, $((size_kb / 1024)) MiB"
if (( size_kb > max_mb * 1024 )); then
  echo "bundle: $out_dir is larger than ${max_mb} MiB (KEVO_BUNDLE_MAX_MB)" >&2
  exit 1
fi
