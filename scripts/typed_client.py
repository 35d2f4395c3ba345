#!/usr/bin/env python3
"""Uses a client that openapi-python-client generated from a live server's /openapi.yaml:
typed models for the counter's state and actions, against that server on 127.0.0.1.

Usage: typed_client.py CLIENT_PARENT_DIR PORT   (the generated package is CLIENT_PARENT_DIR/reactord_client)
"""
import sys

sys.path.insert(0, sys.argv[1])
from reactord_client import Client  # noqa: E402
from reactord_client.api.default import create_session, get_session, send_action, send_session_action  # noqa: E402
from reactord_client.models import (  # noqa: E402
    ActionRequest, CounterActionAlert, CounterActionAlertType, CounterActionIncrease, CounterActionIncreaseType,
    CreateSession, ReactorKind, Session, State)

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
print(f"OK: typed client: session {created.session[:4]}…, State(count={current.state.count}, "
      f"alert_message={current.state.alert_message!r}), version {current.version}")
