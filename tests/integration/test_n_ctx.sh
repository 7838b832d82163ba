#!/bin/sh
# The KV length (issue 17): [model] n_ctx / -c N is N positions; 0 is the
# model's whole context_length (llama.cpp's -c 0); -1, the default, is
# that capped at 4096; the cache's size is logged at plan time, in the
# bytes of its [kv_cache] type; a prompt
# longer than the cache is an error naming both numbers; perplexity's
# default chunk is that context. On synthesized llamas whose
# context_length is 8192 and 64.
set -u
. "$KILN_SRCDIR/tests/integration/cli_test_lib.sh"
"$kiln" synth --arch llama --ctx 8192 --vocab-from "$models/stories260K.gguf" -o "$tmp/m.gguf" \
  > /dev/null 2>&1 || fail "kiln synth"
n_ctx_of() { # the n_ctx `kiln run --json` reports for the flags "$@"
  "$kiln" run -m "$tmp/m.gguf" -p "Once upon a time" -n 1 --json "$@" 2> "$tmp/err" |
    sed -n 's/.*"n_ctx": *\([0-9-]*\).*/\1/p'
}
[ "$(n_ctx_of)" = 4096 ] || fail "default n_ctx $(n_ctx_of), not 4096 (context_length 8192 capped)"
[ "$(n_ctx_of -c 0)" = 8192 ] || fail "-c 0 gave n_ctx $(n_ctx_of -c 0), not the context_length 8192"
[ "$(n_ctx_of -c 100)" = 100 ] || fail "-c 100 gave $(n_ctx_of -c 100)"
printf '[model]\nn_ctx = 0\n[general]\nlog_level = info\n' > "$tmp/c.ini"
[ "$(n_ctx_of --config "$tmp/c.ini")" = 8192 ] || fail "[model] n_ctx = 0 gave $(n_ctx_of --config "$tmp/c.ini")"
grep -q "KV cache: 8192 positions of f32 (.*context_length 8192), 4.0 MiB of state on cpu" "$tmp/err" ||
  fail "no KV cache line at plan time: $(cat "$tmp/err")"
# the line reports the chosen KV type's real bytes: half of f32's in f16
printf '[model]\nn_ctx = 0\n[kv_cache]\ntype = f16\n[general]\nlog_level = info\n' > "$tmp/c16.ini"
n_ctx_of --config "$tmp/c16.ini" > /dev/null
grep -q "KV cache: 8192 positions of f16 (.*context_length 8192), 2.0 MiB of state on cpu" "$tmp/err" ||
  fail "no f16 KV cache line at plan time: $(cat "$tmp/err")"
echo "ok: n_ctx N, 0 (the model's 8192), the default (4096), the cache's size logged"
"$kiln" run -m "$tmp/m.gguf" -p "Once upon a time there was a" -n 1 -c 3 > /dev/null 2> "$tmp/err" &&
  fail "a prompt longer than the cache ran"
grep -q "do not fit: the KV cache holds 3 positions" "$tmp/err" || fail "prompt past n_ctx: $(cat "$tmp/err")"
# the message names what set the length (the flag, or the file's line),
# and counts one position as one
grep -q "(raise --ctx-size)" "$tmp/err" || fail "-c 3: the message does not name -c: $(cat "$tmp/err")"
"$kiln" run -m "$tmp/m.gguf" -p "Once upon a time" -n 1 -c 1 > /dev/null 2> "$tmp/err"
grep -q "do not fit: the KV cache holds 1 position and 0 are used (raise --ctx-size)" "$tmp/err" ||
  fail "-c 1: $(cat "$tmp/err")"
printf '[model]\nn_ctx = 2\n' > "$tmp/c2.ini"
"$kiln" run -m "$tmp/m.gguf" -p "Once upon a time" -n 1 --config "$tmp/c2.ini" > /dev/null 2> "$tmp/err"
grep -qF "(raise [model] n_ctx at $tmp/c2.ini:2)" "$tmp/err" || fail "n_ctx from a file: $(cat "$tmp/err")"
"$kiln" run -m "$tmp/m.gguf" -p Once -n 1 -c -2 > /dev/null 2> "$tmp/err"
[ $? = 2 ] || fail "-c -2 did not exit 2"
echo "ok: a prompt longer than the cache, and -c -2, refused"
# perplexity's chunk is n_ctx: the default (-1) is the model's context
# here too, not a chunk of -1 tokens.
"$kiln" synth --arch llama --ctx 64 --vocab-from "$models/stories260K.gguf" -o "$tmp/c64.gguf" \
  > /dev/null 2>&1 || fail "kiln synth --ctx 64"
"$kiln" perplexity -m "$tmp/c64.gguf" -f "$KILN_SRCDIR/tests/data/perplexity/stories.txt" > "$tmp/out" 2>&1 ||
  fail "perplexity with the default n_ctx: $(cat "$tmp/out")"
grep -q "chunks of n_ctx=64" "$tmp/out" || fail "perplexity's default chunk: $(cat "$tmp/out")"
echo "ok: perplexity with the default n_ctx takes the model's 64"
