#!/bin/bash
# kiln's copy of ../shared/device/peer/on-device-peer.sh, kept in step with kiln's own flags.
# Runs on the GPU machine (from any folder: it finds .peer/ beside itself), after .device/on-device-gpu.sh has built
# kiln in /tmp/kiln-build (same call or an earlier call on the same warm machine).
#   1. builds llama.cpp with CUDA for sm_90 (llama-bench, llama-quantize) in /tmp/llama,
#      once per machine (about 4-5 minutes on 16 cores);
#   2. writes the Qwen2.5-7B-shaped qwen2 (28 layers, hidden 3584, 28/4 heads, ff 18944,
#      the real Qwen2 vocabulary padded to 152064, tiled random F16 weights) and quantizes it
#      with llama-quantize to Q4_K_M: /tmp/q7b-q4km.gguf, 4.68 GB, once per machine;
#   3. runs llama-bench (flash attention off and on) and `kiln bench` on every CUDA backend
#      on that one file, side by side, and prints the ratios.
# Each step skips what a warm machine already has. PEER_STEPS="build model bench" picks steps;
# the step "depth" runs only the decode-at-depth part (PEER_DEPTHS, below).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd); out=${OUT:-/tmp}; K=/tmp/kiln-build/cli/kiln; M=/tmp/q7b-q4km.gguf
steps=${PEER_STEPS:-build model bench}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_PLUGIN_PATH=/tmp/kiln-build/.libs
PEER_BACKENDS=${PEER_BACKENDS:-cuda-batched cuda-serial cuda-cc120}
# cuda-cc120 opens on the H200 (compute capability 9.0) only when allowed to
printf '[cuda-cc120]\nallow_lower_cc = true\n' > /tmp/peer-cc120.ini
cfg_for() { [ "$1" = cuda-cc120 ] && echo "--config /tmp/peer-cc120.ini"; }
if [[ $steps == *build* && ! -x /tmp/llama/build/bin/llama-bench ]]; then
  rm -rf /tmp/llama && mkdir -p /tmp/llama && tar xzf "$root/.peer/llama-src.tgz" -C /tmp/llama
  (cd /tmp/llama && cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
     -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
     > "$out/llama-cmake.log" 2>&1 &&
   cmake --build build --target llama-bench llama-quantize -j "$(nproc)" > "$out/llama-build.log" 2>&1) ||
    { echo "llama.cpp build failed"; tail -20 "$out/llama-build.log" "$out/llama-cmake.log"; exit 1; }
  echo "== llama.cpp built ($(cat "$root/.peer/VERSION"))"
fi
if [[ $steps == *model* && ! -f $M ]]; then
  t=$(date +%s); vocab=""
  for d in "$root/.device/shared" "$root/../shared" "$root/shared"; do
    [ -f "$d/models/ggml-vocab-qwen2.gguf" ] && { vocab=$d/models/ggml-vocab-qwen2.gguf; break; }; done
  [ -n "$vocab" ] || { echo "no ggml-vocab-qwen2.gguf in .device/shared/models or ../shared/models"; exit 1; }
  PYTHONPATH=/tmp/llama/gguf-py python3 "$root/.peer/synth_big.py" "$vocab" /tmp/q7b-f16.gguf > "$out/synth.log" 2>&1 &&
  /tmp/llama/build/bin/llama-quantize /tmp/q7b-f16.gguf $M Q4_K_M "$(nproc)" > "$out/quantize.log" 2>&1 ||
    { echo "model step failed"; tail -5 "$out/synth.log" "$out/quantize.log"; exit 1; }
  rm -f /tmp/q7b-f16.gguf; echo "== $M written in $(( $(date +%s) - t )) s"
fi
if [[ $steps == *bench* ]]; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  /tmp/llama/build/bin/llama-bench -m $M -ngl 99 -fa 0,1 -p 512 -n 128 -r 3 2>/dev/null |
    tee "$out/llama-bench.txt" | grep -E '^\|'
  for b in $PEER_BACKENDS; do
    echo "-- kiln $b"; timeout 300 $K bench -m $M -B "$b" $(cfg_for "$b") -p 512 -n 128 -r 3 -b 512 ${KILN_BENCH_ARGS:-} 2>&1 |
      tee "$out/kiln-bench-$b.txt" | grep -E '^\| |error'
  done
  echo "(ratios: divide kiln's t/s by llama-bench's pp512 and tg128 rows, same run, same file)"
fi
# Decode at depth: PEER_DEPTHS="1024 3840 16384" compares tg64 after a prompt of that many tokens
# (llama-bench -d D and kiln bench -d D: the same flag, the same test), on PEER_DEPTH_BACKENDS
# (default: the first of PEER_BACKENDS).
if [[ ($steps == *bench* || $steps == *depth*) && -n ${PEER_DEPTHS:-} ]]; then
  /tmp/llama/build/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 64 -d "$(echo $PEER_DEPTHS | tr ' ' ,)" -r 2 2>/dev/null |
    tee "$out/llama-bench-depth.txt" | grep -E '^\| qwen'
  for b in ${PEER_DEPTH_BACKENDS:-${PEER_BACKENDS%% *}}; do
    for d in $PEER_DEPTHS; do
      echo "-- kiln $b, tg64 after $d prompt tokens"
      timeout 300 $K bench -m $M -B "$b" $(cfg_for "$b") -d "$d" -p 0 -n 64 -r 2 -b 512 ${KILN_BENCH_ARGS:-} 2>&1 | grep -E '^\| .*tg|error'
    done
  done
fi
