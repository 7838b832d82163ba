#!/bin/bash
# Decode at depth against the split count of the decode attention (issue
# 17), on the GPU machine, from the build tree on-device-gpu.sh made,
# kiln alone: tg32 after DEPTHS tokens (default "16384 32000") on
# cuda-batched, for each KV type of KV_TYPES (default "f32 f16": f16 takes
# the tensor-core kernel, decode_attention = mma) and each attention_splits
# of SPLITS (default "0 132 256": 0 is auto, about two blocks an SM, 66
# for the 7B's 4 KV heads on 132 SMs). The model: /tmp/q7b-q4km.gguf when
# it is there (peer/on-device-peer.sh), else the 7B's widths in
# DEPTH_LAYERS layers (default 8) by kiln synth. Prints one line a run;
# why: at depth 16384 the f16 cache's attention read ~0.9 TB/s on an H100
# (2026-12-07) with 66 splits of 4 warps, two blocks an SM.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
M=/tmp/q7b-q4km.gguf
if [ ! -f $M ]; then
  M=/tmp/depth-7b-${DEPTH_LAYERS:-8}.gguf
  [ -f $M ] || $K synth --arch qwen2 --layers "${DEPTH_LAYERS:-8}" --embd 3584 --ff 18944 --heads 28 \
    --heads-kv 4 --type Q4_K --embd-type Q6_K --untied --vocab 152064 --ctx 32768 --seed 7 -o $M 2>&1 | tail -1
fi
echo "== $M"
for d in ${DEPTHS:-16384 32000}; do
  for kv in ${KV_TYPES:-f32 f16}; do
    for s in ${SPLITS:-0 132 256}; do
      printf '[kv_cache]\ntype = %s\n[cuda-batched]\nattention_splits = %s\n' "$kv" "$s" > "$out/splits.ini"
      printf -- '-- depth %s, KV %s, attention_splits %s: ' "$d" "$kv" "$s"
      timeout 200 $K bench -m $M -B cuda-batched --config "$out/splits.ini" -d "$d" -p 0 -n 32 -r 2 2>&1 |
        grep -E 'tg32|error' | awk -F'|' '/tg32/ { print $8; next } { print }'
    done
  done
done
