"""Soak load for ds-server (driven by scripts/soak.sh; standard library only).

16 client threads send a weighted mix for DURATION seconds: non-streaming and streaming
completions and chats, streams the client abandons after the first event, bodies over the
body limit, prompts that must exceed the context, malformed JSON (syntax errors, 100,000-level
nesting, 1e400, wrong types, 17 stop strings), and the small routes. Each kind has its expected
statuses; anything else (a 5xx above all) is counted as unexpected. The server's RSS is read
from /proc at the start, after the warm-up and at the end (after the load stops and the
server is idle); KV blocks in use are read from /metrics after idle.

usage: soak_client.py PORT PID DURATION_S WARMUP_S CLIENTS MAX_BODY_KB
Exit status: 0 when every criterion holds, 1 otherwise.
"""
import collections
import http.client
import json
import random
import socket
import sys
import threading
import time

PORT, PID = int(sys.argv[1]), int(sys.argv[2])
DURATION, WARMUP = float(sys.argv[3]), float(sys.argv[4])
CLIENTS, MAX_BODY_KB = int(sys.argv[5]), int(sys.argv[6])
TIMEOUT_S = 120
RSS_GROWTH_LIMIT = 0.05

WORDS = "the a server model token stream cache block prompt reply quick brown fox jumps over lazy dog".split()


