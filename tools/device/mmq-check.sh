#!/bin/bash
# gemm = q16mma (the integer tensor-core prefill GEMM, kernels/mmq.cu.tmpl)
# and gemm = fp8 (cuBLASLt e4m3, cuda_gemm_fp8.c) against bf16x3 on the
# GPU machine, kiln alone, from the build tree on-device-gpu.sh made (run
# as its command, so the GPU suites run first):
#
#   TESTS=tests/gpu/test_gpu_ops bash .device/on-device-gpu.sh \
#     bash $PWD/tools/device/mmq-check.sh
#
# The models: the Qwen2.5-7B's layer shapes (hidden 3584, 28/4 heads of
# 128, ff 18944, the qwen2 vocabulary, untied Q6_K head) with MMQ_LAYERS
# layers (default 2), once with Q4_K projections and once with Q6_K (the
# 7B Q4_K_M holds both), written by kiln synth. For each, `kiln parity
# --per-op` of cuda-batched against cpu:f64 with each gemm mode
# (the default thresholds; the summary and the worst rows
# printed), then pp512 of each mode on the first model (kiln bench -r 3).
# MMQ_TYPES (default "Q4_K Q6_K") picks the models, MMQ_GEMMS (default
# "bf16x3 q16mma fp8") the modes; fp8's parity is reported, not counted:
# e4m3 is far past the default thresholds by design. MMQ_SHAPES (default
# auto) lists q16mma's tiles to bench ([cuda-batched] mmq_shape, e.g.
# "auto 64,64,4 128,32,4 128,64,8"; parity runs with the first). Logs to
# $OUT/mmq-*.txt.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
V=${VOCAB:-$(dirname "$PWD")/shared/models/ggml-vocab-qwen2.gguf}
L=${MMQ_LAYERS:-2}
P=$'<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n'
bad=0
gemms=${MMQ_GEMMS:-bf16x3 q16mma fp8}
shapes=${MMQ_SHAPES:-auto}
for g in $gemms; do
  printf '[cuda-batched]\ngemm = %s\nmmq_shape = %s\n' "$g" "${shapes%% *}" > /tmp/mmq-$g.ini
done
for ty in ${MMQ_TYPES:-Q4_K Q6_K}; do
  M=/tmp/mmq-$ty-$L.gguf
  t=$(date +%s)
  [ -f $M ] || $K synth --arch qwen2 --layers "$L" --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --eps 1e-6 --theta 1e6 --type $ty --embd-type Q6_K --untied --vocab-from "$V" --seed 9 \
    -o $M > "$out/mmq-synth-$ty.txt" 2>&1 || { echo "synth $ty failed"; tail -3 "$out/mmq-synth-$ty.txt"; exit 1; }
  echo "== $M ($(du -h $M | cut -f1), $L layers) in $(( $(date +%s) - t )) s"
  for g in $gemms; do
    echo "-- parity $ty, cuda-batched gemm = $g vs cpu:f64 (per op)"
    timeout 150 $K parity -m $M --chat -p "$P" --ref cpu:f64 --test cuda-batched \
      --config /tmp/mmq-$g.ini --per-op > "$out/mmq-parity-$ty-$g.txt" 2>&1 || [ $g = fp8 ] ||
      bad=$((bad + 1))
    grep -E '^(parity:|FAIL)|^logits|every node' "$out/mmq-parity-$ty-$g.txt" | head -8
  done
done
ty=${MMQ_TYPES:-Q4_K}; ty=${ty%% *} # the first model's
for g in $gemms; do
  for sh in $([ $g = q16mma ] && echo $shapes || echo auto); do
    n=$g-${sh//,/x}
    printf '[cuda-batched]\ngemm = %s\nmmq_shape = %s\n' "$g" "$sh" > /tmp/mmq-$n.ini
    echo "-- pp512 $ty model, cuda-batched gemm = $g, mmq_shape = $sh"
    timeout 120 $K bench -m /tmp/mmq-$ty-$L.gguf -B cuda-batched --config /tmp/mmq-$n.ini -p 512 \
      -n 0 -r 3 -b 512 > "$out/mmq-bench-$n.txt" 2>&1 || bad=$((bad + 1))
    grep -E '^\| .*pp|error' "$out/mmq-bench-$n.txt"
  done
done
echo "== mmq-check: $bad failed run(s)"
exit $bad
