"""HTTP/1.1 over a raw socket, with the connection cut where a flaky network cuts it.

urllib cannot stop half way through sending a request, nor after reading three bytes of an
answer; these tests need exactly that, so requests are written and answers read by hand.
"""
import socket
import time

# Where a connection is cut. None: the whole answer is read.
PARTIAL = "before the request is complete"
SENT = "after the request is sent"
STARTED = "after the answer starts"
CUTS = (PARTIAL, SENT, STARTED)


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers   # lower-case names
        self.body = body

    @property
    def replayed(self):
        return self.headers.get("idempotent-replayed") == "true"

    def kept(self):
        """What a replay must repeat byte for byte (issue 28): not Date, not the replay mark."""
        return (self.status, self.body, self.headers.get("content-type"), self.headers.get("etag"),
                self.headers.get("location"))

    def __repr__(self):
        return f"Answer({self.status}, {self.headers}, {self.body!r})"


def request_bytes(method, path, body, headers):
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
            f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def connect(port, wait):
    """A connection to 127.0.0.1:port, retried for up to `wait` s while nothing listens
    (the server being restarted: refused, or reset when it died with the connection in its
    backlog); OSError after that."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except (ConnectionRefusedError, ConnectionResetError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def exchange(port, data, cut=None, rng=None, wait=15):
    """Sends `data` (a whole request) and reads the answer, or cuts the connection at `cut`.
    Returns the Answer, or None when cut or when the network failed (the outcome is unknown).
    Raises OSError only when nothing listens on `port` for `wait` s."""
    sock = connect(port, wait)
    try:
        if cut == PARTIAL:
            sock.sendall(data[:rng.randrange(1, len(data))])
            return None
        sock.sendall(data)
        if cut == SENT:
            return None
        if cut == STARTED:
            sock.recv(rng.randrange(1, 16))
            return None
        return read_answer(sock)
    except OSError:
        return None
    finally:
        sock.close()


def read_answer(sock):
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    head, body = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    if "content-length" not in headers:
        raise AssertionError(f"an answer without Content-Length: {head!r}")
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None   # cut by the server (killed) half way through the body
        body += chunk
    return Answer(status, headers, body[:length].decode())
