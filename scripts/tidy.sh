#!/usr/bin/env bash
# clang-tidy (Debian's clang-tidy-14) with the repository's .clang-tidy over
# FILEs, or every .cc file git tracks under cli/ common/ coordinator/
# mtia_sim/ worker/; the compile commands are BUILD_DIR's (make build first).
#   scripts/tidy.sh [FILE ...]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
command -v clang-tidy-14 >/dev/null || apt-get install -y -q clang-tidy-14 >/dev/null || {
  echo "tidy: clang-tidy-14 is needed (apt-get install clang-tidy-14)" >&2; exit 2; }
[[ -f "$build/compile_commands.json" ]] || { echo "tidy: no $build/compile_commands.json: make build first" >&2; exit 2; }
cd "$root"
files=("$@")
(( ${#files[@]} )) || mapfile -t files < <(git ls-files 'cli/*.cc' 'common/*.cc' 'coordinator/*.cc' 'mtia_sim/*.cc' 'worker/*.cc')
printf '%s\n' "${files[@]}" | nice xargs -P "${JOBS:-$(nproc)}" -n 4 clang-tidy-14 -p "$build" --quiet 2>/dev/null \
  | grep -E '^/.*(warning|error):' | sort -u | tee "$build/tidy.txt"
echo "tidy: $(wc -l < "$build/tidy.txt") findings in ${#files[@]} files ($build/tidy.txt)"
