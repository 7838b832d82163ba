#!/bin/bash
# Perplexity on cpu and every CUDA backend, side by side (issue 11: they must
# agree to 1e-4 relative). Runs on the GPU machine from the build tree that
# on-device-gpu.sh made; pass it as that script's command, with the GPU
# suites left out:
#
#   TESTS=' ' bash .device/on-device-gpu.sh bash $PWD/tools/device/perplexity.sh
#
# Models: stories260K (F32 weights; the test text's own model, so the
# numbers are llama.cpp's: tests/data/perplexity/stories260K.ppl) and a
# synthesized Qwen2 (hidden 896, Q8_0 weights, the real Qwen2 vocabulary:
# the quantized matvec and GEMM kernels). Text: tests/data/perplexity/
# stories.txt, 256-token chunks. For each model it prints every backend's
# PPL +/- and its difference from cpu relative to cpu's; a difference above
# 1e-4 (PPL_TOL) counts as a failure, and the exit status is their number.
set -u
out=${OUT:-/tmp}
K=./cli/kiln
M=$(cd ../shared/models && pwd)
T=tests/data/perplexity/stories.txt
tol=${PPL_TOL:-1e-4}
export KILN_PLUGIN_PATH=$PWD/.libs
cc120=$out/ppl-cc120.ini
printf '[cuda-cc120]\nallow_lower_cc = true\n' > "$cc120"
cfg() { [ "$1" = cuda-cc120 ] && echo "--config $cc120"; }
backends=${PPL_BACKENDS:-cpu cuda-serial cuda-batched cuda-cc120}
$K synth --arch qwen2 --embd 896 --heads 14 --heads-kv 2 --ff 4864 --layers 2 --type Q8_0 --embd-type Q8_0 \
  --vocab-from "$M/ggml-vocab-qwen2.gguf" --seed 5 -o /tmp/ppl-qwen2.gguf 2>&1 | tail -1
bad=0
for model in "$M/stories260K.gguf" /tmp/ppl-qwen2.gguf; do
  name=$(basename "$model" .gguf)
  echo "== perplexity of $name over $T, -c 256"
  printf '%-14s %14s %12s %12s\n' backend PPL "+/-" "rel. to cpu"
  ref=""
  for b in $backends; do
    j=$out/ppl-$name-$b.json
    if ! $K perplexity -m "$model" -f $T -c 256 -B $b $(cfg $b) --fallback error --json > "$j" 2> "$j.err"; then
      echo "$b: failed: $(tail -1 "$j.err")"; bad=$((bad + 1)); continue
    fi
    ppl=$(grep -o '"ppl":[-0-9.eE+]*' "$j" | cut -d: -f2)
    err=$(grep -o '"ppl_err":[-0-9.eE+]*' "$j" | cut -d: -f2)
    [ -z "$ref" ] && ref=$ppl
    rel=$(awk -v a="$ppl" -v r="$ref" 'BEGIN { d = (a - r) / r; printf "%.3e", d < 0 ? -d : d }')
    printf '%-14s %14.6f %12.6f %12s\n' "$b" "$ppl" "$err" "$rel"
    awk -v d="$rel" -v t="$tol" 'BEGIN { exit !(d > t) }' && { echo "!! $b differs from cpu by $rel > $tol"; bad=$((bad + 1)); }
  done
done
grep -E '^(ppl|ppl_f32kv) = ' tests/data/perplexity/stories260K.ppl | sed 's/^/llama.cpp stories260K: /'
rm -f /tmp/ppl-qwen2.gguf
echo "== perplexity: $bad failure(s)"
exit $bad
