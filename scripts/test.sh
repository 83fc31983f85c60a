#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs every test with ctest.
#   scripts/test.sh            all tests (fast and slow labels)
#   scripts/test.sh -L fast    only the fast label (any ctest arguments pass through)
#   scripts/test.sh --sanitize the server and engine fast tests (ctest label "sanitize") built with
#                              AddressSanitizer + UndefinedBehaviorSanitizer (-DDS_SANITIZE=ON) in
#                              build-sanitize/; any report fails the test (halt_on_error)
# Test data is read from ../shared (or $DS_SHARED). Without it, every test that does not
# read it is built and run (`ctest -LE data`), and the script then fails naming the missing
# directory: the tests labelled `data` are required and a missing data directory is never a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shared=${DS_SHARED:-$root/../shared}
have_data=1
if [ ! -d "$shared/refdata" ] || [ ! -d "$shared/tokenizer" ]; then
  have_data=0
  export DS_SHARED=$shared  # the data tests fail if run; ctest leaves them out below
else
  export DS_SHARED=$(cd "$shared" && pwd)
fi
without_data=()
if [ $have_data = 0 ]; then without_data=(-LE data); fi
# Runs ctest; without the data, then fails with one line naming the missing directory.
run_ctest() {
  local rc=0
  ctest "$@" "${without_data[@]}" || rc=$?
  if [ $have_data = 0 ]; then
    echo "test.sh: FAILED: shared test data not found at $shared (set DS_SHARED); the tests labelled data did not run" >&2
    exit 1
  fi
  exit $rc
}

scripts/setup.sh
if [ "${1:-}" = "--sanitize" ]; then
  shift
  build=${BUILD_DIR:-build-sanitize}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON -DDS_BUILD_TESTS=ON \
    -DDS_BUILD_BENCH=OFF -DDS_SANITIZE=ON
  cmake --build "$build" -j"$(nproc)" --target ds_sanitize_tests ds-server ds-cli
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  run_ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" -L sanitize "$@"
fi
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON -DDS_BUILD_TESTS=ON -DDS_BUILD_BENCH=ON
cmake --build "$build" -j"$(nproc)"
run_ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" "$@"
