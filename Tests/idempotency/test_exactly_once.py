"""Issue 28, "Must show", single node: 2,000 actions, each with its own Idempotency-Key, sent
through connections cut at random points and retried 0-3 times, while reactord is killed
with SIGKILL and started again on the same SQLite file twice. Then every key is sent once more
until it is answered 2xx: the counter must be exactly 2,000, and every answer for a key must
be the first one byte for byte (a replay, marked `Idempotent-Replayed: true`).
"""
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cut_http import CUTS, exchange, request_bytes

KEYS = 2000
CLIENTS = 8
# The whole test, killing and restarting included; a debug build takes about a fifth of it.
BUDGET = 90
# Answers a retry may meet on the way: 409 while the first with the key still runs, 503 while
# the restarted server loads the session. Anything else fails the test.
TRANSIENT = (409, 503)


class Run:
    """What the clients saw, per key."""

    def __init__(self, server, session, seed):
        self.server = server
        self.session = session
        self.seed = seed
        self.deadline = time.monotonic() + BUDGET
        self.lock = threading.Lock()
        self.ok = {}            # key -> every 2xx Answer, in the order they came
        self.unexpected = []    # (key, Answer) not 2xx and not transient
        self.attempts = []      # (began, ended) of each attempt
        self.kills = []         # when each SIGKILL was sent
        self.done = 0           # keys whose planned attempts are over

    def request(self, key, rng):
        """The same action as a client would retry it: either route, either JSON spacing (the
        contract: the same request for the same session)."""
        separators = rng.choice([(",", ":"), (", ", ": ")])
        action = {"type": "increase"}
        if rng.random() < 0.5:
            path, body = "/action", {"session": self.session, "action": action}
        else:
            path, body = f"/sessions/{self.session}/actions", action
        return request_bytes("POST", path, json.dumps(body, separators=separators).encode(),
                             {"Content-Type": "application/json", "Idempotency-Key": key})

    def attempt(self, key, cut, rng):
        assert time.monotonic() < self.deadline, f"over the budget of {BUDGET} s (seed {self.seed})"
        began = time.monotonic()
        answer = exchange(self.server.port, self.request(key, rng), cut, rng)
        with self.lock:
            self.attempts.append((began, time.monotonic()))
            if answer is None:
                pass
            elif 200 <= answer.status < 300:
                self.ok.setdefault(key, []).append(answer)
            elif answer.status not in TRANSIENT:
                self.unexpected.append((key, answer))
        return answer

    def send_with_cuts(self, keys, index):
        """A client's share of the keys: each sent 1-4 times, each time cut at a random point
        or read whole."""
        rng = random.Random(self.seed * 100 + index)
        for key in keys:
            for _ in range(1 + rng.randrange(4)):
                self.attempt(key, rng.choice(CUTS + (None,)), rng)
            with self.lock:
                self.done += 1

    def settle(self, keys, index):
        """Every key once more, read whole, until it is answered 2xx."""
        rng = random.Random(self.seed * 100 + CLIENTS + index)
        for key in keys:
            while True:
                answer = self.attempt(key, None, rng)
                if answer is not None and 200 <= answer.status < 300:
                    break
                if answer is not None and answer.status not in TRANSIENT:
                    break   # in self.unexpected
                if answer is not None and answer.status == 409:
                    assert answer.headers.get("retry-after") == "1", answer
                time.sleep(0.05)   # shorter than Retry-After: the budget is bounded, not the patience

    def kill_twice(self):
        """SIGKILL once a third and once two thirds of the keys are through, at a random key,
        each time while the clients have requests in flight; then the same file and port."""
        rng = random.Random(self.seed)
        for low, high in ((0.25, 0.45), (0.55, 0.75)):
            at = rng.randrange(int(KEYS * low), int(KEYS * high))
            while self.done < at:
                assert time.monotonic() < self.deadline, f"over the budget before kill {len(self.kills) + 1}"
                time.sleep(0.002)
            with self.lock:
                self.kills.append(time.monotonic())
            self.server.kill9_and_restart()


def run_clients(work, keys, extra=None):
    shares = [keys[index::CLIENTS] for index in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS + 1) as pool:
        futures = [pool.submit(work, share, index) for index, share in enumerate(shares)]
        if extra:
            futures.append(pool.submit(extra))
        for future in futures:
            future.result()   # a client's failure is the test's


def test_2000_keyed_actions_through_cut_connections_and_two_kill_9s_are_applied_exactly_once(server):
    status, body, _ = server.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201, body
    session = json.loads(body)["session"]
    seed = random.randrange(1 << 20)
    print(f"seed {seed}")
    run = Run(server, session, seed)
    keys = [f"chaos-{seed}-{number}" for number in range(KEYS)]

    run_clients(run.send_with_cuts, keys, extra=run.kill_twice)
    assert len(run.kills) == 2 and server.kills == 2
    for killed in run.kills:
        in_flight = sum(1 for began, ended in run.attempts if began < killed < ended)
        assert in_flight > 0, "each SIGKILL lands while requests are in flight"
    answered_before = len(run.ok)

    shuffled = random.Random(seed).sample(keys, len(keys))
    run_clients(run.settle, shuffled)
    assert not run.unexpected, f"{len(run.unexpected)} unexpected answers, e.g. {run.unexpected[:3]} (seed {seed})"
    assert sorted(run.ok) == sorted(keys), "every key answered 2xx in the end"

    status, body, _ = server.request("GET", f"/sessions/{session}")
    assert status == 200, body
    final = json.loads(body)
    ran_again = [(key, answers) for key, answers in run.ok.items() if any(not a.replayed for a in answers[1:])]
    differ = [(key, answers) for key, answers in run.ok.items() if any(a.kept() != answers[0].kept() for a in answers[1:])]
    # Each key's first answer is the state right after its action: all different, 1...2,000.
    counts = sorted(json.loads(answers[0].body)["state"]["count"] for answers in run.ok.values())
    assert (final["state"]["count"], final["version"], ran_again, differ) == (KEYS, KEYS, [], []), (
        f"count {final['state']['count']} and version {final['version']}, not {KEYS}; "
        f"{len(ran_again)} keys answered 2xx again without being a replay, e.g. {ran_again[:1]}; "
        f"{len(differ)} keys with a repeat that differs from their first 2xx, e.g. {differ[:1]} (seed {seed})")
    assert counts == list(range(1, KEYS + 1)), \
        f"first answers' counts are not 1...{KEYS} once each: {[c for c in counts if counts.count(c) > 1][:10]}"

    assert server.process.poll() is None, f"reactord exited: {server.output()}"
    replays = sum(1 for answers in run.ok.values() for answer in answers if answer.replayed)
    assert replays > 0
    print(f"{len(run.attempts)} attempts, {answered_before} keys answered 2xx before settling, "
          f"{replays} replays, {sum(len(a) for a in run.ok.values())} 2xx answers")
