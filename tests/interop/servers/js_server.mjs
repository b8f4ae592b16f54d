// An A2A agent served by the official JS SDK (@a2a-js/sdk 1.x), for the
// reverse interop direction: the `heddle` CLI is the client.
//
// Usage: node js_server.mjs HTTP_PORT GRPC_PORT
//
// One agent, four skills, chosen by the first word of the message text:
//   echo ...   -> COMPLETED with one text artifact: the rest of the text
//   write ...  -> INPUT_REQUIRED with a question; the follow-up on the same task
//                 -> COMPLETED with an artifact "report" containing the answer
//   stream ... -> WORKING, then ONE artifact in three chunks ("one ", "two ",
//                 "three": append=false, append=true, append=true+lastChunk)
//                 -> COMPLETED
//   wait ...   -> WORKING for up to 30 s, then COMPLETED; cancel -> CANCELED
//
// Served, all from one DefaultRequestHandler and one InMemoryTaskStore, every
// handler with `legacyCompat: { enabled: true }`:
//   http://127.0.0.1:HTTP_PORT/.well-known/agent-card.json  the card (agentCardHandler:
//        A2A-Version 1.0 -> the v1.0 card; 0.3 or no header -> the SDK's hybrid
//        card: v0.3 top-level fields + the v1.0 supportedInterfaces)
//   http://127.0.0.1:HTTP_PORT/a2a/jsonrpc   JSON-RPC, v1.0 + v0.3 (jsonRpcHandler)
//   http://127.0.0.1:HTTP_PORT/a2a/rest      HTTP+JSON v1.0 (/message:send ...) and
//                                            v0.3 (/v1/message:send ...) (restHandler)
//   127.0.0.1:GRPC_PORT                      gRPC: A2AService (v1.0) and
//                                            LegacyA2AService (v0.3) on one server
//
// The card declares pushNotifications, so the handler keeps push configs in
// its own in-memory store (create/set, get, list, delete); deliveries go to
// the registered URLs, which the flows point at a closed port.
//
// The SDK's v0.3 compat layer requires the card to declare the 0.3 interfaces
// too, so every interface is listed for protocolVersion 1.0 and 0.3.

import { randomUUID } from 'node:crypto';

import express from 'express';
import { Server, ServerCredentials } from '@grpc/grpc-js';

import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import {
  agentCardHandler,
  jsonRpcHandler,
  restHandler,
  UserBuilder,
} from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import { LegacyA2AService, legacyGrpcService } from '@a2a-js/sdk/compat/v0_3/server/grpc';

const WAIT_MS = 30_000;

const now = () => new Date().toISOString();

const textPart = (text) => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

function agentMessage(text, taskId, contextId) {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('');
}

class InteropExecutor {
  constructor() {
    this.waiting = new Map(); // taskId -> resolve() of the wait skill's timer
    this.contexts = new Map(); // taskId -> contextId, for cancelTask's event
  }

