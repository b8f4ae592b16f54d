"""The official Python A2A client (a2a-sdk 1.x) calling, through a Heddle hub,
an MCP agent (`kind = "mcp"`) whose server is python/mcp_server.py, all its
tools skills (crates/heddle-hub/tests/mcp.rs serves it). Each flow calls a
tool with a data part {"tool": NAME, "arguments": {...}}:

  call           add(2, 3): COMPLETED, one artifact with a data part
                 {"sum": 5} (the structuredContent)
  stream         slow(3 steps, 50 ms), streamed: WORKING status messages
                 "step 1", "step 2", "step 3" (the MCP progress), an artifact
                 "done after 3 steps", the last status COMPLETED
  tool-error     fail("no such city"): FAILED, the reason as the status
                 message
  bad-arguments  add("two", 3): refused before any task with JSON-RPC
                 -32602 (the SDK raises InvalidParamsError)

Usage: hub_mcp_flows.py AGENT_URL
  AGENT_URL  the hub's URL of the agent, e.g. http://127.0.0.1:8080/api/v1/agents/tools

Runs over JSON-RPC v1.0. Prints `PASS py-hub-mcp FLOW` (or FAIL ...) per flow;
exits 1 if any flow failed.
"""

from __future__ import annotations

import asyncio
import sys

import httpx

from a2a.helpers import get_data_parts, new_data_part
from a2a.types import InvalidParamsError, SendMessageRequest, TaskState
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP

from client_flows import (
    Failure,
    check,
    hub_jsonrpc_client,
    run_named_flows,
    state_name,
    text_of,
    user_message,
)


def tool_call(tool: str, arguments: dict) -> SendMessageRequest:
    return SendMessageRequest(message=user_message(
        new_data_part({'tool': tool, 'arguments': arguments})))


class Flows:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip('/')
        self.http = httpx.AsyncClient(timeout=30.0)

    async def client(self, *, streaming: bool):
        return await hub_jsonrpc_client(self.http, self.url,
                                        streaming=streaming)

    async def send(self, client, tool: str, arguments: dict):
        events = [e async for e in client.send_message(
            tool_call(tool, arguments))]
        check(len(events) == 1 and events[0].HasField('task'),
              f'a blocking send gave {events}')
        return events[0].task

    async def flow_call(self) -> None:
        client = await self.client(streaming=False)
        task = await self.send(client, 'add', {'a': 2, 'b': 3})
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'state {state_name(task.status.state)}: '
              f'{text_of(task.status.message.parts)!r}')
        check(len(task.artifacts) == 1, f'{len(task.artifacts)} artifacts')
        # google.protobuf.Value keeps numbers as doubles: 5 comes back 5.0.
        data = get_data_parts(task.artifacts[0].parts)
        check(any(isinstance(d, dict) and d.keys() == {'sum'}
                  and isinstance(d['sum'], (int, float)) and d['sum'] == 5
                  for d in data),
              f'no data part {{"sum": 5}} in {data} '
              f'(text {text_of(task.artifacts[0].parts)!r})')

    async def flow_stream(self) -> None:
        client = await self.client(streaming=True)
        working, artifacts, last = [], [], None
        async for event in client.send_message(
                tool_call('slow', {'steps': 3, 'delay_ms': 50})):
            kind = event.WhichOneof('payload')
            if kind == 'artifact_update':
                artifacts.append(text_of(event.artifact_update.artifact.parts))
            elif kind == 'status_update':
                status = event.status_update.status
                last = status.state
                if status.state == TaskState.TASK_STATE_WORKING:
                    working.append(text_of(status.message.parts))
        # The progress messages, in order, among the WORKING ones (the first
        # says "calling the MCP tool ...").
        steps = iter(working)
        check(all(any(t == want for t in steps)
                  for want in ('step 1', 'step 2', 'step 3')),
              f'WORKING messages {working}')
        check('done after 3 steps' in artifacts, f'artifacts {artifacts}')
        check(last == TaskState.TASK_STATE_COMPLETED,
              f'stream ended {state_name(last or 0)}')

    async def flow_tool_error(self) -> None:
        client = await self.client(streaming=False)
        task = await self.send(client, 'fail', {'reason': 'no such city'})
        check(task.status.state == TaskState.TASK_STATE_FAILED,
              f'state {state_name(task.status.state)}')
        why = text_of(task.status.message.parts)
        check('no such city' in why, f'status message {why!r}')

    async def flow_bad_arguments(self) -> None:
        client = await self.client(streaming=False)
        try:
            events = [e async for e in client.send_message(
                tool_call('add', {'a': 'two', 'b': 3}))]
        except InvalidParamsError as e:
            # The JSON-RPC transport raises the error class mapped from the
            # code; the code itself is not kept on the exception.
            check(JSON_RPC_ERROR_CODE_MAP[type(e)] == -32602,
                  f'{type(e).__name__} is not -32602')
            check('input schema' in e.message, f'message {e.message!r}')
            return
        raise Failure(f'arguments breaking the schema gave {events}, '
                      'want JSON-RPC error -32602')

    async def run(self) -> int:
        failed = await run_named_flows('py-hub-mcp', [
            ('call', self.flow_call),
            ('stream', self.flow_stream),
            ('tool-error', self.flow_tool_error),
            ('bad-arguments', self.flow_bad_arguments),
        ])
        await self.http.aclose()
        return failed


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    return asyncio.run(Flows(sys.argv[1]).run())


if __name__ == '__main__':
    sys.exit(main())
