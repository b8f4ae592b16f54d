"""Drives ITK instruction chains through running ITK agents and checks that
every hop left its mark in the final answer.

Usage: driver.py --agent H=http://127.0.0.1:N --agent P=... --agent J=...
                 [--only SUBSTRING] [--jobs N] [--timeout SECONDS]

Agents: H (heddle itk-agent), P (the Python SDK agent), J (the JS SDK
agent), and P3 / J3 (the same SDK agents started with --protocol 0.3: a
card with only 0.3 interfaces, calls over v0.3 only, like the kit's agents
on the SDKs' v0.3 lines). A missing agent makes its flows SKIP.

Flows (each gets its own marks, one unique text per return node):
  pairs    P->H, H->P, J->H, H->J, H->H, P3->H, H->P3, J3->H, H->J3, over
           every binding the callee's card lists (jsonrpc, http_json, grpc;
           the 0.3 ones when the callee is P3/J3), each behaviour:
             send         X sends to Y, blocking
             stream       X streams to Y, and the driver streams to X
             push         X attaches a push config (the driver's receiver,
                          given without a scheme); Y's task events must
                          arrive at /notifications with
                          X-A2A-Notification-Token: itk-token, an
                          intermediate state, then COMPLETED with Y's mark
             push-stream  the same with both hops streamed
             resubscribe  Y's return node holds the task; X streams, drops
                          the stream, subscribes again, reads until
                          task-finished and cancels; Y's ListTasks must then
                          show the held task CANCELED
  chains   P->H->J and J->H->P, same binding on both hops, send and stream.
  v0.3-in  H->P and H->J send and stream with the driver's first hop in
           v0.3 (the SDK's compat transports: a v0.3 file part).
  b64-text-in  H->P jsonrpc send, the instruction as base64 in a text part.
  direct   the driver alone against H, P and J: `card` (every binding for
           1.0 and 0.3, gRPC url without a scheme, the v0.3 top-level url;
           JSON-RPC answers at /jsonrpc and /jsonrpc/ in both versions);
           `bad-instruction` and `unreachable` (FAILED with a reason); per
           binding `hold` (a held node's stream to its end: WORKING with
           `mark\ntask-finished`, more WORKING, COMPLETED after >= 5 s) and
           `resubscribe-snapshot` (stream dropped after the first event;
           2.5 s later SubscribeToTask must begin with the Task snapshot
           showing task-finished; CancelTask answers CANCELED, GetTask too).

The driver's first hop is the a2a-sdk client over the flow's binding, v1.0
(v0.3 for v0.3-in and into P3/J3): a blocking send must return a COMPLETED
task whose status message is one text part holding every mark; a streaming
first hop is read the way the kit reads it: only statusUpdate.status.message
(role agent) counts. What an SDK cannot do is listed in KNOWN_LIMITS and
printed as SKIP with the reason.

Prints `PASS name`, `FAIL name: reason` or `SKIP name: reason` per flow and
`itk: N passed, M failed` last; exits 1 if any flow failed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import sys
import threading
import time
import traceback
import uuid

from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import (
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instruction_pb as itk  # noqa: E402

TOKEN = 'itk-token'
FINISHED = 'task-finished'
BINDING_OF = {'jsonrpc': 'JSONRPC', 'http_json': 'HTTP+JSON', 'grpc': 'GRPC'}
TRANSPORT_OF = {v: k for k, v in BINDING_OF.items()}
BEHAVIOURS = ('send', 'stream', 'push', 'push-stream', 'resubscribe')

# What one SDK truly cannot do, per hop: (caller, callee, transport,
# behaviour) with None as a wildcard -> why. Printed as SKIP, never dropped.
PY03_FILE_BYTES = (
    "a2a-sdk 1.3.0's v0.3 gRPC/REST server reads v0.3 file bytes as base64 text "
    "(compat/v0_3/proto_utils.py), so a spec-encoded binary part fails there (gRPC "
    "'Incorrect padding', REST HTTP 500); the JS SDK's v0.3 client fails the same way")
KNOWN_LIMITS: dict[tuple, str] = {
    (None, 'P3', 'grpc', None): PY03_FILE_BYTES,
    (None, 'P3', 'http_json', None): PY03_FILE_BYTES,
}


class Failure(AssertionError):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


# ------------------------------------------------------------------ receiver

class Receiver:
    """Push receiver on 127.0.0.1: records (path, headers, json body) per POST."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.posts: list[tuple[str, dict[str, str], object]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                try:
                    parsed = json.loads(body or b'null')
                except ValueError:
                    parsed = {'unparsable': body.decode('utf-8', 'replace')}
                with receiver.lock:
                    receiver.posts.append(
                        (self.path, {k.lower(): v for k, v in self.headers.items()}, parsed))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def under(self, prefix: str) -> list[tuple[str, dict[str, str], object]]:
        with self.lock:
            return [p for p in self.posts if p[0].startswith(prefix)]

    def close(self) -> None:
        self.server.shutdown()


