#!/bin/bash
# Every GPU suite under NVIDIA's compute-sanitizer, with each of its four
# tools (memcheck: out-of-bounds and misaligned accesses; racecheck:
# shared-memory hazards; initcheck: reads of device memory nothing wrote;
# synccheck: barriers misused), on the GPU machine, from the build tree
# that on-device-gpu.sh made (run it as that script's command, or later in
# the same warm machine from /tmp/kiln-build with that script's
# LD_LIBRARY_PATH: the CUDA libraries and the private sysroot's):
#
#   bash .device/on-device-gpu.sh bash $PWD/tools/device/sanitize.sh
#
# Suites: every tests/gpu/test_gpu_* program except the expected-failure
# builds (*_stale), and tests/unit/test_cuda_plugins; each covers all three
# CUDA backends (KILN_REQUIRE_GPU=1: none may skip). A run fails when the
# suite fails, when the tool reports anything (--error-exitcode, and the
# summary line must say 0 errors / 0 hazards), or when it outlasts
# SAN_TIMEOUT seconds. Runs SAN_JOBS at a time (they share the GPU). The
# per-run logs join $OUT/sanitize.log as each run ends (one file: the run
# tool brings back few; a sweep its caller cuts short keeps them); each
# run's summary line, with the three commonest sites of its printed
# reports ("[at kiln_bias_add x12, ...]"), is printed as it ends (and kept
# in $OUT/sanitize-lines.txt), the verdicts last, one per suite and tool,
# and the exit status is the number of failed runs.
#   SAN_TOOLS="memcheck initcheck"   a subset of the tools
#   SAN_SUITES="tests/gpu/test_gpu_ops"   a subset of the suites
#   SAN_SPLIT="test_gpu_golden test_gpu_qwen35"   (the default) suites run once
#   per CUDA backend (KILN_TEST_BACKENDS), as suite@backend: under the tools
#   each takes minutes for the three backends, and the runs share the GPU
#   SAN_SPLIT_TOOLS="racecheck"   (the default) tools under which every
#   tests/gpu suite runs once per backend: racecheck is the slowest (test_gpu_bounds and
#   test_gpu_attention outlasted 130 s whole on an H200, 2026-12-07)
set -uo pipefail
out=${OUT:-/tmp}
jobs=${SAN_JOBS:-4}
limit=${SAN_TIMEOUT:-420}
tools=${SAN_TOOLS:-memcheck racecheck initcheck synccheck}
if [ -z "${SAN_SUITES:-}" ]; then
  SAN_SUITES=""
  for f in tests/gpu/test_gpu_*; do
    case $f in *.* | *_stale) continue ;; esac
    [ -x "$f" ] && SAN_SUITES+=" $f"
  done
  SAN_SUITES+=" tests/unit/test_cuda_plugins"
fi
command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer is not on the PATH"; exit 1; }
[ -x ./libtool ] || { echo "run this in a configured build tree (no ./libtool here)"; exit 1; }
# What `make check` gives the suites (tests/local.mk), and no skipping.
export KILN_MODELS_DIR=${KILN_MODELS_DIR:-$(cd ../shared/models 2> /dev/null && pwd)}
export KILN_TOKENIZERS_DIR=${KILN_TOKENIZERS_DIR:-$KILN_MODELS_DIR/../tokenizers}
export KILN_PLUGIN_PATH=$PWD/.libs KILN_SRCDIR=$PWD KILN_BUILDDIR=$PWD
export XDG_CACHE_HOME=$PWD/tests/cache-home KILN_REQUIRE_GPU=1
dir=$(mktemp -d /tmp/sanitize.XXXXXX)

