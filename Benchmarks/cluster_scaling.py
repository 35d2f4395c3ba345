#!/usr/bin/env python3
"""Scaling shown, not assumed (issue 31): the CPU an action costs on each path of a cluster,
and the actions/s of 1 and 3 nodes each held to a quarter core.

    Benchmarks/cluster_scaling.py [--rounds 3] [--seconds 8] [--sessions 300] [--quota 25000]
                                  [--only cpu|quota]

A PostgreSQL server is started as cluster_bench.py starts it (scripts/postgres-test-server: as
root, the `postgres` user through runuser; loopback, a temporary folder), the nodes are
cluster_bench's `Node`s (one libmicrohttpd thread each), the load is wrk with
Benchmarks/load/action.lua's `reactord-path` mode (`POST /sessions/{id}/actions`, the route the
shipped nginx.conf hashes on, no Idempotency-Key), 64 connections.

Part 1, CPU per action of each path (--rounds rounds, a fresh database and three fresh nodes A, B,
C each, 64 sessions made on A, so A holds them): utime+stime from /proc/<pid>/stat of each node
and of PostgreSQL (postmaster, its children, and children it reaped) across a wrk run, divided by
the actions applied meanwhile (the nodes' `reactord_actions_total{outcome="applied"}`), less what
each process spent idle (measured just before, for as long). Scenarios:
  served      wrk -> A, the holder; B and C do nothing but receive the commits' NOTIFY.
  served+key  the same with an Idempotency-Key of its own on every request (action.lua's
              reactord-keyed mode, POST /action): what a forward costs the holder and PostgreSQL,
              since a forwarding node sends every request under a key of its own.
  served+sub  the same as served with one subscriber of each session on A (what delivery on the holder costs).
  forwarded   wrk -> B, which forwards every action to A. A's subscribers are kept: a holder hands
              a session over (docs/cluster.md, "Placement") only once it has no subscriber there,
              so none is handed over (checked: reactord_cluster_handovers_total stays 0, and B's
              reactord_cluster_forwarded_total grows by as many as were applied). The holder's
              side of a forward is A here less A in served+sub.
  followed    wrk -> A, one subscriber of each session on B (woken by NOTIFY, events carried in it).
Then a projection for 1, 3 and 10 nodes from the medians (its model is printed with it).

Part 2, the quota run (--rounds rounds, alternating which goes first): 1 node, then 3 nodes, each
node in a cgroup of its own with a CPU bandwidth limit of --quota µs per 100,000 µs (cgroup v2
`cpu.max`; where the cpu controller is bound to the v1 hierarchy instead, as on this machine, v1's
`cpu.cfs_quota_us`/`cpu.cfs_period_us`: the same CFS bandwidth control). PostgreSQL, nginx and wrk
run outside the quotas. Clients go through the shipped deploy/cluster/nginx.conf run by
Tests/cluster/test_nginx.py's `Nginx` (only its addresses rewritten; with one node, its three
`server` lines all name that node). --sessions sessions made through nginx (round robin), a 4 s
wrk run through nginx for placement to settle, then the measured run: actions/s, the share of
actions forwarded between nodes, CPU used by the nodes, PostgreSQL and nginx, and how often the
nodes were throttled. Target: 3 nodes >= 2.5x one node, medians, in the same run. The cgroups are
removed on the way out, whatever happens.

Uses the release build (.build-bench) unless REACTORD_BIN names one; wrk and nginx from Debian.
"""
import argparse
import glob
import json
import os
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from action_load import ROOT, build, free_port, requests_per_second
from cluster_bench import PG, STARTED, Node, createdb, stop_all, warnings

sys.path.insert(0, os.path.join(ROOT, "Tests", "cluster"))
from test_nginx import Nginx  # noqa: E402  (the shipped nginx.conf, its addresses rewritten)

TICK = os.sysconf("SC_CLK_TCK")


# --- CPU from /proc -------------------------------------------------------------------------------

def _stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        text = f.read()
    fields = text[text.rindex(")") + 2:].split()   # fields[0] is field 3 (state)
    return int(fields[1]), [int(x) for x in fields[11:15]]   # ppid; utime, stime, cutime, cstime


def cpu_seconds(pid):
    """utime + stime of one process (all its threads)."""
    _, times = _stat(pid)
    return (times[0] + times[1]) / TICK


def tree_cpu_seconds(root):
    """`root`, its live children, and the children it has reaped (PostgreSQL's backends,
    nginx's worker)."""
    _, times = _stat(root)
    total = sum(times)
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != root:
            try:
                ppid, child = _stat(int(name))
            except (OSError, ValueError):
                continue
            if ppid == root:
                total += child[0] + child[1]
    return total / TICK