def pushed_state_and_texts(body) -> tuple[str, list[str]]:
    """(state, texts) of a push body: a v1.0 StreamResponse
    ({"statusUpdate": ...} / {"task": ...}) or a v0.3 Task / status-update."""
    if not isinstance(body, dict):
        return '', []

    def texts(msg) -> list[str]:
        if not isinstance(msg, dict):
            return []
        return [p['text'] for p in msg.get('parts', []) if isinstance(p, dict) and 'text' in p]

    for key in ('statusUpdate', 'task'):
        if key in body:
            status = body[key].get('status', {})
            return status.get('state', ''), texts(status.get('message'))
    if 'status' in body:  # v0.3: the Task or TaskStatusUpdateEvent itself
        status = body['status']
        return status.get('state', ''), texts(status.get('message'))
    return '', []


# ------------------------------------------------------------------ flows

@dataclass
class Flow:
    name: str
    hops: list[str]            # agent letters, first is the driver's callee
    transport: str             # jsonrpc | http_json | grpc (every hop)
    behaviour: str             # send | stream | push | resubscribe
    first_version: str = ''     # protocol of the driver's own first hop
                                # ('' -> the first agent's, see version_of)
    as_text: bool = False       # first hop sends the instruction as base64 text
    marks: list[str] = field(default_factory=list)
    note: str = ''


def version_of(agent: str) -> str:
    """P3 and J3 are the SDK agents started with --protocol 0.3."""
    return '0.3' if agent.endswith('3') else '1.0'


def first_version(flow: Flow) -> str:
    return flow.first_version or version_of(flow.hops[0])


def ret(mark: str, hold: bool = False):
    return itk.Instruction(return_response=itk.ReturnResponse(response=mark, hold_task=hold))


def build_instruction(flow: Flow, urls: dict[str, str], push_url: str):
    """Innermost hop first: each hop returns its mark, then calls the next."""
    run_id = uuid.uuid4().hex[:8]
    flow.marks = [f'mark-{i}-{agent}-{run_id}' for i, agent in enumerate(flow.hops)]
    last = len(flow.hops) - 1
    inner = ret(flow.marks[last], hold=flow.behaviour == 'resubscribe')
    for i in range(last - 1, -1, -1):
        call = itk.CallAgent(
            transport=flow.transport,
            agent_card_uri=urls[flow.hops[i + 1]],
            instruction=inner,
            streaming=flow.behaviour in ('stream', 'push-stream', 'resubscribe'),
        )
        if flow.behaviour in ('push', 'push-stream'):
            call.push_notification.url = push_url
        elif flow.behaviour == 'resubscribe':
            call.resubscribe.SetInParent()
        else:
            call.send_message.SetInParent()
        inner = itk.Instruction(steps=itk.SeriesOfSteps(
            instructions=[ret(flow.marks[i]), itk.Instruction(call_agent=call)],
            response_generator=itk.RESPONSE_GENERATOR_CONCAT))
    return inner


def grpc_target(url: str) -> str:
    for scheme in ('http://', 'https://', 'grpc://'):
        if url.startswith(scheme):
            return url[len(scheme):].rstrip('/')
    return url


