"""From sending a change on one server to its event arriving on another's stream: the
measurement the cluster benchmark makes of reactord and of its nginx+nchan+Redis peer alike."""
import http.client
import re
import socket
import threading
import time


def delivery_latency(streams, subscribe_port, publish_port, pattern, send, seconds, rate=125):
    """One raw-socket subscriber per key of `streams` (key -> the path of its event stream) on
    `subscribe_port`; then, per key, a sender on its own keep-alive connection to
    `publish_port`, paced at `rate` a second, calling `send(key, connection)`, which returns the
    number the stream will carry for it (`pattern`'s group 1). Each delay runs from just before
    that call to the arrival of the number. Returns (sends a second, sorted delays in ms, sends
    never seen)."""
    sent, arrived = {}, {}
    lock = threading.Lock()

    def subscribe(key):
        sock = socket.create_connection(("127.0.0.1", subscribe_port))
        sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n" % streams[key]).encode())
        buffer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            now = time.monotonic()
            buffer += chunk
            for match in re.finditer(pattern, buffer):
                with lock:
                    arrived.setdefault((key, int(match.group(1))), now)
            buffer = buffer[-200:]

    for key in streams:
        threading.Thread(target=subscribe, args=(key,), daemon=True).start()
    time.sleep(0.5)
    stop = time.monotonic() + seconds

    def sender(key):
        connection = http.client.HTTPConnection("127.0.0.1", publish_port)
        tick = time.monotonic()
        while tick < stop:
            began = time.monotonic()
            number = send(key, connection)
            with lock:
                sent[(key, number)] = began
            tick += 1 / rate
            time.sleep(max(0, tick - time.monotonic()))
        connection.close()

    senders = [threading.Thread(target=sender, args=(key,)) for key in streams]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    time.sleep(1)
    with lock:
        delays = sorted((arrived[key] - began) * 1000 for key, began in sent.items() if key in arrived)
        lost = sum(1 for key in sent if key not in arrived)
    return len(sent) / seconds, delays, lost
