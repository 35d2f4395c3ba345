"""Issue 16 in cluster mode: a session's owner, stored in PostgreSQL, is checked on every node,
whether the node forwards the request to the holder or follows the session's events itself."""
import http.client
import json
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