def message_texts(msg: Message) -> list[str]:
    return [p.text for p in msg.parts if p.WhichOneof('content') == 'text']


async def first_hop(flow: Flow, url: str, inst, timeout: float) -> str:
    """Sends `inst` to the agent at `url` over the flow's binding (v1.0) and
    returns the text of its final answer."""
    binding = BINDING_OF[flow.transport]
    streaming = flow.behaviour in ('stream', 'push-stream')
    legacy = first_version(flow) == '0.3'
    async with httpx.AsyncClient(timeout=timeout) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        keep = [i for i in card.supported_interfaces
                if i.protocol_binding == binding and is_legacy_version(i.protocol_version) == legacy]
        check(keep, f'{url} card lists no {binding} {first_version(flow)} interface')
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        client = ClientFactory(ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding],
            grpc_channel_factory=lambda u: grpc.aio.insecure_channel(grpc_target(u)),
        )).create(card)
        transport = type(getattr(client._transport, '_base', client._transport)).__name__
        check(transport.startswith('Compat') == legacy,
              f'the SDK built {transport} for a {first_version(flow)} first hop')
        if flow.as_text:
            part = Part(text=base64.b64encode(inst.SerializeToString()).decode())
        else:
            part = Part(raw=inst.SerializeToString(), media_type=itk.MEDIA_TYPE,
                        filename=itk.FILENAME)
        request = SendMessageRequest(message=Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part]))
        try:
            events = []
            async for event in client.send_message(request):
                events.append(event)
        finally:
            await client.close()
    if not streaming:
        check(len(events) == 1 and events[0].HasField('task'),
              f'blocking send gave {[e.WhichOneof("payload") for e in events]}, want one task')
        task = events[0].task
        status_text = ' | '.join(message_texts(task.status.message))
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'first hop state {TaskState.Name(task.status.state)}: {status_text!r}')
        texts = message_texts(task.status.message)
        check(len(task.status.message.parts) == 1 and len(texts) == 1,
              f'the COMPLETED status message has {len(task.status.message.parts)} '
              f'parts ({len(texts)} text), want one text part')
        return texts[0]
    # Streaming: only statusUpdate.status.message with role agent counts
    # (for a v0.3 first hop, the SDK's compat layer maps the v0.3 events).
    texts: list[str] = []
    last_state = None
    kinds = []
    for event in events:
        kind = event.WhichOneof('payload')
        kinds.append(kind)
        if kind != 'status_update':
            continue
        status = event.status_update.status
        last_state = status.state
        if status.HasField('message') and status.message.role == Role.ROLE_AGENT:
            texts += message_texts(status.message)
    check(last_state == TaskState.TASK_STATE_COMPLETED,
          f'stream ended in {TaskState.Name(last_state or 0)} (events {kinds}); '
          f'status texts {texts!r}')
    return '\n'.join(texts)


async def sdk_client(http: httpx.AsyncClient, url: str, transport: str, *,
                     streaming: bool):
    """An a2a-sdk client of the agent at `url` over `transport`, v1.0."""
    binding = BINDING_OF[transport]
    card = await A2ACardResolver(http, url).get_agent_card()
    keep = [i for i in card.supported_interfaces
            if i.protocol_binding == binding and not is_legacy_version(i.protocol_version)]
    check(keep, f'{url} card lists no {binding} 1.0 interface')
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    return ClientFactory(ClientConfig(
        streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding],
        grpc_channel_factory=lambda u: grpc.aio.insecure_channel(grpc_target(u)),
    )).create(card)


def held_request(flow: Flow) -> SendMessageRequest:
    flow.marks = [f'mark-0-{flow.hops[0]}-{uuid.uuid4().hex[:8]}']
    inst = ret(flow.marks[0], hold=True)
    return SendMessageRequest(message=Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
        parts=[Part(raw=inst.SerializeToString(), media_type=itk.MEDIA_TYPE,
                    filename=itk.FILENAME)]))


