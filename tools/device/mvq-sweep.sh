#!/bin/bash
# Launch shapes of the quantized-activation matvec (matvec_q) on the GPU
# machine, to choose cuda_prepare.c's defaults from measurements: decode
# with `profile = true` and `graph = false` (the per-node table) on
# 7B-wide synthesized qwen2 files, once per [cuda-batched] matvec_shape and
# matvec_load, and the table's matvec_q16 lines (time and GB/s per kind).
# From the build tree on-device-gpu.sh made (/tmp/kiln-build):
#
#   TESTS=' ' bash .device/on-device-gpu.sh bash $PWD/tools/device/mvq-sweep.sh
#
# Models (hidden 3584, 28/4 heads, ff 18944, untied vocabulary 32768: the
# 7B's matrices but two layers): one all Q4_K, one all Q6_K; written in
# parallel, ~30 s. SWEEP_TYPES picks the types (SWEEP_TYPES='Q4_K Q5_K Q6_K'
# measures Q5_K too, which takes Q4_K's shapes unmeasured); SWEEP_SHAPES and
# SWEEP_LOADS pick the configurations; MVQ_MODEL=FILE adds a model (the 7B
# Q4_K_M). Logs to $OUT/mvq-sweep.log.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
log=$out/mvq-sweep.log
: > "$log"
models=""
for t in ${SWEEP_TYPES:-Q4_K Q6_K}; do
  m=/tmp/sweep-$t.gguf
  models="$models $m"
  [ -f $m ] || $K synth --arch qwen2 --layers 2 --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --type $t --embd-type $t --untied --vocab 32768 --ctx 256 -o $m > "$out/synth-$t.log" 2>&1 &
done
wait
[ -n "${MVQ_MODEL:-}" ] && models="$models $MVQ_MODEL"
shapes=${SWEEP_SHAPES:-"auto 8,4,2 8,8,1 8,8,2 8,2,2 8,4,4 4,4,2 4,2,2 4,4,4 16,8,2 16,16,1 8,1,2 4,1,4"}
loads=${SWEEP_LOADS:-"direct staged"}
for m in $models; do
  for l in $loads; do
    for s in $shapes; do
      printf '[general]\nlog_level = info\n[cuda-batched]\nprofile = true\ngraph = false\nmatvec_load = %s\nmatvec_shape = %s\n' \
        "$l" "$s" > /tmp/sweep.ini
      echo "#### $(basename "$m") load=$l shape=$s" | tee -a "$log"
      timeout 120 $K bench -m "$m" -B cuda-batched --config /tmp/sweep.ini -p 0 -n 48 -r 1 \
        > /tmp/sweep.txt 2>&1 || { echo "  (exit $?)"; tail -3 /tmp/sweep.txt; } | tee -a "$log"
      grep -E 'matvec_q|tg48' /tmp/sweep.txt | sed 's/^kiln\[[a-z0-9-]*\]: info: profile: //' |
        tee -a "$log"
    done
  done
done
