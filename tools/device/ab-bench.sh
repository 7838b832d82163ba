#!/bin/bash
# kiln bench of one backend on one file under several configurations,
# alternated round by round on the same warm machine, so that a difference
# between two settings is not a difference between two machines or two
# minutes of a boost clock. Runs where on-device-gpu.sh built kiln
# (/tmp/kiln-build) and on-device-peer.sh wrote the 7B (/tmp/q7b-q4km.gguf):
#
#   bash tools/device/ab-bench.sh cuda-batched 'fused:' 'kernel:attention_merge=kernel'
#
# Each variant is LABEL:KEY=VALUE[,KEY=VALUE...], each KEY set in the
# backend's section, a SECTION.KEY (kv_cache.type=f16) in its own
# ([cuda-cc120] also gets allow_lower_cc = true). AB_ROUNDS (default 2)
# rounds; each run is `kiln bench -p AB_P -n AB_N -r AB_R -b 512` (defaults
# 512, 128, 3), with `-d AB_D` when AB_D is set (decode after a context of
# that many tokens). Prints every run's table rows, labelled, then the tg
# and pp means per variant.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BACKEND LABEL:KEY=VALUE[,...] ..."; exit 2; }
K=${KILN:-/tmp/kiln-build/cli/kiln}
M=${AB_MODEL:-/tmp/q7b-q4km.gguf}
b=$1; shift
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_PLUGIN_PATH=${KILN_PLUGIN_PATH:-/tmp/kiln-build/.libs}
[ -x "$K" ] && [ -f "$M" ] || { echo "no kiln at $K or no model at $M"; exit 1; }
dir=$(mktemp -d)
for v in "$@"; do
  label=${v%%:*}; keys=${v#*:}
  {
    echo "[$b]"
    [ "$b" = cuda-cc120 ] && echo "allow_lower_cc = true"
    # KEY=VALUE in the backend's section, SECTION.KEY=VALUE in its own
    for kv in $(echo "$keys" | tr ',' ' '); do
      case ${kv%%=*} in
      *.*) printf '[%s]\n%s = %s\n[%s]\n' "${kv%%.*}" "$(echo "${kv#*.}" | cut -d= -f1)" "${kv#*=}" "$b" ;;
      *) echo "${kv%%=*} = ${kv#*=}" ;;
      esac
    done
  } > "$dir/$label.ini"
done
for r in $(seq "${AB_ROUNDS:-2}"); do
  for v in "$@"; do
    label=${v%%:*}
    timeout 300 "$K" bench -m "$M" -B "$b" --config "$dir/$label.ini" -p "${AB_P:-512}" \
      -n "${AB_N:-128}" -r "${AB_R:-3}" -b 512 ${AB_D:+-d $AB_D} 2>&1 | grep -E '^\| .*(pp|tg)[0-9]|error' |
      sed "s/^/$b $label round $r: /" | tee -a "$dir/rows.txt"
  done
done
# The t/s column is the 8th field of the table's '|'-separated row.
for v in "$@"; do
  label=${v%%:*}
  for t in pp tg; do
    grep -E "^$b $label round" "$dir/rows.txt" | grep -E "\| $t[0-9]+ \|" |
      awk -F'|' -v l="$label" -v t="$t" -v b="$b" \
        '{ split($8, a, " "); s += a[1]; n++ } END { if (n) printf "%s %s %s mean %.1f t/s over %d runs\n", b, l, t, s / n, n }'
  done
done
rm -rf "$dir"
