#!/bin/sh
# Builds the consumer against an installed ullm through its pkg-config file.
set -eu
prefix=$1
out=$2
source=$3
libdir=$(find "$prefix" -name ullm.pc -path '*pkgconfig*' -exec dirname {} \; | head -n 1)
test -n "$libdir" || { echo "ullm.pc was not installed under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH="$libdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$out"
# shellcheck disable=SC2046
${CXX:-c++} "$source/consumer/main.cpp" -o "$out/consumer" $(pkg-config --cflags --libs ullm)
"$out/consumer"
