#!/usr/bin/env bash
# cuda_gemm_bf16.sh: compiles matmul_bf16 candidates the way the nvidia worker
# does (nvcc -O3 for sm_90a into a shared object, CUDA runtime shared), then
# checks and times each against cuBLAS with cuda_gemm_bf16.cu, one process a
# candidate (a hang or a fault ends only its own run). Runs on the GPU host.
#
#   cuda_gemm_bf16.sh SRC_DIR OUT_DIR
#
# SRC_DIR holds the sources and index.tsv ("path<TAB>label[<TAB>flags]" lines,
# as recipe_source prints them; only the file name of each path is used; the
# GEMM recipes ask for no flags), e.g.
#   build/bin/recipe_source tasks/matmul_bf16 DIR \
#     'cuda_gemm_wgmma{stages=4,tile=128x256}' ... > DIR/index.tsv
# OUT_DIR gets log.txt (everything) and results.txt (one RESULT line a
# candidate). SAMPLES (default 50) timed samples each; TIMEOUT (default 60)
# seconds a candidate before its run is killed (a deadlocked kernel).
set -u
src=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-nvcc}
command -v "$nvcc" > /dev/null || nvcc=/usr/local/cuda/bin/nvcc
cuobjdump=$(command -v cuobjdump || echo "$(dirname "$(command -v "$nvcc")")/cuobjdump")
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  "$nvcc" --version | tail -1
} 2>&1 | tee "$out/log.txt"
if ! "$nvcc" -O2 -arch=sm_90 --cudart shared "$here/cuda_gemm_bf16.cu" -lcublas -ldl -o "$work/bench" \
    >> "$out/log.txt" 2>&1; then
  echo "the bench driver did not compile" | tee -a "$out/log.txt"
  exit 1
fi
while IFS=$'\t' read -r path _; do
  f=$(basename "$path" .cu)
  ("$nvcc" -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC --cudart shared -Xptxas -v -shared \
     "$src/$f.cu" -o "$work/$f.so" > "$work/$f.log" 2>&1
   echo $? > "$work/$f.rc") &
done < "$src/index.tsv"
wait
while IFS=$'\t' read -r path label _; do
  f=$(basename "$path" .cu)
  if [ "$(cat "$work/$f.rc")" != 0 ]; then
    echo "RESULT label=$label correct=0 compile_failed"
    tail -5 "$work/$f.log"
    continue
  fi
  grep -E "registers|spill" "$work/$f.log" | tr -s ' ' | sed "s/^/  $f: /"
  if [ -x "$cuobjdump" ]; then
    sass=$("$cuobjdump" -sass "$work/$f.so" < /dev/null)
    echo "  $f: SASS $(grep -c HGMMA <<< "$sass") HGMMA, $(grep -c 'HMMA' <<< "$sass") HMMA, $(grep -c UTMALDG <<< "$sass") UTMALDG"
  fi
  timeout "${TIMEOUT:-60}" "$work/bench" "$work/$f.so" "$label" "${SAMPLES:-50}" < /dev/null
  rc=$?
  [ $rc = 0 ] || echo "RESULT label=$label correct=0 exit=$rc"
done < "$src/index.tsv" 2>&1 | tee -a "$out/log.txt"
grep '^RESULT' "$out/log.txt" > "$out/results.txt"
echo "== results (ratio = cuBLAS time / candidate time)"
cat "$out/results.txt"
