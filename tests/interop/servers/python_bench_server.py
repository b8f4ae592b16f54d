"""The benchmark's two agents on the official Python SDK (a2a-sdk 1.x),
with the semantics of Heddle's demo agents `echo` and `writer-stream`:

  echo           -> COMPLETED with one artifact "echo" repeating the user's text
  writer-stream  -> WORKING, one artifact "report" in three chunks (append,
                    lastChunk), then COMPLETED; no pause between chunks

Usage: python_bench_server.py HTTP_PORT GRPC_PORT   (uvicorn, one worker)

  http://127.0.0.1:HTTP_PORT/echo/jsonrpc     JSON-RPC (v1.0)
  http://127.0.0.1:HTTP_PORT/echo/rest        HTTP+JSON (POST /message:send)
  http://127.0.0.1:HTTP_PORT/stream/jsonrpc   JSON-RPC, the streaming agent
  127.0.0.1:GRPC_PORT                         gRPC lf.a2a.v1.A2AService, the echo agent

Each agent has its own DefaultRequestHandler and InMemoryTaskStore. The
interop server (tests/interop/servers/python_server.py) routes by the first
word of the text and sleeps between chunks, so it is not reused here.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import grpc
import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc

CHUNKS = ['Report, part one: the findings. ', 'Part two: what they mean. ',
          'Part three: what to do next.']


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(context.get_user_input())], name='echo')
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class WriterStream(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        for i, chunk in enumerate(CHUNKS):
            await updater.add_artifact(
                [new_text_part(chunk)], artifact_id=f'{task.id}-report', name='report',
                append=i > 0, last_chunk=i == len(CHUNKS) - 1)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(name: str, interfaces: dict[str, str]) -> AgentCard:
    return AgentCard(
        name=name, description=f'benchmark agent {name}', version='1.0.0',
        supported_interfaces=[AgentInterface(url=url, protocol_binding=binding,
                                             protocol_version='1.0')
                              for binding, url in interfaces.items()],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=['text/plain'], default_output_modes=['text/plain'],
        skills=[AgentSkill(id=name, name=name, description=name, tags=['bench'])],
    )


async def main(http_port: int, grpc_port: int) -> None:
    base = f'http://127.0.0.1:{http_port}'
    echo = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(),
                                 agent_card=card('echo', {'JSONRPC': f'{base}/echo/jsonrpc',
                                                     'HTTP+JSON': f'{base}/echo/rest',
                                                     'GRPC': f'127.0.0.1:{grpc_port}'}))
    writer = DefaultRequestHandler(agent_executor=WriterStream(), task_store=InMemoryTaskStore(),
                                   agent_card=card('writer-stream',
                                                   {'JSONRPC': f'{base}/stream/jsonrpc'}))
    # The REST routes end with a catch-all `/{tenant}` mount: they go last.
    routes = [
        *create_jsonrpc_routes(echo, rpc_url='/echo/jsonrpc'),
        *create_jsonrpc_routes(writer, rpc_url='/stream/jsonrpc'),
        *create_rest_routes(echo, path_prefix='/echo/rest'),
    ]
    app = Starlette(routes=routes)

    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(echo), grpc_server)
    grpc_server.add_insecure_port(f'127.0.0.1:{grpc_port}')
    await grpc_server.start()

    config = uvicorn.Config(app, host='127.0.0.1', port=http_port, workers=1,
                            log_level='warning', access_log=False,
                            timeout_graceful_shutdown=1)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await grpc_server.stop(grace=None)


if __name__ == '__main__':
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
