#!/usr/bin/env python3
"""Reads real Server-Sent Events from a running reactord and validates each against the spec it
serves: the event as an SSE parser hands it over (StreamEvent: `event`, `id`, `data`, `retry`),
and its JSON `data` against that event's `x-contentSchema` (StateFields, Pulse, End), a state
event without `?fields=` also against State. Run by scripts/check-spec, before schemathesis
(whose run reads the stream too, but not every kind of event: it never sees an `end`).

Three streams of one counter session: from now, `?fields=count`, and (opened after the actions)
`?lastEventId=0`, replayed from history. The session gets actions (a state change, two pulses),
the global user is set (a typed nested object in the state), then the session is deleted: every
stream gets `event: end` and closes.

Usage: check_stream.py PORT ADMIN_TOKEN
"""
import http.client
import json
import sys
import time
import urllib.request

import yaml
from openapi_schema_validator import OAS30Validator

PORT, ADMIN_TOKEN = int(sys.argv[1]), sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
TIMEOUT = 10


def request(method, path, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=TIMEOUT) as response:
        text = response.read()
        return response.status, (json.loads(text) if text else None)


class Stream:
    """One GET of the event stream on its own connection; `events()` reads it to its end."""

    def __init__(self, session, query=""):
        self.query = query
        self.connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=TIMEOUT)
        self.connection.request("GET", f"/sessions/{session}/events{query}",
                                headers={"Accept": "text/event-stream"})
        self.response = self.connection.getresponse()
        assert self.response.status == 200, (query, self.response.status, self.response.read())
        content_type = self.response.getheader("Content-Type", "")
        assert content_type.startswith("text/event-stream"), content_type

    def events(self):
        """The events as the WHATWG parser (and schemathesis's) dispatches them: the last `id`
        carried over, a block with no `data` dispatches nothing, `:` lines are comments."""
        events, fields, data, last_id = [], {}, [], None
        for raw in iter(self.response.readline, b""):
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    event = {"event": fields.get("event") or "message", "data": "\n".join(data)}
                    if last_id is not None:
                        event["id"] = last_id
                    if "retry" in fields:
                        event["retry"] = fields["retry"]
                    events.append(event)
                fields, data = {}, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    data.append(value)
                elif name == "id":
                    last_id = value
                elif name == "retry" and value.isdigit():
                    fields["retry"] = int(value)
                elif name == "event":
                    fields["event"] = value
        self.connection.close()
        return events


def validator(spec, pointer):
    """A validator of the schema at `pointer` in the spec, its `$ref`s resolved in the spec."""
    # OAS30Validator reads `nullable`; the document is the root, so '#/components/…' resolves.
    return OAS30Validator({**spec, "$ref": pointer})


def main():
    with urllib.request.urlopen(BASE + "/openapi.yaml", timeout=TIMEOUT) as response:
        spec = yaml.safe_load(response.read())
    media = spec["paths"]["/sessions/{id}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert media["schema"] == media["x-itemSchema"] == {"$ref": "#/components/schemas/StreamEvent"}, media
    schemas = spec["components"]["schemas"]
    envelope = validator(spec, "#/components/schemas/StreamEvent")
    data_schemas = {}
    for variant in schemas["StreamEvent"]["oneOf"]:
        properties = schemas[variant["$ref"].split("/")[-1]]["properties"]
        (name,) = properties["event"]["enum"]
        assert properties["data"]["x-contentMediaType"] == "application/json", properties["data"]
        data_schemas[name] = OAS30Validator({**spec, **properties["data"]["x-contentSchema"]})
    full_state = validator(spec, "#/components/schemas/State")
    assert set(data_schemas) == {"state", "pulse", "end"}, data_schemas

    # The validators can fail: a wrong event and wrong data are refused.
    for wrong in ({"event": "state", "id": "x1", "data": "{}"}, {"event": "other", "id": "1", "data": "{}"},
                  {"event": "state", "data": "{}"}):
        assert not envelope.is_valid(wrong), wrong
    for name, wrong in (("state", {"count": "1"}), ("pulse", {"name": "nope", "value": 1}),
                        ("end", {"reason": "bored"}), ("state", {"user": {"id": 1}})):
        assert not data_schemas[name].is_valid(wrong), (name, wrong)
    assert not full_state.is_valid({"count": 1}), "State requires every always-written field"

    started = time.monotonic()
    _, created = request("POST", "/sessions", {"reactor": "counter"})
    session = created["session"]
    streams = [Stream(session), Stream(session, "?fields=count")]
    for action in ({"type": "increase"}, {"type": "alert", "message": "Hello"},
                   {"type": "alert", "message": "Hello"}, {"type": "decrease"}):
        status, _ = request("POST", "/action", {"session": session, "action": action})
        assert status == 200, (action, status)
    status, _ = request("PUT", "/user", {"id": "u1", "name": "Ada"}, token=ADMIN_TOKEN)
    assert status == 200, status
    streams.append(Stream(session, "?lastEventId=0"))
    status, _ = request("DELETE", f"/sessions/{session}")
    assert status == 204, status
    # check-spec runs the server with --stream-max-age 1 (for schemathesis): a stream closed at
    # that age before the DELETE has no `end`, which would read as a failure of the server.
    elapsed = time.monotonic() - started
    assert elapsed < 0.8, f"the session's actions took {elapsed:.2f} s: streams may close at their max age first"

    counts = {"state": 0, "pulse": 0, "end": 0}
    failures = []
    for stream in streams:
        events = stream.events()
        kinds = [event["event"] for event in events]
        if kinds.count("end") != 1 or kinds[-1] != "end":
            failures.append(f"{stream.query or 'no query'}: the stream did not close after one end event: {kinds}")
        if "state" not in kinds:
            failures.append(f"{stream.query or 'no query'}: no state event: {kinds}")
        for event in events:
            counts[event["event"]] = counts.get(event["event"], 0) + 1
            for error in envelope.iter_errors(event):
                failures.append(f"{stream.query or 'no query'}: {event}: {error.message}")
            try:
                data = json.loads(event["data"])
            except ValueError as error:
                failures.append(f"{stream.query or 'no query'}: data is not JSON: {event}: {error}")
                continue
            if event["event"] in data_schemas:
                for error in data_schemas[event["event"]].iter_errors(data):
                    failures.append(f"{stream.query or 'no query'}: {event}: data: {error.message}")
            if event["event"] == "state" and "fields" not in stream.query:
                for error in full_state.iter_errors(data):
                    failures.append(f"{stream.query or 'no query'}: {event}: not a State: {error.message}")
            if event["event"] == "state" and "fields" in stream.query and set(data) != {"count"}:
                failures.append(f"?fields=count: {event}: other fields than count")
        if stream.query == "?lastEventId=0" and kinds.count("pulse") != 2:
            failures.append(f"?lastEventId=0: the replay has not the two pulses: {kinds}")
    if counts["pulse"] < 2 or counts["end"] != 3:
        failures.append(f"not every kind of event was seen: {counts}")
    for failure in failures:
        print("FAIL:", failure)
    verdict = "FAILED" if failures else "OK"
    print(f"{verdict}: {sum(counts.values())} stream events read, each against the spec's schemas "
          f"(state {counts['state']}, pulse {counts['pulse']}, end {counts['end']}; {len(failures)} failures; "
          f"actions to delete in {elapsed * 1000:.0f} ms)")
    sys.exit(1 if failures else 0)


main()
