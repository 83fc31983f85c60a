"""Readiness under systemd: ds-server with a fake NOTIFY_SOCKET sends READY=1 only once the
model is loaded (/health is 200 at that moment), WATCHDOG=1 at the interval WATCHDOG_USEC
asks for, STOPPING=1 on SIGTERM; a failed load exits 1 and never says READY=1.

usage: notify_test.py BUILD_DIR"""
import os
import socket
import sys
import tempfile
import threading
import time

from deploy_util import Server, env_without_systemd, fail, make_model, request


class NotifyListener:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []  # (time, text)
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append((time.time(), data.decode()))

    def wait_for(self, field, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                for t, m in self.messages:
                    if field in m.split("\n"):
                        return t
            time.sleep(0.02)
        return None

    def count(self, field):
        with self.lock:
            return sum(1 for _, m in self.messages if field in m.split("\n"))

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


def main():
    build = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_model(build, model)

        # A good start: READY=1 after the load, watchdog pings, STOPPING=1 on SIGTERM.
        listener = NotifyListener(os.path.join(tmp, "notify.sock"))
        env = env_without_systemd()
        env["NOTIFY_SOCKET"] = os.path.join(tmp, "notify.sock")
        env["WATCHDOG_USEC"] = "400000"
        srv = Server(build, ["--model", model], os.path.join(tmp, "good.log"), env=env, wait=False)
        srv.wait_port()
        t_ready = listener.wait_for("READY=1", 60)
        if t_ready is None:
            fail("no READY=1 within 60 s")
        status, _, _ = request(srv.port, "GET", "/health")
        if status != 200:
            fail(f"READY=1 was sent while /health answers {status}")
        pings_before = listener.count("WATCHDOG=1")
        time.sleep(1.0)
        pings = listener.count("WATCHDOG=1") - pings_before
        if pings < 3:  # every 0.2 s (half of WATCHDOG_USEC): about 5 in 1 s
            fail(f"{pings} WATCHDOG=1 pings in 1 s with WATCHDOG_USEC=400000")
        rc = srv.stop()
        if listener.wait_for("STOPPING=1", 5) is None:
            fail("no STOPPING=1 after SIGTERM")
        if rc != 0:
            fail(f"exit status {rc} after SIGTERM")
        listener.close()
        os.unlink(os.path.join(tmp, "notify.sock"))

        # A failed load: exit 1, no READY=1.
        bad = os.path.join(tmp, "bad.gguf")
        with open(bad, "wb") as f:
            f.write(b"GGUF" + b"\xff" * 60)
        listener = NotifyListener(os.path.join(tmp, "notify.sock"))
        srv = Server(build, ["--model", bad], os.path.join(tmp, "bad.log"), env=env, wait=False)
        try:
            rc = srv.proc.wait(60)
        except Exception:
            srv.stop(timeout=5)
            fail("a failed load did not exit within 60 s")
        if rc != 1:
            fail(f"a failed load exited {rc}, expected 1")
        if listener.count("READY=1"):
            fail("READY=1 was sent for a model that failed to load")
        listener.close()
    print("notify_test: ok")


if __name__ == "__main__":
    main()
