#!/bin/bash
# norm_matvec = kernel against fused, decode only, on the GPU machine, from
# the build tree that on-device-gpu.sh made (its LD_LIBRARY_PATH): tg128
# of the 7B Q4_K_M (/tmp/q7b-q4km.gguf, written by peer/on-device-peer.sh;
# without it a 8-layer synthetic of the 7B's widths, Q4_K projections and
# a Q6_K output, written here), the two values alternated NORM_AB_ROUNDS
# times (default 2) on each of NORM_AB_BACKENDS, then llama-bench's fa = 1
# tg128 on the same file when llama.cpp is built (/tmp/llama), and kiln qa
# of the stories260K golden set with norm_matvec = fused. Prints the
# tables; reports, checks nothing.
set -u
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
M=/tmp/q7b-q4km.gguf
if [ ! -f $M ]; then
  M=/tmp/q7b-8l-q4k.gguf
  [ -f $M ] || $K synth --arch qwen2 --layers 8 --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --type Q4_K --embd-type Q6_K --untied --vocab 152064 --ctx 4096 --seed 5 -o $M 2>&1 | tail -1
fi
echo "== $M ($(du -h $M | cut -f1))"
for b in ${NORM_AB_BACKENDS:-cuda-batched cuda-serial}; do
  for r in $(seq "${NORM_AB_ROUNDS:-2}"); do
    for v in kernel fused; do
      printf '[%s]\nnorm_matvec = %s\n[cuda-cc120]\nallow_lower_cc = true\n' "$b" $v > "$out/norm-ab.ini"
      printf -- '-- %s norm_matvec = %s (round %s): ' "$b" $v "$r"
      # the t/s column, or the error whole
      timeout 120 $K bench -m $M -B "$b" --config "$out/norm-ab.ini" -p 0 -n 128 -r 3 2>&1 |
        grep -E 'tg128|error' | awk -F'|' '/tg128/ { print $8; next } { print }'
    done
  done
done
if [ -x /tmp/llama/build/bin/llama-bench ] && [ $M = /tmp/q7b-q4km.gguf ]; then
  echo "-- llama.cpp fa=1 tg128:"
  /tmp/llama/build/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 128 -r 3 2>/dev/null | grep -E '^\| qwen'
fi
printf '[cuda-batched]\nnorm_matvec = fused\n' > "$out/norm-qa.ini"
$K qa -m ../shared/models/stories260K.gguf --golden tests/golden/stories260K.golden -B cuda-batched \
  --config "$out/norm-qa.ini" --fallback error 2>&1 | grep -E '^golden|error'
