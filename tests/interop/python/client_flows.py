"""Interop flows: the official Python A2A SDK (a2a-sdk 1.x) against `heddle serve`.

Usage: client_flows.py BASE_URL VERSION
  BASE_URL  e.g. http://127.0.0.1:8080/api/v1/agents  (agents live at BASE_URL/{id})
  VERSION   "1.0"  -> the SDK's native JsonRpcTransport (A2A-Version: 1.0)
            "0.3"  -> the SDK's v0.3 compatibility transport (CompatJsonRpcTransport),
                      selected by ClientFactory because the card handed to it only
                      lists the agent's protocolVersion "0.3" interface.

Prints `PASS python-v1 echo` (or FAIL ...) per flow; exits 1 if any flow failed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskNotCancelableError,
    TaskState,
)

# A tiny but well-formed PDF (one empty page).
PDF_BYTES = (
    b'%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n'
    b'2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n'
    b'3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n'
    b'trailer<</Root 1 0 R>>\n%%EOF\n'
)
STREAM_TEXT = (
    'Report, part one: the findings. '
    'Part two: what they mean. '
    'Part three: what to do next.'
)
WRITER_ANSWER = 'For the board, one page.'
CANCEL_PREFIX = 'test-resubscribe-message-id'


class Failure(AssertionError):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def state_name(state: int) -> str:
    return TaskState.Name(state)


def text_of(parts) -> str:
    return ''.join(p.text for p in parts if p.WhichOneof('content') == 'text')


def user_message(*parts: Part, task_id: str = '', context_id: str = '',
                 message_id: str | None = None) -> Message:
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=list(parts),
        task_id=task_id,
        context_id=context_id,
    )


class Runner:
    def __init__(self, base: str, version: str) -> None:
        self.base = base.rstrip('/')
        self.version = version
        self.legacy = version == '0.3'
        self.label = 'python-v1' if version == '1.0' else 'python-v0.3'
        self.failed = 0
        self.wire: list[tuple[str, str]] = []  # (A2A-Version header, method)
        self.http = httpx.AsyncClient(
            timeout=30.0, event_hooks={'request': [self._record]}
        )
        self.echo_task: Task | None = None
        self.writer_task_id = ''

    async def _record(self, request: httpx.Request) -> None:
        if request.method == 'POST':
            body = json.loads(request.content or b'{}')
            self.wire.append(
                (request.headers.get('A2A-Version', ''), body.get('method', ''))
            )

    def agent_url(self, agent: str) -> str:
        return f'{self.base}/{agent}'

    async def client(self, agent: str, *, streaming: bool):
        """Card discovery with the SDK's resolver, client from ClientFactory."""
        resolver = A2ACardResolver(self.http, self.agent_url(agent))
        card = await resolver.get_agent_card()
        if self.legacy:
            # A v0.3 client: keep only the interfaces the card advertises for
            # protocol 0.3 so the factory negotiates the compat transport.
            legacy = [
                i for i in card.supported_interfaces
                if is_legacy_version(i.protocol_version)
            ]
            check(legacy, f'{agent} card has no protocolVersion 0.3 interface')
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(legacy)
        factory = ClientFactory(
            ClientConfig(streaming=streaming, httpx_client=self.http)
        )
        client = factory.create(card)
        want = 'CompatJsonRpcTransport' if self.legacy else 'JsonRpcTransport'
        got = type(client._transport).__name__  # sanity check of negotiation
        check(got == want, f'factory chose {got}, wanted {want}')
        return client

    def check_wire(self, since: int) -> None:
        """Every JSON-RPC request since `since` used this run's protocol."""
        for header, method in self.wire[since:]:
            if self.legacy:
                check(header == '0.3' and '/' in method,
                      f'v0.3 run sent {method!r} with A2A-Version {header!r}')
            else:
                check(header == '1.0' and '/' not in method,
                      f'v1.0 run sent {method!r} with A2A-Version {header!r}')

    async def send_blocking(self, client, message: Message,
                            return_immediately: bool = False) -> Task:
        request = SendMessageRequest(
            message=message,
            configuration=SendMessageConfiguration(
                return_immediately=return_immediately
            ),
        )
        events = [e async for e in client.send_message(request)]
        check(len(events) == 1, f'non-streaming send gave {len(events)} events')
        check(events[0].HasField('task'),
              f'send result is not a task: {events[0]}')
        return events[0].task

    # ---------------------------------------------------------------- flows

    async def flow_card(self) -> None:
        """The dual card: v1.0 interfaces plus the v0.3 top-level fields."""
        url = f'{self.agent_url("echo")}/.well-known/agent-card.json'
        response = await self.http.get(url)
        response.raise_for_status()
        raw = response.json()
        card = parse_agent_card(json.loads(json.dumps(raw)))
        versions = sorted({i.protocol_version for i in card.supported_interfaces})
        check(versions == ['0.3', '1.0'],
              f'supportedInterfaces versions are {versions}')
        bindings = sorted({i.protocol_binding for i in card.supported_interfaces})
        check(bindings == ['GRPC', 'HTTP+JSON', 'JSONRPC'],
              f'supportedInterfaces bindings are {bindings}')
        # What a v0.3-only reader sees: drop supportedInterfaces and let the
        # SDK's legacy mapping build the interface from url/protocolVersion.
        legacy_only = {k: v for k, v in raw.items() if k != 'supportedInterfaces'}
        legacy_card = parse_agent_card(legacy_only)
        check(len(legacy_card.supported_interfaces) >= 1,
              'v0.3 view of the card has no interface')
        iface = legacy_card.supported_interfaces[0]
        check(iface.protocol_binding == 'JSONRPC' and
              is_legacy_version(iface.protocol_version),
              f'v0.3 view of the card: {iface}')
        v03 = [i for i in card.supported_interfaces if i.protocol_version == '0.3']
        check(iface.url == v03[0].url,
              f'card url {iface.url} != 0.3 interface url {v03[0].url}')

    async def flow_echo(self) -> None:
        client = await self.client('echo', streaming=False)
        task = await self.send_blocking(client, user_message(Part(text='hello')))
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'echo state {state_name(task.status.state)}')
        check(len(task.artifacts) == 1,
              f'echo has {len(task.artifacts)} artifacts')
        got = text_of(task.artifacts[0].parts)
        check(got == 'hello', f'echo artifact text {got!r}')
        self.echo_task = task

    async def flow_writer(self) -> None:
        client = await self.client('writer', streaming=False)
        first = await self.send_blocking(client, user_message(
            Part(text='Please write a report on the attached notes.'),
            Part(raw=PDF_BYTES, media_type='application/pdf',
                 filename='notes.pdf'),
        ))
        check(first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
              f'writer first state {state_name(first.status.state)}')
        question = text_of(first.status.message.parts)
        check(question.strip() != '', 'INPUT_REQUIRED without a question')
        second = await self.send_blocking(client, user_message(
            Part(text=WRITER_ANSWER),
            task_id=first.id, context_id=first.context_id,
        ))
        check(second.id == first.id, 'second turn made a new task')
        check(second.status.state == TaskState.TASK_STATE_COMPLETED,
              f'writer second state {state_name(second.status.state)}')
        reports = [a for a in second.artifacts if a.name == 'report']
        check(len(reports) == 1,
              f'artifacts {[a.name for a in second.artifacts]}, want one "report"')
        report = text_of(reports[0].parts)
        check(WRITER_ANSWER in report,
              f'report does not mention the answer: {report!r}')
        self.writer_task_id = first.id

    async def flow_stream(self) -> None:
        client = await self.client('writer-stream', streaming=True)
        request = SendMessageRequest(
            message=user_message(Part(text='Write the report.')))
        kinds: list[str] = []
        artifacts: dict[str, list] = {}
        last_chunk_seen = False
        final_state = None
        task_id = ''
        async for event in client.send_message(request):
            kind = event.WhichOneof('payload')
            kinds.append(kind)
            if kind == 'task':
                task_id = event.task.id
                final_state = event.task.status.state
            elif kind == 'status_update':
                check(event.status_update.task_id == task_id,
                      'status update for another task')
                final_state = event.status_update.status.state
                if 'artifact_update' not in kinds:
                    check(final_state == TaskState.TASK_STATE_WORKING,
                          f'status before the artifacts is {state_name(final_state)}')
            elif kind == 'artifact_update':
                up = event.artifact_update
                check(up.task_id == task_id, 'artifact update for another task')
                check(not last_chunk_seen, 'chunk after lastChunk')
                aid = up.artifact.artifact_id
                if up.append:
                    check(aid in artifacts, 'append to an unknown artifact')
                    artifacts[aid].extend(up.artifact.parts)
                else:
                    artifacts[aid] = list(up.artifact.parts)
                last_chunk_seen = up.last_chunk
            else:
                raise Failure(f'unexpected stream event {kind}')
        check(kinds and kinds[0] == 'task', f'first event is {kinds[:1]}')
        check(kinds.count('artifact_update') == 3,
              f'{kinds.count("artifact_update")} artifact chunks, want 3')
        check(last_chunk_seen, 'no chunk had lastChunk=true')
        first_art = kinds.index('artifact_update')
        check('status_update' in kinds[:first_art],
              f'no WORKING status before the artifacts: {kinds}')
        check(kinds[-1] == 'status_update', f'stream ended with {kinds[-1]}')
        check(final_state == TaskState.TASK_STATE_COMPLETED,
              f'stream final state {state_name(final_state or 0)}')
        check(len(artifacts) == 1, f'{len(artifacts)} artifacts')
        text = text_of(next(iter(artifacts.values())))
        check(text == STREAM_TEXT, f'accumulated {text!r}')

    async def flow_get(self) -> None:
        check(self.writer_task_id != '', 'writer flow did not run')
        client = await self.client('writer', streaming=False)
        task = await client.get_task(
            GetTaskRequest(id=self.writer_task_id, history_length=1))
        check(task.id == self.writer_task_id, 'GetTask returned another task')
        check(len(task.history) == 1,
              f'historyLength 1 gave {len(task.history)} messages')
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'writer task state {state_name(task.status.state)}')

    async def flow_list(self) -> None:
        check(self.echo_task is not None, 'echo flow did not run')
        client = await self.client('echo', streaming=False)
        # A second echo task so that pageSize 1 needs at least two pages.
        await self.send_blocking(client, user_message(Part(text='again')))
        listed = await client.list_tasks(ListTasksRequest())
        all_ids = [t.id for t in listed.tasks]
        check(self.echo_task.id in all_ids,
              'ListTasks does not contain the echo task')
        seen: list[str] = []
        token = ''
        pages = 0
        while True:
            page = await client.list_tasks(
                ListTasksRequest(page_size=1, page_token=token))
            pages += 1
            check(len(page.tasks) <= 1, f'pageSize 1 gave {len(page.tasks)}')
            seen.extend(t.id for t in page.tasks)
            token = page.next_page_token
            if not token:
                break
            check(pages < 1000, 'page chain does not end')
        check(pages >= 2, f'pageSize 1 over {len(all_ids)} tasks gave 1 page')
        check(len(seen) == len(set(seen)), 'a task appeared on two pages')
        if not listed.next_page_token:  # the unpaged call returned them all
            check(set(seen) == set(all_ids),
                  'paged ids differ from the unpaged list')

    async def flow_cancel(self) -> str:
        check(self.echo_task is not None, 'echo flow did not run')
        client = await self.client('conformance', streaming=False)
        # v1.0: this messageId prefix keeps the conformance agent WORKING for
        # ~10 s. v0.3: any message is WORKING for ~1.5 s (then INPUT_REQUIRED).
        message_id = (str(uuid.uuid4()) if self.legacy
                      else f'{CANCEL_PREFIX}-{uuid.uuid4()}')
        task = await self.send_blocking(
            client,
            user_message(Part(text='cancel me'), message_id=message_id),
            return_immediately=True,
        )
        check(task.status.state in (TaskState.TASK_STATE_SUBMITTED,
                                     TaskState.TASK_STATE_WORKING),
              f'non-blocking send state {state_name(task.status.state)}')
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        check(canceled.id == task.id, 'cancel returned another task')
        check(canceled.status.state == TaskState.TASK_STATE_CANCELED,
              f'after cancel: {state_name(canceled.status.state)}')
        # Cancel again: the task is already CANCELED. Record what happens.
        try:
            again = await client.cancel_task(CancelTaskRequest(id=task.id))
            again_note = f'second cancel -> task {state_name(again.status.state)}'
        except Exception as e:  # noqa: BLE001 - recording, not asserting
            again_note = f'second cancel -> {type(e).__name__}'
        # Cancel a COMPLETED task: TaskNotCancelable (-32002).
        echo_client = await self.client('echo', streaming=False)
        try:
            got = await echo_client.cancel_task(
                CancelTaskRequest(id=self.echo_task.id))
            raise Failure('canceling a completed task returned '
                          f'{state_name(got.status.state)}, want TaskNotCancelable')
        except TaskNotCancelableError:
            pass
        return again_note

    async def run(self) -> int:
        flows = [
            ('card', self.flow_card),
            ('echo', self.flow_echo),
            ('writer', self.flow_writer),
            ('stream', self.flow_stream),
            ('get', self.flow_get),
        ]
        if not self.legacy:
            flows.append(('list', self.flow_list))  # no ListTasks in v0.3
        flows.append(('cancel', self.flow_cancel))
        for name, flow in flows:
            since = len(self.wire)
            try:
                note = await asyncio.wait_for(flow(), timeout=60)
                self.check_wire(since)
                print(f'PASS {self.label} {name}' + (f' ({note})' if note else ''),
                      flush=True)
            except Exception as e:  # noqa: BLE001
                self.failed += 1
                why = ' '.join(str(e).split())
                print(f'FAIL {self.label} {name}: {type(e).__name__}: {why}',
                      flush=True)
                traceback.print_exc(file=sys.stderr)
        await self.http.aclose()
        return 1 if self.failed else 0


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[2] not in ('1.0', '0.3'):
        print(__doc__, file=sys.stderr)
        return 2
    return asyncio.run(Runner(sys.argv[1], sys.argv[2]).run())


if __name__ == '__main__':
    sys.exit(main())
