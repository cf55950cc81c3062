#!/bin/sh
# The whole test suite, as CI runs it: formatting, clang-tidy, a -Werror build with every test (unit,
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

# clang-tidy with .clang-tidy's checks over the library's sources and public headers, every
# finding an error. It reads the unity build's units (two for the library, one per store), so
# nlohmann is parsed five times rather than once per file: about 40 s on 2 cores.
echo "== lint (clang-tidy)"
lint_started=$(date +%s)
cmake -S . -B build/tidy -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DULLM_ENABLE_PCH=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DULLM_BUILD_TESTS=OFF -DULLM_BUILD_EXAMPLES=OFF \
    -DULLM_BUILD_BENCHMARKS=OFF >/dev/null
if ! run-clang-tidy-14 -p build/tidy -j "$jobs" -quiet -header-filter="$PWD/(include/ullm|src)/" \
    >build/tidy/findings.txt 2>&1; then
    grep -A3 -E "(warning|error):" build/tidy/findings.txt || cat build/tidy/findings.txt
    echo "clang-tidy found the above (fix them, or suppress one with a NOLINT saying why)"
    exit 1
fi
echo "== lint took $(($(date +%s) - lint_started)) s"

# Debug builds with line tables only (-g1): what a sanitizer report or a backtrace needs, at a
# tenth less compile time than full debug information.
debug="-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1"

build_started=$(date +%s)
echo "== build (warnings are errors)"
# shellcheck disable=SC2086
cmake -S . -B build/ci -G Ninja $debug -DULLM_WERROR=ON >/dev/null
cmake --build build/ci -j "$jobs"
echo "== tests"
ctest --test-dir build/ci --output-on-failure -j "$jobs"
echo "== build and tests took $(($(date +%s) - build_started)) s"

echo "== tests under AddressSanitizer and UndefinedBehaviorSanitizer (clang, with the fuzz targets)"
asan_started=$(date +%s)
# shellcheck disable=SC2086
cmake -S . -B build/asan-clang -G Ninja $debug -DULLM_WERROR=ON \
    -DCMAKE_CXX_COMPILER=clang++-14 -DULLM_SANITIZE=address,undefined -DULLM_BUILD_FUZZERS=ON \
    -DULLM_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/asan-clang -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan-clang --output-on-failure -j "$jobs"
echo "== sanitizer build and tests took $(($(date +%s) - asan_started)) s"

# A smoke run, not a campaign (tests/fuzz/README.md has the long run; fuzz a stream decoder
# for ten minutes after changing it): the saved findings, then each of the 16 targets for 15 s,
# as many at a time as there are cores. Any finding fails the run.
echo "== fuzzing smoke run (tests/fuzz/run.sh)"
fuzz_started=$(date +%s)
sh tests/fuzz/run.sh -j "$jobs" -t 15 build/asan-clang
echo "== fuzzing smoke run took $(($(date +%s) - fuzz_started)) s"

echo "== threaded parts (transport, client, conversations, stores, dialogs) under ThreadSanitizer"
tsan_started=$(date +%s)
# shellcheck disable=SC2086
cmake -S . -B build/tsan -G Ninja $debug -DULLM_WERROR=ON \
    -DULLM_SANITIZE=thread -DULLM_BUILD_BENCHMARKS=OFF -DULLM_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/tsan -j "$jobs" --target ullm_integration_tests ullm_threaded_unit_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
build/tsan/tests/ullm_integration_tests
# The kill-during-write tests fork; they run in the other two builds.
build/tsan/tests/ullm_threaded_unit_tests "~[crash]"
echo "== ThreadSanitizer build and tests took $(($(date +%s) - tsan_started)) s"

echo "== all tests passed"
