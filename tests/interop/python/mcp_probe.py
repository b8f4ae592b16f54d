"""Drives the test MCP servers over the raw wire (JSON-RPC lines over stdio, or
streamable HTTP POSTs with SSE replies) and prints what they send, so the
shapes the hub's `kind = "mcp"` agents see are checked and visible.

    python mcp_probe.py ours stdio|http          # python/mcp_server.py
    python mcp_probe.py everything stdio|http    # @modelcontextprotocol/server-everything

Exits non-zero when an expectation fails. Needs tests/interop/setup.sh first.
HTTP ports: 38xxx picked free at start.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.dirname(HERE)
EVERYTHING = os.path.join(INTEROP, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
PROTOCOL = os.environ.get("MCP_PROBE_PROTOCOL", "2025-11-25")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - start
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} not listening after {timeout}s")


class Peer:
    """Messages from the server arrive on self.inbox (dicts)."""

    def __init__(self) -> None:
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0

    def request(self, method: str, params: dict | None = None) -> int:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.next_id

    def notify(self, method: str, params: dict | None = None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def wait_response(self, rid: int, timeout: float = 15.0, on_other=None) -> tuple[dict, list]:
        """The response to rid, and every other message received meanwhile."""
        others = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no response to {rid}; got {others}")
            msg = self.inbox.get(timeout=left)
            if msg.get("id") == rid and "method" not in msg:
                return msg, others
            others.append(msg)
            if on_other:
                on_other(msg)

    def drain(self, seconds: float) -> list:
        out = []
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                out.append(self.inbox.get(timeout=left))
            except queue.Empty:
                return out

    def call(self, name: str, args: dict, meta: dict | None = None, timeout: float = 15.0):
        params = {"name": name, "arguments": args}
        if meta:
            params["_meta"] = meta
        rid = self.request("tools/call", params)
        return self.wait_response(rid, timeout)


class StdioPeer(Peer):
    def __init__(self, argv: list[str], env: dict) -> None:
        super().__init__()
        self.stderr_lines: list[str] = []
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                self.inbox.put(json.loads(line))
        self.inbox.put({"eof": True})

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line.rstrip())

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class HttpPeer(Peer):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.session_id: str | None = None
        self.version: str | None = None
        self.http = httpx.Client(timeout=httpx.Timeout(60.0, connect=5.0))
        self.errors: list[str] = []

    def headers(self) -> dict:
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if self.version:
            h["Mcp-Protocol-Version"] = self.version
        return h

    def send(self, msg: dict) -> None:
        if "id" not in msg:  # a notification: 202, no body
            r = self.http.post(self.url, json=msg, headers=self.headers())
            if r.status_code != 202:
                self.errors.append(f"notification {msg['method']}: HTTP {r.status_code} {r.text[:200]}")
            return
        ready = threading.Event()
        threading.Thread(target=self._post, args=(msg, ready), daemon=True).start()
        ready.wait(10)

    def _post(self, msg: dict, ready: threading.Event) -> None:
        try:
            with self.http.stream("POST", self.url, json=msg, headers=self.headers()) as r:
                if msg.get("method") == "initialize":
                    self.session_id = r.headers.get("mcp-session-id")
                ready.set()
                ctype = r.headers.get("content-type", "")
                if r.status_code >= 400:
                    self.inbox.put({"http_error": r.status_code, "body": r.read().decode()[:300], "for": msg.get("id")})
                    return
                if ctype.startswith("application/json"):
                    self.inbox.put(json.loads(r.read()))
                    return
                data = []
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif line == "" and data:
                        payload = "\n".join(data)
                        data = []
                        if payload:
                            self.inbox.put(json.loads(payload))
        except httpx.HTTPError as e:
            ready.set()
            self.inbox.put({"transport_error": repr(e), "for": msg.get("id")})

    def close(self) -> None:
        if self.session_id:
            try:
                self.http.delete(self.url, headers=self.headers())
            except httpx.HTTPError:
                pass
        self.http.close()


FAILURES: list[str] = []


def expect(cond: bool, what: str) -> None:
    print(("  ok   " if cond else "  FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def show(label: str, obj) -> None:
    text = json.dumps(obj)
    if len(text) > 600:
        text = text[:600] + f"... ({len(text)} chars)"
    print(f"  {label}: {text}")


def handshake(peer: Peer, capabilities: dict | None = None) -> dict:
    t0 = time.monotonic()
    rid = peer.request(
        "initialize",
        {"protocolVersion": PROTOCOL, "capabilities": capabilities or {}, "clientInfo": {"name": "probe", "version": "0"}},
    )
    resp, others = peer.wait_response(rid, 30)
    result = resp["result"]
    if isinstance(peer, HttpPeer):
        peer.version = result["protocolVersion"]
    print(f"initialize ({time.monotonic() - t0:.2f}s): asked {PROTOCOL}, got {result['protocolVersion']}")
    show("capabilities", result.get("capabilities"))
    show("serverInfo", result.get("serverInfo"))
    if others:
        show("before the initialize response", others)
    peer.notify("notifications/initialized")
    return result


def tools_of(peer: Peer) -> list[dict]:
    rid = peer.request("tools/list", {})
    resp, others = peer.wait_response(rid)
    if others:
        show("during tools/list", others)
    return resp["result"]["tools"]


def text_of(result: dict) -> str:
    return " | ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


# ---------------------------------------------------------------- ours


def probe_ours(transport: str) -> None:
    log = tempfile.NamedTemporaryFile(prefix="mcp-test-log-", delete=False).name
    env = dict(os.environ, MCP_TEST_LOG=log)
    server = [sys.executable, os.path.join(HERE, "mcp_server.py")]
    proc = None
    if transport == "stdio":
        peer: Peer = StdioPeer(server + ["stdio"], env)
    else:
        port = free_port()
        proc = subprocess.Popen(server + ["http", str(port)], env=env, stderr=subprocess.PIPE, text=True)
        print(f"listening after {wait_port(port):.2f}s")
        peer = HttpPeer(f"http://127.0.0.1:{port}/mcp")
    try:
        init = handshake(peer)
        expect(init["capabilities"].get("tools", {}).get("listChanged") is True, "tools.listChanged advertised")
        tools = tools_of(peer)
        for t in tools:
            show(t["name"], {k: t[k] for k in ("description", "inputSchema", "outputSchema", "annotations") if k in t})
        expect(
            sorted(t["name"] for t in tools) == ["add", "crash", "fail", "image", "learn", "shout", "slow"], "tool names"
        )

        resp, _ = peer.call("shout", {"text": "hello"})
        show("shout", resp)
        expect(resp["result"]["content"] == [{"type": "text", "text": "HELLO"}], "shout -> HELLO")
        expect(not resp["result"].get("isError"), "shout not isError")
        expect("structuredContent" not in resp["result"], "shout: no structuredContent")

        resp, _ = peer.call("add", {"a": 2, "b": 3.5})
        show("add", resp)
        expect(resp["result"].get("structuredContent") == {"sum": 5.5}, "add structuredContent")

        resp, others = peer.call("slow", {"steps": 3, "delay_ms": 100}, {"progressToken": "p1"})
        show("slow progress", others)
        show("slow", resp)
        expect([o["params"]["progress"] for o in others if o.get("method") == "notifications/progress"] == [1, 2, 3], "slow: 3 progress")
        expect(text_of(resp["result"]) == "done after 3 steps", "slow text")

        resp, others = peer.call("slow", {"steps": 2, "delay_ms": 10})
        expect(others == [] and text_of(resp["result"]) == "done after 2 steps", "slow without progressToken: no notifications")

        resp, _ = peer.call("fail", {"reason": "no luck"})
        show("fail", resp)
        expect(resp["result"].get("isError") is True and text_of(resp["result"]) == "no luck", "fail isError")

        resp, _ = peer.call("image", {})
        show("image", resp)
        c = resp["result"]["content"]
        expect(c[0]["type"] == "image" and c[0]["mimeType"] == "image/png", "image content")

        resp, others = peer.call("learn", {"name": "greet"})
        show("learn", resp)
        show("learn notifications", others)
        expect(any(o.get("method") == "notifications/tools/list_changed" for o in others), "learn -> tools/list_changed")
        names = [t["name"] for t in tools_of(peer)]
        expect("greet" in names, "greet listed")
        resp, _ = peer.call("greet", {"text": "hi"})
        expect(text_of(resp["result"]) == "greet: hi", "greet works")

        # Cancellation: notifications/cancelled after 2 progress steps.
        rid = peer.request(
            "tools/call", {"name": "slow", "arguments": {"steps": 50, "delay_ms": 100}, "_meta": {"progressToken": 7}}
        )
        seen = 0
        t0 = time.monotonic()
        while seen < 2:
            m = peer.inbox.get(timeout=10)
            if m.get("method") == "notifications/progress":
                seen += 1
        peer.notify("notifications/cancelled", {"requestId": rid, "reason": "probe"})
        after = peer.drain(1.0)
        show("after cancel (1s)", after)
        with open(log) as f:
            lines = f.read().splitlines()
        expect("cancelled" in lines, f"cancelled logged ({time.monotonic() - t0:.2f}s after start)")
        resp, _ = peer.call("shout", {"text": "still here"})
        expect(text_of(resp["result"]) == "STILL HERE", "alive after cancel")

        # Crash mid-call.
        rid = peer.request("tools/call", {"name": "crash", "arguments": {}})
        msgs = peer.drain(2.0)
        show("crash", msgs)
        if transport == "stdio":
            code = peer.proc.wait(5)
            expect(code == 3, f"exit code {code}")
        else:
            code = proc.wait(5)
            expect(code == 3, f"exit code {code}")
        with open(log) as f:
            lines = f.read().splitlines()
        print(f"  MCP_TEST_LOG: {lines}")
        expect(sum(1 for l in lines if l.startswith("started ")) == 1, "one 'started PID'")
    finally:
        peer.close()
        if proc and proc.poll() is None:
            proc.terminate()
            proc.wait(5)
        if isinstance(peer, StdioPeer) and peer.stderr_lines:
            show("stderr", peer.stderr_lines[-10:])
        if isinstance(peer, HttpPeer) and peer.errors:
            show("http errors", peer.errors)
        os.unlink(log)


# ---------------------------------------------------------------- everything


def probe_everything(transport: str) -> None:
    proc = None
    env = dict(os.environ)
    if transport == "stdio":
        t0 = time.monotonic()
        peer: Peer = StdioPeer(["node", EVERYTHING, "stdio"], env)
    else:
        port = free_port()
        env["PORT"] = str(port)
        proc = subprocess.Popen(["node", EVERYTHING, "streamableHttp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"listening after {wait_port(port):.2f}s")
        peer = HttpPeer(f"http://127.0.0.1:{port}/mcp")
    try:
        # MCP_PROBE_CAPS='{"roots": {}, "sampling": {}, "elicitation": {}}' shows the
        # tools (and the roots/list request) a client with those capabilities gets.
        handshake(peer, json.loads(os.environ.get("MCP_PROBE_CAPS", "{}")))
        show("after initialized (1s)", peer.drain(1.0))
        tools = tools_of(peer)
        for t in tools:
            schema = t.get("inputSchema", {})
            brief = {
                "props": {k: v.get("type", v.get("enum")) for k, v in schema.get("properties", {}).items()},
                "required": schema.get("required"),
            }
            for k in ("outputSchema", "execution"):
                if k in t:
                    brief[k] = t[k] if k == "execution" else "yes"
            brief["readOnly"] = t.get("annotations", {}).get("readOnlyHint")
            show(t["name"], brief)
        calls = [
            ("echo", {"message": "hi"}),
            ("get-sum", {"a": 2, "b": 3}),
            ("get-tiny-image", {}),
            ("get-annotated-message", {"messageType": "success", "includeImage": True}),
            ("get-resource-links", {"count": 2}),
            ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
            ("get-structured-content", {"location": "Chicago"}),
            ("simulate-research-query", {"topic": "x"}),
            ("get-sum", {"a": "x"}),
            ("no-such-tool", {}),
        ]
        for name, args in calls:
            resp, others = peer.call(name, args)
            r = resp.get("result", resp.get("error"))
            if isinstance(r, dict) and "content" in r:
                r = dict(r)
                r["content"] = [
                    {k: (v[:40] + "..." if k in ("data", "blob") and isinstance(v, str) else v) for k, v in c.items()}
                    for c in r["content"]
                ]
            show(name, r)
            if others:
                show(f"{name} others", others)
        resp, others = peer.call("trigger-long-running-operation", {"duration": 1, "steps": 3}, {"progressToken": "lr"})
        show("long-running progress", others)
        show("long-running", resp.get("result"))
        expect(len([o for o in others if o.get("method") == "notifications/progress"]) == 3, "everything: 3 progress")
        # Cancel a long-running operation: is the call answered anyway?
        rid = peer.request(
            "tools/call", {"name": "trigger-long-running-operation", "arguments": {"duration": 3, "steps": 3}, "_meta": {"progressToken": "c"}}
        )
        time.sleep(0.3)
        peer.notify("notifications/cancelled", {"requestId": rid, "reason": "probe"})
        show("after cancel (3.5s)", peer.drain(3.5))
        resp, others = peer.call("toggle-simulated-logging", {})
        show("toggle-simulated-logging", resp.get("result"))
        show("toggle-simulated-logging others", others)
        show("logging after toggle (1s)", peer.drain(1.0))
        resp, _ = peer.call("toggle-simulated-logging", {})
    finally:
        peer.close()
        if proc:
            proc.terminate()
            proc.wait(5)
        if isinstance(peer, StdioPeer):
            show("stderr", peer.stderr_lines[-10:])


def main() -> None:
    which, transport = sys.argv[1], sys.argv[2]
    print(f"== {which} over {transport}")
    (probe_ours if which == "ours" else probe_everything)(transport)
    if FAILURES:
        print(f"FAILED: {FAILURES}")
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