async def hold_flow(flow: Flow, url: str, timeout: float) -> None:
    """The driver streams a held return node and reads the stream to its
    end: WORKING with `mark\ntask-finished`, more WORKING updates while
    held, COMPLETED after several seconds."""
    request = held_request(flow)
    want = f'{flow.marks[0]}\n{FINISHED}'
    started = time.monotonic()
    states: list[str] = []
    first_text = None
    async with httpx.AsyncClient(timeout=timeout) as http:
        client = await sdk_client(http, url, flow.transport, streaming=True)
        try:
            async for event in client.send_message(request):
                if event.WhichOneof('payload') != 'status_update':
                    continue
                status = event.status_update.status
                states.append(TaskState.Name(status.state).removeprefix('TASK_STATE_'))
                texts = message_texts(status.message) if status.HasField('message') else []
                if texts and first_text is None:
                    first_text = (states[-1], texts)
        finally:
            await client.close()
    took = time.monotonic() - started
    check(first_text is not None, f'no status update carried a message: {states}')
    check(first_text[0] == 'WORKING' and want in first_text[1],
          f'the first status message is {first_text}, want WORKING with {want!r}')
    check(states and states[-1] == 'COMPLETED', f'status updates {states}, want COMPLETED last')
    check(took >= 5, f'the held task completed after {took:.1f} s, want it held for a while')
    flow.note = (f'{states.count("WORKING")} WORKING updates, COMPLETED after {took:.1f} s')


async def snapshot_flow(flow: Flow, url: str, timeout: float) -> None:
    """The resubscribe behaviour done by the driver itself, strictly: the
    stream dropped after its first event; 2.5 s later (after the first plain
    WORKING update) SubscribeToTask must start with a
    Task snapshot; task-finished is read from the snapshot or an update;
    CancelTask must answer CANCELED and GetTask agree."""
    request = held_request(flow)
    async with httpx.AsyncClient(timeout=timeout) as http:
        client = await sdk_client(http, url, flow.transport, streaming=True)
        try:
            stream = client.send_message(request)
            task_id = ''
            try:
                async for event in stream:
                    kind = event.WhichOneof('payload')
                    task_id = (event.task.id if kind == 'task' else
                               event.status_update.task_id if kind == 'status_update' else '')
                    break
            finally:
                await stream.aclose()
            check(task_id, 'the first streamed event names no task')
            # Past the first plain WORKING update: task-finished is then only
            # in the snapshot's history, where the kit's resubscribers look.
            await asyncio.sleep(2.5)
            kinds: list[str] = []
            found = ''
            sub = client.subscribe(SubscribeToTaskRequest(id=task_id))
            try:
                async for event in sub:
                    kind = event.WhichOneof('payload')
                    kinds.append(kind)
                    where = kind
                    if kind == 'task':
                        texts = task_texts(event.task)
                        in_history = [t for m in event.task.history for t in message_texts(m)]
                        where = ('task snapshot history'
                                 if any(FINISHED in t for t in in_history) else
                                 'task snapshot status')
                    elif kind == 'status_update' and event.status_update.status.HasField('message'):
                        texts = message_texts(event.status_update.status.message)
                    else:
                        texts = []
                    hit = [t for t in texts if FINISHED in t and flow.marks[0] in t]
                    if hit:
                        found = f'{where}, event #{len(kinds)}'
                        break
            finally:
                await sub.aclose()
            check(kinds and kinds[0] == 'task',
                  f'SubscribeToTask began with {kinds[:1]}, want the Task snapshot')
            check(found, f'no {FINISHED} with the mark after subscribing: events {kinds}')
            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
            check(canceled.status.state == TaskState.TASK_STATE_CANCELED,
                  f'CancelTask answered {TaskState.Name(canceled.status.state)}')
            got = await client.get_task(GetTaskRequest(id=task_id))
            check(got.status.state == TaskState.TASK_STATE_CANCELED,
                  f'GetTask after the cancel: {TaskState.Name(got.status.state)}')
        finally:
            await client.close()
    flow.note = f'{FINISHED} found in the {found}'


