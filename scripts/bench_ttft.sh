#!/usr/bin/env bash
# Time to first token through ds-server against the engine's own prefill time for the same
# prompt length, and against the time at the pp512 rate (the target: within 10%).
#   scripts/bench_ttft.sh [MODEL.gguf] [extra ds-server flags...]
# Env: PROMPT (prompt tokens, default 2000), REPEATS (default 3), THREADS (default 2),
# KV_TYPE (the KV cache type of both the engine's runs and the server, default f16),
# BUILD_DIR (default build).
# 1. `ds-cli bench -p PROMPT -n 1 --batch 0` gives the engine's prefill rate for one step of
#    PROMPT tokens, and for a 512-token step (the usual pp512 figure).
# 2. A ds-server on a free loopback port gets REPEATS streamed /completion requests whose
#    prompt is PROMPT random token ids (a different prompt each time, cache_prompt false,
#    n_predict 1); TTFT is the client-side time from sending the request to the first
#    streamed token. Prints the median TTFT and its ratio to PROMPT / pp rate.
# 3. Step 1 again after the server's runs; the ratios use the mean of the two readings.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
build=${BUILD_DIR:-build}
model=${1:-build/bench/moe-bench-Q4_K_M.gguf}
shift || true
prompt=${PROMPT:-2000}
repeats=${REPEATS:-3}
threads=${THREADS:-2}
kv_type=${KV_TYPE:-f16}
cli="$build/src/ds-cli"

pp_json() {
  "$cli" bench --model "$model" -p "$1" -n 1 -t "$threads" --batch 0 --repeats "$repeats" --kv-type "$kv_type" \
    --no-limits --json |
    grep '^{' | tail -1
}
# The engine's rates are read before and after the server's runs (the server sits idle
# meanwhile) and averaged: a shared or virtual host drifts within minutes, and one reading
# a minute away from the TTFT runs can move the ratio by +-20%.
pp_long=$(pp_json "$prompt")
pp_512=$(pp_json 512)

log=$(mktemp /tmp/ds-ttft.XXXXXX.log)
start_server "$log" --model "$model" --threads "$threads" --ctx-per-seq $((prompt + 64)) --kv-type "$kv_type" "$@"

ttft_json=$(python3 - "$port" "$prompt" "$repeats" <<'PY'
import json, random, statistics, sys, time, urllib.request
port, n, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

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
print(json.dumps({"ttft": statistics.median(r[0] for r in runs),
                  "server": statistics.median(r[1] for r in runs),
                  "all": [r[0] for r in runs]}))
PY
)
pp_long_after=$(pp_json "$prompt")
pp_512_after=$(pp_json 512)

python3 - "$prompt" "$repeats" "$ttft_json" "$pp_long" "$pp_long_after" "$pp_512" "$pp_512_after" <<'PY'
import json, sys
n, repeats, res = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
rate = lambda a: json.loads(a)["pp_tps"]
l0, l1, s0, s1 = (rate(a) for a in sys.argv[4:8])
pp_long, pp_512 = (l0 + l1) / 2, (s0 + s1) / 2
t, s = res["ttft"], res["server"]
print(f"engine prefill (before / after the server runs): pp{n} {l0:.1f} / {l1:.1f} t/s "
      f"({n / pp_long:.2f} s at their mean), pp512 {s0:.1f} / {s1:.1f} t/s "
      f"({n / pp_512:.2f} s for {n} tokens at their mean)")
print(f"ds-server: TTFT {t:.2f} s (median of {repeats}: {', '.join(f'{x:.2f}' for x in res['all'])}; "
      f"server-side prompt time {s:.2f} s)")
print(f"TTFT / engine time at the pp{n} rate: {t * pp_long / n:.3f}; at the pp512 rate: {t * pp_512 / n:.3f}")
PY
