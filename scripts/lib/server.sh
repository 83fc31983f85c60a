# Sourced by the bench scripts: start_server LOG ARGS... starts build/src/ds-server (BUILD_DIR)
# on a free loopback port with ARGS, logging to LOG, waits until /health answers and sets
# $pid and $port; the caller's EXIT trap stops it. Exits 1 with the log when the server dies.
start_server() {
  local log=$1
  shift
  "${BUILD_DIR:-build}/src/ds-server" --host 127.0.0.1 --port 0 "$@" >"$log" 2>&1 &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "'"$log"'"' EXIT
  port=""
  for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
  done
  echo "ds-server did not answer /health within 60 s" >&2
  cat "$log"
  exit 1
}
