"""The official Python A2A SDK calls an agent laid out by `heddle new agent`,
knowing only what its BLUEPRINT.md says: the card URL, the header to send and
its value.

Usage: new_agent_client.py BASE_URL HEADER VALUE BINDING VERSION
  BASE_URL  where the card is (`BASE_URL/.well-known/agent-card.json`)
  HEADER    the auth header the blueprint names ('' for none), VALUE its value
  BINDING   JSONRPC or HTTP+JSON; VERSION 1.0 or 0.3

Sends "hello" (blocking, then streaming) and checks the task COMPLETED with
the skeleton's `result` artifact. Prints PASS/FAIL lines; exits 1 on a failure.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState


def text_of(parts) -> str:
    return ''.join(p.text for p in parts if p.WhichOneof('content') == 'text')


async def run(base: str, header: str, value: str, binding: str, version: str) -> int:
    headers = {header: value} if header else {}
    label = f'{binding} {version}'
    async with httpx.AsyncClient(timeout=30.0, headers=headers) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        keep = [i for i in card.supported_interfaces
                if i.protocol_binding == binding
                and is_legacy_version(i.protocol_version) == (version == '0.3')]
        if not keep:
            print(f'FAIL {label}: the card has no such interface')
            return 1
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        failed = 0
        for streaming in (False, True):
            factory = ClientFactory(ClientConfig(
                streaming=streaming, httpx_client=http,
                supported_protocol_bindings=[binding]))
            client = factory.create(card)
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                              parts=[Part(text='hello')])
            states, artifacts = [], []
            try:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    if event.HasField('task'):
                        states.append(event.task.status.state)
                        artifacts.extend(text_of(a.parts) for a in event.task.artifacts)
                    elif event.HasField('status_update'):
                        states.append(event.status_update.status.state)
                    elif event.HasField('artifact_update'):
                        artifacts.append(text_of(event.artifact_update.artifact.parts))
            except Exception as e:  # noqa: BLE001 - reported, not hidden
                print(f'FAIL {label} streaming={streaming}: {type(e).__name__}: {e}')
                failed += 1
                continue
            done = states and states[-1] == TaskState.TASK_STATE_COMPLETED
            echoed = any('received: hello' in a for a in artifacts)
            if done and echoed:
                print(f'PASS {label} streaming={streaming}')
            else:
                names = [TaskState.Name(s) for s in states]
                print(f'FAIL {label} streaming={streaming}: states {names}, artifacts {artifacts}')
                failed += 1
        return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(run(*sys.argv[1:6])))
