"""nginx+nchan with its Redis backend, two nodes on one Redis: the cluster benchmark's peer
(issue 31). Each node is Benchmarks/peers/nchan with one worker; Redis runs without
persistence. Needs Debian's nginx, libnginx-mod-nchan and redis-server."""
import os
import re
import shutil
import socket
import subprocess
import time

from action_load import ROOT, free_port, requests_per_second
from delivery_latency import delivery_latency

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
    return requests_per_second(port, ["nchan", "64"], seconds)


def cross_node_latency(publish_port, subscribe_port, seconds):
    """As the cluster benchmark measures reactord: 8 channels, a subscriber on one node each,
    1,000 messages/s published to the other node (125/s a channel): from sending a publish to
    its message arriving. Returns (rate, sorted delays in ms, messages not seen)."""
    published = {}

    def send(channel, connection):
        published[channel] = published.get(channel, 0) + 1   # one sender a channel: no race
        connection.request("POST", "/pub/" + channel, str(published[channel]).encode())
        connection.getresponse().read()
        return published[channel]

    return delivery_latency({"lat%d" % index: "/sub/lat%d" % index for index in range(8)},
                            subscribe_port, publish_port, rb"data: (\d+)\n", send, seconds)
