"""Push notification interop: the official Python A2A SDK registers a webhook
against `heddle serve` and the deliveries parse with the SDK's own types.

Usage: push_flows.py BASE_URL VERSION [BINDING]
  (as client_flows.py; the server must allow pushes to 127.0.0.1 over http:
   `heddle serve --push-allow 127.0.0.1/32 --push-allow-http`)

The flow, on the writer agent: send (INPUT_REQUIRED), register a webhook on
the task with the SDK's create call (v1.0 TaskPushNotificationConfig; the
SDK's compat layer turns it into v0.3 `set` on 0.3 runs), read it back with
get and list, answer the question, then wait for the deliveries:
  1.0: each body parses as the SDK's `StreamResponse` (json_format.Parse),
       the last is a statusUpdate COMPLETED;
  0.3: each body parses as the SDK's v0.3 `Task` model, the last COMPLETED
       with the report artifact.
Every delivery must carry the config's token and credentials and a distinct
X-A2A-Delivery-Id. Finally delete the config and list again (empty).

Prints `PASS push-<label> writer-webhook` or FAIL; exits 1 on failure.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format

from a2a.compat.v0_3 import types as v03
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Part,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)

from client_flows import LABELS, Failure, Runner, check, state_name, user_message

TOKEN = 'interop-token'
CREDENTIALS = 'interop-credentials'


class Inbox:
    """A webhook receiver on 127.0.0.1 recording (headers, body) per POST."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(length)
                with inbox.lock:
                    inbox.deliveries.append(
                        ({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}/hook'

    def snapshot(self) -> list[tuple[dict[str, str], bytes]]:
        with self.lock:
            return list(self.deliveries)

    def close(self) -> None:
        self.server.shutdown()


def final_state(version: str, body: bytes):
    """The task state a delivery reports, parsed with the SDK's types."""
    if version == '0.3':
        task = v03.Task.model_validate_json(body)
        return task, task.status.state.value
    event = json_format.Parse(body, StreamResponse())
    kind = event.WhichOneof('payload')
    if kind == 'task':
        return event, state_name(event.task.status.state)
    if kind == 'status_update':
        return event, state_name(event.status_update.status.state)
    return event, None


async def flow(runner: Runner, inbox: Inbox) -> None:
    client = await runner.client('writer', streaming=False)
    first = await runner.send_blocking(
        client, user_message(Part(text='Please write a report.')))
    check(first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
          f'writer first state {state_name(first.status.state)}')
    created = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(
            task_id=first.id,
            id='interop-hook',
            url=inbox.url,
            token=TOKEN,
            authentication=AuthenticationInfo(scheme='Bearer', credentials=CREDENTIALS),
        ))
    check(created.url == inbox.url, f'created config url {created.url!r}')
    check(created.id == 'interop-hook', f'created config id {created.id!r}')
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=first.id, id='interop-hook'))
    check(got.url == inbox.url and got.token == TOKEN, f'get returned {got}')
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=first.id))
    check([c.id for c in listed.configs] == ['interop-hook'], f'list returned {listed}')

    second = await runner.send_blocking(client, user_message(
        Part(text='For the board, one page.'),
        task_id=first.id, context_id=first.context_id))
    check(second.status.state == TaskState.TASK_STATE_COMPLETED,
          f'writer second state {state_name(second.status.state)}')

    done = 'completed' if runner.legacy else 'TASK_STATE_COMPLETED'
    deadline = time.monotonic() + 15
    while True:
        deliveries = inbox.snapshot()
        states = [final_state(runner.version, body)[1] for _, body in deliveries]
        if done in states:
            break
        check(time.monotonic() < deadline,
              f'no COMPLETED delivery within 15 s; got states {states}')
        await asyncio.sleep(0.1)
    ids = [h.get('x-a2a-delivery-id') for h, _ in deliveries]
    check(all(ids) and len(set(ids)) == len(ids), f'delivery ids {ids}')
    for headers, _ in deliveries:
        check(headers.get('x-a2a-notification-token') == TOKEN,
              f'token header {headers.get("x-a2a-notification-token")!r}')
        check(headers.get('authorization') == f'Bearer {CREDENTIALS}',
              'Authorization header is not the config\'s credentials')
        want_type = 'application/json' if runner.legacy else 'application/a2a+json'
        check(headers.get('content-type', '').startswith(want_type),
              f'content type {headers.get("content-type")!r}')
    check(states[-1] == done, f'last delivery state {states[-1]}, all {states}')
    last, _ = final_state(runner.version, deliveries[-1][1])
    if runner.legacy:
        check(last.id == first.id, 'delivered task is another task')
        check([a.name for a in last.artifacts] == ['report'],
              f'delivered task artifacts {[a.name for a in last.artifacts]}')
    else:
        check(last.status_update.task_id == first.id, 'delivered event is about another task')
        kinds = [json_format.Parse(b, StreamResponse()).WhichOneof('payload')
                 for _, b in deliveries]
        check('artifact_update' in kinds, f'no artifact delivery: {kinds}')

    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=first.id, id='interop-hook'))
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=first.id))
    check(len(listed.configs) == 0, f'list after delete returned {listed}')


async def run(base: str, version: str, binding: str) -> int:
    runner = Runner(base, version, binding)
    label = f'push-{runner.label}'
    inbox = Inbox()
    try:
        await flow(runner, inbox)
        print(f'PASS {label} writer-webhook', flush=True)
        return 0
    except Failure as e:
        print(f'FAIL {label} writer-webhook: {e}', flush=True)
    except Exception:  # noqa: BLE001 (report anything the SDK raised)
        print(f'FAIL {label} writer-webhook: {traceback.format_exc()}', flush=True)
    finally:
        inbox.close()
    return 1


def main() -> int:
    args = sys.argv[1:]
    if len(args) == 2:
        args.append('JSONRPC')
    if len(args) != 3 or (args[2], args[1]) not in LABELS:
        print(__doc__, file=sys.stderr)
        return 2
    return asyncio.run(run(*args))


if __name__ == '__main__':
    sys.exit(main())
