#!/bin/bash
# Qwen3.5-9B-shaped speed, side by side with llama.cpp, on the GPU machine (the
# on-device-peer.sh pattern; run it as .peer/on-device-peer-qwen35.sh after kiln is built in
# /tmp/kiln-build by .device/on-device-gpu.sh, in the same call or an earlier one):
#   1. builds llama.cpp with CUDA (llama-bench, llama-quantize) in /tmp/llama unless a warm
#      machine has it (on-device-peer.sh's build step, the same source);
#   2. writes the 9B shape with `kiln synth` in F16 (32 blocks, 3 Gated DeltaNet : 1 full
#      attention, hidden 4096, ff 12288, 16/4 heads of 256, linear attention 16 q/k and 32
#      value heads of 128, conv 4, untied, the Qwen3.5 vocabulary padded to 248320 rows; the
#      layout llama.cpp's converter writes) and quantizes it with llama-quantize to Q4_K_M:
#      /tmp/q35-9b-q4km.gguf, once per machine. This llama.cpp (llama-cpp-python 0.3.36)
#      quantizes attn_qkv by its attn_v rules (Q4_K, Q6_K in the use_more_bits layers);
#      PEER_QKV=q5_k makes it Q5_K (--tensor-type attn_qkv=q5_k, as other llama.cpp
#      versions' Q4_K_M do; /tmp/q35-9b-q4km-qkv-q5_k.gguf), PEER_QKV=q6_k Q6_K (this
#      script's file before kiln read Q5_K);
#   3. runs llama-bench (flash attention off and on) and `kiln bench` on every CUDA backend on
#      that one file, and prints both.
# PEER_STEPS="build model bench", PEER_BACKENDS and KILN_BENCH_ARGS narrow it, as in
# on-device-peer.sh.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd); out=${OUT:-/tmp}; K=/tmp/kiln-build/cli/kiln
qkv=${PEER_QKV:-}; M=/tmp/q35-9b-q4km${qkv:+-qkv-$qkv}.gguf
steps=${PEER_STEPS:-build model bench}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_PLUGIN_PATH=/tmp/kiln-build/.libs
if [[ $steps == *build* && ! -x /tmp/llama/build/bin/llama-bench ]]; then
  PEER_STEPS=build bash "$root/.peer/on-device-peer.sh" || exit 1
fi
if [[ $steps == *model* && ! -f $M ]]; then
  t=$(date +%s); vocab=""
  for d in "$root/.device/shared" "$root/../shared" "$root/shared"; do
    [ -f "$d/models/ggml-vocab-qwen35.gguf" ] && { vocab=$d/models/ggml-vocab-qwen35.gguf; break; }; done
  [ -n "$vocab" ] || { echo "no ggml-vocab-qwen35.gguf in .device/shared/models or ../shared/models"; exit 1; }
  $K synth --arch qwen35 --layers 32 --full-every 4 --embd 4096 --ff 12288 --heads 16 --heads-kv 4 \
    --head-dim 256 --rot 64 --rope-sections 11,11,10,0 --theta 10000000 --eps 1e-6 --ssm-conv 4 \
    --ssm-groups 16 --ssm-heads 32 --ssm-state 128 --ssm-head-v 128 --untied --type F16 --embd-type F16 \
    --vocab-from "$vocab" --vocab-rows 248320 --ctx 32768 --seed 9 -o /tmp/q35-9b-f16.gguf > "$out/synth.log" 2>&1 &&
  /tmp/llama/build/bin/llama-quantize ${qkv:+--tensor-type attn_qkv=$qkv} /tmp/q35-9b-f16.gguf $M Q4_K_M "$(nproc)" \
    > "$out/quantize.log" 2>&1 ||
    { echo "model step failed"; tail -5 "$out/synth.log" "$out/quantize.log"; exit 1; }
  rm -f /tmp/q35-9b-f16.gguf
  echo "== $M written in $(( $(date +%s) - t )) s, $(du -h $M | cut -f1)"
  $K inspect $M | awk '$2 ~ /^(F32|F16|Q4_K|Q6_K|Q8_0|Q5_K|Q5_0)$/ { n[$2]++ } END { for (t in n) printf "   %s x %d\n", t, n[t] }'
fi
if [[ $steps == *bench* ]]; then
  printf '[cuda-cc120]\nallow_lower_cc = true\n' > /tmp/peer-cc120.ini
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  /tmp/llama/build/bin/llama-bench -m $M -ngl 99 -fa 0,1 -p 512 -n 128 -r 3 2>/dev/null |
    tee "$out/llama-bench-qwen35.txt" | grep -E '^\|'
  PEER_BACKENDS=${PEER_BACKENDS:-cuda-batched cuda-serial cuda-cc120}
  for b in $PEER_BACKENDS; do
    c=""; [ "$b" = cuda-cc120 ] && c="--config /tmp/peer-cc120.ini"
    echo "-- kiln $b"; timeout 300 $K bench -m $M -B "$b" $c -p 512 -n 128 -r 3 -b 512 ${KILN_BENCH_ARGS:-} 2>&1 |
      tee "$out/kiln-bench-qwen35-$b.txt" | grep -E '^\| |error'
  done
  echo "(ratios: divide kiln's t/s by llama-bench's pp512 and tg128 rows, same run, same file)"
fi