def machine_busy_seconds():
    """CPU seconds the whole machine spent busy (all but idle and iowait), every process's."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / TICK


def pg_commits(pg_dir):
    """Transactions PostgreSQL has committed so far (group commits, and reads such as an
    Idempotency-Key's lookup), all databases (pg_stat_database, which
    backends update about once a second): over its unix socket, where the superuser is trusted."""
    psql = shutil.which("psql") or sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1]
    port = open(os.path.join(pg_dir, "port")).read().strip()
    out = subprocess.run([psql, "-X", "-Atq", "-h", pg_dir, "-p", port, "-U", "postgres", "-d", "postgres", "-c",
                          "SELECT sum(xact_commit) FROM pg_stat_database"], check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def postmaster(pg_dir):
    with open(os.path.join(pg_dir, "data", "postmaster.pid")) as f:
        return int(f.readline())


class Meter:
    """CPU seconds of named processes between `start()` and `stop()`, less what each spent in
    as long a time idle, measured by `idle(seconds)` before."""

    def __init__(self, probes):
        self.probes = probes            # name -> function returning CPU seconds so far
        self.idle_rate = {name: 0.0 for name in probes}

    def sample(self):
        return {name: probe() for name, probe in self.probes.items()}

    def idle(self, seconds=2.0):
        first, began = self.sample(), time.monotonic()
        time.sleep(seconds)
        last, wall = self.sample(), time.monotonic() - began
        self.idle_rate = {name: max(0.0, (last[name] - first[name]) / wall) for name in self.probes}

    def start(self):
        self.first, self.began = self.sample(), time.monotonic()

    def stop(self):
        last, wall = self.sample(), time.monotonic() - self.began
        return {name: last[name] - self.first[name] - self.idle_rate[name] * wall for name in self.probes}, wall


# --- what the nodes count -------------------------------------------------------------------------

def metric(node, name, label=""):
    status, body = node.request("GET", "/metrics")
    assert status == 200, status
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name) and label in line and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            if head == name or head.startswith(name + "{"):
                total += float(value)
    return total


def applied(nodes):
    return sum(metric(node, "reactord_actions_total", 'outcome="applied"') for node in nodes)


# --- subscribers ----------------------------------------------------------------------------------

class Subscribers:
    """One raw-socket event stream per session on `port`, read (and dropped) by one thread."""

    def __init__(self, port, sessions):
        self.selector = selectors.DefaultSelector()
        self.sockets = []
        self.bytes = 0
        for session in sessions:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(("GET /sessions/%s/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
                          % session).encode())
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ)
            self.sockets.append(sock)
        self.done = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        time.sleep(0.5)

    def _read(self):
        while not self.done:
            for key, _ in self.selector.select(0.2):
                try:
                    chunk = key.fileobj.recv(262144)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.selector.unregister(key.fileobj)
                self.bytes += len(chunk)

    def close(self):
        self.done = True
        self.thread.join()
        for sock in self.sockets:
            sock.close()


# --- part 1 ---------------------------------------------------------------------------------------

def load(port, sessions, seconds, folder, mode="reactord-path"):
    ids = os.path.join(folder, "sessions-%d.txt" % port)
    with open(ids, "w") as out:
        out.write("\n".join(sessions) + "\n")
    return requests_per_second(port, [mode, ids], seconds,
                               explain=lambda: "\nthe nodes' log:\n" + warnings(STARTED))


def scenario(meter, nodes, port, sessions, seconds, folder, pg_dir, mode="reactord-path"):
    """wrk against `port` (2 s warm-up, then `seconds`), metered: (µs per action by process,
    actions applied, actions/s by wrk, PostgreSQL commits a second)."""
    meter.idle()
    before, commits = applied(nodes), pg_commits(pg_dir)
    meter.start()
    rate = load(port, sessions, seconds, folder, mode)
    spent, wall = meter.stop()
    actions, commits = applied(nodes) - before, pg_commits(pg_dir) - commits
    return {name: seconds_ * 1e6 / actions for name, seconds_ in spent.items()}, actions, rate, commits / wall


def cpu_round(binary, pg_dir, round_, seconds, folder):
    dsn = createdb(pg_dir, "scaling_cpu_%d" % round_)
    a, b, c = Node(binary, dsn), Node(binary, dsn), Node(binary, dsn)
    nodes = [a, b, c]
    pg = postmaster(pg_dir)
    meter = Meter({"A": lambda: cpu_seconds(a.process.pid), "B": lambda: cpu_seconds(b.process.pid),
                   "C": lambda: cpu_seconds(c.process.pid), "PostgreSQL": lambda: tree_cpu_seconds(pg)})
    sessions = [a.create() for _ in range(64)]
    found = {}

    def run(name, port, mode="reactord-path"):
        costs, actions, rate, commits = scenario(meter, nodes, port, sessions, seconds, folder, pg_dir, mode)
        found[name] = costs
        print("round %d, %-12s %6.0f actions/s, %6d applied, %5.0f PostgreSQL transactions/s; µs per action: %s" % (
            round_ + 1, name, rate, actions, commits, ", ".join("%s %.1f" % item for item in costs.items())),
            flush=True)
        return actions

    run("served", a.port)
    run("served+key", a.port, "reactord-keyed")
    held = Subscribers(a.port, sessions)
    run("served+sub", a.port)
    handovers = metric(a, "reactord_cluster_handovers_total")
    forwarded = metric(b, "reactord_cluster_forwarded_total")
    actions = run("forwarded", b.port)
    handovers = metric(a, "reactord_cluster_handovers_total") - handovers
    forwarded = metric(b, "reactord_cluster_forwarded_total") - forwarded
    print("    forwarded by B: %d (applied %d, incl. the 2 s warm-up); handovers by A: %d"
          % (forwarded, actions, handovers), flush=True)
    if handovers:
        sys.exit("sessions were handed over during the forwarded run: it did not measure forwarding alone")
    held.close()
    followers = Subscribers(b.port, sessions)
    run("followed", a.port)
    followers.close()
    for node in nodes:
        node.stop()
    return found


def cpu_part(binary, pg_dir, rounds, seconds, folder):
    rounds_found = [cpu_round(binary, pg_dir, r, seconds, folder) for r in range(rounds)]
    med = {s: {p: statistics.median(f[s][p] for f in rounds_found) for p in rounds_found[0][s]}
           for s in rounds_found[0]}
    notify = statistics.median([med["served"]["B"], med["served"]["C"]])
    path = {
        "served (holder)": med["served"]["A"],
        "commit notification, each other node": notify,
        "delivery to a subscriber on the holder": med["served+sub"]["A"] - med["served"]["A"],
        "forwarding node, beyond its notification": med["forwarded"]["B"] - notify,
        "holder, forwarded instead of direct": med["forwarded"]["A"] - med["served+sub"]["A"],
        "follower (subscriber on B), beyond its notification": med["followed"]["B"] - notify,
        "holder, an Idempotency-Key's cost (every forward carries one)": med["served+key"]["A"] - med["served"]["A"],
        "PostgreSQL, served": med["served"]["PostgreSQL"],
        "PostgreSQL, an Idempotency-Key's cost": med["served+key"]["PostgreSQL"] - med["served"]["PostgreSQL"],
    }
    print("\nCPU per action, medians of %d rounds (µs; utime+stime from /proc, idle subtracted):" % rounds)
    print("| scenario | A | B | C | PostgreSQL |")
    print("|---|---|---|---|---|")
    for s, costs in med.items():
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % (s, costs["A"], costs["B"], costs["C"], costs["PostgreSQL"]))
    print("\nBy path (µs per action):")
    for name, value in path.items():
        print("- %s: %.1f" % (name, value))
    project(path, med)
    return med, path


def project(path, med):
    S = path["served (holder)"]
    N = path["commit notification, each other node"]
    F = path["forwarding node, beyond its notification"] + max(0.0, path["holder, forwarded instead of direct"])
    L = path["follower (subscriber on B), beyond its notification"]
    P = med["served"]["PostgreSQL"]
    print("""
