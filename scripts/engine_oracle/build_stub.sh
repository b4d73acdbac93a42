#!/usr/bin/env bash
# Build the stand-in libcuda.so.1 into the given directory (default: engine-oracle-lib in $TMPDIR).
set -euo pipefail
out="${1:-${TMPDIR:-/tmp}/engine-oracle-lib}"
mkdir -p "$out"
cc -shared -fPIC -O1 -Wall -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.1" "$(dirname "$0")/libcuda_stub.c"
ln -sf libcuda.so.1 "$out/libcuda.so"
echo "$out/libcuda.so.1"