  cancelTask = async (taskId, eventBus) => {
    const wake = this.waiting.get(taskId);
    this.waiting.delete(taskId);
    eventBus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: this.contexts.get(taskId) ?? '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
        metadata: undefined,
      }),
    );
    wake?.();
  };

  execute = async (requestContext, eventBus) => {
    const { taskId, contextId } = requestContext;
    const text = textOf(requestContext.userMessage).trim();
    const existing = requestContext.task;
    this.contexts.set(taskId, contextId);

    const status = (state, message) =>
      eventBus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId,
          status: {
            state,
            message: message === undefined ? undefined : agentMessage(message, taskId, contextId),
            timestamp: now(),
          },
          metadata: undefined,
        }),
      );
    const artifact = (artifactId, name, chunk, append, lastChunk) =>
      eventBus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: {
            artifactId,
            name,
            description: '',
            parts: [textPart(chunk)],
            metadata: undefined,
            extensions: [],
          },
          append,
          lastChunk,
          metadata: undefined,
        }),
      );

    // Every execute() must publish a task (or message) first, follow-ups included.
    eventBus.publish(
      AgentEvent.task(
        existing ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
          artifacts: [],
          history: [requestContext.userMessage],
          metadata: undefined,
        },
      ),
    );

    // A follow-up on a task waiting for input: the writer's second turn.
    if (existing?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      status(TaskState.TASK_STATE_WORKING);
      artifact(randomUUID(), 'report', `Report, written ${text}.`, false, true);
      status(TaskState.TASK_STATE_COMPLETED);
      return;
    }

    const space = text.indexOf(' ');
    const word = (space < 0 ? text : text.slice(0, space)).toLowerCase();
    const rest = space < 0 ? '' : text.slice(space + 1);
    switch (word) {
      case 'echo':
        artifact(randomUUID(), 'echo', rest, false, true);
        status(TaskState.TASK_STATE_COMPLETED);
        break;
      case 'write':
        status(TaskState.TASK_STATE_INPUT_REQUIRED, 'Who is the report for?');
        break;
      case 'stream': {
        status(TaskState.TASK_STATE_WORKING, 'Streaming three chunks.');
        const chunks = [
          ['one ', false, false],
          ['two ', true, false],
          ['three', true, true],
        ];
        for (const [chunk, append, last] of chunks) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          artifact('stream-artifact', 'stream', chunk, append, last);
        }
        status(TaskState.TASK_STATE_COMPLETED);
        break;
      }
      case 'wait': {
        status(TaskState.TASK_STATE_WORKING, `Waiting up to ${WAIT_MS / 1000} s.`);
        let timer;
        const canceled = await new Promise((resolve) => {
          this.waiting.set(taskId, () => resolve(true));
          timer = setTimeout(() => resolve(false), WAIT_MS);
        });
        clearTimeout(timer);
        this.waiting.delete(taskId);
        if (!canceled) status(TaskState.TASK_STATE_COMPLETED, 'Done waiting.');
        // canceled: cancelTask already published CANCELED.
        break;
      }
      default:
        status(
          TaskState.TASK_STATE_REJECTED,
          `Unknown skill '${word}': start with echo, write, stream or wait.`,
        );
    }
  };
}

function agentCard(httpPort, grpcPort) {
  const urls = {
    JSONRPC: `http://127.0.0.1:${httpPort}/a2a/jsonrpc`,
    'HTTP+JSON': `http://127.0.0.1:${httpPort}/a2a/rest`,
    GRPC: `127.0.0.1:${grpcPort}`,
  };
  const supportedInterfaces = [];
  for (const protocolVersion of ['1.0', '0.3']) {
    for (const [protocolBinding, url] of Object.entries(urls)) {
      supportedInterfaces.push({ url, protocolBinding, tenant: '', protocolVersion });
    }
  }
  const skill = (id, description) => ({
    id,
    name: id,
    description,
    tags: ['interop'],
    examples: [`${id} hello`],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  });
  return {
    name: 'js-sdk-interop',
    description: '@a2a-js/sdk server for the heddle client interop tests',
    supportedInterfaces,
    provider: undefined,
    version: '1.0.0',
    documentationUrl: undefined,
    capabilities: {
      streaming: true,
      pushNotifications: true,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      skill('echo', 'Completes with the rest of the text as an artifact.'),
      skill('write', 'Asks a question, then writes a report with the answer.'),
      skill('stream', 'Streams one artifact in three chunks.'),
      skill('wait', 'Works for 30 s; cancel it.'),
    ],
    signatures: [],
    iconUrl: undefined,
  };
}

function main() {
  const [httpPort, grpcPort] = process.argv.slice(2).map(Number);
  if (!httpPort || !grpcPort) {
    console.error('usage: node js_server.mjs HTTP_PORT GRPC_PORT');
    process.exit(2);
  }
  const card = agentCard(httpPort, grpcPort);
  const requestHandler = new DefaultRequestHandler(
    card,
    new InMemoryTaskStore(),
    new InteropExecutor(),
  );
  const legacyCompat = { enabled: true };
  const userBuilder = UserBuilder.noAuthentication;

  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler, userBuilder, legacyCompat }));
  app.use('/a2a/rest', restHandler({ requestHandler, userBuilder, legacyCompat }));
  const http = app.listen(httpPort, '127.0.0.1');
  http.on('error', (err) => {
    console.error('js_server: HTTP listen failed:', err);
    process.exit(1);
  });

  const grpc = new Server();
  grpc.addService(A2AService, grpcService({ requestHandler, userBuilder }));
  grpc.addService(LegacyA2AService, legacyGrpcService({ requestHandler, userBuilder }));
  grpc.bindAsync(`127.0.0.1:${grpcPort}`, ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error('js_server: gRPC bind failed:', err);
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
