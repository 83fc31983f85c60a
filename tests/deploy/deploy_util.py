"""Helpers for the deployment tests: start ds-server / nginx on loopback, plain HTTP calls."""
import http.client
import json
import os
import re
import signal
import subprocess
import time


def fail(msg):
    raise SystemExit(f"FAIL: {msg}")


def make_model(build, out):
    subprocess.run([f"{build}/src/ds-cli", "synth", "--shape", "tiny-llama", "--out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Server:
    """ds-server on 127.0.0.1; port 0 picks a free one, read back from the log."""

    def __init__(self, build, args, log_path, env=None, port=0, wait=True):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([f"{build}/src/ds-server", "--host", "127.0.0.1", "--port", str(port)] + args,
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.port = None
        if wait:
            self.wait_healthy()

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_port(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.read_log())
            if m:
                self.port = int(m.group(1))
                return self.port
            if self.proc.poll() is not None:
                fail(f"ds-server exited {self.proc.returncode}:\n{self.read_log()}")
            time.sleep(0.05)
        fail("ds-server did not report its port")

    def wait_healthy(self, timeout=60):
        self.wait_port()
        end = time.time() + timeout
        while time.time() < end:
            try:
                status, _, _ = request(self.port, "GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                fail(f"ds-server exited {self.proc.returncode}:\n{self.read_log()}")
            time.sleep(0.05)
        fail("ds-server did not become healthy")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                fail(f"ds-server did not exit within {timeout} s")
        self.log.close()
        return self.proc.returncode

    def metric(self, name):
        _, _, body = request(self.port, "GET", "/metrics")
        m = re.search(rf"^{name} ([0-9.e+]+)$", body.decode(), re.M)
        return float(m.group(1)) if m else 0.0


def request(port, method, path, body=None, headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    r = conn.getresponse()
    out = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), out


def env_without_systemd():
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"):
        env.pop(k, None)
    return env
