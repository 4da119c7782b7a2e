#!/usr/bin/env bash
# Configures and builds kimi-relay (Release, Ninja, ccache when present) into build/.
#   BUILD_DIR=build-debug BUILD_TYPE=Debug scripts/build.sh
#   scripts/build.sh -DRELAY_BUILD_BENCH=OFF     extra arguments go to cmake's configure step
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(($(nproc) < 2 ? 1 : 2))}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
