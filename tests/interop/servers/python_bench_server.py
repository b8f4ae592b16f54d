"""The benchmark's two agents on the official Python SDK (a2a-sdk 1.x),
with the semantics of Heddle's demo agents `echo` and `writer-stream`:

  echo           -> COMPLETED with one artifact "echo" repeating the user's text
  writer-stream  -> WORKING, one artifact "report" in three chunks (append,
                    lastChunk), then COMPLETED; no pause between chunks

Usage: python_bench_server.py HTTP_PORT GRPC_PORT [STORE_URL]   (uvicorn, one worker)

  http://127.0.0.1:HTTP_PORT/echo/jsonrpc     JSON-RPC (v1.0)
  http://127.0.0.1:HTTP_PORT/echo/rest        HTTP+JSON (POST /message:send)
  http://127.0.0.1:HTTP_PORT/stream/jsonrpc   JSON-RPC, the streaming agent
  127.0.0.1:GRPC_PORT                         gRPC lf.a2a.v1.A2AService, the echo agent

Each agent has its own DefaultRequestHandler and InMemoryTaskStore. The
interop server (tests/interop/servers/python_server.py) routes by the first
word of the text and sleeps between chunks, so it is not reused here.

STORE_URL, a SQLAlchemy async URL (sqlite+aiosqlite:////tmp/bench.db,
postgresql+asyncpg://postgres@127.0.0.1:5432/test), swaps each agent's
InMemoryTaskStore for the SDK's DatabaseTaskStore, both on one engine: tables
bench_py_echo_tasks and bench_py_stream_tasks, dropped and recreated at start so
every run starts empty; SQLite in WAL mode with synchronous=NORMAL, as Heddle's. It needs python/bench-store-requirements.txt installed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

import grpc
import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

CHUNKS = ['Report, part one: the findings. ', 'Part two: what they mean. ',
          'Part three: what to do next.']
STORE_TABLES = ('bench_py_echo_tasks', 'bench_py_stream_tasks')


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


def sqlite_wal(dbapi_conn, _record) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute('PRAGMA journal_mode=WAL')
    cursor.execute('PRAGMA synchronous=NORMAL')
    cursor.close()


async def database_stores(engine: AsyncEngine) -> list[TaskStore]:
    """One DatabaseTaskStore per agent (STORE_TABLES) on `engine`, its table
    dropped and recreated."""
    stores = [DatabaseTaskStore(engine, table_name=name) for name in STORE_TABLES]
    async with engine.begin() as conn:
        for store in stores:
            await conn.run_sync(store.task_model.__table__.drop, checkfirst=True)
    for store in stores:
        await store.initialize()  # create_table=True: CREATE TABLE + indexes
    return stores


async def main(http_port: int, grpc_port: int, store_url: str | None) -> None:
    base = f'http://127.0.0.1:{http_port}'
    engine = None
    if store_url is None:
        echo_store, writer_store = InMemoryTaskStore(), InMemoryTaskStore()
    else:
        # Imported here: the in-memory server runs without the bench-store extras.
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine
        engine = create_async_engine(store_url)
        if engine.dialect.name == 'sqlite':
            # Heddle's SQLite store runs WAL with synchronous=NORMAL: the same here,
            # so the two are compared at the same durability.
            event.listen(engine.sync_engine, 'connect', sqlite_wal)
        echo_store, writer_store = await database_stores(engine)
    echo = DefaultRequestHandler(agent_executor=Echo(), task_store=echo_store,
                                 agent_card=card('echo', {'JSONRPC': f'{base}/echo/jsonrpc',
                                                     'HTTP+JSON': f'{base}/echo/rest',
                                                     'GRPC': f'127.0.0.1:{grpc_port}'}))
    writer = DefaultRequestHandler(agent_executor=WriterStream(), task_store=writer_store,
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
        if engine is not None:
            await engine.dispose()


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]),
                     sys.argv[3] if len(sys.argv) == 4 else None))