split=${SAN_SPLIT-test_gpu_golden test_gpu_qwen35}
split_tools=${SAN_SPLIT_TOOLS-racecheck}
runs() { # SUITE TOOL BACKEND ("-": every backend in one run), one line each
  local s t b
  for s in $SAN_SUITES; do
    for t in $tools; do
      # (tests/gpu suites only: they honour KILN_TEST_BACKENDS)
      if [[ " $split " == *" $(basename "$s") "* || (" $split_tools " == *" $t "* && $s == tests/gpu/*) ]]; then
        for b in cuda-serial cuda-batched cuda-cc120; do echo "$s $t $b"; done
      else echo "$s $t -"; fi
    done
  done
}
label() { # SUITE BACKEND: the suite's name in the report
  if [ "$2" = - ]; then basename "$1"; else echo "$(basename "$1")@$2"; fi
}
one() { # SUITE TOOL BACKEND: runs it, writes $dir/NAME.log and $dir/NAME.rc,
  # and prints its summary line at once (a sweep cut short still reports
  # the runs that finished, also in $out/sanitize-lines.txt)
  local suite=$1 tool=$2 backend=$3 name rc line only=""
  name=$(label "$suite" "$backend")-$tool
  [ "$backend" = - ] || only=$backend
  KILN_TEST_BACKENDS=$only timeout "$limit" ./libtool --mode=execute compute-sanitizer --tool "$tool" \
    --nvtx true --error-exitcode 86 --print-limit 50 "$suite" > "$dir/$name.log" 2>&1
  rc=$?
  echo $rc > "$dir/$name.rc"
  line=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$dir/$name.log" | tail -1 | sed 's/^=* *//')
  # No summary line: the suite did not start under the tool (a library the
  # loader cannot find, a missing program); its last line says why.
  [ -n "$line" ] || line="no summary line: $(tail -1 "$dir/$name.log" | cut -c1-160)"
  # where the printed reports are (kernel or API call, offsets dropped):
  # the first thing to know when a count is large
  local sites
  sites=$(grep -E '^=+ +at ' "$dir/$name.log" | sed -E 's/^=+ +at //; s/\+0x[0-9a-f]+//; s/ in .*//' |
    sort | uniq -c | sort -rn | head -3 | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')
  [ -n "$sites" ] && line="$line [at $sites]"
  printf 'done: %-28s %-9s exit %-3s %s\n' "$(label "$suite" "$backend")" "$tool" "$rc" \
    "$line" | tee -a "$out/sanitize-lines.txt"
  # the log joins sanitize.log as the run ends (one writer at a time), so
  # a sweep cut short by its caller's time limit keeps what it found
  { flock 9; { echo "######## $(label "$suite" "$backend") under $tool: exit $rc"; cat "$dir/$name.log"; } >> "$out/sanitize.log"; } 9> "$dir/.lock"
}
export -f one label
export dir limit out
: > "$out/sanitize-lines.txt"
: > "$out/sanitize.log"
t0=$(date +%s)
runs | xargs -P "$jobs" -L 1 bash -c 'one "$0" "$1" "$2"'

bad=0
summary=""
while read -r s t b; do
  {
    name=$(label "$s" "$b")-$t
    rc=$(cat "$dir/$name.rc" 2> /dev/null || echo missing)
    line=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$dir/$name.log" | tail -1 | sed 's/^=* *//')
    verdict=ok
    case $line in
    "ERROR SUMMARY: 0 errors" | "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)") ;;
    *) verdict=FAIL ;;
    esac
    [ "$rc" = 0 ] || verdict=FAIL
    [ "$rc" = 124 ] && line="$line (timed out after $limit s)"
    [ -n "$line" ] || line="no summary line: $(tail -1 "$dir/$name.log" | cut -c1-160)"
    [ $verdict = ok ] || bad=$((bad + 1))
    summary+=$(printf '%-28s %-9s %-4s exit %-3s %s' "$(label "$s" "$b")" "$t" "$verdict" "$rc" \
      "$line")$'\n'
  }
done < <(runs)
rm -rf "$dir"
echo "== compute-sanitizer: $(echo $SAN_SUITES | wc -w) suites x $(echo $tools | wc -w) tools ($(runs | wc -l)" \
  "runs) in $(($(date +%s) - t0)) s, $bad failed (logs: sanitize.log)"
printf '%s' "$summary"
exit $bad
