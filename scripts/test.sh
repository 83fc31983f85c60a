#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs every test with ctest.
#   scripts/test.sh            all tests (fast and slow labels)
#   scripts/test.sh -L fast    only the fast label (any ctest arguments pass through)
# Test data is read from ../shared (or $DS_SHARED).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shared=${DS_SHARED:-$root/../shared}
if [ ! -d "$shared/refdata" ] || [ ! -d "$shared/tokenizer" ]; then
  echo "test.sh: shared test data not found at $shared (set DS_SHARED)" >&2
  exit 1
fi
export DS_SHARED=$(cd "$shared" && pwd)

scripts/setup.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON -DDS_BUILD_TESTS=ON -DDS_BUILD_BENCH=ON
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
