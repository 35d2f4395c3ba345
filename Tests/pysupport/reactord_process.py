"""What the Python test suites share about a reactord they start themselves."""
import json
import socket
import time
import urllib.error
import urllib.request


def free_port():
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(port, method, path, body=None, headers=None, timeout=15):
    """One request to the reactord on `port`: (status, body text, headers), errors included;
    a dict or list `body` is sent as JSON."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    sent = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def wait_until_healthy(server, name="reactord", pause=0.02, seconds=30):
    """Polls `server`'s /healthz (its `request`) until it answers 200; fails, with `server.output()`,
    when its `process` exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"{name} exited {server.process.returncode}: {server.output()}")
        try:
            if server.request("GET", "/healthz", timeout=1)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(pause)
    raise AssertionError(f"{name} did not answer /healthz: {server.output()}")
