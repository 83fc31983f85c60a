#!/usr/bin/env bash
# Soak test of ds-server: DURATION seconds (default 600) of 16 clients against a server on
# 127.0.0.1 serving a demo model made with `ds-cli synth`: streaming and non-streaming
# completions and chats, clients that vanish mid-stream, oversized bodies, prompts that must
# exceed the context and malformed JSON mixed in (scripts/lib/soak_client.py).
#   scripts/soak.sh [DURATION]
# Env: BUILD_DIR (default build; needs ds-server and ds-cli built), CLIENTS (16), WARMUP
# (seconds before the reference RSS reading; default DURATION/4, at most 120), SHAPE (synth
# shape, default tiny-llama), THREADS (ds-server --threads, default 2).
# Reports requests, status counts, RSS at start / after warm-up / end and KV blocks used after
# idle; exits 1 on any 5xx, an unexpected outcome, RSS growth >= 5% after warm-up, or KV
# blocks not back to 0. Results and method: docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
build=${BUILD_DIR:-build}
duration=${1:-${DURATION:-600}}
clients=${CLIENTS:-16}
warmup=${WARMUP:-$(( duration / 4 < 120 ? duration / 4 : 120 ))}
max_body_kb=1024
for bin in ds-server ds-cli; do
  [ -x "$build/src/$bin" ] || { echo "soak.sh: $build/src/$bin is not built" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ds-soak.XXXXXX)
model=$work/model.gguf
"$build/src/ds-cli" synth --shape "${SHAPE:-tiny-llama}" --out "$model" >/dev/null 2>&1
log=$work/server.log
start_server "$log" --model "$model" --ctx-per-seq 512 --parallel 4 --threads "${THREADS:-2}" \
  --max-queue 64 --max-body-kb "$max_body_kb" --timeout 30
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "'"$work"'"' EXIT
rc=0
python3 scripts/lib/soak_client.py "$port" "$pid" "$duration" "$warmup" "$clients" "$max_body_kb" || rc=$?
kill -0 "$pid" 2>/dev/null || { echo "soak: ds-server died"; tail -20 "$log"; rc=1; }
exit $rc
