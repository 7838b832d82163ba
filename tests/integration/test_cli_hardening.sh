#!/bin/sh
# What the environment and hostile files must not do to the kiln command
# (issue 14): a cpu-only run needs no cache folder (no HOME, no
# XDG_CACHE_HOME) and no cpu-only command creates one; inspect never passes
# a terminal control byte from a file through; a file synth writes is one
# kiln reads; a NUL byte in a configuration value is an error.
set -u
. "$KILN_SRCDIR/tests/integration/cli_test_lib.sh"
# An empty environment but for PATH, and the library path where the build
# machine keeps its libraries in a private prefix (the GPU machine's
# sysroot): the point is no HOME, no XDG_* and no configuration.
clean_env() { env -i PATH=/usr/bin:/bin ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} "$@"; }

model="$models/stories260K.gguf"

# A FIFO where a file belongs is refused at once, never waited on (opening
# one for reading blocks until a writer comes).
mkfifo "$tmp/fifo" || exit 99
golden="$KILN_SRCDIR/tests/golden/stories260K.golden"
for cmd in "inspect $tmp/fifo" "run -m $tmp/fifo -p Once" "run -m $model --config $tmp/fifo -p Once" \
           "run -m $model -f $tmp/fifo" "qa -m $model --golden $tmp/fifo"; do
  # shellcheck disable=SC2086 # the command's words
  timeout 20 "$kiln" $cmd > "$tmp/out" 2>&1
  rc=$?
  [ $rc = 1 ] || fail "kiln $cmd with a FIFO: exit $rc (124: it waited): $(cat "$tmp/out")"
  grep -q "fifo: not a regular file" "$tmp/out" || fail "kiln $cmd with a FIFO: $(cat "$tmp/out")"
done
echo "ok: a FIFO as model, configuration, prompt file or golden set is refused at once"

# The issue's command: no HOME, no XDG_CACHE_HOME, no configuration.
clean_env "$kiln" run -m "$model" -p "Once upon a time" -n 16 >"$tmp/out" 2>"$tmp/err" \
  || { cat "$tmp/err"; fail "env -i kiln run exited $?"; }
grep -q "there was a little girl" "$tmp/out" || fail "env -i kiln run printed [$(cat "$tmp/out")]"
grep -q "generated 16" "$tmp/err" || fail "env -i kiln run: no summary"
echo "ok: kiln run with an empty environment"

# No cpu-only command creates a cache folder, under HOME or XDG_CACHE_HOME.
mkdir "$tmp/home"
for cmd in "run -m $model -p Once -n 4" "bench -m $model -p 8 -n 4 -r 1" \
           "parity -m $model -p Once --ref cpu:f64 --test cpu" "qa -m $model --golden $golden" \
           "backends" "config --show" "inspect --no-tensors $model" "tokenize -m $model -p Once" \
           "perplexity -m $model -f $KILN_SRCDIR/tests/data/perplexity/stories.txt -c 64 --chunks 1"; do
  # shellcheck disable=SC2086 # the command's words
  clean_env HOME="$tmp/home" "$kiln" $cmd >"$tmp/out" 2>&1 \
    || { cat "$tmp/out"; fail "kiln $cmd exited $? with HOME set"; }
  # shellcheck disable=SC2086
  clean_env XDG_CACHE_HOME="$tmp/xdg" "$kiln" $cmd >"$tmp/out" 2>&1 \
    || { cat "$tmp/out"; fail "kiln $cmd exited $? with XDG_CACHE_HOME set"; }
  # .nv is the NVIDIA driver's own JIT cache (~/.nv/ComputeCache), which
  # cuInit makes when `backends` probes a GPU: not kiln's, and not on a
  # machine without one.
  made=$(ls -A "$tmp/home" | grep -vx '.nv')
  [ -z "$made" ] || fail "kiln $cmd created $made in HOME"
  [ ! -e "$tmp/xdg" ] || fail "kiln $cmd created XDG_CACHE_HOME ($tmp/xdg)"
done
echo "ok: no cpu-only command creates a cache folder"

