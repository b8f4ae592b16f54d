"""A small MCP server on the official MCP Python SDK (mcp 2.x, MCPServer), the
peer of the hub's `kind = "mcp"` agents in the tests.

    python mcp_server.py stdio
    python mcp_server.py http PORT      # streamable HTTP, http://127.0.0.1:PORT/mcp

Tools:
  shout(text)            text content: text.upper()                (readOnlyHint)
  add(a, b)              structuredContent {"sum": a+b} + the same JSON as text,
                         with an outputSchema                      (readOnlyHint)
  slow(steps, delay_ms)  one notifications/progress per step (progress i, total
                         steps, message "step i") when the call has a
                         progressToken, delay_ms apart; text "done after N steps".
                         On notifications/cancelled the SDK cancels the handler
                         at once; "cancelled" is appended to $MCP_TEST_LOG.
  fail(reason)           isError = true, the reason as text
  crash()                the process exits (code 3) mid-call, no response
  image()                image content (a 1x1 PNG, image/png) + text "a red pixel"
  learn(name)            registers a tool NAME (it echoes its `text` argument,
                         "NAME: TEXT"), sends notifications/tools/list_changed,
                         returns text "learned NAME"

At start, "started PID" is appended to $MCP_TEST_LOG (when set), so a test can
count (re)starts. Logs of the SDK go to stderr (stdout is the stdio transport).
"""

from __future__ import annotations

import os
import sys

import anyio
from pydantic import BaseModel

from mcp.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    ImageContent,
    TextContent,
    ToolAnnotations,
    ToolListChangedNotification,
)

# A valid 1x1 red PNG.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)

# Tools returning str are declared structured_output=False: text content only
# (the SDK would otherwise add an outputSchema and structuredContent {"result": ...}).
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


server = MCPServer(
    name="heddle-test-mcp",
    version="1.0.0",
    instructions="A test MCP server for Heddle's hub (mcp agents).",
    log_level="WARNING",
)

# Advertise tools.listChanged = true (MCPServer's runners take the default
# NotificationOptions, which advertise false): learn() sends list_changed.
_lowlevel = server._lowlevel_server
_create_init_options = _lowlevel.create_initialization_options


def _init_options(notification_options=None, *args, **kwargs):
    return _create_init_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


_lowlevel.create_initialization_options = _init_options


@server.tool(description="Returns the text upper-cased.", annotations=READ_ONLY, structured_output=False)
def shout(text: str) -> str:
    return text.upper()


class Sum(BaseModel):
    sum: float


@server.tool(description="Adds two numbers; the sum as structured content.", annotations=READ_ONLY)
def add(a: float, b: float) -> Sum:
    return Sum(sum=a + b)


@server.tool(
    description="Works for `steps` steps of `delay_ms` ms each, reporting progress after each step.",
    annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    structured_output=False,
)
async def slow(steps: int, delay_ms: int, ctx: Context) -> str:
    try:
        for i in range(1, steps + 1):
            await anyio.sleep(delay_ms / 1000)
            # A no-op when the request has no progressToken.
            await ctx.report_progress(i, steps, f"step {i}")
    except anyio.get_cancelled_exc_class():
        log("cancelled")
        raise
    return f"done after {steps} steps"


@server.tool(description="Always fails: a tool result with isError and the reason as text.")
def fail(reason: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=reason)], is_error=True)


@server.tool(
    description="Exits the server process (code 3) in the middle of the call.",
    annotations=ToolAnnotations(destructiveHint=True),
    structured_output=False,
)
def crash() -> str:
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Returns a tiny PNG image and a text.", annotations=READ_ONLY)
def image() -> CallToolResult:
    return CallToolResult(
        content=[
            ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
            TextContent(type="text", text="a red pixel"),
        ]
    )


@server.tool(
    description="Registers a new tool named `name` at runtime and announces the tools list changed.",
    structured_output=False,
)
async def learn(name: str, ctx: Context) -> str:
    def learned(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(
        learned,
        name=name,
        description=f"A tool learned at runtime: echoes its text as '{name}: TEXT'.",
        structured_output=False,
    )
    # Handshake-era sessions (protocol <= 2025-11-25): a notification on the
    # call's own stream (the POST's SSE stream over HTTP, so no GET stream is
    # needed). Modern sessions (2026-07-28) get it through subscriptions/listen.
    await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
    await ctx.notify_tools_changed()
    return f"learned {name}"


def main() -> None:
    args = sys.argv[1:]
    log(f"started {os.getpid()}")
    if args == ["stdio"]:
        server.run("stdio")
    elif len(args) == 2 and args[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]), streamable_http_path="/mcp")
    else:
        print("usage: mcp_server.py stdio | http PORT", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
