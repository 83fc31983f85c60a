#!/usr/bin/env bash
# Time to first token through ds-server against the engine's own prefill time for the same
# prompt length (issue 7: "within 10% of the pp rate").
#   scripts/bench_ttft.sh [MODEL.gguf] [extra ds-server flags...]
# Env: PROMPT (prompt tokens, default 2000), REPEATS (default 3), THREADS (default 2),
# BUILD_DIR (default build).
# 1. `ds-cli bench -p PROMPT -n 1 --batch 0` gives the engine's prefill rate for one step of
#    PROMPT tokens, and for a 512-token step (the usual pp512 figure).
# 2. A ds-server on a free loopback port gets REPEATS streamed /completion requests whose
#    prompt is PROMPT random token ids (a different prompt each time, cache_prompt false,
#    n_predict 1); TTFT is the client-side time from sending the request to the first
#    streamed token. Prints the median TTFT and its ratio to PROMPT / pp rate.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
build=${BUILD_DIR:-build}
model=${1:-build/bench/moe-bench-Q4_K_M.gguf}
shift || true
prompt=${PROMPT:-2000}
repeats=${REPEATS:-3}
threads=${THREADS:-2}
cli="$build/src/ds-cli"

pp_json() {
  "$cli" bench --model "$model" -p "$1" -n 1 -t "$threads" --batch 0 --repeats "$repeats" --no-limits --json |
    grep '^{' | tail -1
}
pp_long=$(pp_json "$prompt")
pp_512=$(pp_json 512)

log=$(mktemp /tmp/ds-ttft.XXXXXX.log)
start_server "$log" --model "$model" --threads "$threads" --ctx-size $((prompt + 64)) "$@"

python3 - "$port" "$prompt" "$repeats" "$pp_long" "$pp_512" <<'PY'
import json, random, statistics, sys, time, urllib.request
port, n, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
pp_long, pp_512 = json.loads(sys.argv[4])["pp_tps"], json.loads(sys.argv[5])["pp_tps"]

def ttft(seed):
    rng = random.Random(seed)
    ids = [rng.randrange(3, 600) for _ in range(n)]  # every vocabulary here has >= 600 tokens
    body = json.dumps({"prompt": ids, "n_predict": 1, "stream": True, "cache_prompt": False,
                       "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body,
                                 {"Content-Type": "application/json"})
    t0 = time.time()
    first = None
    server_ms = None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            if not line.startswith(b"data: "):
                continue
            if first is None:
                first = time.time() - t0
            ev = json.loads(line[6:])
            if ev.get("stop"):
                server_ms = ev["timings"]["prompt_ms"]
                assert ev["tokens_evaluated"] == n, ev["tokens_evaluated"]
    return first, server_ms / 1000.0

ttft(0)  # warm-up: page cache, thread pool
runs = [ttft(i + 1) for i in range(repeats)]
t = statistics.median(r[0] for r in runs)
s = statistics.median(r[1] for r in runs)
print(f"engine prefill: pp{n} {pp_long:.1f} t/s ({n / pp_long:.2f} s), pp512 {pp_512:.1f} t/s "
      f"({n / pp_512:.2f} s for {n} tokens at that rate)")
print(f"ds-server: TTFT {t:.2f} s (median of {repeats}; server-side prompt time {s:.2f} s)")
print(f"TTFT / engine time at the pp{n} rate: {t * pp_long / n:.3f}; at the pp512 rate: {t * pp_512 / n:.3f}")
PY
