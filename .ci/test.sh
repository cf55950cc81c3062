#!/bin/sh
# The whole test suite, as CI runs it: formatting, a -Werror build with every test (unit,
# integration, header self-containment, packaging, examples), the suite again under
# ASan+UBSan built with clang, a short run of every fuzz target in that build, and the threaded
# parts under TSan.
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

echo "== formatting (clang-format)"
files=$(git ls-files '*.hpp' '*.cpp' 2>/dev/null || find include src tests examples -name '*.[ch]pp')
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files

echo "== build (warnings are errors)"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=Debug -DULLM_WERROR=ON >/dev/null
cmake --build build/ci -j "$jobs"
echo "== tests"
ctest --test-dir build/ci --output-on-failure -j "$jobs"

echo "== tests under AddressSanitizer and UndefinedBehaviorSanitizer (clang, with the fuzz targets)"
asan_started=$(date +%s)
cmake -S . -B build/asan-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug -DULLM_WERROR=ON \
    -DCMAKE_CXX_COMPILER=clang++-14 -DULLM_SANITIZE=address,undefined -DULLM_BUILD_FUZZERS=ON \
    -DULLM_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/asan-clang -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan-clang --output-on-failure -j "$jobs"
echo "== sanitizer build and tests took $(($(date +%s) - asan_started)) s"

# A smoke run, not a campaign (tests/fuzz/README.md has the long run): the saved findings, then
# each of the 16 targets for 25 s, as many at a time as there are cores (222 s measured for
# 15 targets on 2). Any finding fails the run.
echo "== fuzzing smoke run (tests/fuzz/run.sh)"
fuzz_started=$(date +%s)
sh tests/fuzz/run.sh -j "$jobs" -t 25 build/asan-clang
echo "== fuzzing smoke run took $(($(date +%s) - fuzz_started)) s"

echo "== threaded parts (transport, client, conversations, stores, dialogs) under ThreadSanitizer"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DULLM_WERROR=ON \
    -DULLM_SANITIZE=thread -DULLM_BUILD_BENCHMARKS=OFF -DULLM_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/tsan -j "$jobs" --target ullm_integration_tests ullm_unit_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
build/tsan/tests/ullm_integration_tests
# The kill-during-write tests fork; they run in the other two builds.
build/tsan/tests/ullm_unit_tests "[conversation],[turn_queue],[session_store],[dialog],[cell_space]~[crash]"

echo "== all tests passed"
