#!/bin/bash
# Everything a CUDA change needs on the GPU machine, in ONE device call of
# at most 600 s on 16 cores, from the repository root with .device/ and
# .peer/ carried (here: tools/device/prepare-gpu.sh from a configured build
# tree, and tools/device/peer/prepare-peer.sh):
#
#   bash tools/device/all-gpu.sh
#
# Two tracks at once, then the timed runs alone on the GPU:
#   A (CPU)  llama.cpp built for sm_90 and the Qwen2.5-7B-shaped Q4_K_M
#            written (tools/device/peer/on-device-peer.sh, steps build and
#            model; 4-8 minutes on a fresh machine, skipped on a warm one;
#            PEER=0 leaves it out, for a call of suites and sanitizer only);
#   B (GPU)  kiln built from the release tarball and every GPU suite run
#            with KILN_REQUIRE_GPU=1 (.device/on-device-gpu.sh, at most
#            SUITES_TIMEOUT s), then every GPU suite under compute-sanitizer's
#            four tools (tools/device/sanitize.sh; SANITIZE=0 leaves it out,
#            and it stops AFTER_SANITIZE s before the deadline, after
#            at most SAN_MAX s, default 300), then
#            perplexity on cpu and every CUDA backend (PERPLEXITY=0: not);
#   then     kiln parity --per-op of the 7B file against cpu:f64 on every
#            CUDA backend (PARITY_BACKENDS; PARITY_7B=0: not), with the
#            ChatML prompt of the decode issue, kiln qa (the stories260K
#            golden set) on every CUDA backend (QA=0: not), llama-bench (fa 0 and 1) and
#            `kiln bench` on the three CUDA backends on that one file, and
#            `kiln bench` on cuda-batched with profile = true, once with
#            graph = false (the per-node table) and once with graph = true
#            (BENCH=0: none of these), and the kernel timeline of
#            cuda-batched's decode (tools/device/kernel-trace; TRACE=0:
#            not). WHILE_PEER="cmd" runs cmd in the
#            build tree between tracks B and A (the GPU is idle while
#            llama.cpp builds), its log in $OUT/while-peer.log.
# Each stage checks the time left (DEADLINE seconds from the start, default
# 570) and is skipped or cut, saying so; the logs of a finished stage are in
# $OUT at once, so a call cut short still brings them back: summary.txt
# (what matters, also printed last), tests.log (every GPU suite's log),
# sanitize.log, perplexity.log, parity-7b.log, bench.log, profile.log, and
# the build and peer logs.
set -uo pipefail
root=$(pwd)
out=${OUT:-/tmp/all-gpu-out}
mkdir -p "$out"
work=/tmp/all-gpu
rm -rf "$work" && mkdir -p "$work"
printf '[cuda-cc120]\nallow_lower_cc = true\n' > "$work/cc120.ini"
deadline=${DEADLINE:-570}
t0=$(date +%s)
left() { echo $((deadline - ($(date +%s) - t0))); }
summary=$out/summary.txt
: > "$summary"
say() { echo "== [$(($(date +%s) - t0)) s] $*" | tee -a "$summary"; }
[ -d .device ] && [ -d .peer ] || { echo "carry .device and .peer (see this script's header)"; exit 1; }

if [ "${PEER:-1}" = 1 ]; then
  say "track A: llama.cpp and the 7B Q4_K_M in the background"
  (OUT=$work PEER_STEPS="build model" nice -n 10 bash .peer/on-device-peer.sh > "$work/peer-prep.log" 2>&1
   echo $? > "$work/peer-prep.rc") &
  peer=$!
else
  say "track A left out (PEER=0): no llama.cpp, no 7B file unless a warm machine has them"
  peer=""
  echo skipped > "$work/peer-prep.log"
fi