# A GGUF whose metadata holds terminal control sequences (an OSC title
# change, a screen clear, a C1 CSI), laid out byte by byte (gguf.md):
# magic, version 3, 0 tensors, 2 key/values; key lengths are u64, the value
# type 8 is a string.
esc=$(printf '\033')
{
  printf 'GGUF\003\000\000\000'
  printf '\000\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000'
  printf '\014\000\000\000\000\000\000\000general.name\010\000\000\000'
  printf '\021\000\000\000\000\000\000\000\033]0;pwned\007\033[2J\302\233x'
  printf '\012\000\000\000\000\000\000\000bad\033[1mkey\010\000\000\000'
  printf '\001\000\000\000\000\000\000\000v'
} >"$tmp/escape.gguf"
"$kiln" inspect "$tmp/escape.gguf" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "inspect exited $?"; }
if grep -q "$esc" "$tmp/out" || grep -q "$(printf '\007')" "$tmp/out" || grep -q "$(printf '\302\233')" "$tmp/out"; then
  fail "inspect passed a control byte from the file to the terminal"
fi
grep -qF 'general.name' "$tmp/out" && grep -qF '"\x1b]0;pwned\x07\x1b[2J\u009bx"' "$tmp/out" \
  || { cat "$tmp/out"; fail "inspect: the value is not shown escaped"; }
grep -qF 'bad\x1b[1mkey' "$tmp/out" || { cat "$tmp/out"; fail "inspect: the key is not shown escaped"; }
echo "ok: inspect escapes control bytes"

# kiln tokenize shows each piece: vocabulary text, escaped (the byte token
# for ESC would otherwise reach the terminal).
"$kiln" tokenize -m "$model" -p "x${esc}[2Jy" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "tokenize exited $?"; }
grep -q "$esc" "$tmp/out" && fail "tokenize passed ESC through"
grep -qF "'\x1b'" "$tmp/out" || { cat "$tmp/out"; fail "tokenize: the ESC piece is not shown escaped"; }
echo "ok: tokenize escapes control bytes"

# A configuration value with a control byte is shown escaped by config --show.
printf '[model]\npath = m\033[2J.gguf\n' >"$tmp/esc.ini"
"$kiln" config --show --config "$tmp/esc.ini" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "config --show exited $?"; }
grep -q "$esc" "$tmp/out" && fail "config --show passed ESC through"
grep -qF 'm\x1b[2J.gguf' "$tmp/out" || { cat "$tmp/out"; fail "config --show: value not escaped"; }
echo "ok: config --show escapes control bytes"

# n_predict = 4\0junk once read as 4.
printf '[sampling]\nn_predict = 4\000junk\n' >"$tmp/nul.ini"
"$kiln" config --show --config "$tmp/nul.ini" >"$tmp/out" 2>&1
[ $? -eq 1 ] || fail "a NUL in a value: exit status not 1"
grep -q "$tmp/nul.ini:2: a NUL byte at column 14" "$tmp/out" || { cat "$tmp/out"; fail "NUL: message"; }
echo "ok: a NUL byte in a configuration file is an error"

