#!/bin/bash
# Whether compute-sanitizer's initcheck sees the stores of cuBLAS's and
# cuBLASLt's GEMMs (perf-notes v11: test_gpu_ops' 162668 initcheck reports
# are all reads of a bf16x3 or fp8 GEMM's output). On the GPU machine,
# from the repository root: `bash tools/device/initcheck-probe.sh`. Builds
# initcheck-probe.cu with the machine's nvcc, runs it plain (each stage's
# "check" line: the sum its GEMM's output must have) and under initcheck,
# and prints the number of reports in each stage. A stage with reports and
# a right sum is initcheck not seeing those stores; f32 is the control.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
bin=/tmp/initcheck-probe
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
"$nvcc" -arch=sm_90 -o "$bin" "$here/initcheck-probe.cu" -lcublas -lcublasLt -ldl ||
  { echo "nvcc failed"; exit 1; }
echo "== plain"
"$bin" | tee "$out/initcheck-probe-plain.txt" | grep -E '^(check|fp8:)'
echo "== under initcheck"
compute-sanitizer --tool initcheck --nvtx true --print-limit 100000000 --show-backtrace no "$bin" \
  > "$out/initcheck-probe.txt" 2>&1
awk '/^stage / { s = $2; next } /^========= +Uninitialized/ { n[s]++ }
     END { for (x in n) printf "   %-8s %d reports\n", x, n[x] }' "$out/initcheck-probe.txt"
grep -E 'ERROR SUMMARY' "$out/initcheck-probe.txt"
