#!/bin/bash
# Lays out <repo>/.device for the GPU machine (../shared/device/README.md
# has the machine's facts): the release tarball, the Debian packages the
# build needs there, the test models, and on-device-gpu.sh.
#
# Run it from a configured build tree of this repository (in-tree or
# VPATH, e.g. /work/build-cuda); the folder it fills is the repository's
# .device (git-ignored; name it in the run tool's carry), or $DEVICE_DIR.
# Unlike ../shared/device/prepare.sh it needs no .git in the current
# folder, so it works from a VPATH build.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${DEVICE_DIR:-$src/.device}
shared=${SHARED_DIR:-$src/../shared}
debs="libinih1 libinih-dev libcmocka0 libcmocka-dev libxxhash0 libxxhash-dev libpcre2-dev \
libpcre2-8-0 libjansson4 libjansson-dev ${DEVICE_DEBS:-}"
[ -f Makefile ] || { echo "run this in a configured build tree of $src"; exit 1; }
rm -rf "$out" && mkdir -p "$out/debs"
(cd "$out/debs" && apt-get download $debs >/dev/null 2>&1) ||
  { echo "apt-get download failed (run apt-get update once)"; exit 1; }
mkdir -p "$out/shared" && cp -r "$shared/models" "$shared/tokenizers" "$out/shared/"
rm -f ./kiln-*.tar.gz
make dist >/dev/null
mv ./kiln-*.tar.gz "$out/"
cp "$src/tools/device/on-device-gpu.sh" "$out/"
# The kernel tracer (tools/device/kernel-trace/): built here against the
# toolkit's CUPTI, with that libcupti beside it (the GPU machine's CUDA may
# lack it); left out, saying so, where this machine has no CUPTI.
cuda=${CUDA_HOME:-/usr/local/cuda}
cupti_so=$(objdump -p "$cuda/lib64/libcupti.so" 2> /dev/null | awk '/SONAME/ { print $2 }')
if [ -f "$cuda/include/cupti.h" ] && [ -n "$cupti_so" ]; then
  mkdir -p "$out/trace"
  gcc -std=c11 -O2 -fPIC -shared -I"$cuda/include" "$src/tools/device/kernel-trace/trace.c" \
    -o "$out/trace/libkilntrace.so" -L"$cuda/lib64" -lcupti -Wl,-rpath,'$ORIGIN'
  cp -L "$cuda/lib64/$cupti_so" "$out/trace/" # the soname alone (one copy of 4 MB)
else
  echo "no CUPTI under $cuda: .device has no kernel tracer"
fi
du -sh "$out"; ls "$out"
