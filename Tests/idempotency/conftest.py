"""One real reactord on a real SQLite file, killed with SIGKILL and started again on the
same file and port as often as a test likes.
Run by scripts/check-idempotency (scripts/test): REACTORD_BINARY names the binary.
"""
import os
import signal
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("REACTORD_BINARY", os.path.join(ROOT, ".build/debug/reactord"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "pysupport"))
from reactord_process import free_port, request, wait_until_healthy  # noqa: E402


class Server:
    def __init__(self, *extra):
        self.directory = tempfile.TemporaryDirectory(prefix="reactord-idempotency-")
        self.store = f"sqlite:{self.directory.name}/store.sqlite"
        self.port = free_port()
        self.extra = extra
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = None
        self.kills = 0
        self.start()

    def start(self):
        # Many short connections from one address at once: no per-address limit.
        self.process = subprocess.Popen(
            [BINARY, "--store", self.store, "--port", str(self.port), "--access-log", "off",
             "--connections-per-ip", "0", *self.extra],
            stdout=subprocess.DEVNULL, stderr=self.log)
        wait_until_healthy(self)

    def kill9_and_restart(self):
        """SIGKILL (it must still be running: it did not die on its own), then the same file and port."""
        assert self.process.poll() is None, f"reactord died on its own ({self.process.returncode}): {self.output()}"
        self.process.kill()
        self.process.wait(timeout=10)
        self.kills += 1
        self.log.write(f"\n--- kill -9 number {self.kills}, restarted ---\n")
        self.log.flush()
        self.start()

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, headers=None, timeout=10):
        return request(self.port, method, path, body, headers, timeout)

    def close(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.directory.cleanup()


@pytest.fixture()
def server():
    started = Server()
    yield started
    started.close()