Projection. Model: one action costs the cluster c(n) = S + (n-1)*N + f*F + g*L CPU-µs, with
S = %.1f served on its holder, N = %.1f on every other node for the commit's NOTIFY (one channel,
every node listens), F = %.1f for a forward (forwarding node + the holder's extra), L = %.1f for a
subscriber on a node other than the holder; f = share of actions forwarded, g = share with a
subscriber elsewhere. A consistent-hash balancer without placement: f = g = (n-1)/n; with placement
(sessions live where their requests and streams hash): f = g = 0. The nodes share the load evenly,
so n nodes of q cores each reach n*q/c(n) actions/s. PostgreSQL (outside the nodes) needs
P = %.1f µs per action in the served run; P is not fixed: its group commits get smaller as the load
splits over more nodes (each node commits on its own), and a smaller commit costs more per action
(the quota run prints PostgreSQL's transactions/s and µs per action for 1 and 3 nodes).""" % (S, N, F, L, P))
    print("| nodes | placement | c(n) µs | actions/s at 1/4 core a node | at 1 core a node | PostgreSQL cores at the 1/4-core rate |")
    print("|---|---|---|---|---|---|")
    for n in (1, 3, 10):
        for placed in (True, False):
            share = 0.0 if placed else (n - 1) / n
            cost = S + (n - 1) * N + share * (F + L)
            quarter = n * 0.25 / cost * 1e6
            print("| %d | %s | %.1f | %.0f | %.0f | %.2f |" % (n, "yes" if placed else "no", cost, quarter,
                                                            n / cost * 1e6, quarter * P / 1e6))


# --- part 2: cgroups ------------------------------------------------------------------------------

class CpuQuota:
    """A parent cgroup of our own and one child per node, each with `quota` µs of CPU per 100 ms:
    cgroup v2 (`cpu.max`) where its cpu controller is available, else the v1 cpu hierarchy."""

    def __init__(self, quota, period=100000):
        self.quota, self.period = quota, period
        self.children = []
        self.enabled_at_root = False
        name = "reactord-scaling-%d" % os.getpid()
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            controllers = os.path.join(root, "cgroup.controllers")
            if os.path.exists(controllers) and "cpu" in open(controllers).read().split():
                self.version, self.root = 2, root
                break
        else:
            if not os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
                sys.exit("no cgroup cpu controller: neither v2 with cpu nor v1's cpu hierarchy")
            self.version, self.root = 1, "/sys/fs/cgroup/cpu"
        if self.version == 2:
            control = os.path.join(self.root, "cgroup.subtree_control")
            if "cpu" not in open(control).read().split():
                self._write(control, "+cpu")
                self.enabled_at_root = True
        self.parent = os.path.join(self.root, name)
        os.mkdir(self.parent)
        if self.version == 2:
            self._write(os.path.join(self.parent, "cgroup.subtree_control"), "+cpu")
        self.how = ("cgroup v2 %s, cpu.max \"%d %d\"" % (self.parent, quota, period) if self.version == 2 else
                    "cgroup v1 %s (the cpu controller is bound to v1 here; the v2 hierarchy at "
                    "/sys/fs/cgroup/unified has no cpu controller), cpu.cfs_quota_us %d / cpu.cfs_period_us %d"
                    % (self.parent, quota, period))

    @staticmethod
    def _write(path, value):
        with open(path, "w") as f:
            f.write(value)

    def place(self, pid):
        child = os.path.join(self.parent, "node-%d" % pid)
        os.mkdir(child)
        self.children.append(child)
        if self.version == 2:
            self._write(os.path.join(child, "cpu.max"), "%d %d" % (self.quota, self.period))
        else:
            self._write(os.path.join(child, "cpu.cfs_period_us"), str(self.period))
            self._write(os.path.join(child, "cpu.cfs_quota_us"), str(self.quota))
        self._write(os.path.join(child, "cgroup.procs"), str(pid))   # every thread of it
        return child

    @staticmethod
    def throttling(child):
        """(periods, periods throttled, seconds throttled) so far."""
        stat = dict(line.split() for line in open(os.path.join(child, "cpu.stat")) if len(line.split()) == 2)
        throttled = int(stat.get("throttled_usec", 0)) / 1e6 if "throttled_usec" in stat else \
            int(stat.get("throttled_time", 0)) / 1e9
        return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0)), throttled

    def cleanup(self):
        for child in self.children + [self.parent]:
            for _ in range(50):
                try:
                    for pid in open(os.path.join(child, "cgroup.procs")).read().split():
                        try:
                            self._write(os.path.join(self.root, "cgroup.procs"), pid)
                        except OSError:
                            pass
                    os.rmdir(child)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        if self.enabled_at_root:
            try:
                self._write(os.path.join(self.root, "cgroup.subtree_control"), "-cpu")
            except OSError:
                pass


