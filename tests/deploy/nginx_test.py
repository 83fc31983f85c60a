"""Two ds-server instances behind Debian's nginx with configs/nginx/ds-server.conf, all on
loopback: requests spread over both, a session sticks to one instance (its prefix cache
hits), killing an instance loses no request that had not started answering (nginx retries
them on the other) and ends the stream running on it at once instead of hanging; both
instances' /metrics are scraped.

usage: nginx_test.py BUILD_DIR SOURCE_DIR"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from deploy_util import Server, env_without_systemd, fail, make_model, request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_conf(tmp, site, ports, listen):
    conf = open(site).read()
    conf, n = re.subn(r"server 127\.0\.0\.1:8100 ", f"server 127.0.0.1:{ports[0]} ", conf)
    conf, m = re.subn(r"server 127\.0\.0\.1:8101 ", f"server 127.0.0.1:{ports[1]} ", conf)
    conf, k = re.subn(r"listen 8080;", f"listen 127.0.0.1:{listen};", conf)
    if (n, m, k) != (1, 1, 1):
        fail("configs/nginx/ds-server.conf no longer has the upstream/listen lines this test rewrites")
    with open(os.path.join(tmp, "ds-server.conf"), "w") as f:
        f.write(conf)
    temp = os.path.join(tmp, "temp")
    os.makedirs(temp)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(f"""{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {tmp}/ds-server.conf;
}}
""")


def completion(port, prompt, headers=None, n=4, **extra):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0}
    body.update(extra)
    return request(port, "POST", "/completion", body, headers)


def requests_of(servers):
    return [s.metric("ds_requests_total") for s in servers]


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx_bin):
        fail("nginx is not installed (scripts/setup.sh installs nginx-light)")
    tmp = tempfile.mkdtemp()
    servers, nginx = [], None
    try:
        os.chmod(tmp, 0o755)
        model = os.path.join(tmp, "m.gguf")
        make_model(build, model)
        env = env_without_systemd()
        # One sequence each: while a stream runs on an instance, its other requests wait in its queue.
        servers = [Server(build, ["--model", model, "--parallel", "1", "--grace", "2"], os.path.join(tmp, f"s{i}.log"),
                          env=env) for i in range(2)]
        listen = free_port()
        nginx_conf(tmp, os.path.join(source, "configs/nginx/ds-server.conf"), [s.port for s in servers], listen)
        nginx = subprocess.Popen([nginx_bin, "-p", tmp, "-c", os.path.join(tmp, "nginx.conf")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        end = time.time() + 20
        while True:
            try:
                if request(listen, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if nginx.poll() is not None or time.time() > end:
                fail("nginx did not come up:\n" + open(os.path.join(tmp, "error.log")).read())
            time.sleep(0.1)

        # Spread: distinct sessions land on both instances.
        before = requests_of(servers)
        for i in range(16):
            status, _, _ = completion(listen, f"spread {i}", {"X-Session-Id": f"session-{i}"})
            if status != 200:
                fail(f"request {i} through nginx: {status}")
        spread = [a - b for a, b in zip(requests_of(servers), before)]
        if sum(spread) != 16 or min(spread) == 0:
            fail(f"16 sessions were served {spread[0]:.0f} / {spread[1]:.0f}: not spread over both instances")

        # Affinity: one session's requests all reach one instance, whose prefix cache hits.
        prompt = "The quick brown fox jumps over the lazy dog. " * 8
        before = requests_of(servers)
        cached = []
        for _ in range(4):
            status, _, body = completion(listen, prompt, {"X-Session-Id": "sticky"})
            if status != 200:
                fail(f"sticky request: {status}")
            cached.append(int(re.search(rb'"tokens_cached":\s*(\d+)', body).group(1)))
        delta = [a - b for a, b in zip(requests_of(servers), before)]
        if sorted(delta) != [0, 4]:
            fail(f"one session's 4 requests went {delta[0]:.0f} / {delta[1]:.0f}")
        if cached[-1] <= 0:
            fail(f"the session's repeated prompt found no cached tokens: {cached}")
        home = 0 if delta[0] == 4 else 1

        # The "user" field of an OpenAI request is the key when no X-Session-Id is sent.
        before = requests_of(servers)
        for _ in range(4):
            status, _, _ = request(listen, "POST", "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "user": "alice"})
            if status != 200:
                fail(f"chat request with user: {status}")
        delta = [a - b for a, b in zip(requests_of(servers), before)]
        if sorted(delta) != [0, 4]:
            fail(f"one user's 4 requests went {delta[0]:.0f} / {delta[1]:.0f}")

        # Kill the session's instance while it streams and while requests wait on it.
        sock = socket.create_connection(("127.0.0.1", listen), timeout=15)
        body = ('{"prompt":"stream","n_predict":100000,"ignore_eos":true,"stream":true}').encode()
        sock.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nX-Session-Id: sticky\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data:" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                fail("the stream ended before its first event")
            got += chunk
        results = []

        def waiting_request(i):
            try:
                # Queued behind the stream on the session's instance until it dies.
                results.append(completion(listen, f"queued {i}", {"X-Session-Id": "sticky"}, n=8)[0])
            except OSError as e:
                results.append(str(e))

        threads = [threading.Thread(target=waiting_request, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        # The four requests reached the instance (they wait in its queue) before it dies.
        end = time.time() + 20
        while servers[home].metric("ds_requests_waiting") < 4:
            if time.time() > end:
                fail("the four requests did not reach the session's instance")
            time.sleep(0.05)
        servers[home].proc.send_signal(signal.SIGKILL)
        servers[home].proc.wait()
        t0 = time.time()
        complete = False
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
                if b'"stop":true' in got or b"\r\n0\r\n\r\n" in got:
                    complete = True
                    break
        except socket.timeout:
            fail("the stream on the killed instance hung instead of ending")
        ended_s = time.time() - t0
        sock.close()
        if complete:
            fail("the stream on the killed instance ended as if complete")
        if ended_s > 5:
            fail(f"the stream on the killed instance ended only after {ended_s:.1f} s")
        for t in threads:
            t.join(60)
        if results != [200] * 4:
            fail(f"requests waiting on the killed instance: {results} (expected 4 x 200, retried on the other)")
        retried = open(os.path.join(tmp, "error.log")).read().count("while reading response header from upstream")
        if retried < 4:
            fail(f"nginx retried {retried} requests: the 4 requests had not reached the killed instance")
        for i in range(8):
            status, _, _ = completion(listen, f"after {i}", {"X-Session-Id": "sticky"})
            if status != 200:
                fail(f"request {i} after the kill: {status}")
        survivor = servers[1 - home]
        if survivor.metric("ds_requests_total") <= 0:
            fail("the surviving instance's /metrics shows no requests")
        print(f"nginx_test: ok (spread {spread[0]:.0f}/{spread[1]:.0f}, session cached {cached}, "
              f"killed stream ended in {ended_s:.2f} s, {retried} requests retried)")
    finally:
        if nginx and nginx.poll() is None:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(10)
            except subprocess.TimeoutExpired:
                nginx.kill()
        for s in servers:
            if s.proc.poll() is None:
                s.stop(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
