#!/bin/sh
# The demo: installs what is missing, builds the `ullm` program, and plays an offline chat
# (piped in, so it runs unattended): a tool call, a calculation and a streamed story, then the
# stored session listed and printed as Markdown. No network, no API key.
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps.sh
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DULLM_BUILD_TESTS=OFF \
    -DULLM_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/demo --target ullm_cli -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
ullm=./build/demo/examples/cli/ullm
store=build/demo/demo-sessions.db
rm -f "$store" "$store-wal" "$store-shm"
printf 'What time is it?\nWhat is 12 * (3 + 4)?\nTell me a story\n/totals\n' |
    "$ullm" chat --offline --store "$store" --session offline-demo
echo
echo "\$ ullm sessions"
"$ullm" sessions --store "$store"
echo
echo "\$ ullm show offline-demo"
"$ullm" show offline-demo --store "$store"
