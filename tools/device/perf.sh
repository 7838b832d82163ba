#!/bin/bash
# Decode and prefill speed of the CUDA backends on the GPU machine, with
# the per-node profile ([<plugin>] profile = true), from the build tree
# that on-device-gpu.sh made. Pass it as that script's command, with the
# script's own test run emptied so that the GPU tests run here, beside the
# (single-threaded, ~50 s) synthesis of the bench model:
#
#   TESTS=' ' bash .device/on-device-gpu.sh bash $PWD/tools/device/perf.sh
#
# Runs, in order: the GPU suites (KILN_REQUIRE_GPU=1) while the bench
# model is synthesized (qwen2, hidden 3584, 4 layers, ff 18944, Q8_0,
# tied vocabulary 151936: 1.5 GB of weights); parity of every CUDA backend
# against cpu:f64 on a small synthesized qwen2 (hidden 896: rows whose
# bytes are not 16-byte multiples) at the golden suite's 1e-4; kiln bench
# on every CUDA backend; the profile of cuda-serial and cuda-batched; and
# launch-shape variants of cuda-serial (where a matvec splits rows between
# warps, rows per warp group, decode attention warps), each rebuilt from a
# sed of its source. Logs go to $OUT (at most 8 files come back); the
# summary is printed last.
# PERF_QUICK=1 skips the variants.
set -uo pipefail
out=${OUT:-/tmp}
K=./cli/kiln
M=$(cd ../shared/models && pwd)
export KILN_PLUGIN_PATH=$PWD/.libs
bench=/tmp/bench.gguf
small=/tmp/q2small.gguf
log=$out/perf.log
: > "$log"
bad=0
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$log"; }

$K synth --arch qwen2 --embd 3584 --heads 28 --heads-kv 4 --ff 18944 --layers 4 --type Q8_0 \
  --embd-type Q8_0 --vocab 151936 --ctx 1024 -o $bench > "$out/synth.log" 2>&1 &
synth=$!

stamp "GPU suites"
gpu_tests="$(make -s print-gpu-tests) \
tests/unit/test_cuda_plugins tests/unit/test_cuda_templates tests/unit/test_kcache_guard \
tests/unit/test_kcache_guard_drop tests/unit/test_kcache_seed"
timeout 300 make -j"$(nproc)" check TESTS="$gpu_tests" > "$out/tests.log" 2>&1 || bad=$((bad + 1))
for f in $gpu_tests; do
  echo "#### $f" >> "$out/tests.log"
  cat "$f.log" >> "$out/tests.log" 2>/dev/null
done
grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' "$out/tests.log" | tee -a "$log"
grep -E 'FAIL|NOT REFUSED|WRITTEN' "$out/tests.log" | grep -v '^XFAIL' | head -20 | tee -a "$log"

stamp "parity against cpu:f64 on a small qwen2 (hidden 896, Q8_0)"
$K synth --arch qwen2 --embd 896 --heads 14 --heads-kv 2 --ff 4864 --layers 2 --type Q8_0 \
  --embd-type Q8_0 --vocab-from "$M/ggml-vocab-qwen2.gguf" --special-ms 1e-6 --seed 5 -o $small \
  > /dev/null 2>&1
cc120=/tmp/cc120.ini
printf '[cuda-cc120]\nallow_lower_cc = true\n' > $cc120
prof=/tmp/prof.ini
printf '[general]\nlog_level = info\n[cuda-serial]\nprofile = true\n' > $prof
printf '[cuda-batched]\nprofile = true\n' >> $prof
cfg() { [ "$1" = cuda-cc120 ] && echo "--config $cc120"; }
P=$'<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n'
P+=$'<|im_start|>assistant\n'
for b in cuda-serial cuda-batched cuda-cc120; do
  $K parity -m $small --chat -p "$P" --ref cpu:f64 --test $b $(cfg $b) --max-rel-l2 1e-4 \
    --max-norm-dev 1e-4 > /tmp/parity.txt 2>&1 || bad=$((bad + 1))
  echo "$b: $(grep -E '^logits|^(PASS|FAIL)' /tmp/parity.txt | tr '\n' ' ')" | tee -a "$log"