def quota_round(binary, pg_dir, quota, count, round_, seconds, sessions_wanted, folder):
    dsn = createdb(pg_dir, "scaling_quota_%d_%d" % (round_, count))
    nodes = [Node(binary, dsn, "--session-create-rate", "0") for _ in range(count)]   # 300 from one address
    children = [quota.place(node.process.pid) for node in nodes]
    ports = [node.port for node in nodes]
    balancer = Nginx(ports * 3 if count == 1 else ports)
    try:
        sessions = []
        for _ in range(sessions_wanted):
            status, body, _ = balancer.request("POST", "/sessions", {"reactor": "counter"})
            assert status == 201, (status, body)
            sessions.append(json.loads(body)["session"])
        load(balancer.port, sessions, 4, folder)    # placement settles (plus wrk's own 2 s warm-up)
        pg = postmaster(pg_dir)
        probes = {"nodes": lambda: sum(cpu_seconds(node.process.pid) for node in nodes),
                  "PostgreSQL": lambda: tree_cpu_seconds(pg), "nginx": lambda: tree_cpu_seconds(balancer.process.pid),
                  "wrk": lambda: os.times().children_user + os.times().children_system,   # reaped: wrk
                  "this script": lambda: os.times().user + os.times().system, "machine": machine_busy_seconds}
        meter = Meter(probes)
        before = [quota.throttling(child) for child in children]
        forwarded = sum(metric(node, "reactord_cluster_forwarded_total") for node in nodes)
        done, commits = applied(nodes), pg_commits(pg_dir)
        meter.start()
        rate = load(balancer.port, sessions, seconds, folder)
        spent, wall = meter.stop()
        forwarded = sum(metric(node, "reactord_cluster_forwarded_total") for node in nodes) - forwarded
        done, commits = applied(nodes) - done, pg_commits(pg_dir) - commits
        after = [quota.throttling(child) for child in children]
        periods = sum(a[0] - b[0] for a, b in zip(after, before))
        throttled = sum(a[1] - b[1] for a, b in zip(after, before))
        line = ("round %d, %d node%s: %6.0f actions/s through nginx; forwarded %.1f %% of %d applied; cores used: "
                "nodes %.2f (%.2f each), PostgreSQL %.2f, nginx %.2f, wrk %.2f, this script %.2f, other processes %.2f, "
                "whole machine %.2f of %d; periods throttled %d of %d"
                % (round_ + 1, count, "s" if count > 1 else " ", rate, 100.0 * forwarded / max(done, 1), done,
                   spent["nodes"] / wall, spent["nodes"] / wall / count, spent["PostgreSQL"] / wall,
                   spent["nginx"] / wall, spent["wrk"] / wall, spent["this script"] / wall,
                   (spent["machine"] - sum(v for k, v in spent.items() if k != "machine")) / wall,
                   spent["machine"] / wall, os.cpu_count(), throttled, periods))
        line += "; µs per action: nodes %.1f, PostgreSQL %.1f, nginx %.1f" % tuple(
            spent[k] * 1e6 / max(done, 1) for k in ("nodes", "PostgreSQL", "nginx"))
        line += "; PostgreSQL %.0f transactions/s, %.1f actions a transaction, %.0f µs of its CPU a transaction" % (
            commits / wall, done / max(commits, 1), spent["PostgreSQL"] * 1e6 / max(commits, 1))
        print(line, flush=True)
        return rate
    finally:
        balancer.close()
        for node in nodes:
            node.stop()