say "track B: kiln build and every GPU suite (KILN_REQUIRE_GPU=1)"
OUT=$work timeout "${SUITES_TIMEOUT:-240}" bash .device/on-device-gpu.sh > "$work/gpu.log" 2>&1
gpu_rc=$?
grep -E '^(== built|== tests done)' "$work/gpu.log" | tee -a "$summary"
grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' "$work/check.log" 2>/dev/null | tee -a "$summary"
save_logs() { # what has come so far, into $out at once: a later stage may be cut short
  # The suites' logs from the build tree itself: on-device-gpu.sh copies
  # them only when make check ends, and SUITES_TIMEOUT may kill it first
  # (2026-12-07: a FAIL whose log never came back).
  for f in /tmp/kiln-build/tests/gpu/*.log /tmp/kiln-build/tests/unit/test_cuda*.log \
    /tmp/kiln-build/tests/unit/test_kcache_guard*.log; do
    [ -f "$f" ] && [ "$(basename "$f")" != test-suite.log ] && { echo "######## $f"; cat "$f"; }
  done > "$out/tests.log"
  cp "$work/make.log" "$out/build.log" 2> /dev/null
  cp "$work/sanitize.log" "$out/sanitize.log" 2> /dev/null
  cp "$work/sanitize-lines.txt" "$out/sanitize-lines.txt" 2> /dev/null
}
save_logs
# the failing cases themselves, where the summary is all that comes back
grep -E '^ *(FAIL|ERROR)|NOT REFUSED|\[  FAILED  \]' "$out/tests.log" | head -20 | tee -a "$summary"
B=/tmp/kiln-build
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if [ "${SANITIZE:-1}" = 1 ] && [ -x $B/cli/kiln ]; then
  t=$(( $(left) - ${AFTER_SANITIZE:-200} )); [ $t -gt "${SAN_MAX:-300}" ] && t=${SAN_MAX:-300}
  if [ $t -lt 60 ]; then say "$(left) s left: compute-sanitizer skipped"; else
    say "compute-sanitizer, every GPU suite and tool, at most $t s"
    (cd $B && OUT=$work SAN_JOBS=${SAN_JOBS:-8} SAN_TIMEOUT=${SAN_TIMEOUT:-150} \
      timeout $t bash "$root/tools/device/sanitize.sh") > "$work/san.out" 2>&1
    san_rc=$?; [ $san_rc = 124 ] && say "compute-sanitizer cut at $t s (raise the budget)"
    gpu_rc=$((gpu_rc || san_rc))
    grep -E '^(== compute-sanitizer|test_|done: )' "$work/san.out" | tee -a "$summary"
    save_logs
  fi
fi
if [ "${PERPLEXITY:-1}" = 1 ] && [ -x $B/cli/kiln ] && [ "$(left)" -gt 150 ]; then
  say "perplexity, cpu and every CUDA backend"
  (cd $B && OUT=$work timeout 90 bash "$root/tools/device/perplexity.sh") > "$out/perplexity.log" 2>&1
  tail -12 "$out/perplexity.log" | tee -a "$summary"
fi
if [ -n "${WHILE_PEER:-}" ] && [ -x $B/cli/kiln ] && [ "$(left)" -gt $(( ${WHILE_PEER_RESERVE:-180} + 60 )) ]; then
  # The GPU is idle while llama.cpp builds: a command of the caller's, in the build tree.
  say "while track A runs: $WHILE_PEER (at most $(( $(left) - ${WHILE_PEER_RESERVE:-180} )) s)"
  (cd $B && OUT=$work timeout $(( $(left) - ${WHILE_PEER_RESERVE:-180} )) bash -c "$WHILE_PEER") > "$out/while-peer.log" 2>&1
  say "exit $?"; grep -E '^(==|--|parity:|FAIL|logits|golden|\| )| round [0-9]+: | mean ' "$out/while-peer.log" | tee -a "$summary"
fi
say "track B done (exit $gpu_rc); waiting for track A"
[ -n "$peer" ] && wait $peer
say "track A done (exit $(cat "$work/peer-prep.rc" 2> /dev/null || echo '?'))"
tail -3 "$work/peer-prep.log" >> "$summary"
cp "$work/peer-prep.log" "$out/peer.log"

K=/tmp/kiln-build/cli/kiln
M=/tmp/q7b-q4km.gguf
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_PLUGIN_PATH=/tmp/kiln-build/.libs
if [ ! -x $K ] || [ ! -f $M ]; then
  say "no kiln build or no $M: no benchmarks"
else
  if [ "${PARITY_7B:-1}" = 1 ]; then
    # The decode issue's prompt, ChatML written out (the synthetic file has
    # no chat template), on each CUDA backend in its default modes.
    prompt=$'<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n'
    for b in ${PARITY_BACKENDS:-cuda-batched cuda-serial cuda-cc120}; do
      [ "$(left)" -lt 200 ] && { say "$(left) s left: parity on $b skipped"; continue; }
      say "parity: the 7B Q4_K_M on $b vs cpu:f64, per op, the ChatML prompt"
      (cd $B && timeout $(( $(left) - 120 )) ./cli/kiln parity -m $M -p "$prompt" --config "$work/cc120.ini" \
        --ref cpu:f64 --test $b --per-op > "$out/parity-7b-$b.log" 2>&1)
      say "parity $b exit $?"
      grep -E "^(parity:|PASS|FAIL)|^logits" "$out/parity-7b-$b.log" | head -8 | tee -a "$summary"
    done
  fi
  if [ "${QA:-1}" = 1 ]; then
    for b in cuda-batched cuda-serial cuda-cc120; do
      (cd $B && ./cli/kiln qa -m ../shared/models/stories260K.gguf --golden "$root/tests/golden/stories260K.golden" \
        -B $b --config "$work/cc120.ini" --fallback error > "$out/qa-$b.txt" 2>&1)
      say "qa $b (stories260K golden): exit $? $(grep '^golden' "$out/qa-$b.txt")"
    done
  fi
fi
if [ ! -x $K ] || [ ! -f $M ] || [ "${BENCH:-1}" = 0 ]; then :
elif [ "$(left)" -lt 100 ]; then
  say "$(left) s left: the benchmarks are skipped (run PEER_STEPS=bench bash .peer/on-device-peer.sh next)"
else
  say "side by side: llama-bench and kiln bench on $(du -h $M | cut -f1) ($(left) s left)"
  OUT=$work PEER_STEPS=bench bash .peer/on-device-peer.sh > "$out/bench.log" 2>&1
  grep -E '^\| |-- kiln|error' "$out/bench.log" | tee -a "$summary"
  for g in false true; do
    [ "$(left)" -lt 60 ] && { say "$(left) s left: profile graph = $g skipped"; continue; }
    printf '[general]\nlog_level = info\n[cuda-batched]\nprofile = true\ngraph = %s\n' $g > "$work/prof.ini"
    say "profile: cuda-batched, graph = $g, 512 prompt tokens and 128 decoded"
    timeout "$(left)" $K bench -m $M -B cuda-batched --config "$work/prof.ini" -p 512 -n 128 -r 1 \
      -b 512 > "$work/prof-$g.txt" 2>&1
    { echo "######## graph = $g"; cat "$work/prof-$g.txt"; } >> "$out/profile.log"
    grep -E 'decode|steps of one|host|captured|matvec|mul_mat|rms_norm|rope|attention|swiglu|quantize|store_kv|get_rows' \
      "$work/prof-$g.txt" | grep -v 'T>1' | head -40 | sed 's/^kiln\[[a-z0-9-]*\]: info: //' | tee -a "$summary"
  done
fi
if [ -x $K ] && [ -f "$root/.device/trace/libkilntrace.so" ] && [ "${TRACE:-1}" = 1 ]; then
  if [ "$(left)" -lt 120 ]; then
    say "$(left) s left: the kernel trace is skipped"
  else
    # the table comes back in trace.log (and the summary); the CSV stays there
    say "kernel trace: cuda-batched decode under CUPTI (tools/device/kernel-trace)"
    (cd $B && OUT=$work TRACE_BACKENDS=cuda-batched timeout $(( $(left) - 10 )) \
      bash "$root/tools/device/kernel-trace/run.sh") > "$out/trace.log" 2>&1
    grep -vE '^kiln\[' "$out/trace.log" | head -30 | tee -a "$summary"
  fi
fi
say "done; exit status: GPU suites and sanitizer $gpu_rc"
exit $gpu_rc
