"""nginx+nchan with its Redis backend, two nodes on one Redis: the cluster benchmark's peer
(issue 31). Each node is Benchmarks/peers/nchan with one worker; Redis runs without
persistence. Needs Debian's nginx, libnginx-mod-nchan and redis-server."""
import http.client
import os
import re
import shutil
import socket
import subprocess
import threading
import time

from action_load import ROOT, SCRIPT, free_port

HERE = os.path.join(ROOT, "Benchmarks", "peers", "nchan")


def missing():
    """What this machine lacks to run the peer, or None."""
    if not os.path.exists("/usr/lib/nginx/modules/ngx_nchan_module.so"):
        return "libnginx-mod-nchan"
    if not shutil.which("redis-server"):
        return "redis-server"
    return None


class NchanRedisCluster:
    def __init__(self, nodes=2):
        redis_port = free_port()
        self.redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", redis_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        environment = dict(os.environ, NCHAN_REDIS_URL="redis://127.0.0.1:%d" % redis_port)
        self.prefixes, self.ports = [], []
        for _ in range(nodes):
            out = subprocess.run([os.path.join(HERE, "start-nchan.sh"), str(free_port()), "1"], env=environment,
                                 check=True, capture_output=True, text=True).stdout
            self.prefixes.append(re.search(r"prefix=(\S+)", out).group(1))
            self.ports.append(int(re.search(r"port=(\d+)", out).group(1)))

    def stop(self):
        for prefix in self.prefixes:
            subprocess.run([os.path.join(HERE, "stop-nchan.sh"), prefix], capture_output=True)
            shutil.rmtree(prefix, ignore_errors=True)
        self.redis.terminate()
        self.redis.wait(timeout=10)


def publish_rate(port, seconds):
    """wrk -t1 -c64 publishing to 64 channels (action.lua's nchan mode), after a 2 s warm-up."""
    url = "http://127.0.0.1:%d" % port
    subprocess.run(["wrk", "-t1", "-c64", "-d2s", "-s", SCRIPT, url, "--", "nchan", "64"],
                   check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(["wrk", "-t1", "-c64", "-d%ds" % seconds, "-s", SCRIPT, url, "--", "nchan", "64"],
                         check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in out:
        raise SystemExit("nchan answered non-2xx under load:\n" + out)
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def cross_node_latency(publish_port, subscribe_port, seconds):
    """As the cluster benchmark measures reactord: 8 channels, a subscriber on one node each,
    1,000 messages/s published to the other node (125/s a channel): from sending a publish to
    its message arriving. Returns (rate, sorted delays in ms, messages not seen)."""
    channels = ["lat%d" % index for index in range(8)]
    sent, arrived = {}, {}
    lock = threading.Lock()

    def subscribe(channel):
        sock = socket.create_connection(("127.0.0.1", subscribe_port))
        sock.sendall(("GET /sub/%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n" % channel).encode())
        buffer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            now = time.monotonic()
            buffer += chunk
            for match in re.finditer(rb"data: (\d+)\n", buffer):
                with lock:
                    arrived.setdefault((channel, int(match.group(1))), now)
            buffer = buffer[-200:]

    for channel in channels:
        threading.Thread(target=subscribe, args=(channel,), daemon=True).start()
    time.sleep(0.5)
    stop = time.monotonic() + seconds

    def publish(channel):
        client = http.client.HTTPConnection("127.0.0.1", publish_port)
        tick = time.monotonic()
        number = 0
        while tick < stop:
            number += 1
            with lock:
                sent[(channel, number)] = time.monotonic()
            client.request("POST", "/pub/" + channel, str(number).encode())
            client.getresponse().read()
            tick += 1 / 125
            time.sleep(max(0, tick - time.monotonic()))
        client.close()

    publishers = [threading.Thread(target=publish, args=(channel,)) for channel in channels]
    for thread in publishers:
        thread.start()
    for thread in publishers:
        thread.join()
    time.sleep(1)
    with lock:
        delays = sorted((arrived[key] - began) * 1000 for key, began in sent.items() if key in arrived)
        lost = sum(1 for key in sent if key not in arrived)
    return len(sent) / seconds, delays, lost
