"""Assertions on the `heddle` CLI's `-o json` output, for client_run.sh.

Usage: client_check.py CHECK FILE [ARGS...]
  task FILE STATE [--artifact TEXT | --artifact-contains TEXT] [--id ID] [--question]
      FILE holds one JSON task; its status.state is TASK_STATE_<STATE>; with
      --artifact its only artifact's text is exactly TEXT; with
      --artifact-contains some artifact's text contains TEXT; with --id the
      task id is ID; with --question the status message has text.
      Prints the task id.
  stream FILE TEXT
      FILE holds JSON Lines (one StreamResponse each: task / statusUpdate /
      artifactUpdate / message). The first is the task; a WORKING status comes
      before the artifact; the artifact chunks, accumulated honouring
      append/lastChunk, give exactly one artifact with text TEXT in 3 chunks,
      the last one with lastChunk; the last event is a COMPLETED status.
      Prints the task id.
  first-task-id FILE
      The task id in the first JSON line of a stream (waits for nothing).
  last-state FILE
      The last task state seen in a JSON Lines stream (or "none").
  list FILE ID...
      FILE holds a ListTasks response whose tasks include every ID.
  push-config FILE TASK_ID [--id ID] [--url URL] [--token TOKEN] [--auth SCHEME]
      FILE holds one push notification config of task TASK_ID with a
      non-empty id (ID when given), and the given url, token and
      authentication scheme. Prints its id.
  push-list FILE ID...
      FILE holds a push config list whose config ids are exactly the IDs.
      Prints the count.
  polled FILE TEXT
      FILE holds JSON Lines of a polled stream: every event is a task
      snapshot of one task, the last one COMPLETED with one artifact whose
      text is TEXT. Prints the number of snapshots.
  card FILE GRPC_PORT
      FILE holds `heddle card get -o json`: the card lists JSONRPC and
      HTTP+JSON for 1.0 and 0.3 and GRPC at 127.0.0.1:GRPC_PORT. Prints the
      interfaces.
  wire-summary FILE
      The first request in `--debug` stderr: "POST /path A2A-Version v method".
  wire FILE VERSION BINDING
      FILE holds the `--debug` stderr. Every request was a POST (JSON-RPC) or
      went to a v1.0 REST path, with the method names / paths and the
      A2A-Version header of VERSION (1.0: header "1.0", PascalCase methods;
      0.3: no 1.0 header, slash methods). With BINDING grpc: every
      `> gRPC Method URL` call has a PascalCase method, `a2a-version: VERSION`
      metadata, and the version's proto shape (v1.0 Message.parts and
      GetTask/CancelTask {id}; v0.3 Message.content and {name: tasks/ID}).
      Prints a short summary.

Exits 1 with a one-line reason on failure.
"""

from __future__ import annotations

import json
import re
import sys


class Failure(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def load_one(path: str) -> dict:
    with open(path, encoding='utf-8') as f:
        text = f.read().strip()
    check(text != '', 'no output')
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f'output is not one JSON object: {e}: {text[:200]!r}') from e


def load_lines(path: str) -> list[dict]:
    events = []
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise Failure(f'line {n} is not JSON: {e}: {line[:200]!r}') from e
    return events


def text_of(parts) -> str:
    return ''.join(p.get('text', '') for p in parts or [])


def state_of(task: dict) -> str:
    return (task.get('status') or {}).get('state', '')


def cmd_task(path: str, state: str, *opts: str) -> None:
    task = load_one(path)
    check('id' in task and 'status' in task,
          f'not a task: keys {sorted(task)}')
    want = f'TASK_STATE_{state}'
    check(state_of(task) == want, f'state {state_of(task)!r}, want {want}')
    artifacts = task.get('artifacts') or []
    args = list(opts)
    while args:
        opt = args.pop(0)
        if opt == '--artifact':
            text = args.pop(0)
            check(len(artifacts) == 1, f'{len(artifacts)} artifacts, want 1')
            got = text_of(artifacts[0].get('parts'))
            check(got == text, f'artifact text {got!r}, want {text!r}')
        elif opt == '--artifact-contains':
            text = args.pop(0)
            texts = [text_of(a.get('parts')) for a in artifacts]
            check(any(text in t for t in texts),
                  f'no artifact contains {text!r}: {texts}')
        elif opt == '--id':
            want_id = args.pop(0)
            check(task['id'] == want_id, f'task id {task["id"]}, want {want_id}')
        elif opt == '--question':
            question = text_of(((task.get('status') or {}).get('message') or {}).get('parts'))
            check(question.strip() != '', f'{state} without a question in status.message')
        else:
            raise SystemExit(f'unknown option {opt}')
    print(task['id'])


