#!/bin/sh
# Installs the Debian 12 packages ullm needs to build and test, when any is missing. clang-14
# (clang++-14) builds the sanitizer and fuzz stage; its ASan, UBSan and libFuzzer runtimes
# (libclang_rt.*.a) are in libclang-rt-14-dev, which clang-14 only recommends, so it is named.
# clang-tidy-14 runs the lint stage.
# postgresql and redis-server: the session store tests start their own throwaway servers
# (never the system service); libpq-dev and libhiredis-dev build the optional store components.
set -eu
packages="g++ cmake ninja-build pkgconf git ca-certificates nlohmann-json3-dev libcurl4-openssl-dev
libfmt-dev catch2 libsqlite3-dev libre2-dev json-schema-test-suite clang-format clang-14
clang-tidy-14
libclang-rt-14-dev libedit-dev postgresql redis-server libpq-dev libhiredis-dev"
missing=""
for package in $packages; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
if [ -n "$missing" ]; then
    echo "ullm: installing$missing"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# The MCP tests run the npm reference servers pinned in tests/mcp with node (Debian's nodejs
# and npm when node or npm is missing; a node from elsewhere, 18 or newer, serves as well).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "ullm: installing nodejs npm"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
mcp_dir="$(dirname "$0")/../tests/mcp"
if [ ! -d "$mcp_dir/node_modules" ] || [ "$mcp_dir/package-lock.json" -nt "$mcp_dir/node_modules" ]; then
    echo "ullm: npm ci in tests/mcp"
    npm ci --prefix "$mcp_dir" --ignore-scripts --no-audit --no-fund >/dev/null
fi
