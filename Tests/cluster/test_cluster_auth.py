"""Issue 16 in cluster mode: a session's owner, stored in PostgreSQL, is checked on every node,
whether the node forwards the request to the holder or follows the session's events itself."""
import http.client
import json
import threading
import time
import urllib.parse

import jwt
import pytest

from conftest import Cluster

SECRET = "a-cluster-hs256-secret-of-32-bytes-at-least"


def bearer(sub):
    now = int(time.time())
    return jwt.encode({"sub": sub, "iat": now, "exp": now + 300}, SECRET, algorithm="HS256")


def auth(sub):
    return {"Authorization": f"Bearer {bearer(sub)}"}


def stream_status(port, session, token):
    """The event stream's status through `port` with ?access_token=, and its first event's name when 200."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    connection.request("GET", f"/sessions/{session}/events?" + urllib.parse.urlencode({"access_token": token}))
    response = connection.getresponse()
    first = None
    if response.status == 200:
        while first is None:
            line = response.fp.readline().decode()
            if not line:
                break
            if line.startswith("event: "):
                first = line[7:].strip()
    connection.close()
    return response.status, first


@pytest.fixture()
def cluster(postgres):
    made = Cluster(postgres, 3, "--jwt-secret", SECRET)
    yield made
    made.close()


def test_the_owner_is_checked_on_every_node(cluster):
    first, second, third = cluster.nodes
    status, body, _ = first.request("POST", "/sessions", {"reactor": "counter"}, headers=auth("alice"))
    assert status == 201, body
    session = json.loads(body)["session"]
    owner = cluster.postgres.sql(cluster.dsn, f"SELECT owner FROM reactord_sessions WHERE id = '{session}'")
    assert owner == "alice", owner

    # Through the other nodes: forwarded to the holder (GET, action, DELETE) or followed (events).
    for node in (second, third):
        assert node.request("GET", f"/sessions/{session}", headers=auth("alice"))[0] == 200
        assert node.request("GET", f"/sessions/{session}", headers=auth("bob"))[0] == 403
        assert node.request("GET", f"/sessions/{session}")[0] == 401
        action = {"session": session, "action": {"type": "increase"}}
        assert node.request("POST", "/action", action, headers=auth("alice"))[0] == 200
        assert node.request("POST", "/action", action, headers=auth("bob"))[0] == 403
        assert stream_status(node.port, session, bearer("alice")) == (200, "state")
        assert stream_status(node.port, session, bearer("bob"))[0] == 403
    assert second.request("DELETE", f"/sessions/{session}", headers=auth("bob"))[0] == 403
    assert third.request("DELETE", f"/sessions/{session}", headers=auth("alice"))[0] == 204


def test_a_subjects_creations_on_every_node_at_once_stay_within_its_quota(postgres):
    """Creations of one subject sent at once round robin over the nodes count each other: never
    more sessions than --max-sessions-per-subject, and every 201 is a stored session."""
    cluster = Cluster(postgres, 3, "--jwt-secret", SECRET, "--max-sessions-per-subject", "3")
    try:
        for trial in range(3):
            subject = f"racer-{trial}"
            headers = auth(subject)
            answers = []

            def create(node):
                answers.append(node.request("POST", "/sessions", {"reactor": "counter"}, headers=headers)[:2])

            threads = [threading.Thread(target=create, args=(cluster.nodes[index % 3],)) for index in range(18)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            created = [json.loads(body)["session"] for status, body in answers if status == 201]
            assert len(answers) == 18 and all(status in (201, 429) for status, _ in answers), answers
            stored = cluster.postgres.sql(
                cluster.dsn, f"SELECT count(*) FROM reactord_sessions WHERE owner = '{subject}'")
            assert len(created) == 3 and int(stored) == 3, (created, stored)
        # A deleted session's place is free again at once, whichever node made it.
        first, second, _ = cluster.nodes
        one = cluster.postgres.sql(cluster.dsn, "SELECT id FROM reactord_sessions WHERE owner = 'racer-0' LIMIT 1")
        assert second.request("DELETE", f"/sessions/{one}", headers=auth("racer-0"))[0] == 204
        assert first.request("POST", "/sessions", {"reactor": "counter"}, headers=auth("racer-0"))[0] == 201
        assert second.request("POST", "/sessions", {"reactor": "counter"}, headers=auth("racer-0"))[0] == 429
    finally:
        cluster.close()