def cmd_stream(path: str, text: str) -> None:
    events = load_lines(path)
    check(events, 'no stream events')
    kinds = [next(iter(e)) if len(e) == 1 else '?' for e in events]
    if '?' in kinds:
        raise Failure(f'an event is not a one-key StreamResponse: {events[kinds.index("?")]}')
    check(kinds[0] == 'task', f'first event is {kinds[0]}, want task')
    task_id = events[0]['task']['id']
    artifacts: dict[str, list] = {}
    chunks = 0
    last_chunk_seen = False
    working_before_artifact = False
    state = state_of(events[0]['task'])
    for kind, event in zip(kinds, events):
        body = event[kind]
        if kind == 'statusUpdate':
            check(body.get('taskId') == task_id, 'status update for another task')
            state = state_of(body)
            if chunks == 0 and state == 'TASK_STATE_WORKING':
                working_before_artifact = True
        elif kind == 'artifactUpdate':
            check(body.get('taskId') == task_id, 'artifact update for another task')
            check(not last_chunk_seen, 'a chunk after lastChunk')
            artifact = body.get('artifact') or {}
            aid = artifact.get('artifactId', '')
            if body.get('append', False):
                check(aid in artifacts, f'append=true to unknown artifact {aid!r}')
                artifacts[aid].extend(artifact.get('parts') or [])
            else:
                artifacts[aid] = list(artifact.get('parts') or [])
            chunks += 1
            last_chunk_seen = bool(body.get('lastChunk', False))
        elif kind == 'task':
            check(body.get('id') == task_id, 'a second task in the stream')
            state = state_of(body)
        else:
            raise Failure(f'unexpected stream event {kind}')
    check(working_before_artifact, f'no WORKING status before the artifact: {kinds}')
    check(chunks == 3, f'{chunks} artifact chunks, want 3')
    check(last_chunk_seen, 'the last chunk has no lastChunk=true')
    check(len(artifacts) == 1, f'{len(artifacts)} artifacts, want 1')
    got = text_of(next(iter(artifacts.values())))
    check(got == text, f'accumulated {got!r}, want {text!r}')
    check(kinds[-1] == 'statusUpdate', f'stream ended with {kinds[-1]}')
    check(state == 'TASK_STATE_COMPLETED', f'last state {state}')
    print(task_id)


def cmd_first_task_id(path: str) -> None:
    events = load_lines(path)
    check(events, 'no stream events yet')
    first = events[0]
    if 'task' in first:
        print(first['task']['id'])
    elif 'statusUpdate' in first:
        print(first['statusUpdate']['taskId'])
    else:
        raise Failure(f'first event has no task id: {sorted(first)}')


def cmd_last_state(path: str) -> None:
    state = 'none'
    for event in load_lines(path):
        for kind in ('task', 'statusUpdate'):
            if kind in event:
                state = state_of(event[kind]) or state
    print(state)


def cmd_list(path: str, *ids: str) -> None:
    body = load_one(path)
    check('tasks' in body, f'not a ListTasks response: keys {sorted(body)}')
    listed = {t.get('id') for t in body['tasks']}
    missing = [i for i in ids if i not in listed]
    check(not missing, f'ListTasks ({len(listed)} tasks) lacks {missing}')
    print(len(listed))


