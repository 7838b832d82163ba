#!/bin/bash
# One backend key's two values against each other, decode only, on the GPU
# machine, from the build tree that on-device-gpu.sh made (its
# LD_LIBRARY_PATH):
#
#   bash $REPO/tools/device/key-ab.sh KEY VALUE_A VALUE_B
#
# tg128 of the 7B Q4_K_M (/tmp/q7b-q4km.gguf, written by
# peer/on-device-peer.sh; without it an 8-layer synthetic of the 7B's
# widths, Q4_K projections and a Q6_K output, written here), the two values
# alternated AB_ROUNDS times (default 2) on each of AB_BACKENDS (default
# cuda-batched cuda-serial), so that a difference is not one of two
# machines or two minutes of a boost clock; then kiln qa of the stories260K
# golden set with KEY = VALUE_B on cuda-batched. Prints the tg128 column of
# every run; reports, checks nothing (all-gpu.sh's WHILE_PEER runs it).
set -u
[ $# = 3 ] || { echo "usage: $0 KEY VALUE_A VALUE_B"; exit 2; }
key=$1 a=$2 b_val=$3
out=${OUT:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
K=./cli/kiln
export KILN_PLUGIN_PATH=$PWD/.libs
M=/tmp/q7b-q4km.gguf
if [ ! -f $M ]; then
  M=/tmp/q7b-8l-q4k.gguf
  [ -f $M ] || $K synth --arch qwen2 --layers 8 --embd 3584 --ff 18944 --heads 28 --heads-kv 4 \
    --type Q4_K --embd-type Q6_K --untied --vocab 152064 --ctx 4096 --seed 5 -o $M 2>&1 | tail -1
fi
echo "== $M ($(du -h $M | cut -f1)): $key = $a against $b_val"
for be in ${AB_BACKENDS:-cuda-batched cuda-serial}; do
  for r in $(seq "${AB_ROUNDS:-2}"); do
    for v in "$a" "$b_val"; do
      printf '[%s]\n%s = %s\n[cuda-cc120]\nallow_lower_cc = true\n' "$be" "$key" "$v" > "$out/key-ab.ini"
      printf -- '-- %s %s = %s (round %s): ' "$be" "$key" "$v" "$r"
      timeout 120 $K bench -m $M -B "$be" --config "$out/key-ab.ini" -p 0 -n 128 -r 3 2>&1 |
        grep -E 'tg128|error' | awk -F'|' '{ print (NF > 1 ? $8 : $0) }'
    done
  done
done
printf '[cuda-batched]\n%s = %s\n' "$key" "$b_val" > "$out/key-qa.ini"
$K qa -m ../shared/models/stories260K.gguf --golden "$here/../../tests/golden/stories260K.golden" \
  -B cuda-batched --config "$out/key-qa.ini" --fallback error 2>&1 | grep -E '^golden|error'
