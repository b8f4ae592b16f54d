"""An ITK-style agent on the official Python SDK (a2a-sdk 1.x): it runs the
`itk.Instruction` (itk/instruction.proto) that the first user message
carries and hands nested instructions on to other agents with the SDK's own
client. The behaviour is the one the ITK section of tests/interop/README.md describes (and
`heddle itk-agent` and itk/js_agent.mjs share).

Usage: python_agent.py --httpPort N --grpcPort M [--protocol 1.0|0.3]

With --protocol 0.3 it stands in for an agent of the v0.3 line: the card
lists only the 0.3 interfaces and every call goes to the callee's 0.3
interfaces with the SDK's compat transports (the server keeps serving 1.0).

Served, all from one DefaultRequestHandler and one InMemoryTaskStore:
  http://127.0.0.1:N/.well-known/agent-card.json   the card
  http://127.0.0.1:N/jsonrpc/   JSON-RPC v1.0 + v0.3 (also at /jsonrpc)
  http://127.0.0.1:N/rest/      HTTP+JSON v1.0 (/rest/message:send ...) + v0.3 (/rest/v1/...)
  127.0.0.1:M                   gRPC lf.a2a.v1.A2AService + a2a.v1.A2AService (v0.3)
The card lists each binding for protocolVersion 1.0 and 0.3. Push configs
given by callers are kept in memory and the SDK's BasePushNotificationSender
delivers every task event to them. ITK_LOG_LEVEL (INFO/DEBUG) sets the log
level; the default is WARNING.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import logging
import os
import re
import sys
import uuid

import grpc
import httpx
import uvicorn

from google.protobuf.message import DecodeError
from starlette.applications import Starlette

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
    a2a_pb2_grpc,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instruction_pb as itk  # noqa: E402

log = logging.getLogger('itk-python-agent')

FINISHED = 'task-finished'
PUSH_TOKEN = 'itk-token'
HOLD_UPDATES = 5
HOLD_INTERVAL = 2.0
# --protocol 0.3: calls go to the 0.3 interfaces of the callee's card only
# (a2a-sdk's compat transports), like an agent on the SDK's v0.3 line.
OUTGOING_LEGACY = False
OPEN_STATES = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING,
               TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)

BINDINGS = {
    'jsonrpc': 'JSONRPC',
    'grpc': 'GRPC',
    'http_json': 'HTTP+JSON',
    'http+json': 'HTTP+JSON',
    'rest': 'HTTP+JSON',
}


BASE64_BYTES = re.compile(rb'[A-Za-z0-9+/]+={0,2}')


class InstructionError(Exception):
    pass


# ------------------------------------------------------------------ reading

def instruction_of(message: Message | None):
    """The instruction in `message`: a binary part (raw bytes; the v0.3 file
    part arrives here as raw too), else base64 text in a text part."""
    if message is None:
        raise InstructionError('the task has no user message')
    for part in message.parts:
        if part.WhichOneof('content') == 'raw':
            data = part.raw
            # a2a-sdk's v0.3 gRPC/REST clients put the base64 text itself into
            # the v0.3 bytes field, so it arrives as ASCII. An encoded
            # instruction starts with a tag byte (0x0a/0x12/0x1a), never with
            # a base64 letter, so ASCII base64 is decoded once more.
            if data and BASE64_BYTES.fullmatch(data):
                data = base64.b64decode(data)
            try:
                return itk.Instruction.FromString(data)
            except DecodeError as e:
                raise InstructionError(
                    f'the binary part {part.filename or "(unnamed)"} is not an '
                    f'itk.Instruction: {e}') from e
    for part in message.parts:
        if part.WhichOneof('content') == 'text' and part.text.strip():
            try:
                data = base64.b64decode(part.text.strip(), validate=True)
                return itk.Instruction.FromString(data)
            except (binascii.Error, ValueError, DecodeError):
                continue
    raise InstructionError(
        'no instruction found: want a binary part (application/x-protobuf, '
        'instruction.bin) or base64 text holding an itk.Instruction')


def holds(inst) -> bool:
    """Whether a return node of this agent's own instruction holds the task
    (nested instructions of call_agent nodes belong to the called agent)."""
    kind = inst.WhichOneof('step')
    if kind == 'return_response':
        return inst.return_response.hold_task
    if kind == 'steps':
        return any(holds(i) for i in inst.steps.instructions)
    return False


def texts_of_message(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.WhichOneof('content') == 'text']


def texts_of_event(event: StreamResponse, *, history: bool = False) -> list[str]:
    """Every text in a reply event: a message's parts, a task's status
    message (and, with `history`, its agent messages), a status update's
    message."""
    kind = event.WhichOneof('payload')
    if kind == 'message':
        return texts_of_message(event.message)
    if kind == 'task':
        out = []
        if history:
            for m in event.task.history:
                if m.role == Role.ROLE_AGENT:
                    out += texts_of_message(m)
        if event.task.status.HasField('message'):
            out += texts_of_message(event.task.status.message)
        return out
    if kind == 'status_update':
        if event.status_update.status.HasField('message'):
            return texts_of_message(event.status_update.status.message)
    return []


def task_id_of(event: StreamResponse) -> str:
    kind = event.WhichOneof('payload')
    if kind == 'task':
        return event.task.id
    if kind == 'status_update':
        return event.status_update.task_id
    if kind == 'artifact_update':
        return event.artifact_update.task_id
    if kind == 'message':
        return event.message.task_id
    return ''


# ------------------------------------------------------------------ running

def grpc_target(url: str) -> str:
    for scheme in ('http://', 'https://', 'grpc://'):
        if url.startswith(scheme):
            return url[len(scheme):].rstrip('/')
    return url


async def run(inst) -> list[str]:
    kind = inst.WhichOneof('step')
    if kind == 'return_response':
        return [inst.return_response.response]
    if kind == 'steps':
        out: list[str] = []
        for step in inst.steps.instructions:
            out += await run(step)
        return out
    if kind == 'call_agent':
        return await call_agent(inst.call_agent)
    raise InstructionError('an instruction node with no step set')


async def call_agent(call) -> list[str]:
    binding = BINDINGS.get(call.transport.strip().lower())
    if binding is None:
        raise InstructionError(f'unknown transport {call.transport!r}')
    behavior = call.WhichOneof('behavior')
    resubscribe = behavior == 'resubscribe'
    push = None
    if behavior == 'push_notification':
        url = call.push_notification.url.rstrip('/')
        if not url:
            raise InstructionError('push_notification behaviour without a url')
        if '://' not in url:
            url = f'http://{url}'
        push = TaskPushNotificationConfig(url=f'{url}/notifications', token=PUSH_TOKEN)
    log.info('call %s over %s (%s, streaming=%s)', call.agent_card_uri, binding,
             behavior or 'send_message', call.streaming)
    async with httpx.AsyncClient(timeout=60.0) as http:
        try:
            card = await A2ACardResolver(http, call.agent_card_uri).get_agent_card()
        except Exception as e:
            raise InstructionError(
                f'cannot read the card of {call.agent_card_uri}: {e}') from e
        if OUTGOING_LEGACY:
            keep = [i for i in card.supported_interfaces
                    if is_legacy_version(i.protocol_version)]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)
        config = ClientConfig(
            streaming=call.streaming or resubscribe,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=lambda u: grpc.aio.insecure_channel(grpc_target(u)),
            push_notification_config=push,
        )
        try:
            client = ClientFactory(config).create(card)
        except ValueError as e:
            raise InstructionError(
                f'{call.agent_card_uri} offers no {binding} interface: {e}') from e
        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
            parts=[Part(raw=call.instruction.SerializeToString(),
                        media_type=itk.MEDIA_TYPE, filename=itk.FILENAME)])
        request = SendMessageRequest(message=message)
        try:
            if resubscribe:
                return await send_and_resubscribe(client, request)
            out: list[str] = []
            async for event in client.send_message(request):
                out += texts_of_event(event)
            return out
        except InstructionError:
            raise
        except Exception as e:
            raise InstructionError(
                f'{binding} call to {call.agent_card_uri} failed: '
                f'{type(e).__name__}: {e}') from e
        finally:
            await client.close()


async def send_and_resubscribe(client, request: SendMessageRequest) -> list[str]:
    stream = client.send_message(request)
    task_id = ''
    try:
        async for event in stream:
            task_id = task_id_of(event)
            break
    finally:
        await stream.aclose()
    if not task_id:
        raise InstructionError('the streamed send gave no task id in its first event')
    log.info('dropped the stream of task %s, subscribing again', task_id)
    out: list[str] = []
    finished = False
    last_state = None
    sub = client.subscribe(SubscribeToTaskRequest(id=task_id))
    try:
        async for event in sub:
            kind = event.WhichOneof('payload')
            if kind == 'task':
                last_state = event.task.status.state
            elif kind == 'status_update':
                last_state = event.status_update.status.state
            for text in texts_of_event(event, history=True):
                if FINISHED in text:
                    finished = True
                cleaned = text.replace(FINISHED, '').strip('\n')
                if cleaned and cleaned not in out:
                    out.append(cleaned)
            if finished:
                break
    finally:
        await sub.aclose()
    if not finished:
        raise InstructionError(
            f'the subscription to task {task_id} ended without "{FINISHED}"')
    if last_state in OPEN_STATES:
        try:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        except Exception as e:  # noqa: BLE001 (it may have ended meanwhile)
            log.info('cancel of task %s: %s', task_id, e)
    return out


class ItkExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(text: str) -> Message:
            return new_text_message(text, context_id=task.context_id, task_id=task.id)

        try:
            inst = instruction_of(context.message)
            hold = holds(inst)
            outputs = await run(inst)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 (every error ends the task FAILED)
            log.warning('task %s failed: %s', task.id, e)
            await updater.failed(say(f'itk-python-agent failed: {e}'))
            return
        answer = '\n'.join(outputs)
        if not hold:
            await updater.complete(say(answer))
            return
        await updater.start_work(say(f'{answer}\n{FINISHED}'))
        for _ in range(HOLD_UPDATES):
            await asyncio.sleep(HOLD_INTERVAL)  # a cancel arrives here
            await updater.start_work()
        await updater.complete(say(answer))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, context.task_id,
                              task.context_id if task else context.context_id)
        await updater.cancel()


def agent_card(http_port: int, grpc_port: int, versions: tuple[str, ...]) -> AgentCard:
    base = f'http://127.0.0.1:{http_port}'
    urls = {'JSONRPC': f'{base}/jsonrpc/', 'HTTP+JSON': f'{base}/rest/',
            'GRPC': f'127.0.0.1:{grpc_port}'}
    interfaces = [
        AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
        for version in versions  # the first 0.3 one becomes the v0.3 `url`
        for binding, url in urls.items()
    ]
    return AgentCard(
        name='itk-python-agent',
        description='ITK agent on the official Python A2A SDK (a2a-sdk)',
        version='1.0.0',
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=['application/x-protobuf', 'text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(
            id='itk', name='itk', tags=['itk'],
            description='Runs an itk.Instruction: answers, calls agents, holds tasks.')],
    )


async def main(http_port: int, grpc_port: int, protocol: str) -> None:
    global OUTGOING_LEGACY
    OUTGOING_LEGACY = protocol == '0.3'
    card = agent_card(http_port, grpc_port, ('0.3',) if OUTGOING_LEGACY else ('1.0', '0.3'))
    push_store = InMemoryPushNotificationConfigStore()
    push_http = httpx.AsyncClient(timeout=10.0)
    handler = DefaultRequestHandler(
        agent_executor=ItkExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=push_store,
        push_sender=BasePushNotificationSender(push_http, push_store),
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url='/jsonrpc/', enable_v0_3_compat=True),
        *create_jsonrpc_routes(handler, rpc_url='/jsonrpc', enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True, path_prefix='/rest'),
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
        await uvicorn.Server(config).serve()  # returns on SIGTERM / SIGINT
    finally:
        await grpc_server.stop(grace=None)
        await push_http.aclose()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='ITK agent on a2a-sdk')
    parser.add_argument('--httpPort', type=int, required=True)
    parser.add_argument('--grpcPort', type=int, required=True)
    parser.add_argument('--protocol', choices=('1.0', '0.3'), default='1.0',
                        help='0.3: act as a v0.3-only agent (card and calls)')
    args = parser.parse_args()
    level = os.environ.get('ITK_LOG_LEVEL', 'WARNING').upper()
    logging.basicConfig(level=getattr(logging, level, logging.WARNING),
                        format='%(asctime)s %(name)s %(levelname)s %(message)s')
    if level != 'DEBUG':  # at INFO these log every request and whole cards
        logging.getLogger('httpx').setLevel(logging.WARNING)
        logging.getLogger('a2a.client').setLevel(logging.WARNING)
    asyncio.run(main(args.httpPort, args.grpcPort, args.protocol))