done

wait $synth || { echo "synth failed"; cat "$out/synth.log"; exit 1; }
stamp "bench model ready: $(du -h $bench | cut -f1)"

run_bench() { # NAME BACKEND ARGS...
  local name=$1 b=$2
  shift 2
  $K bench -m $bench -B "$b" "$@" > /tmp/bench.txt 2>&1 || bad=$((bad + 1))
  cat /tmp/bench.txt >> "$log"
  # the table's tg and pp rows: test | t/s | ms/token | total ms
  printf '%-28s %s | %s\n' "$name" \
    "$(grep '| tg' /tmp/bench.txt | awk -F'|' '{print $8 "t/s," $9 "ms/token"}')" \
    "$(grep '| pp' /tmp/bench.txt | awk -F'|' '{print $8 "t/s," $10 "ms total"}')" >> /tmp/summary.txt
}
: > /tmp/summary.txt
for b in cuda-serial cuda-batched cuda-cc120; do
  stamp "bench $b"
  reps=3; [ $b = cuda-cc120 ] && reps=1
  run_bench "$b" $b -p 512 -n 128 -r $reps -b 512 $(cfg $b)
done
for b in cuda-serial cuda-batched; do
  stamp "profile $b"
  run_bench "$b (profiled)" $b -p 512 -n 128 -r 1 -b 512 --config $prof
  grep 'profile' /tmp/bench.txt | sed 's/^kiln\[[a-z0-9-]*\]: info: //' > "/tmp/profile-$b.txt"
done

variant() { # NAME FILE SED-EXPRESSION: cuda-serial rebuilt with FILE edited
  local name=$1 f=$2 expr=$3
  cp "$f" /tmp/variant.bak
  sed -i "$expr" "$f"
  if cmp -s "$f" /tmp/variant.bak; then
    echo "variant $name: the sed changed nothing" | tee -a "$log"
    return
  fi
  stamp "variant $name"
  if ! make -j"$(nproc)" kiln-cuda-serial.la > /dev/null 2>&1; then
    echo "variant $name: build failed" | tee -a "$log"
    bad=$((bad + 1))
  fi
  run_bench "serial $name" cuda-serial -p 512 -n 128 -r 1 -b 512 --config $prof
  grep -E 'profile.*(mul_mat|attention).*\[T=1\]|profile, steps of one' /tmp/bench.txt |
    sed 's/^kiln\[[a-z0-9-]*\]: info: //' > "/tmp/variant-$name.txt"
  cp /tmp/variant.bak "$f"
}
if [ "${PERF_QUICK:-0}" != 1 ]; then
  entry=backends/cuda-serial/serial_entry.c prep=backends/cuda-common/cuda_prepare.c
  variant nosplit $prep 's/#define MATVEC_SPLIT_BELOW 4096/#define MATVEC_SPLIT_BELOW 0/'
  variant allsplit $prep 's/#define MATVEC_SPLIT_BELOW 4096/#define MATVEC_SPLIT_BELOW (1 << 30)/'
  variant rows1 $entry 's/\.matvec_rows_per_group = 2/.matvec_rows_per_group = 1/'
  variant attn4 $entry 's/\.attention_warps_decode = 16/.attention_warps_decode = 4/'
  make -j"$(nproc)" kiln-cuda-serial.la > /dev/null 2>&1
fi
stamp "done"

{
  echo "======== summary ($bad failures)"
  cat /tmp/summary.txt
  for b in cuda-serial cuda-batched; do
    echo "---- profile $b"
    cat "/tmp/profile-$b.txt"
  done
  for f in /tmp/variant-*.txt; do
    [ -f "$f" ] || continue
    echo "---- $(basename "$f" .txt)"
    cat "$f"
  done
} | tee -a "$log"
exit $((bad > 0))
