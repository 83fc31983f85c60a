#!/usr/bin/env bash
# Aggregate decode throughput of ds-server: 1 stream alone, then 8 concurrent streams.
#   scripts/bench_server.sh [MODEL.gguf] [extra ds-server flags...]
# Env: N_PREDICT (default 128), STREAMS (default 8), THREADS (ds-server --threads, default
# all cores), BUILD_DIR (default build). Starts its own ds-server on a free loopback port
# and stops it at the end. Prints one line per run and the ratio; nothing is timed in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
build=${BUILD_DIR:-build}
model=${1:-../shared/refdata/tiny-dsv3-Q4_K_M.gguf}
shift || true
n_predict=${N_PREDICT:-128}
streams=${STREAMS:-8}
threads=${THREADS:-0}
log=$(mktemp /tmp/ds-bench.XXXXXX.log)

start_server "$log" --model "$model" --parallel "$streams" --threads "$threads" \
  --ctx-per-seq $((n_predict + 256)) "$@"

python3 - "$port" "$n_predict" "$streams" <<'PY'
import json, sys, threading, time, urllib.request
port, n_predict, streams = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def stream(i, out):
    body = json.dumps({"prompt": f"Benchmark stream {i}: write a long story.", "n_predict": n_predict,
                       "ignore_eos": True, "temperature": 0, "stream": True, "cache_prompt": False}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    final = None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            if line.startswith(b"data: "):
                ev = json.loads(line[6:])
                if ev.get("stop"):
                    final = ev
    out[i] = final

def run(n):
    out = [None] * n
    t0 = time.time()
    ts = [threading.Thread(target=stream, args=(i, out)) for i in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
    wall = time.time() - t0
    toks = sum(o["tokens_predicted"] for o in out)
    # Decode throughput: generated tokens over the span in which decoding ran.
    decode_s = max(o["timings"]["predicted_ms"] for o in out) / 1000.0
    per_stream = sum(o["timings"]["predicted_per_second"] for o in out) / n
    print(f"{n} stream(s): {toks} tokens, wall {wall:.2f} s, aggregate decode {toks / decode_s:.1f} tok/s, "
          f"per stream {per_stream:.1f} tok/s")
    return toks / decode_s

run(1)  # warm-up (page cache, thread pool)
one = run(1)
many = run(streams)
print(f"aggregate decode throughput {streams} streams / 1 stream: {many / one:.2f}x")
PY
