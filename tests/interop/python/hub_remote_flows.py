"""The official Python A2A client (a2a-sdk 1.x) calling, through a Heddle hub,
a remote agent the hub fronts: one of the interop suite's SDK servers
(servers/python_server.py, servers/js_server.mjs), whose skills are chosen by
the first word of the message (echo, write, stream, wait).

Usage: hub_remote_flows.py AGENT_URL VERSION BINDING
  AGENT_URL  the hub's URL of the agent, e.g. http://127.0.0.1:8080/api/v1/agents/py
  VERSION    "1.0" or "0.3"
  BINDING    "JSONRPC", "HTTP+JSON" (1.0 only) or "GRPC"

The card comes from the hub (the SDK's card resolver) and keeps only the
interfaces of BINDING and VERSION, so ClientFactory builds that transport.
Prints `PASS LABEL flow` (or FAIL ...) per flow; exits 1 if any flow failed.
"""

from __future__ import annotations

import asyncio
import sys

import grpc
import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import (
    CancelTaskRequest,
    Part,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from client_flows import (
    LABELS,
    TenantMetadata,
    check,
    grpc_target,
    run_named_flows,
    state_name,
    text_of,
    user_message,
)


def final_state(event) -> int | None:
    kind = event.WhichOneof('payload')
    if kind == 'task':
        return event.task.status.state
    if kind == 'status_update':
        return event.status_update.status.state
    return None


class Flows:
    def __init__(self, url: str, version: str, binding: str) -> None:
        self.url = url.rstrip('/')
        self.binding = binding
        self.legacy = version == '0.3'
        self.label = 'hub-' + LABELS[(binding, version)]
        self.http = httpx.AsyncClient(timeout=30.0)
        self.channels: list = []

    def _channel(self, url: str):
        channel = grpc.aio.insecure_channel(grpc_target(url))
        self.channels.append(channel)
        return channel

    async def client(self, *, streaming: bool):
        card = await A2ACardResolver(self.http, self.url).get_agent_card()
        keep = [
            i for i in card.supported_interfaces
            if i.protocol_binding == self.binding
            and is_legacy_version(i.protocol_version) == self.legacy
        ]
        check(keep, f'the hub card has no {self.binding} interface of this version')
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        factory = ClientFactory(ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            supported_protocol_bindings=[self.binding],
            grpc_channel_factory=self._channel,
        ))
        interceptors = []
        if self.binding == 'GRPC' and self.legacy:
            interceptors.append(TenantMetadata(keep[0].tenant))
        return factory.create(card, interceptors)

    async def send(self, client, text: str, task=None):
        message = (user_message(Part(text=text), task_id=task.id,
                                context_id=task.context_id)
                   if task else user_message(Part(text=text)))
        events = [e async for e in client.send_message(
            SendMessageRequest(message=message))]
        check(len(events) == 1 and events[0].HasField('task'),
              f'a blocking send gave {events}')
        return events[0].task

    async def flow_echo(self) -> None:
        client = await self.client(streaming=False)
        task = await self.send(client, 'echo through the hub')
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'echo state {state_name(task.status.state)}')
        got = text_of(task.artifacts[0].parts)
        check(got == 'through the hub', f'echo artifact {got!r}')

    async def flow_multi_turn(self) -> None:
        client = await self.client(streaming=False)
        asked = await self.send(client, 'write')
        check(asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
              f'first turn {state_name(asked.status.state)}')
        done = await self.send(client, 'for Ann', asked)
        check(done.id == asked.id, 'the answer made another task')
        check(done.status.state == TaskState.TASK_STATE_COMPLETED,
              f'second turn {state_name(done.status.state)}')
        got = text_of(done.artifacts[0].parts)
        check('Ann' in got, f'report {got!r}')

    async def flow_stream(self) -> None:
        client = await self.client(streaming=True)
        chunks, last = [], None
        async for event in client.send_message(
                SendMessageRequest(message=user_message(Part(text='stream')))):
            if event.WhichOneof('payload') == 'artifact_update':
                chunks.append(text_of(event.artifact_update.artifact.parts))
            last = final_state(event) or last
        check(chunks == ['one ', 'two ', 'three'], f'chunks {chunks}')
        check(last == TaskState.TASK_STATE_COMPLETED,
              f'stream ended {state_name(last or 0)}')

    async def flow_resubscribe_and_cancel(self) -> None:
        client = await self.client(streaming=True)
        stream = client.send_message(
            SendMessageRequest(message=user_message(Part(text='wait'))))
        first = await anext(stream)
        await stream.aclose()
        check(first.HasField('task'), f'first event {first}')
        task_id = first.task.id
        sub = client.subscribe(SubscribeToTaskRequest(id=task_id))
        snapshot = await anext(sub)
        check(snapshot.HasField('task') and snapshot.task.id == task_id,
              f'resubscribe began with {snapshot}')
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        check(canceled.status.state == TaskState.TASK_STATE_CANCELED,
              f'after cancel {state_name(canceled.status.state)}')
        last = None
        async for event in sub:
            last = final_state(event) or last
        check(last == TaskState.TASK_STATE_CANCELED,
              f'the subscription ended {state_name(last or 0)}')

    async def run(self) -> int:
        failed = await run_named_flows(self.label, [
            ('echo', self.flow_echo),
            ('multi-turn', self.flow_multi_turn),
            ('stream', self.flow_stream),
            ('resubscribe-cancel', self.flow_resubscribe_and_cancel),
        ])
        await self.http.aclose()
        for channel in self.channels:
            await channel.close()
        return failed


def main() -> int:
    args = sys.argv[1:]
    if len(args) != 3 or (args[2], args[1]) not in LABELS:
        print(__doc__, file=sys.stderr)
        return 2
    return asyncio.run(Flows(*args).run())


if __name__ == '__main__':
    sys.exit(main())
