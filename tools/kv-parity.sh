#!/bin/bash
# What each [kv_cache] type costs in numbers: `kiln parity --per-op` of the
# test backend with that cache type (--test-kv) against cpu:f64 with the
# configured one (f32), every node and token position, summed up per op
# kind as one Markdown row: the worst relative L2 error, the worst |norm
# ratio - 1|, the lowest cosine, and the rows past parity's default
# thresholds (rel L2 and |ratio - 1| <= 1e-3, cosine >= 0.9999), then
# the same over every node.
#
#   tools/kv-parity.sh MODEL.gguf PROMPT_FILE [TYPE ...]
#
# TYPE defaults to f32 f16 bf16 q8_0 (q8_0 needs head_dim a multiple of
# 32: a model that has not is said so and skipped). KILN (default
# ./cli/kiln, run from a build tree), TEST (default cpu), ARGS (more kiln
# parity flags, e.g. --chat). Exit status: 2 on a usage or run error; the
# rows past the thresholds are data here, not a failure.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 MODEL.gguf PROMPT_FILE [TYPE ...]" >&2; exit 2; }
model=$1 prompt=$2; shift 2
types=${*:-f32 f16 bf16 q8_0}
kiln=${KILN:-./cli/kiln} test=${TEST:-cpu}
csv=$(mktemp -u) err=$(mktemp)
trap 'rm -f "$csv" "$err"' EXIT
echo "| model | KV type | op | worst rel L2 | worst \|ratio - 1\| | lowest cosine | rows past | rows |"
echo "|---|---|---|---|---|---|---|---|"
for t in $types; do
  rm -f "$csv"
  "$kiln" parity -m "$model" -f "$prompt" --ref cpu:f64 --test "$test" --test-kv "$t" --per-op \
    --csv "$csv" ${ARGS:-} > /dev/null 2> "$err"
  # exit status 1 is also a run error: only a written CSV says it ran
  if [ ! -s "$csv" ]; then
    if grep -q 'needs head_dim to be a multiple' "$err"; then
      echo "| $(basename "$model") | $t | (not possible: head_dim is $(grep -oE '(has head_dim|head_dim is) [0-9]+' "$err" | grep -oE '[0-9]+$' | head -1)) | | | | | |"
      continue
    fi
    echo "kiln parity failed for $t:" >&2; cat "$err" >&2; exit 2
  fi
  awk -F, -v m="$(basename "$model")" -v t="$t" 'NR > 1 {
      op = $2; rows[op]++; d = $6 - 1; if (d < 0) d = -d
      if (!(op in rel) || $7 > rel[op]) rel[op] = $7
      if (!(op in dev) || d > dev[op]) dev[op] = d
      if (!(op in cmin) || $5 < cmin[op]) cmin[op] = $5
      if ($10 != 1) bad[op]++
      n++; if ($7 > R) R = $7; if (d > D) D = d; if (n == 1 || $5 < C) C = $5; if ($10 != 1) B++
    } END {
      for (op in rows) printf "| %s | %s | %s | %.3e | %.3e | %.7f | %d | %d |\n", m, t, op, rel[op], dev[op], cmin[op], bad[op], rows[op] | "sort"
      close("sort")
      printf "| %s | %s | **every node** | %.3e | %.3e | %.7f | %d | %d |\n", m, t, R, D, C, B, n
    }' "$csv"
done
