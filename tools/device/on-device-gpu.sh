#!/bin/bash
# Runs on the GPU machine from the repository root, with .device/ laid out
# by tools/device/prepare-gpu.sh: unpacks the Debian packages into a
# private sysroot, builds the release tarball with CUDA, and runs the GPU
# suites and the CUDA unit suites with KILN_REQUIRE_GPU=1 (a GPU test that
# finds no device fails instead of skipping). FULL=1 runs the whole
# `make check` instead. Every test log goes to $OUT (flat names); then "$@" runs in the
# build tree.
set -uo pipefail
root=$(pwd); sys=/tmp/sysroot; build=/tmp/kiln-build; out=${OUT:-/tmp}
mkdir -p "$sys" "$build"
ln -sfn "$root/.device/shared" "$(dirname "$build")/shared" # $(top_srcdir)/../shared
for f in "$root"/.device/debs/*.deb; do dpkg -x "$f" "$sys"; done
# The sysroot's .pc files say prefix=/usr: only configure needs them moved
# into the sysroot (exporting PKG_CONFIG_SYSROOT_DIR for `make check` too
# would also move the build tree's kiln-uninstalled.pc, which
# tests/embed/test_embed.sh reads).
pc_path=$sys/usr/lib/x86_64-linux-gnu/pkgconfig:$sys/usr/share/pkgconfig
export CPPFLAGS="-I$sys/usr/include ${CPPFLAGS:-}"
export LDFLAGS="-L$sys/usr/lib/x86_64-linux-gnu ${LDFLAGS:-}"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$sys/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export KILN_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
# A fresh tree every time: unpacked over an earlier build, sources older
# than its objects (the tarball's mtimes are the make dist machine's) were
# not rebuilt, and a call ran the previous call's kiln (H200, 2026-12-07).
rm -rf "$build" && mkdir -p "$build"
tar xzf "$root"/.device/kiln-*.tar.gz -C "$build" --strip-components=1
cd "$build" || exit 1
t0=$(date +%s)
PKG_CONFIG_SYSROOT_DIR=$sys PKG_CONFIG_PATH=$pc_path \
  ./configure --with-cuda=/usr/local/cuda > "$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
make -j"$(nproc)" > "$out/make.log" 2>&1 || { grep -E 'error|Error' "$out/make.log" | head -40; exit 1; }
echo "== built in $(( $(date +%s) - t0 )) s; warnings: $(grep -c 'warning:' "$out/make.log")"
# Every GPU suite (the build lists them: make print-gpu-tests) and the CUDA
# unit suites that open a device; test_cuda_templates* need none (NVRTC
# alone, CI runs it) and its ~30 mmq compiles took it past the 240 s the
# suites get in all-gpu.sh, so it is left to FULL=1.
gpu_tests="$(make -s print-gpu-tests) \
tests/unit/test_cuda_plugins tests/unit/test_kcache_guard \
tests/unit/test_kcache_guard_drop tests/unit/test_kcache_seed tests/unit/test_cuda_qwen35"
if [ "${FULL:-0}" = 1 ]; then
  timeout "${CHECK_TIMEOUT:-480}" make -j"$(nproc)" check > "$out/check.log" 2>&1; rc=$?
else
  timeout "${CHECK_TIMEOUT:-480}" make -j"$(nproc)" check TESTS="${TESTS:-$gpu_tests}" \
    > "$out/check.log" 2>&1; rc=$?
fi
echo "== tests done at $(( $(date +%s) - t0 )) s"
# Flat names (tests/gpu/x.log -> tests_gpu_x.log): the run tool brings
# back only shallow folders.
for f in $(find tests -name '*.log'); do cp "$f" "$out/$(echo "$f" | tr / _)"; done
grep -E '^(# |PASS|FAIL|SKIP|ERROR|XFAIL|XPASS)' "$out/check.log" | tail -60
KILN_PLUGIN_PATH=$build/.libs ./cli/kiln backends > "$out/backends.txt" 2>&1; cat "$out/backends.txt"
[ $# -gt 0 ] && { echo "== $*"; "$@"; rc=$((rc || $?)); }
exit $rc