def cmd_push_config(path: str, task_id: str, *opts: str) -> None:
    config = load_one(path)
    check(config.get('taskId') == task_id,
          f'config of task {config.get("taskId")!r}, want {task_id}')
    check(config.get('id', '') != '', f'config without an id: {config}')
    want = {'--id': 'id', '--url': 'url', '--token': 'token'}
    args = list(opts)
    while args:
        opt, value = args.pop(0), args.pop(0)
        if opt == '--auth':
            scheme = (config.get('authentication') or {}).get('scheme')
            check(scheme == value, f'authentication scheme {scheme!r}, want {value!r}')
        elif opt in want:
            got = config.get(want[opt], '')
            check(got == value, f'{want[opt]} {got!r}, want {value!r}')
        else:
            raise SystemExit(f'unknown option {opt}')
    print(config['id'])


def cmd_push_list(path: str, *ids: str) -> None:
    body = load_one(path)
    got = sorted(c.get('id', '') for c in body.get('configs') or [])
    check(got == sorted(ids), f'config ids {got}, want {sorted(ids)}')
    print(len(got))


def cmd_polled(path: str, text: str) -> None:
    events = load_lines(path)
    check(events, 'no events')
    kinds = sorted({k for e in events for k in e})
    check(kinds == ['task'], f'polled events are task snapshots only, got {kinds}')
    ids = {e['task'].get('id') for e in events}
    check(len(ids) == 1, f'snapshots of {len(ids)} tasks')
    last = events[-1]['task']
    check(state_of(last) == 'TASK_STATE_COMPLETED', f'last state {state_of(last)}')
    artifacts = last.get('artifacts') or []
    check(len(artifacts) == 1, f'{len(artifacts)} artifacts, want 1')
    got = text_of(artifacts[0].get('parts'))
    check(got == text, f'artifact text {got!r}, want {text!r}')
    print(len(events))


def cmd_wire(path: str, version: str, binding: str) -> None:
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    if binding == 'grpc':
        cmd_wire_grpc(lines, version)
        return
    requests = []  # [method, url, headers, body]
    for line in lines:
        m = re.match(r'^> (GET|POST|PUT|DELETE) (\S+)$', line)
        if m:
            requests.append([m.group(1), m.group(2), [], None])
        elif line.startswith('> ') and requests:
            content = line[2:]
            if content.startswith('{'):
                requests[-1][3] = content
            else:
                requests[-1][2].append(content)
    check(requests, 'no requests in the --debug output')
    seen = []
    for verb, url, headers, body in requests:
        header_versions = [h.split(':', 1)[1].strip() for h in headers
                           if h.lower().startswith('a2a-version:')]
        if version == '1.0':
            check(header_versions == ['1.0'],
                  f'{verb} {url}: A2A-Version headers {header_versions}, want ["1.0"]')
        else:
            check('1.0' not in header_versions,
                  f'{verb} {url}: v0.3 run sent A2A-Version {header_versions}')
        if binding == 'jsonrpc':
            check(verb == 'POST' and body is not None, f'JSON-RPC request {verb} {url} without a body')
            method = json.loads(body).get('method', '')
            if version == '1.0':
                check(re.fullmatch(r'[A-Z][A-Za-z]+', method or '') is not None,
                      f'v1.0 run sent method {method!r}')
            else:
                check('/' in method, f'v0.3 run sent method {method!r}')
            seen.append(method)
        else:
            path_part = re.sub(r'^https?://[^/]+', '', url)
            if version == '1.0':
                check('/v1/' not in path_part, f'REST v1.0 run used a v0.3 path {path_part}')
            else:
                check('/v1/' in path_part, f'REST v0.3 run used a v1.0 path {path_part}')
            path_part = re.sub(r'^.*?/(message:|tasks)', r'/\1', path_part)
            seen.append(f'{verb} ' + re.sub(r'/tasks/[^/:?]+', '/tasks/{id}', path_part))
    print(', '.join(seen))