def text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def request(method, path, body=None, read_all=True):
    """Returns (status, body bytes) or raises OSError / http.client errors."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=TIMEOUT_S)
    try:
        headers = {"Content-Type": "application/json", "Connection": "close"}
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read() if read_all else b""
        return r.status, data
    finally:
        conn.close()


def gen_body(rng, stream, chat=False):
    body = {"n_predict": rng.randint(1, 24), "temperature": rng.choice([0, 0.7, 1.0]),
            "seed": rng.randint(0, 1 << 30), "stream": stream, "cache_prompt": rng.random() < 0.5}
    if chat:
        body["messages"] = [{"role": "user", "content": text(rng, rng.randint(1, 30))}]
    else:
        body["prompt"] = text(rng, rng.randint(1, 60))
    return json.dumps(body).encode()


def kind_complete(rng):
    return request("POST", "/completion", gen_body(rng, False))[0], {200}


def kind_chat(rng):
    return request("POST", "/v1/chat/completions", gen_body(rng, False, chat=True))[0], {200}


def kind_stream(rng):
    chat = rng.random() < 0.5
    path = "/v1/chat/completions" if chat else "/completion"
    status, data = request("POST", path, gen_body(rng, True, chat=chat))
    ends = b"data: [DONE]" in data if chat else b'"stop":true' in data
    return (status if ends or status != 200 else "stream_unfinished"), {200}


def kind_disconnect(rng):
    """A streaming request whose client reads the first event and then vanishes."""
    body = json.dumps({"prompt": text(rng, 20), "n_predict": 200, "ignore_eos": True, "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT_S)
    try:
        s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data: " not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else "no_response"
        if rng.random() < 0.5:  # an abortive close (RST) half of the time
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    finally:
        s.close()
    return status, {200}


def kind_oversized(rng):
    body = b'{"prompt":"' + b"x" * ((MAX_BODY_KB + 64) * 1024) + b'"}'
    try:
        return request("POST", "/completion", body)[0], {413}
    except (ConnectionResetError, BrokenPipeError):
        return "reset_while_sending_oversized", {"reset_while_sending_oversized"}


def kind_long_prompt(rng):
    body = json.dumps({"prompt": "y" * (rng.randint(256, 900) * 1024)}).encode()
    return request("POST", "/completion", body)[0], {400}


MALFORMED = [
    b"{not json",
    b"",
    b"[1,2,3]",
    b'{"prompt":' + b"[" * 100000 + b"]" * 100000 + b"}",
    b'{"prompt":"a","temperature":1e400}',
    b'{"prompt":"a","n_predict":-1e400}',
    b'{"prompt":"a","seed":"x"}',
    b'{"prompt":{"a":1}}',
    b'{"prompt":"a","stop":' + json.dumps([str(i) for i in range(17)]).encode() + b"}",
    b'{"prompt":"a","logit_bias":[[999999999,1]]}',
    b'{"prompt":"\xff\xfe"}',
]


def kind_malformed(rng):
    path = rng.choice(["/completion", "/v1/completions", "/v1/chat/completions", "/tokenize"])
    return request("POST", path, rng.choice(MALFORMED))[0], {400}


def kind_small(rng):
    pick = rng.randrange(5)
    if pick == 0:
        return request("POST", "/tokenize", json.dumps({"content": text(rng, 20)}).encode())[0], {200}
    if pick == 1:
        return request("POST", "/detokenize", json.dumps({"tokens": [1, 2, 3]}).encode())[0], {200}
    if pick == 2:
        return request("GET", "/health")[0], {200}
    if pick == 3:
        return request("GET", "/metrics")[0], {200}
    return request("GET", "/no/such/route")[0], {404}


KINDS = [(kind_complete, 20), (kind_chat, 8), (kind_stream, 20), (kind_disconnect, 8), (kind_oversized, 3),
         (kind_long_prompt, 3), (kind_malformed, 18), (kind_small, 20)]

counts = collections.Counter()
unexpected = collections.Counter()
lock = threading.Lock()
stop_at = time.time() + DURATION


def client(seed):
    rng = random.Random(seed)
    fns, weights = zip(*KINDS)
    while time.time() < stop_at:
        fn = rng.choices(fns, weights)[0]
        name = fn.__name__[5:]
        try:
            status, expected = fn(rng)
        except (OSError, http.client.HTTPException) as e:
            status, expected = type(e).__name__, set()
        with lock:
            counts[(name, status)] += 1
            if status not in expected:
                unexpected[(name, status)] += 1


def metric(name):
    _, data = request("GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main():
    rss_start = rss_kib()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    t0 = time.time()
    for t in threads:
        t.start()
    rss_samples = []
    rss_warm = None
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        rss_samples.append(rss_kib())
        if rss_warm is None and time.time() - t0 >= WARMUP:
            rss_warm = rss_samples[-1]
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    # Idle: wait for running requests (abandoned streams included) to be cancelled.
    kv_used = None
    for _ in range(100):
        kv_used = metric("ds_kv_blocks_used")
        running = metric("ds_requests_running")
        if kv_used == 0 and running == 0:
            break
        time.sleep(0.1)
    time.sleep(2)
    rss_end = rss_kib()
    n_5xx = metric("ds_http_errors_5xx_total")
    total = sum(counts.values())
    growth = (rss_end - rss_warm) / rss_warm if rss_warm else 0.0

    print(f"soak: {total} requests in {elapsed:.0f} s from {CLIENTS} clients ({total / elapsed:.1f}/s)")
    for (name, status), n in sorted(counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        print(f"  {name:<12} {str(status):<32} {n}")
    statuses = collections.Counter()
    for (_, status), n in counts.items():
        statuses[status] += n
    print("status counts: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items(), key=lambda kv: str(kv[0]))))
    print(f"server-counted 5xx: {n_5xx:.0f}")
    print(f"RSS: start {rss_start / 1024:.1f} MiB, after {WARMUP:.0f} s warm-up {rss_warm / 1024:.1f} MiB, "
          f"peak {max(rss_samples) / 1024:.1f} MiB, end (idle) {rss_end / 1024:.1f} MiB "
          f"({growth * 100:+.1f}% after warm-up)")
    print(f"KV blocks used after idle: {kv_used:.0f}")

    failures = []
    if n_5xx or any(isinstance(s, int) and s >= 500 for (_, s) in counts):
        failures.append("5xx responses")
    if unexpected:
        failures.append("unexpected outcomes: " + ", ".join(f"{k[0]} {k[1]} x{n}" for k, n in unexpected.items()))
    if growth >= RSS_GROWTH_LIMIT:
        failures.append(f"RSS grew {growth * 100:.1f}% after warm-up (limit {RSS_GROWTH_LIMIT * 100:.0f}%)")
    if kv_used != 0:
        failures.append(f"{kv_used} KV blocks still in use after idle")
    print("soak: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
