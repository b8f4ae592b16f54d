// The benchmark's two agents on the official JS SDK (@a2a-js/sdk 1.x, express),
// with the semantics of Heddle's demo agents `echo` and `writer-stream`:
//
//   echo           -> COMPLETED with one artifact "echo" repeating the user's text
//   writer-stream  -> WORKING, one artifact "report" in three chunks (append,
//                     lastChunk), then COMPLETED; no pause between chunks
//
// Usage: node js_bench_server.mjs HTTP_PORT GRPC_PORT
//
//   http://127.0.0.1:HTTP_PORT/echo/jsonrpc     JSON-RPC (v1.0)
//   http://127.0.0.1:HTTP_PORT/echo/rest        HTTP+JSON (POST /message:send)
//   http://127.0.0.1:HTTP_PORT/stream/jsonrpc   JSON-RPC, the streaming agent
//   127.0.0.1:GRPC_PORT                         gRPC A2AService, the echo agent
//
// Each agent has its own DefaultRequestHandler and InMemoryTaskStore. The
// interop server (tests/interop/servers/js_server.mjs) routes by the first
// word of the text and pauses between chunks, so it is not reused here.

import { randomUUID } from 'node:crypto';

import express from 'express';
import { Server, ServerCredentials } from '@grpc/grpc-js';

import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';

const CHUNKS = ['Report, part one: the findings. ', 'Part two: what they mean. ', 'Part three: what to do next.'];

const now = () => new Date().toISOString();
const textPart = (text) => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});
const textOf = (message) =>
  (message?.parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('');

// Publishes the task (every execute() must start with one), then what `body` adds.
function executor(body) {
  return {
    cancelTask: async (taskId, eventBus) => {
      eventBus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId: '',
          status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
          metadata: undefined,
        }),
      );
    },
    execute: async (requestContext, eventBus) => {
      const { taskId, contextId } = requestContext;
      eventBus.publish(
        AgentEvent.task(
          requestContext.task ?? {
            id: taskId,
            contextId,
            status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
            artifacts: [],
            history: [requestContext.userMessage],
            metadata: undefined,
          },
        ),
      );
      const status = (state) =>
        eventBus.publish(
          AgentEvent.statusUpdate({
            taskId,
            contextId,
            status: { state, message: undefined, timestamp: now() },
            metadata: undefined,
          }),
        );
      const artifact = (artifactId, name, chunk, append, lastChunk) =>
        eventBus.publish(
          AgentEvent.artifactUpdate({
            taskId,
            contextId,
            artifact: { artifactId, name, description: '', parts: [textPart(chunk)], metadata: undefined, extensions: [] },
            append,
            lastChunk,
            metadata: undefined,
          }),
        );
      body({ taskId, text: textOf(requestContext.userMessage), status, artifact });
    },
  };
}

const echo = executor(({ text, status, artifact }) => {
  artifact(randomUUID(), 'echo', text, false, true);
  status(TaskState.TASK_STATE_COMPLETED);
});

const writerStream = executor(({ taskId, status, artifact }) => {
  status(TaskState.TASK_STATE_WORKING);
  CHUNKS.forEach((chunk, i) => artifact(`${taskId}-report`, 'report', chunk, i > 0, i === CHUNKS.length - 1));
  status(TaskState.TASK_STATE_COMPLETED);
});

// `interfaces`: protocol binding -> URL; the SDK serves a binding in v1.0 only if the card lists it.
function card(name, interfaces) {
  return {
    name,
    description: `benchmark agent ${name}`,
    supportedInterfaces: Object.entries(interfaces).map(([protocolBinding, url]) => ({
      url,
      protocolBinding,
      tenant: '',
      protocolVersion: '1.0',
    })),
    provider: undefined,
    version: '1.0.0',
    documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      { id: name, name, description: name, tags: ['bench'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
    ],
    signatures: [],
    iconUrl: undefined,
  };
}

function main() {
  const [httpPort, grpcPort] = process.argv.slice(2).map(Number);
  if (!httpPort || !grpcPort) {
    console.error('usage: node js_bench_server.mjs HTTP_PORT GRPC_PORT');
    process.exit(2);
  }
  const base = `http://127.0.0.1:${httpPort}`;
  const userBuilder = UserBuilder.noAuthentication;
  const echoHandler = new DefaultRequestHandler(
    card('echo', {
      JSONRPC: `${base}/echo/jsonrpc`,
      'HTTP+JSON': `${base}/echo/rest`,
      GRPC: `127.0.0.1:${grpcPort}`,
    }),
    new InMemoryTaskStore(),
    echo,
  );
  const streamHandler = new DefaultRequestHandler(
    card('writer-stream', { JSONRPC: `${base}/stream/jsonrpc` }),
    new InMemoryTaskStore(),
    writerStream,
  );
  const app = express();
  app.use('/echo/jsonrpc', jsonRpcHandler({ requestHandler: echoHandler, userBuilder }));
  app.use('/echo/rest', restHandler({ requestHandler: echoHandler, userBuilder }));
  app.use('/stream/jsonrpc', jsonRpcHandler({ requestHandler: streamHandler, userBuilder }));
  const http = app.listen(httpPort, '127.0.0.1');
  http.on('error', (err) => {
    console.error('js_bench_server: HTTP listen failed:', err);
    process.exit(1);
  });
  const grpc = new Server();
  grpc.addService(A2AService, grpcService({ requestHandler: echoHandler, userBuilder }));
  grpc.bindAsync(`127.0.0.1:${grpcPort}`, ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error('js_bench_server: gRPC bind failed:', err);
      process.exit(1);
    }
  });
  const stop = () => {
    grpc.forceShutdown();
    http.close();
    http.closeAllConnections?.();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
