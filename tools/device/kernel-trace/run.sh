#!/bin/bash
# The kernel timeline of kiln's decode step on the GPU machine: kiln bench
# under CUPTI's activity tracing (trace.c, injected by the driver through
# CUDA_INJECTION64_PATH), then summarize.py's table: per kind of kernel,
# its launches a step, duration, and how much it moves the step's end.
# From the build tree on-device-gpu.sh made, with .device/trace/ laid out
# by tools/device/prepare-gpu.sh (trace.c built here against the CUDA
# toolkit's CUPTI, and that libcupti beside it):
#
#   bash .device/on-device-gpu.sh bash $PWD/tools/device/kernel-trace/run.sh
#
# TRACE_MODEL (default /tmp/q7b-q4km.gguf if present, else an 8-layer
# synthetic of the 7B's widths written here), TRACE_BACKENDS (default
# cuda-batched cuda-serial), TRACE_CONFIG (extra lines for the backend's
# section, e.g. "pdl = false"). Each trace and its table go to $OUT
# (trace-BACKEND.csv, trace-BACKEND.txt); the tables are printed.
set -u
out=${OUT:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
lib=$repo/.device/trace/libkilntrace.so
[ -f "$lib" ] || { echo "no $lib: run tools/device/prepare-gpu.sh (it builds it) and carry .device"; exit 1; }
export LD_LIBRARY_PATH=$repo/.device/trace:${LD_LIBRARY_PATH:-}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
M=${TRACE_MODEL:-/tmp/q7b-q4km.gguf}
if [ ! -f "$M" ]; then
  M=/tmp/q7b-8l-q4k.gguf
  [ -f $M ] || $K synth --arch qwen2 --layers 8 --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --type Q4_K --embd-type Q6_K --untied --vocab 152064 --ctx 4096 --seed 5 -o $M 2>&1 | tail -1
fi
for b in ${TRACE_BACKENDS:-cuda-batched cuda-serial}; do
  printf '[%s]\n%s\n' "$b" "${TRACE_CONFIG:-}" > "$out/trace.ini"
  echo "== $b on $(basename "$M"), ${TRACE_CONFIG:-default config}: kiln bench -p 0 -n 64 under CUPTI"
  KILN_TRACE_OUT=$out/trace-$b.csv CUDA_INJECTION64_PATH=$lib timeout 300 \
    $K bench -m "$M" -B "$b" --config "$out/trace.ini" -p 0 -n 64 -r 1 2>&1 | grep -E 'tg64|error|CUPTI'
  python3 "$here/summarize.py" "$out/trace-$b.csv" | tee "$out/trace-$b.txt" | head -60
done
