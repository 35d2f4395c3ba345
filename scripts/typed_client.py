#!/usr/bin/env python3
"""Uses a client that openapi-python-client generated from a live server's /openapi.yaml:
typed models for the counter's state and actions, against that server on 127.0.0.1; a
retry with the same Idempotency-Key (the spec's typed header parameter), replayed, not applied twice;
and the session's action log, typed, a page at a time.

Usage: typed_client.py CLIENT_PARENT_DIR PORT   (the generated package is CLIENT_PARENT_DIR/reactord_client)
"""
import inspect
import secrets
import sys

sys.path.insert(0, sys.argv[1])
from reactord_client import Client  # noqa: E402
from reactord_client.api.default import (  # noqa: E402
    create_session, get_action_log, get_session, send_action, send_session_action)
from reactord_client.models import (  # noqa: E402
    ActionLogPage, ActionRequest, CounterActionAlert, CounterActionAlertType, CounterActionIncrease,
    CounterActionIncreaseType, CreateSession, LoggedActionCause, ReactorKind, Session, State)

client = Client(base_url=f"http://127.0.0.1:{sys.argv[2]}", raise_on_unexpected_status=True)
created = create_session.sync(client=client, body=CreateSession(reactor=ReactorKind.COUNTER))
assert isinstance(created, Session), created
# With one kind registered, State is that kind's state (CounterState): a one-member anyOf would
# make this generator give up on every nested object of it (see OpenAPISpec.union).
assert isinstance(created.state, State) and created.state.count == 0, created
after = send_action.sync(client=client, body=ActionRequest(
    session=created.session, action=CounterActionIncrease(type_=CounterActionIncreaseType.INCREASE)))
assert isinstance(after, Session) and after.state.count == 1 and after.version == 1, after
after = send_action.sync(client=client, body=ActionRequest(
    session=created.session, action=CounterActionAlert(type_=CounterActionAlertType.ALERT, message="Hello")))
assert after.state.alert_message == "Hello", after
# The same action with the session in the path (POST /sessions/{id}/actions), where a balancer hashes on it.
after = send_session_action.sync(id=created.session, client=client,
                                 body=CounterActionIncrease(type_=CounterActionIncreaseType.INCREASE))
assert isinstance(after, Session) and after.state.count == 2, after
current = get_session.sync(id=created.session, client=client)
assert isinstance(current.state, State) and current.state.count == 2, current

# A retry that is safe: the spec declares the Idempotency-Key header, so the generated client takes
# it as a typed parameter. The first request runs; the same request again with the same key (as a
# client does when the first answer was lost) gets the first answer back, byte for byte, marked
# Idempotent-Replayed, and the count does not move.
for operation in (send_session_action, send_action):
    assert "idempotency_key" in inspect.signature(operation.sync_detailed).parameters, \
        f"{operation.__name__}: the spec declares no Idempotency-Key header parameter"
key = secrets.token_urlsafe(16)   # 128 random bits, fresh for this action
increase = CounterActionIncrease(type_=CounterActionIncreaseType.INCREASE)
first = send_session_action.sync_detailed(id=created.session, client=client, body=increase, idempotency_key=key)
assert first.status_code == 200 and first.parsed.state.count == 3, (first.status_code, first.content)
assert first.headers.get("Idempotent-Replayed") is None, first.headers
retried = send_session_action.sync_detailed(id=created.session, client=client, body=increase, idempotency_key=key)
assert retried.status_code == 200, (retried.status_code, retried.content)
assert retried.headers.get("Idempotent-Replayed") == "true", retried.headers
assert retried.content == first.content, (first.content, retried.content)
assert retried.headers.get("ETag") == first.headers.get("ETag"), (first.headers, retried.headers)
# POST /action with the same action for the same session is the same request: replayed too.
via_action = send_action.sync_detailed(client=client, body=ActionRequest(session=created.session, action=increase),
                                       idempotency_key=key)
assert via_action.status_code == 200 and via_action.headers.get("Idempotent-Replayed") == "true", \
    (via_action.status_code, via_action.headers, via_action.content)
assert via_action.content == first.content, (first.content, via_action.content)
# The same key with another request is a conflict, not a replay.
alert = CounterActionAlert(type_=CounterActionAlertType.ALERT, message="other")
conflict = send_session_action.sync_detailed(id=created.session, client=client, body=alert, idempotency_key=key)
assert conflict.status_code == 422 and b"Idempotency-Key" in conflict.content, (conflict.status_code, conflict.content)
current = get_session.sync(id=created.session, client=client)
assert current.state.count == 3 and current.version == first.parsed.version, current

# The session's action log (GET /sessions/{id}/actions), typed: the four actions applied (the
# replays and the conflict were not), a page of two at a time.
page = get_action_log.sync(id=created.session, client=client, limit=2)
assert isinstance(page, ActionLogPage) and len(page.actions) == 2 and page.next_ == page.actions[-1].version, page
entries = list(page.actions)
for _ in range(10):
    if not isinstance(page.next_, int):   # absent on the last page (the generator's UNSET)
        break
    page = get_action_log.sync(id=created.session, client=client, after=page.next_, limit=2)
    entries += page.actions
assert [entry.number for entry in entries] == [1, 2, 3, 4], entries
assert all(entry.cause == LoggedActionCause.ACTION for entry in entries), entries
assert entries[1].action == {"type": "alert", "message": "Hello"}, entries[1]
assert entries[-1].idempotency_key == key and entries[-1].version == current.version, entries[-1]
print(f"OK: typed client: session {created.session[:4]}…, State(count={current.state.count}, "
      f"alert_message={current.state.alert_message!r}), version {current.version}; "
      f"a retry with the same Idempotency-Key replayed, applied once; {len(entries)} actions in its typed log")