async def card_flow(flow: Flow, url: str, timeout: float) -> None:
    """The card the kit expects (every binding for 1.0 and 0.3, gRPC
    without a scheme, the v0.3 top-level url), and JSON-RPC answering at
    /jsonrpc and /jsonrpc/ in both protocol versions."""
    base = url.rstrip('/')
    async with httpx.AsyncClient(timeout=timeout) as http:
        response = await http.get(f'{base}/.well-known/agent-card.json')
        check(response.status_code == 200, f'card: HTTP {response.status_code}')
        card = response.json()
        ifaces = {(i.get('protocolBinding'), i.get('protocolVersion')): i.get('url', '')
                  for i in card.get('supportedInterfaces', [])}
        want = {(b, v) for b in BINDING_OF.values() for v in ('1.0', '0.3')}
        check(want <= set(ifaces), f'supportedInterfaces lack {sorted(want - set(ifaces))}')
        for version in ('1.0', '0.3'):
            check('://' not in ifaces[('GRPC', version)],
                  f'GRPC {version} url {ifaces[("GRPC", version)]!r} has a scheme')
        check(card.get('url') == ifaces[('JSONRPC', '0.3')],
              f'v0.3 top-level url {card.get("url")!r}, want the JSONRPC 0.3 interface '
              f'{ifaces[("JSONRPC", "0.3")]!r}')
        for path in ('/jsonrpc', '/jsonrpc/'):
            for version, method in (('1.0', 'GetTask'), ('0.3', 'tasks/get')):
                response = await http.post(
                    f'{base}{path}', headers={'A2A-Version': version},
                    json={'jsonrpc': '2.0', 'id': 1, 'method': method,
                          'params': {'id': f'no-such-task-{uuid.uuid4().hex[:6]}'}})
                try:
                    code = response.json().get('error', {}).get('code')
                except ValueError:
                    code = None
                check(response.status_code == 200 and code == -32001,
                      f'POST {path} {method} (A2A-Version {version}) for an unknown task: '
                      f'HTTP {response.status_code} {response.text[:200]!r}, '
                      'want a JSON-RPC error -32001')


async def error_flow(flow: Flow, url: str, timeout: float) -> None:
    """A hop that cannot be carried out must end FAILED with a message
    saying why: `bad-instruction` sends bytes that are no itk.Instruction,
    `unreachable` a call to an agent whose card cannot be fetched."""
    if flow.behaviour == 'bad-instruction':
        part = Part(raw=b'\xff\xff\xff not protobuf', media_type=itk.MEDIA_TYPE,
                    filename=itk.FILENAME)
    else:
        inst = itk.Instruction(call_agent=itk.CallAgent(
            transport='jsonrpc', agent_card_uri='http://127.0.0.1:9',
            instruction=ret('never'), send_message=itk.SendMessageBehavior()))
        part = Part(raw=inst.SerializeToString(), media_type=itk.MEDIA_TYPE,
                    filename=itk.FILENAME)
    request = SendMessageRequest(message=Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part]))
    async with httpx.AsyncClient(timeout=timeout) as http:
        client = await sdk_client(http, url, flow.transport, streaming=False)
        try:
            events = [e async for e in client.send_message(request)]
        finally:
            await client.close()
    check(len(events) == 1 and events[0].HasField('task'),
          f'send gave {[e.WhichOneof("payload") for e in events]}, want one task')
    task = events[0].task
    why = ' '.join(message_texts(task.status.message))
    check(task.status.state == TaskState.TASK_STATE_FAILED,
          f'state {TaskState.Name(task.status.state)} ({why!r}), want FAILED')
    check(why.strip() != '', 'FAILED without a message saying why')
    flow.note = f'FAILED: {why[:120]}'


