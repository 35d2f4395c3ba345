#!/usr/bin/env python3
"""A test double of reactord's wire contract, for checking the benchmark plumbing only.

    REACTORD_BIN=Benchmarks/load/mock_reactord.py Benchmarks/bench.sh --smoke

Speaks just enough of docs/wire-contract.md for the suite: POST /sessions, POST /action (increase, alert),
GET /sessions/{id}/events (chunked SSE: retry, state, pulse, keep-alive comments), PUT /user
(admin token), GET /healthz. Single-threaded asyncio: its figures measure Python, not reactord,
and must never be recorded as reactord's.
"""
import argparse
import asyncio
import json
import os
import resource
import secrets


class Session:
    __slots__ = ("id", "version", "count", "alert", "subs")

    def __init__(self, sid):
        self.id, self.version, self.count, self.alert, self.subs = sid, 0, 0, None, set()

    def state(self, user):
        return {"alertMessage": self.alert, "count": self.count, "user": user}


class Mock:
    def __init__(self, args):
        self.args, self.sessions, self.user = args, {}, None

    @staticmethod
    def frame(event, seq, data):
        body = f"event: {event}\nid: {seq}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        return b"%x\r\n%s\r\n" % (len(body), body)

    def emit(self, s, event, data):
        s.version += 1
        chunk = self.frame(event, s.version, data)
        for w in list(s.subs):
            if w.is_closing():
                s.subs.discard(w)
            else:
                w.write(chunk)

    async def handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for l in lines[1:]:
                    if ":" in l:
                        k, v = l.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(n) if n else b""
                if await self.route(method, target.split("?")[0], headers, body, writer):
                    return   # an SSE stream owns the connection now
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    def reply(self, writer, status, obj=None):
        data = b"" if obj is None else json.dumps(obj, separators=(",", ":")).encode()
        reason = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
                  404: "Not Found", 422: "Unprocessable Content"}.get(status, "X")
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (status, reason.encode(), len(data), data))

    async def route(self, method, path, headers, body, writer):
        if path == "/healthz":
            self.reply(writer, 200, {"status": "ok"})
        elif path == "/sessions" and method == "POST":
            s = Session(secrets.token_urlsafe(16))
            self.sessions[s.id] = s
            self.reply(writer, 201, {"session": s.id, "reactor": "counter", "version": 0, "state": s.state(self.user)})
        elif path == "/action" and method == "POST":
            try:
                req = json.loads(body)
            except ValueError:
                self.reply(writer, 400, {"title": "bad json"}); return False
            s = self.sessions.get(req.get("session"))
            if s is None:
                self.reply(writer, 404, {"title": "no session"}); return False
            act = req.get("action", {})
            if act.get("type") == "increase":
                s.count += 1
                self.emit(s, "state", s.state(self.user))
            elif act.get("type") == "alert":
                s.alert = act.get("message")
                self.emit(s, "state", s.state(self.user))
                self.emit(s, "pulse", {"name": "alertMessage", "value": s.alert})
            else:
                self.reply(writer, 422, {"title": "bad action"}); return False
            self.reply(writer, 200, {"session": s.id, "version": s.version, "state": s.state(self.user)})
        elif path == "/user" and method == "PUT":
            if headers.get("authorization") != f"Bearer {self.args.admin_token}":
                self.reply(writer, 401, {"title": "token"}); return False
            self.user = json.loads(body)
            for s in self.sessions.values():
                self.emit(s, "state", s.state(self.user))
            self.reply(writer, 200, self.user)
        elif path.startswith("/sessions/") and path.endswith("/events") and method == "GET":
            s = self.sessions.get(path.split("/")[2])
            if s is None:
                self.reply(writer, 404, {"title": "no session"}); return False
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            writer.write(b"%x\r\n%s\r\n" % (13, b"retry: 3000\n\n"))
            writer.write(self.frame("state", s.version, s.state(self.user)))
            s.subs.add(writer)
            try:
                while not writer.is_closing():
                    await asyncio.sleep(self.args.heartbeat)
                    writer.write(b"%x\r\n%s\r\n" % (14, b": keep-alive\n\n"))
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                s.subs.discard(writer)
            return True
        else:
            self.reply(writer, 404, {"title": "not found"})
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--admin-token", default="token")
    p.add_argument("--heartbeat", type=float, default=15)
    for ignored in ("--threads", "--log-level", "--connection-limit", "--connections-per-ip", "--max-sessions"):
        p.add_argument(ignored)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mock = Mock(args)

    async def serve():
        server = await asyncio.start_server(mock.handle, "127.0.0.1", args.port, backlog=4096)
        print(f"mock reactord port={args.port} pid={os.getpid()}", flush=True)
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
