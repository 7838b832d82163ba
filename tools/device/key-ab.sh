#!/bin/bash
# One backend key's two values against each other, decode only, on the GPU
# machine, from the build tree that on-device-gpu.sh made (its
# LD_LIBRARY_PATH; all-gpu.sh's WHILE_PEER runs it there):
#
#   bash $REPO/tools/device/key-ab.sh KEY VALUE_A VALUE_B
#
# ab-bench.sh's alternated rounds (AB_ROUNDS, default 2) of tg128 on each
# of AB_BACKENDS (default cuda-batched cuda-serial), on the 7B Q4_K_M
# (/tmp/q7b-q4km.gguf, written by peer/on-device-peer.sh) or, before it
# exists, an 8-layer synthetic of the 7B's widths (Q4_K projections, a
# Q6_K output) written here; then kiln qa of the stories260K golden set
# with KEY = VALUE_B on cuda-batched. Reports, checks nothing.
set -u
[ $# = 3 ] || { echo "usage: $0 KEY VALUE_A VALUE_B"; exit 2; }
key=$1 a=$2 b_val=$3
out=${OUT:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
K=$PWD/cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
M=/tmp/q7b-q4km.gguf
if [ ! -f $M ]; then
  M=/tmp/q7b-8l-q4k.gguf
  [ -f $M ] || $K synth --arch qwen2 --layers 8 --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --type Q4_K --embd-type Q6_K --untied --vocab 152064 --ctx 4096 --seed 5 -o $M 2>&1 | tail -1
fi
echo "== $M ($(du -h $M | cut -f1)): $key = $a against $b_val"
for be in ${AB_BACKENDS:-cuda-batched cuda-serial}; do
  KILN=$K AB_MODEL=$M AB_P=0 AB_N=128 bash "$here/ab-bench.sh" "$be" "$a:$key=$a" "$b_val:$key=$b_val"
done
printf '[cuda-batched]\n%s = %s\n' "$key" "$b_val" > "$out/key-qa.ini"
$K qa -m ../shared/models/stories260K.gguf --golden "$here/../../tests/golden/stories260K.golden" \
  -B cuda-batched --config "$out/key-qa.ini" --fallback error 2>&1 | grep -E '^golden|error'
