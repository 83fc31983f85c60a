#!/usr/bin/env bash
# Idle cost of a started ds-server: CPU time and thread wake-ups (voluntary context switches of
# all its threads) over SECONDS with no requests, then the mean latency of N kept-alive
# GET /health requests on one connection. Exits 1 when the idle CPU is 1% of a core or more.
#   scripts/idle_cpu.sh [SECONDS] [N]          (defaults 60 and 2000)
#   SERVER=path/ds-server CLI=path/ds-cli MODEL=model.gguf PORT=18093 scripts/idle_cpu.sh
# Without MODEL a tiny-dsv3 demo model is made with `ds-cli synth`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60} n=${2:-2000}
build=${BUILD_DIR:-build}
server=${SERVER:-$build/src/ds-server}
cli=${CLI:-$build/src/ds-cli}
port=${PORT:-18093}
tmp=$(mktemp -d)
model=${MODEL:-$tmp/demo.gguf}
[ -f "$model" ] || "$cli" synth --shape tiny-dsv3 --type Q4_K_M --out "$model" 2>/dev/null
"$server" --model "$model" --host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
  sleep 0.1
done
sleep 2  # let start-up work (thread pools, first allocations) settle
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
wakeups() { cat /proc/$pid/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
hz=$(getconf CLK_TCK)
t0=$(ticks) w0=$(wakeups)
sleep "$secs"
t1=$(ticks) w1=$(wakeups)
threads=$(ls /proc/$pid/task | wc -l)
python3 - "$port" "$n" "$secs" "$hz" "$t0" "$t1" "$w0" "$w1" "$threads" <<'PY'
import http.client, sys, time
port, n, secs, hz, t0, t1, w0, w1, threads = sys.argv[1:]
n, secs, hz = int(n), float(secs), int(hz)
cpu = (int(t1) - int(t0)) / hz
print(f"idle {secs:.0f} s: cpu {cpu:.2f} s = {100 * cpu / secs:.3f}% of a core; "
      f"{int(w1) - int(w0)} wake-ups ({(int(w1) - int(w0)) / secs:.1f}/s) over {threads} threads")
c = http.client.HTTPConnection("127.0.0.1", int(port))
lat = []
for _ in range(n):
    t = time.perf_counter()
    c.request("GET", "/health")
    r = c.getresponse()
    r.read()
    lat.append(time.perf_counter() - t)
    assert r.status == 200, r.status
lat.sort()
print(f"GET /health x{n} kept alive: mean {1e6 * sum(lat) / n:.0f} us, median {1e6 * lat[n // 2]:.0f} us, "
      f"p99 {1e6 * lat[int(n * 0.99)]:.0f} us")
sys.exit(0 if cpu / secs < 0.01 else 1)
PY