def quota_part(binary, pg_dir, rounds, seconds, sessions, quota_us, folder):
    quota = CpuQuota(quota_us)
    print("quota: " + quota.how, flush=True)
    results = {1: [], 3: []}
    try:
        for round_ in range(rounds):
            for count in ((1, 3) if round_ % 2 == 0 else (3, 1)):
                results[count].append(quota_round(binary, pg_dir, quota, count, round_, seconds, sessions, folder))
    finally:
        for node in STARTED:
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait()
        quota.cleanup()
    one, three = statistics.median(results[1]), statistics.median(results[3])
    print("quota run, medians of %d rounds: 1 node %.0f actions/s, 3 nodes %.0f actions/s: %.2fx (target >= 2.5x)"
          % (rounds, one, three, three / one), flush=True)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=300, help="sessions in the quota run")
    parser.add_argument("--quota", type=int, default=25000, help="µs of CPU per 100,000 µs for each node")
    parser.add_argument("--only", choices=("cpu", "quota"))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-scaling-")
    pg_dir = tempfile.mkdtemp(prefix="reactord-scaling-pg-")
    subprocess.run([PG, "start", pg_dir, str(free_port())], check=True, capture_output=True)
    try:
        print("reactord %s; %s; load average %s" % (binary, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                     " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
        if args.only != "quota":
            cpu_part(binary, pg_dir, args.rounds, args.seconds, folder)
        if args.only != "cpu":
            quota_part(binary, pg_dir, args.rounds, args.seconds, args.sessions, args.quota, folder)
    finally:
        stop_all(pg_dir, folder)


if __name__ == "__main__":
    main()