async def run_flow(flow: Flow, urls: dict[str, str], receiver: Receiver,
                   timeout: float) -> None:
    if flow.behaviour in ('bad-instruction', 'unreachable'):
        await asyncio.wait_for(error_flow(flow, urls[flow.hops[0]], timeout), timeout)
        return
    if flow.behaviour == 'card':
        await asyncio.wait_for(card_flow(flow, urls[flow.hops[0]], timeout), timeout)
        return
    if flow.behaviour == 'hold':
        await asyncio.wait_for(hold_flow(flow, urls[flow.hops[0]], timeout), timeout)
        return
    if flow.behaviour == 'resubscribe-snapshot':
        await asyncio.wait_for(snapshot_flow(flow, urls[flow.hops[0]], timeout), timeout)
        return
    prefix = f'/{flow.name.replace(" ", "_").replace(">", "").replace("-", "_")}-{uuid.uuid4().hex[:6]}'
    push_url = f'127.0.0.1:{receiver.port}{prefix}'
    inst = build_instruction(flow, urls, push_url)
    answer = await asyncio.wait_for(first_hop(flow, urls[flow.hops[0]], inst, timeout),
                                    timeout)
    missing = [m for m in flow.marks if m not in answer]
    check(not missing, f'marks {missing} missing from the answer {answer!r}')
    if flow.behaviour in ('push', 'push-stream'):
        await check_pushes(flow, receiver, prefix)
    if flow.behaviour == 'resubscribe':
        await check_held_task_canceled(flow, urls[flow.hops[-1]], timeout)


def task_texts(task) -> list[str]:
    out = [t for m in task.history for t in message_texts(m)]
    if task.status.HasField('message'):
        out += message_texts(task.status.message)
    return out


async def check_held_task_canceled(flow: Flow, url: str, timeout: float) -> None:
    """The callee's held task (its texts carry the callee's mark and
    task-finished) must end CANCELED soon: the caller cancels it once it
    has read task-finished. Found through ListTasks (JSON-RPC v1.0)."""
    mark = flow.marks[-1]
    deadline = time.monotonic() + 5
    async with httpx.AsyncClient(timeout=timeout) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        keep = [i for i in card.supported_interfaces
                if i.protocol_binding == 'JSONRPC' and not is_legacy_version(i.protocol_version)]
        if not keep:
            # P3/J3: v0.3 has no ListTasks, but their SDK servers still speak
            # 1.0 behind the 0.3-only card, at the same JSON-RPC url.
            keep = [AgentInterface(url=i.url, protocol_binding='JSONRPC', protocol_version='1.0')
                    for i in card.supported_interfaces if i.protocol_binding == 'JSONRPC'][:1]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        client = ClientFactory(ClientConfig(
            streaming=False, httpx_client=http, supported_protocol_bindings=['JSONRPC'],
        )).create(card)
        try:
            while True:
                try:
                    listed = await client.list_tasks(ListTasksRequest(history_length=20))
                except Exception as e:  # noqa: BLE001
                    flow.note = f'cancel not verified: ListTasks failed: {type(e).__name__}: {e}'
                    return
                held = [t for t in listed.tasks
                        if any(mark in x and FINISHED in x for x in task_texts(t))]
                if held and all(t.status.state == TaskState.TASK_STATE_CANCELED for t in held):
                    flow.note = 'held task CANCELED'
                    return
                if time.monotonic() > deadline:
                    states = [TaskState.Name(t.status.state) for t in held]
                    check(held, f'no task of {flow.hops[-1]} carries {mark} and '
                          f'{FINISHED} (ListTasks gave {len(listed.tasks)} tasks)')
                    raise Failure(
                        f'the held task of {flow.hops[-1]} is {states}, want CANCELED '
                        f'5 s after the answer: {flow.hops[-2]} (the caller) must cancel '
                        f'it after reading {FINISHED}, and {flow.hops[-1]} must honour it')
                await asyncio.sleep(0.2)
        finally:
            await client.close()


