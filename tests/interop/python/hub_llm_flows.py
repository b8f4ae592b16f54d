"""The official Python A2A client (a2a-sdk 1.x) calling, through a Heddle hub,
an LLM agent (`kind = "llm"`) whose endpoint is the stand-in chat-completions
server of crates/heddle-hub/tests/llm.rs. That test scripts the stand-in's
answers in the order of these flows:

  send        "Hello, world." in one artifact, usage on the task's metadata
  stream      "One", " two", " three", "." as artifact chunks, the last one
              marked lastChunk
  ask-user    the model asks "Which city?" (INPUT_REQUIRED); the reply
              "Paris" gets "Sunny in Paris."

Usage: hub_llm_flows.py AGENT_URL
  AGENT_URL  the hub's URL of the agent, e.g. http://127.0.0.1:8080/api/v1/agents/chat

Runs over JSON-RPC v1.0. Prints `PASS py-hub-llm FLOW` (or FAIL ...) per flow;
exits 1 if any flow failed.
"""

from __future__ import annotations

import asyncio
import sys

import httpx

from a2a.types import Part, SendMessageRequest, TaskState

from client_flows import (
    check,
    hub_jsonrpc_client,
    run_named_flows,
    state_name,
    text_of,
    user_message,
)

USAGE_KEY = 'https://heddle.dev/extensions/usage/v1'


class Flows:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip('/')
        self.http = httpx.AsyncClient(timeout=30.0)

    async def client(self, *, streaming: bool):
        return await hub_jsonrpc_client(self.http, self.url,
                                        streaming=streaming)

    async def send(self, client, text: str, task=None):
        message = (user_message(Part(text=text), task_id=task.id,
                                context_id=task.context_id)
                   if task else user_message(Part(text=text)))
        events = [e async for e in client.send_message(
            SendMessageRequest(message=message))]
        check(len(events) == 1 and events[0].HasField('task'),
              f'a blocking send gave {events}')
        return events[0].task

    async def flow_send(self) -> None:
        client = await self.client(streaming=False)
        task = await self.send(client, 'Hi')
        check(task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'state {state_name(task.status.state)}')
        check(len(task.artifacts) == 1, f'{len(task.artifacts)} artifacts')
        got = text_of(task.artifacts[0].parts)
        check(got == 'Hello, world.', f'artifact {got!r}')
        check(USAGE_KEY in task.metadata, f'no usage in {task.metadata}')
        usage = task.metadata[USAGE_KEY]
        check(usage['promptTokens'] > 0, f'usage {usage}')

    async def flow_stream(self) -> None:
        client = await self.client(streaming=True)
        chunks, last_flags, last = [], [], None
        async for event in client.send_message(
                SendMessageRequest(message=user_message(Part(text='Count')))):
            kind = event.WhichOneof('payload')
            if kind == 'artifact_update':
                chunks.append(text_of(event.artifact_update.artifact.parts))
                last_flags.append(event.artifact_update.last_chunk)
            elif kind == 'status_update':
                last = event.status_update.status.state
        check(chunks == ['One', ' two', ' three', '.'], f'chunks {chunks}')
        check(last_flags == [False, False, False, True],
              f'lastChunk flags {last_flags}')
        check(last == TaskState.TASK_STATE_COMPLETED,
              f'stream ended {state_name(last or 0)}')

    async def flow_ask_user(self) -> None:
        client = await self.client(streaming=False)
        asked = await self.send(client, "What's the weather?")
        check(asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
              f'first turn {state_name(asked.status.state)}')
        question = text_of(asked.status.message.parts)
        check(question == 'Which city?', f'question {question!r}')
        done = await self.send(client, 'Paris', asked)
        check(done.id == asked.id, 'the reply made another task')
        check(done.status.state == TaskState.TASK_STATE_COMPLETED,
              f'second turn {state_name(done.status.state)}')
        got = text_of(done.artifacts[0].parts)
        check(got == 'Sunny in Paris.', f'answer {got!r}')

    async def run(self) -> int:
        failed = await run_named_flows('py-hub-llm', [
            ('send', self.flow_send),
            ('stream', self.flow_stream),
            ('ask-user', self.flow_ask_user),
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
