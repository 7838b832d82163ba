#!/bin/bash
# The evidence a default needs, on the GPU machine, for the CUDA backends'
# named modes: speed (tools/device/ab-bench.sh, variants alternated on the
# same warm machine) and parity against cpu:f64 per op kind
# (tools/kv-parity.sh with the mode's config) on the 7B Q4_K_M of
# tools/device/peer/, with the decode issue's ChatML prompt. Runs after
# on-device-gpu.sh built kiln in /tmp/kiln-build and on-device-peer.sh wrote
# /tmp/q7b-q4km.gguf (same call or an earlier one on the same warm machine),
# from the repository root:
#
#   bash tools/device/modes.sh
#
# MODES_STEPS (default "parity merge gemm depth profile") picks the parts, run
# in that order:
#   parity   per-op parity of cuda-batched with gemm = MODES_GEMM (default
#            "bf16x3 tf32 bf16 q16mma") against cpu:f64;
#   merge    tg128 with attention_merge = fused and kernel, cuda-batched and
#            cuda-serial, AB_ROUNDS rounds each (default 2);
#   gemm     pp512 with gemm = f32 and each of MODES_GEMM, and bf16x3 with
#            tiles of MODES_SCRATCH MiB (default "32 64");
#   depth    tg64 on cuda-batched after MODES_DEPTH tokens (default
#            16384): f32 KV (split), f16 KV split and f16 KV mma
#            (decode_attention; the untimed depth prefilled with gemm =
#            bf16), and llama-bench -fa 1 -d at the same depths;
#   profile  one pp512 step and 128 decode steps of cuda-batched with
#            profile = true and graph = false (the per-node table), gemm =
#            MODES_PROFILE_GEMM (default bf16x3).
# Logs go to $OUT: modes-merge.log, modes-gemm.md (parity),
# modes-gemm-speed.log, modes-depth.log, modes-profile.log.
set -uo pipefail
root=$(pwd); out=${OUT:-/tmp}
B=/tmp/kiln-build; K=$B/cli/kiln; M=/tmp/q7b-q4km.gguf
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_PLUGIN_PATH=$B/.libs
[ -x $K ] && [ -f $M ] || { echo "no kiln build in $B or no $M"; exit 1; }
steps=${MODES_STEPS:-parity merge gemm depth profile}
t0=$(date +%s)
say() { echo "== [$(($(date +%s) - t0)) s] $*"; }
prompt=/tmp/modes-prompt.txt
printf '<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n' > $prompt
if [[ $steps == *parity* ]]; then
  say "per-op parity of cuda-batched for gemm = ${MODES_GEMM:-bf16x3 tf32 bf16 q16mma} against cpu:f64"
  for g in ${MODES_GEMM:-bf16x3 tf32 bf16 q16mma}; do
    printf '[cuda-batched]\ngemm = %s\n' "$g" > "/tmp/modes-$g.ini"
    echo "gemm = $g (the KV type column is the cache's: f32)"
    KILN=$K TEST=cuda-batched ARGS="--config /tmp/modes-$g.ini" timeout 200 \
      bash "$root/tools/kv-parity.sh" $M $prompt f32
  done > "$out/modes-gemm.md" 2>&1
  grep -E 'gemm =|every node' "$out/modes-gemm.md"
fi
if [[ $steps == *merge* ]]; then
  say "tg128: attention_merge fused against kernel"
  for b in cuda-batched cuda-serial; do
    bash "$root/tools/device/ab-bench.sh" "$b" 'fused:attention_merge=fused' 'kernel:attention_merge=kernel'
  done 2>&1 | tee "$out/modes-merge.log" | grep mean
fi
if [[ $steps == *gemm* ]]; then
  say "pp512 per gemm mode"
  v=('f32:gemm=f32')
  for g in ${MODES_GEMM:-bf16x3 tf32 bf16 q16mma}; do v+=("$g:gemm=$g"); done
  # bf16x3 with smaller tiles: a tile that stays in the L2 (50 MB) between
  # its dequant_rows and its GEMM saves its HBM round trip
  for m in ${MODES_SCRATCH:-32 64}; do v+=("bf16x3-${m}MiB:gemm=bf16x3,gemm_scratch_mib=$m"); done
  AB_ROUNDS=1 AB_N=16 bash "$root/tools/device/ab-bench.sh" cuda-batched "${v[@]}" \
    > "$out/modes-gemm-speed.log" 2>&1
  grep mean "$out/modes-gemm-speed.log"
fi
if [[ $steps == *depth* ]]; then
  say "tg64 at depth ${MODES_DEPTH:-16384}: KV f32 split, f16 split, f16 mma; llama.cpp fa=1"
  for d in ${MODES_DEPTH:-16384}; do
    AB_ROUNDS=1 AB_D=$d AB_P=0 AB_N=64 AB_R=2 bash "$root/tools/device/ab-bench.sh" cuda-batched \
      'f32-split:gemm=bf16' 'f16-split:gemm=bf16,kv_cache.type=f16' \
      'f16-mma:gemm=bf16,kv_cache.type=f16,decode_attention=mma'
  done > "$out/modes-depth.log" 2>&1
  [ -x /tmp/llama/build/bin/llama-bench ] &&
    timeout 120 /tmp/llama/build/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 64 -r 2 \
      -d "$(echo ${MODES_DEPTH:-16384} | tr ' ' ,)" 2>/dev/null | grep -E '^\|' >> "$out/modes-depth.log"
  grep -E 'mean|^\|' "$out/modes-depth.log"
fi
if [[ $steps == *profile* ]]; then
  g=${MODES_PROFILE_GEMM:-bf16x3}
  say "profile: cuda-batched, gemm = $g, graph = false, pp512 and tg128"
  printf '[general]\nlog_level = info\n[cuda-batched]\nprofile = true\ngraph = false\ngemm = %s\n' "$g" \
    > /tmp/modes-prof.ini
  timeout 200 $K bench -m $M -B cuda-batched --config /tmp/modes-prof.ini -p 512 -n 128 -r 1 -b 512 \
    > "$out/modes-profile.log" 2>&1
  grep -E 'T>1|host|step' "$out/modes-profile.log" | head -40
fi
say "done"