async def check_pushes(flow: Flow, receiver: Receiver, prefix: str) -> None:
    want_path = f'{prefix}/notifications'
    deadline = time.monotonic() + 10
    while True:
        posts = receiver.under(prefix)
        states = [pushed_state_and_texts(b)[0] for _, _, b in posts]
        if any(s in ('TASK_STATE_COMPLETED', 'completed') for s in states):
            break
        check(time.monotonic() < deadline,
              f'no COMPLETED push within 10 s of the answer; got {len(posts)} '
              f'posts, states {states}, paths {sorted({p for p, _, _ in posts})}')
        await asyncio.sleep(0.1)
    bad_paths = sorted({p for p, _, _ in posts if p != want_path})
    check(not bad_paths, f'pushes went to {bad_paths}, want {want_path}')
    tokens = sorted({h.get('x-a2a-notification-token', '(none)') for _, h, _ in posts})
    check(tokens == [TOKEN], f'X-A2A-Notification-Token values {tokens}, want {TOKEN}')
    final = [pushed_state_and_texts(b) for _, _, b in posts]
    done_texts = [t for s, ts in final if s in ('TASK_STATE_COMPLETED', 'completed') for t in ts]
    callee_mark = flow.marks[-1]
    check(any(callee_mark in t for t in done_texts),
          f'the COMPLETED push does not carry {callee_mark}: {done_texts!r}')
    done_at = next(i for i, s in enumerate(states) if s in ('TASK_STATE_COMPLETED', 'completed'))
    check(any(s not in ('', 'TASK_STATE_COMPLETED', 'completed') for s in states[:done_at]),
          f'no push of an intermediate state (submitted/working) before COMPLETED: {states}')
    shapes = sorted({next(iter(b)) if isinstance(b, dict) and b else '?' for _, _, b in posts})
    flow.note = f'{len(posts)} pushes, states {states}, body keys {shapes}'


# ------------------------------------------------------------------ matrix

def matrix(agents: dict[str, str]) -> list[Flow]:
    flows: list[Flow] = []
    pairs = [('P', 'H'), ('H', 'P'), ('J', 'H'), ('H', 'J'), ('H', 'H'),
             ('P3', 'H'), ('H', 'P3'), ('J3', 'H'), ('H', 'J3')]
    for caller, callee in pairs:
        for transport in BINDING_OF:
            for behaviour in BEHAVIOURS:
                flows.append(Flow(f'{caller}->{callee} {transport} {behaviour}',
                                  [caller, callee], transport, behaviour))
    for chain in (['P', 'H', 'J'], ['J', 'H', 'P']):
        for transport in BINDING_OF:
            for behaviour in ('send', 'stream'):
                flows.append(Flow(f'{"->".join(chain)} {transport} {behaviour}',
                                  chain, transport, behaviour))
    for callee in ('P', 'J'):
        for transport in BINDING_OF:
            for behaviour in ('send', 'stream'):
                flows.append(Flow(f'H->{callee} {transport} {behaviour} v0.3-in',
                                  ['H', callee], transport, behaviour, first_version='0.3'))
    for agent in ('H', 'P', 'J'):
        flows.append(Flow(f'driver->{agent} card', [agent], 'jsonrpc', 'card'))
        for behaviour in ('bad-instruction', 'unreachable'):
            flows.append(Flow(f'driver->{agent} jsonrpc {behaviour}', [agent], 'jsonrpc',
                              behaviour))
        for transport in BINDING_OF:
            for behaviour in ('hold', 'resubscribe-snapshot'):
                flows.append(Flow(f'driver->{agent} {transport} {behaviour}',
                                  [agent], transport, behaviour))
    flows.append(Flow('H->P jsonrpc send b64-text-in', ['H', 'P'], 'jsonrpc', 'send',
                      as_text=True))
    return flows


def known_limit(flow: Flow) -> str | None:
    for i in range(len(flow.hops) - 1):
        hop = (flow.hops[i], flow.hops[i + 1], flow.transport, flow.behaviour)
        for key, why in KNOWN_LIMITS.items():
            if all(k is None or k == h for k, h in zip(key, hop)):
                return why
    return None


async def served_transports(urls: dict[str, str], legacy: bool = False
                            ) -> dict[str, set[str]]:
    """The bindings each agent's card lists for protocol 1.0 (or 0.3)."""
    out: dict[str, set[str]] = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for name, url in urls.items():
            try:
                card = await A2ACardResolver(http, url).get_agent_card()
                out[name] = {TRANSPORT_OF[i.protocol_binding] for i in card.supported_interfaces
                             if i.protocol_binding in TRANSPORT_OF
                             and is_legacy_version(i.protocol_version) == legacy}
            except Exception as e:  # noqa: BLE001
                print(f'itk: cannot read the card of {name} at {url}: {e}', flush=True)
                out[name] = set()
    return out


