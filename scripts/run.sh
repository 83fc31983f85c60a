#!/usr/bin/env bash
# Sets up, builds Release and starts ds-server.
#   MODEL=/path/model.gguf scripts/run.sh [extra ds-server flags]
# Without MODEL, a small random-weight demo model is made once with `ds-cli synth`
# (build/demo/demo.gguf): it answers with gibberish but exercises the whole server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)" --target ds-server ds-cli
model=${MODEL:-}
if [ -z "$model" ]; then
  model=$build/demo/demo.gguf
  if [ ! -f "$model" ]; then
    mkdir -p "$build/demo"
    echo "run.sh: no MODEL given; making a demo model at $model"
    "$build/src/ds-cli" synth --shape tiny-dsv3 --type Q4_K_M --out "$model"
  fi
fi
exec "$build/src/ds-server" --model "$model" --host "${HOST:-127.0.0.1}" --port "${PORT:-8080}" "$@"
