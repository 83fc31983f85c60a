#!/usr/bin/env bash
# Runs openai_sdk_test.mjs: installs the pinned SDK from the npm registry into the build tree
# (once), makes a random-weight model with `ds-cli synth`, and hands both to node, which starts
# ds-server on 127.0.0.1 and stops it at the end.
# Usage: openai_sdk_test.sh BUILD_DIR TEST_SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# 4.x is the SDK line that supports Debian 12's Node.js 18 (5.x and later ask for Node 20, 7.x for 22).
sdk_version=4.104.0

command -v node >/dev/null || { echo "FAIL: node not found (scripts/setup.sh installs nodejs)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not found (scripts/setup.sh installs npm)"; exit 1; }

work="$build/tests/sdk"
mkdir -p "$work/node"
installed=$(node -e "try{console.log(require('$work/node/node_modules/openai/package.json').version)}catch{}" || true)
if [ "$installed" != "$sdk_version" ]; then
  echo "installing openai@$sdk_version from the npm registry"
  (cd "$work/node" && timeout 45 npm install --no-audit --no-fund --no-save --loglevel=error \
     "openai@$sdk_version")
fi

model="$work/sdk-tiny.gguf"
"$build/src/ds-cli" synth --shape tiny-llama --out "$model" >/dev/null 2>&1

exec timeout 60 node "$src/openai_sdk_test.mjs" --server "$build/src/ds-server" --model "$model" \
  --sdk "$work/node" --log "$work/ds-server.log"
