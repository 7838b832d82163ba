#!/bin/sh
# Builds tests/embed/embed_example.c the way an embedder would — through
# `pkg-config --cflags --libs kiln` (the build tree's kiln-uninstalled.pc)
# — runs it on stories260K, and checks it prints llama.cpp's greedy text.
set -u
models="${KILN_MODELS_DIR:-}"
[ -f "$models/stories260K.gguf" ] || { echo "SKIP: no stories260K.gguf in $models"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
export PKG_CONFIG_PATH="$KILN_BUILDDIR/core"
flags=$(${PKG_CONFIG:-pkg-config} --cflags --libs kiln) || { echo "FAIL: pkg-config kiln"; exit 1; }
${CC:-cc} -std=c11 -Wall -Werror "$KILN_SRCDIR/tests/embed/embed_example.c" $flags -o "$tmp/embed" \
  || { echo "FAIL: compiling against pkg-config kiln ($flags)"; exit 1; }
LD_LIBRARY_PATH="$KILN_BUILDDIR/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/embed" "$models/stories260K.gguf" "Once upon a time" 16 \
  >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: embed_example exited $?"; exit 1; }
head -c 60 "$tmp/out"; echo
grep -q "^, there was a little girl named Lily. She loved to play" "$tmp/out" \
  || { echo "FAIL: unexpected text"; exit 1; }
grep -q "5 prompt tokens, 16 generated" "$tmp/err" || { echo "FAIL: no stats"; exit 1; }
echo "ok: embedded through pkg-config kiln"
