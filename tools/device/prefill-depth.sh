#!/bin/bash
# Prefill attention and decode at depth on the GPU machine, kiln alone (no
# llama.cpp: for a call without the peer's build), from the build tree
# on-device-gpu.sh made (/tmp/kiln-build):
#
#   bash $REPO/tools/device/prefill-depth.sh
#
# The model: the Qwen2.5-7B's layer shapes (hidden 3584, 28/4 heads of 128,
# ff 18944, Q4_K matrices, vocabulary 152064 untied, Q6_K head) but
# DEPTH_LAYERS layers (default 4), written by kiln synth in seconds. Then:
#   1. pp512 on cuda-batched and cuda-cc120 with prefill_attention = flash
#      and = rows (the same file, the same run: the flash kernel's gain);
#   2. the profiled 512-token prefill (flash, graph = false), its attention
#      lines;
#   3. tg32 after DEPTHS tokens (default "64 1024 3840 16384") on
#      cuda-batched with log_level = info: the decode steps captured and
#      replayed, and the tok/s, to see what a depth costs per token;
#   4. the profiled decode at the first depth past 64 (graph = false), the
#      per-kind table.
# Logs to $OUT/prefill-depth.log; the lines that matter are printed.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
log=$out/prefill-depth.log
: > "$log"
L=${DEPTH_LAYERS:-4}
M=/tmp/depth-7b-$L.gguf
t=$(date +%s)
[ -f $M ] || $K synth --arch qwen2 --layers "$L" --embd 3584 --ff 18944 --heads 28 --heads-kv 4 --type Q4_K \
  --embd-type Q6_K --untied --vocab 152064 --ctx 32768 -o $M >> "$log" 2>&1 ||
  { echo "synth failed"; tail -3 "$log"; exit 1; }
echo "== $M ($(du -h $M | cut -f1), $L layers) in $(( $(date +%s) - t )) s" | tee -a "$log"
ini() { # FILE BACKEND KEY=VALUE...: a config with [general] log_level = info
  local f=$1 b=$2; shift 2
  { printf '[general]\nlog_level = info\n[cuda-cc120]\nallow_lower_cc = true\n'
    printf '[%s]\n' "$b"; for kv in "$@"; do printf '%s\n' "${kv/=/ = }"; done; } > "$f"
}
bad=0
for b in cuda-batched cuda-cc120; do
  for a in flash rows; do
    ini /tmp/pd.ini $b prefill_attention=$a
    echo "-- pp512 $b prefill_attention = $a" | tee -a "$log"
    timeout 120 $K bench -m $M -B $b --config /tmp/pd.ini -p 512 -n 0 -r 3 -b 512 > /tmp/pd.txt 2>&1 || bad=$((bad + 1))
    cat /tmp/pd.txt >> "$log"; grep -E '^\| .*pp|error' /tmp/pd.txt
  done
done
ini /tmp/pd.ini cuda-batched profile=true graph=false
echo "-- profile: pp512 cuda-batched flash" | tee -a "$log"
timeout 120 $K bench -m $M -B cuda-batched --config /tmp/pd.ini -p 512 -n 0 -r 1 -b 512 > /tmp/pd.txt 2>&1 || bad=$((bad + 1))
cat /tmp/pd.txt >> "$log"; grep -E 'attention|steps of|host' /tmp/pd.txt | sed 's/^kiln\[[a-z0-9-]*\]: info: //' | head -12
depths=${DEPTHS:-64 1024 3840 16384}
for d in $depths; do
  ini /tmp/pd.ini cuda-batched
  echo "-- tg32 @ d$d cuda-batched" | tee -a "$log"
  timeout 150 $K bench -m $M -B cuda-batched --config /tmp/pd.ini -d "$d" -p 0 -n 32 -r 2 -b 512 > /tmp/pd.txt 2>&1 || bad=$((bad + 1))
  cat /tmp/pd.txt >> "$log"; grep -E '^\| .*tg|captured|error' /tmp/pd.txt | sed 's/^kiln\[[a-z0-9-]*\]: info: //'
done
for d in $depths; do
  [ "$d" -le 64 ] && continue
  ini /tmp/pd.ini cuda-batched profile=true graph=false
  echo "-- profile: tg8 @ d$d cuda-batched, graph = false" | tee -a "$log"
  timeout 120 $K bench -m $M -B cuda-batched --config /tmp/pd.ini -d "$d" -p 0 -n 8 -r 1 -b 512 > /tmp/pd.txt 2>&1 || bad=$((bad + 1))
  cat /tmp/pd.txt >> "$log"
  grep -E 'steps of one|host|attention|matvec|mul_mat|rms_norm|rope|store_kv|swiglu|quantize' /tmp/pd.txt | grep -v 'T>1' |
    sed 's/^kiln\[[a-z0-9-]*\]: info: //' | head -24
  break
done
echo "== prefill-depth: $bad failed run(s)"
exit $bad
