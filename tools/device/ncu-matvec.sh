#!/bin/bash
# Nsight Compute on the decode matvecs (kiln_matvec_q) of a 7B-wide file,
# to see what holds them below HBM speed: achieved bandwidth against the
# peak, occupancy, registers, and where warps stall. From the build tree
# on-device-gpu.sh made (/tmp/kiln-build), after tools/device/mvq-sweep.sh
# has written its files (or with NCU_MODEL=FILE):
#
#   bash $REPO/tools/device/ncu-matvec.sh
#
# Needs ncu on a runtime that gives it the counters (Firecracker; not
# gVisor), with the clocks left alone (--clock-control none). One decode
# step: -p 0 -n 2, graph = false so every kernel is its own launch; the
# first NCU_COUNT (default 12) matvec_q launches of the step. Sections:
# SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, LaunchStats,
# WarpStateStats. Report and text to $OUT/ncu-matvec.{ncu-rep,txt}.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
command -v ncu > /dev/null || { echo "ncu is not on the PATH (/usr/local/cuda/bin?)"; exit 1; }
for m in ${NCU_MODEL:-/tmp/sweep-Q4_K.gguf /tmp/sweep-Q6_K.gguf}; do
  [ -f "$m" ] || { echo "no $m (run tools/device/mvq-sweep.sh first)"; continue; }
  printf '[cuda-batched]\ngraph = false\n%s\n' "${NCU_EXTRA:-}" > /tmp/ncu.ini
  name=$(basename "$m" .gguf)
  timeout 300 ncu --clock-control none --kernel-name kiln_matvec_q --launch-count "${NCU_COUNT:-12}" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats -o "$out/ncu-$name" -f \
    $K bench -m "$m" -B cuda-batched --config /tmp/ncu.ini -p 0 -n 2 -r 1 > "$out/ncu-$name.log" 2>&1
  echo "== $name: ncu exit $?"
  ncu --import "$out/ncu-$name.ncu-rep" --page details > "$out/ncu-$name.txt" 2>&1
  grep -E 'kiln_matvec_q|Memory Throughput|DRAM Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Stall|Warp Cycles Per Issued' \
    "$out/ncu-$name.txt" | head -80
done
