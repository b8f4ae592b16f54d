"""An A2A agent served by the official Python SDK (a2a-sdk 1.x), for the
reverse interop direction: the `heddle` CLI is the client.

Usage: python_server.py HTTP_PORT GRPC_PORT [--no-streaming]

With --no-streaming the card declares capabilities.streaming false (the
client must poll instead of streaming); nothing else changes.

One agent, four skills, chosen by the first word of the message text:
  echo ...   -> COMPLETED with one text artifact: the rest of the text
  write ...  -> INPUT_REQUIRED with a question; the follow-up on the same task
                -> COMPLETED with an artifact "report" containing the answer
  stream ... -> WORKING, then ONE artifact in three chunks ("one ", "two ",
                "three": append=false, append=true, append=true+lastChunk)
                -> COMPLETED
  wait ...   -> WORKING for up to 30 s, then COMPLETED; cancel -> CANCELED
  relay URL TEXT -> sends TEXT to the agent at URL (the SDK's own client,
                JSON-RPC), with this message's metadata copied (a delegation
                chain passes through an agent that does not know it), then
                COMPLETED with an artifact "relayed": the answer's text

Push notification configs (create/set, get, list, delete) are kept in an
InMemoryPushNotificationConfigStore and the card declares pushNotifications;
no sender is configured, so nothing is delivered: the flows check the
client's calls, not deliveries.

Served, all from one DefaultRequestHandler and one InMemoryTaskStore:
  http://127.0.0.1:HTTP_PORT/.well-known/agent-card.json  the card
  http://127.0.0.1:HTTP_PORT/a2a/jsonrpc   JSON-RPC, v1.0 + v0.3 (enable_v0_3_compat)
  http://127.0.0.1:HTTP_PORT/a2a/rest      HTTP+JSON v1.0 (/message:send ...) and
                                           v0.3 (/v1/message:send ...)
  127.0.0.1:GRPC_PORT                      gRPC: lf.a2a.v1.A2AService (v1.0) and
                                           a2a.v1.A2AService (v0.3) side by side

The card lists every interface twice (protocolVersion 1.0 and 0.3). The SDK's
card route (agent_card_to_dict) adds the v0.3 top-level fields (url,
preferredTransport, protocolVersion, additionalInterfaces) from the first
0.3 interface, so one card serves v1.0 and v0.3 readers.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid

import grpc
import httpx
import uvicorn

from starlette.applications import Starlette

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    a2a_pb2_grpc,
)

WAIT_SECONDS = 30.0


class InteropExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def agent_text(value: str):
            return new_text_message(value, context_id=task.context_id, task_id=task.id)

        # A follow-up on a task waiting for input: the writer's second turn.
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.add_artifact(
                [new_text_part(f'Report, written {text}.')], name='report')
            await updater.complete()
            return

        word, _, rest = text.partition(' ')
        word = word.lower()
        if word == 'echo':
            await updater.add_artifact([new_text_part(rest)], name='echo')
            await updater.complete()
        elif word == 'write':
            await updater.requires_input(
                agent_text('Who is the report for?'))
        elif word == 'stream':
            await updater.start_work(agent_text('Streaming three chunks.'))
            chunks = [('one ', False, False), ('two ', True, False),
                      ('three', True, True)]
            for chunk, append, last in chunks:
                await asyncio.sleep(0.05)
                await updater.add_artifact(
                    [new_text_part(chunk)], artifact_id='stream-artifact',
                    name='stream', append=append, last_chunk=last)
            await updater.complete()
        elif word == 'wait':
            await updater.start_work(agent_text(f'Waiting up to {WAIT_SECONDS:.0f} s.'))
            # Cancellation arrives as asyncio.CancelledError at the sleep.
            await asyncio.sleep(WAIT_SECONDS)
            await updater.complete(agent_text('Done waiting.'))
        elif word == 'relay':
            url, _, ask = rest.partition(' ')
            await updater.start_work(agent_text(f'Handing the work on to {url}.'))
            answer = await relay(url, ask, context.message)
            await updater.add_artifact([new_text_part(answer)], name='relayed')
            await updater.complete()
        else:
            await updater.reject(agent_text(
                f'Unknown skill {word!r}: start with echo, write, stream, wait or relay.'))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, context.task_id,
                              task.context_id if task else context.context_id)
        await updater.cancel()


async def relay(url: str, text: str, incoming: Message) -> str:
    """Sends `text` to the agent at `url` with `incoming`'s metadata and
    returns the text of the answer's artifacts."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(
            streaming=False, httpx_client=http,
            supported_protocol_bindings=['JSONRPC'],
        )).create(card)
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                          parts=[Part(text=text)])
        if incoming.HasField('metadata'):
            message.metadata.CopyFrom(incoming.metadata)
        events = [e async for e in client.send_message(
            SendMessageRequest(message=message))]
    task = events[-1].task
    return ''.join(p.text for a in task.artifacts for p in a.parts)


def agent_card(http_port: int, grpc_port: int, streaming: bool = True) -> AgentCard:
    jsonrpc = f'http://127.0.0.1:{http_port}/a2a/jsonrpc'
    rest = f'http://127.0.0.1:{http_port}/a2a/rest'
    grpc_url = f'127.0.0.1:{grpc_port}'
    interfaces = []
    for version in ('1.0', '0.3'):  # the first 0.3 one becomes the v0.3 `url`
        interfaces += [
            AgentInterface(url=jsonrpc, protocol_binding='JSONRPC', protocol_version=version),
            AgentInterface(url=rest, protocol_binding='HTTP+JSON', protocol_version=version),
            AgentInterface(url=grpc_url, protocol_binding='GRPC', protocol_version=version),
        ]

    def skill(skill_id: str, description: str) -> AgentSkill:
        return AgentSkill(id=skill_id, name=skill_id, description=description,
                          tags=['interop'], examples=[f'{skill_id} hello'])

    return AgentCard(
        name='python-sdk-interop',
        description='a2a-sdk (Python) server for the heddle client interop tests',
        version='1.0.0',
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=True),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            skill('echo', 'Completes with the rest of the text as an artifact.'),
            skill('write', 'Asks a question, then writes a report with the answer.'),
            skill('stream', 'Streams one artifact in three chunks.'),
            skill('wait', 'Works for 30 s; cancel it.'),
            skill('relay', 'Sends the rest of the text to the agent at the URL that follows.'),
        ],
    )


async def main(http_port: int, grpc_port: int, streaming: bool) -> None:
    card = agent_card(http_port, grpc_port, streaming)
    handler = DefaultRequestHandler(
        agent_executor=InteropExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url='/a2a/jsonrpc', enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True, path_prefix='/a2a/rest'),
    ]
    app = Starlette(routes=routes)

    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
    a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(handler), grpc_server)
    grpc_server.add_insecure_port(f'127.0.0.1:{grpc_port}')
    await grpc_server.start()

    config = uvicorn.Config(app, host='127.0.0.1', port=http_port,
                            log_level='warning', timeout_graceful_shutdown=1)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await grpc_server.stop(grace=None)


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ['--no-streaming']):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] == []))