async def main_async(args) -> int:
    urls = dict(a.split('=', 1) for a in args.agent)
    served = await served_transports(urls)
    served_03 = await served_transports(urls, legacy=True)
    receiver = Receiver()
    sem = asyncio.Semaphore(args.jobs)
    results = {'PASS': 0, 'FAIL': 0, 'SKIP': 0}

    async def one(flow: Flow) -> None:
        missing = [a for a in flow.hops if a not in urls]
        if missing:
            results['SKIP'] += 1
            print(f'SKIP {flow.name}: agent {",".join(sorted(set(missing)))} not started', flush=True)
            return
        by_version = {'1.0': served, '0.3': served_03}
        for callee in flow.hops[1:]:
            version = version_of(callee)
            if flow.transport not in by_version[version][callee]:
                results['SKIP'] += 1
                print(f'SKIP {flow.name}: {callee} does not serve {flow.transport} '
                      f'{version}', flush=True)
                return
        version = first_version(flow)
        if flow.transport not in by_version[version][flow.hops[0]]:
            results['SKIP'] += 1
            print(f'SKIP {flow.name}: {flow.hops[0]} does not serve {flow.transport} '
                  f'{version} for the first hop', flush=True)
            return
        why = known_limit(flow)
        if why:
            results['SKIP'] += 1
            print(f'SKIP {flow.name}: {why}', flush=True)
            return
        # Held tasks mostly wait: they do not take one of the --jobs slots.
        async with (contextlib.nullcontext() if flow.behaviour == 'hold' else sem):
            started = time.monotonic()
            try:
                await run_flow(flow, urls, receiver, args.timeout)
                results['PASS'] += 1
                notes = [flow.note] if flow.note else []
                if args.verbose:
                    notes.append(f'{time.monotonic() - started:.1f} s')
                print(f'PASS {flow.name}' + (f' ({"; ".join(notes)})' if notes else ''),
                      flush=True)
            except Exception as e:  # noqa: BLE001
                results['FAIL'] += 1
                why = ' '.join(str(e).split()) or type(e).__name__
                if not isinstance(e, Failure):
                    why = f'{type(e).__name__}: {why}'
                print(f'FAIL {flow.name}: {why[:1500]}', flush=True)
                if args.verbose:
                    traceback.print_exc(file=sys.stderr)

    flows = [f for f in matrix(urls) if not args.only or any(o in f.name for o in args.only)]
    try:
        await asyncio.gather(*(one(f) for f in flows))
    finally:
        receiver.close()
    if results['SKIP']:
        print(f'itk: {results["SKIP"]} skipped', flush=True)
    print(f'itk: {results["PASS"]} passed, {results["FAIL"]} failed', flush=True)
    return 1 if results['FAIL'] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--agent', action='append', default=[],
                        help='NAME=BASE_URL (NAME: H, P or J); repeat')
    parser.add_argument('--only', action='append', default=[],
                        help='run only flows whose name contains this; repeat')
    parser.add_argument('--jobs', type=int, default=8, help='flows at once')
    parser.add_argument('--timeout', type=float, default=45.0, help='seconds a flow')
    parser.add_argument('-v', '--verbose', action='store_true')
    parser.add_argument('--standin', action='store_true',
                        help='H is a copy of the Python SDK agent (itk_run.sh ITK_STANDIN=1)')
    args = parser.parse_args()
    if args.standin:
        for transport in ('grpc', 'http_json'):
            KNOWN_LIMITS[('J3', 'H', transport, None)] = (
                'H stands in as the Python SDK agent: ' + PY03_FILE_BYTES)
    if not args.agent:
        parser.error('give at least one --agent NAME=URL')
    return asyncio.run(main_async(args))


if __name__ == '__main__':
    sys.exit(main())
