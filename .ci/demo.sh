#!/bin/sh
# The demo: installs what is missing, builds, and runs the foundation demo (a streamed tool
# call against an in-process server; no network, no API key).
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps.sh
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DULLM_BUILD_TESTS=OFF \
    -DULLM_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/demo --target ullm_demo -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
./build/demo/examples/ullm_demo