# kiln synth --vocab 1 writes a file kiln opens.
"$kiln" synth --arch llama --vocab 1 -o "$tmp/v1.gguf" >/dev/null 2>&1 || fail "synth --vocab 1 exited $?"
"$kiln" inspect --no-tensors "$tmp/v1.gguf" >"$tmp/out" 2>&1 || fail "inspect of synth's file exited $?"
grep -q "kiln cannot run this file" "$tmp/out" && { cat "$tmp/out"; fail "kiln refuses the file synth wrote"; }
grep -q "n_vocab        = 1" "$tmp/out" || { cat "$tmp/out"; fail "synth --vocab 1: no n_vocab 1"; }
echo "ok: synth --vocab 1"
# parity --csv / --plot never destroy what is there: not the model being
# read, not a read-only file; the report replaces a file only whole.
cp "$model" "$tmp/victim.gguf"
sum=$(cksum <"$tmp/victim.gguf")
"$kiln" parity -m "$tmp/victim.gguf" -p Once --ref cpu:f64 --test cpu --csv "$tmp/victim.gguf" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "parity --csv onto the model: exit status not 1"; }
grep -q "is the model file" "$tmp/out" || { cat "$tmp/out"; fail "parity --csv onto the model: message"; }
"$kiln" parity -m "$tmp/victim.gguf" -p Once --ref cpu:f64 --test cpu --plot "$tmp/victim.gguf" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "parity --plot onto the model: exit status not 1"; }
[ "$(cksum <"$tmp/victim.gguf")" = "$sum" ] || fail "parity changed the model it read"
echo keep >"$tmp/ro.csv" && chmod 0444 "$tmp/ro.csv"
"$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --csv "$tmp/ro.csv" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "parity --csv onto a read-only file: exit status not 1"; }
grep -q "read-only file" "$tmp/out" || { cat "$tmp/out"; fail "parity --csv read-only: message"; }
[ "$(cat "$tmp/ro.csv")" = keep ] || fail "parity --csv replaced a read-only file"
echo old >"$tmp/r.csv"
"$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --csv "$tmp/r.csv" >/dev/null 2>&1 \
  || fail "parity --csv onto a writable file exited $?"
head -1 "$tmp/r.csv" | grep -q '^node,op,pos' || fail "parity --csv: no header in the report"
[ -z "$(ls "$tmp" | grep '\.tmp-')" ] || fail "parity left a temporary file: $(ls "$tmp")"
# A report into a missing folder is refused before the run, naming it.
"$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --json --plot "$tmp/no/such/x.svg" \
  >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || fail "parity --plot into a missing folder: exit status not 1"
[ -s "$tmp/out" ] && { head -3 "$tmp/out"; fail "parity --plot into a missing folder: it ran first"; }
grep -q "folder $tmp/no/such: No such file or directory" "$tmp/err" || { cat "$tmp/err"; fail "parity --plot: message"; }
"$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --csv "$tmp/no/such/x.csv" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ ! -s "$tmp/out" ] || fail "parity --csv into a missing folder: not refused before the run"
if command -v gnuplot >/dev/null 2>&1; then
  "$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --json --plot "$tmp/x.svg" >"$tmp/out" 2>"$tmp/err" \
    || { rc=$?; cat "$tmp/err"; head -c 600 "$tmp/out"; echo; fail "parity --json --plot exited $rc"; }
  grep -q '<svg' "$tmp/out" && fail "parity --plot: the SVG reached stdout"
  grep -q '<svg' "$tmp/x.svg" || fail "parity --plot: no SVG in the file"
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" 2>/dev/null \
    || { head -5 "$tmp/out"; fail "parity --json --plot: stdout is not JSON"; }
else
  # No gnuplot on this machine (a GPU machine's private sysroot has none):
  # --plot must then fail, say so, and leave no file behind.
  "$kiln" parity -m "$model" -p Once --ref cpu:f64 --test cpu --json --plot "$tmp/x.svg" >"$tmp/out" 2>"$tmp/err"
  [ $? -ne 0 ] || fail "parity --plot without gnuplot: exit status 0"
  grep -q "parity plot: .*gnuplot is not installed" "$tmp/err" \
    || { cat "$tmp/err"; fail "parity --plot without gnuplot: the message does not say so"; }
  [ -e "$tmp/x.svg" ] && fail "parity --plot without gnuplot: left $tmp/x.svg"
  echo "ok: no gnuplot here; parity --plot refused with: $(grep 'parity plot' "$tmp/err" | head -1)"
fi
echo "ok: parity reports never replace the model or a read-only file"

# Every error message is escaped, not only those of some commands: an
# unknown key in a configuration file, with ESC in its name.
printf '[model]\nba\033[31md = 1\n' >"$tmp/esckey.ini"
"$kiln" run --config "$tmp/esckey.ini" -m "$model" -p Once -n 1 >"$tmp/out" 2>&1
[ $? -ne 0 ] || fail "an unknown key was accepted"
grep -q "$esc" "$tmp/out" && { cat -v "$tmp/out"; fail "run's error passed ESC through"; }
echo "ok: error messages escape control bytes"
exit 0
