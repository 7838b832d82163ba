#!/bin/bash
# kiln's copy of ../shared/device/peer/prepare-peer.sh (run it as tools/device/peer/prepare-peer.sh).
# Run here, in the project root: lays out .peer/ (git-ignored) with llama.cpp's source as
# llama-cpp-python's sdist vendors it (pruned to what a CUDA build of llama-bench and
# llama-quantize needs, ~5 MB), this folder's scripts, and nothing else. Carry `.peer`
# with `.device` in the same run call; see README.md beside this file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
grep -qx '/.peer/' .git/info/exclude 2>/dev/null || echo '/.peer/' >> .git/info/exclude
rm -rf .peer && mkdir -p .peer
tmp=$(mktemp -d)
pip download --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$tmp" >/dev/null
tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
src=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
(cd "$src" && tar czf - --exclude=tools/ui --exclude=tools/server \
   --exclude=ggml/src/ggml-sycl --exclude=ggml/src/ggml-vulkan --exclude=ggml/src/ggml-opencl \
   --exclude=ggml/src/ggml-hexagon --exclude=ggml/src/ggml-metal --exclude=ggml/src/ggml-webgpu \
   --exclude=ggml/src/ggml-et \
   CMakeLists.txt cmake common ggml gguf-py include src tools vendor app licenses LICENSE) > .peer/llama-src.tgz
echo "llama-cpp-python $ver" > .peer/VERSION
cp "$here/on-device-peer.sh" "$here/on-device-peer-qwen35.sh" "$here/synth_big.py" .peer/
rm -rf "$tmp"; du -sh .peer; ls .peer