def cmd_wire_grpc(lines: list[str], version: str) -> None:
    """`--debug` of the gRPC transport: `> gRPC Method URL`, then `> key: value`
    metadata lines and `> {json}` (the request message as proto JSON)."""
    calls = []  # [method, url, metadata, body]
    for line in lines:
        m = re.match(r'^> gRPC (\S+) (\S+)$', line)
        if m:
            calls.append([m.group(1), m.group(2), [], None])
        elif line.startswith('> ') and calls:
            content = line[2:]
            if content.startswith('{'):
                calls[-1][3] = content
            else:
                calls[-1][2].append(content)
    check(calls, 'no gRPC calls in the --debug output')
    seen = []
    for method, url, metadata, body in calls:
        check(re.fullmatch(r'[A-Z][A-Za-z]+', method) is not None,
              f'gRPC method {method!r} is not a PascalCase RPC name')
        versions = [h.split(':', 1)[1].strip() for h in metadata
                    if h.lower().startswith('a2a-version:')]
        check(versions == [version],
              f'gRPC {method}: a2a-version metadata {versions}, want [{version!r}]')
        check(body is not None, f'gRPC {method} without a logged request')
        req = json.loads(body)
        message = req.get('message')
        if message is not None:
            # v1.0 Message.parts; v0.3 (a2a.v1 proto) Message.content.
            key, other = ('parts', 'content') if version == '1.0' else ('content', 'parts')
            check(key in message and other not in message,
                  f'gRPC {method} v{version}: message keys {sorted(message)}, want {key!r}')
        if method in ('GetTask', 'CancelTask'):
            # v1.0 {id}; v0.3 {name: "tasks/ID"}.
            if version == '1.0':
                check('id' in req and 'name' not in req, f'gRPC {method} v1.0 request {req}')
            else:
                check(str(req.get('name', '')).startswith('tasks/'),
                      f'gRPC {method} v0.3 request {req}, want name tasks/ID')
        seen.append(f'{method} a2a-version {version}')
    print(', '.join(seen))


def cmd_card(path: str, grpc_port: str) -> None:
    card = load_one(path)
    interfaces = [(i.get('protocolBinding'), i.get('protocolVersion'), i.get('url'))
                  for i in card.get('supportedInterfaces') or []]
    have = {(b, v) for b, v, _ in interfaces}
    for want in [('JSONRPC', '1.0'), ('HTTP+JSON', '1.0'), ('JSONRPC', '0.3'),
                 ('GRPC', '1.0')]:
        check(want in have, f'card lacks {want[0]} {want[1]}: {sorted(have)}')
    grpc = {u for b, _, u in interfaces if b == 'GRPC'}
    check(grpc == {f'127.0.0.1:{grpc_port}'}, f'GRPC interface urls {grpc}')
    print(' '.join(f'{b}/{v}' for b, v, _ in interfaces))


def cmd_wire_summary(path: str) -> None:
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    verb = url = version = method = ''
    for line in lines:
        m = re.match(r'^> (GET|POST|PUT|DELETE) (\S+)$', line)
        if m:
            if url:
                break
            verb, url = m.group(1), re.sub(r'^https?://[^/]+', '', m.group(2))
        elif line.lower().startswith('> a2a-version:'):
            version = line.split(':', 1)[1].strip()
        elif line.startswith('> {') and url:
            method = json.loads(line[2:]).get('method', '')
    check(url != '', 'no request in the --debug output')
    print(f'{verb} {url} A2A-Version {version or "(none)"}' +
          (f' {method}' if method else ''))


COMMANDS = {
    'card': cmd_card,
    'wire-summary': cmd_wire_summary,
    'task': cmd_task,
    'stream': cmd_stream,
    'first-task-id': cmd_first_task_id,
    'last-state': cmd_last_state,
    'list': cmd_list,
    'push-config': cmd_push_config,
    'push-list': cmd_push_list,
    'polled': cmd_polled,
    'wire': cmd_wire,
}


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        COMMANDS[sys.argv[1]](*sys.argv[2:])
    except Failure as e:
        print(' '.join(str(e).split()))
        return 1
    except Exception as e:  # noqa: BLE001 - a malformed output is a failure too
        print(f'{type(e).__name__}: ' + ' '.join(str(e).split()))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
