// An ITK-style agent on the official JS SDK (@a2a-js/sdk 1.x): it runs the
// itk.Instruction (itk/instruction.proto) that the first user message carries
// and hands nested instructions on to other agents with the SDK's own client.
// Same behaviour as itk/python_agent.py and `heddle itk-agent` (see the ITK
// section of tests/interop/README.md).
//
// Usage: node js_agent.mjs --httpPort N --grpcPort M [--protocol 1.0|0.3]
//
// With --protocol 0.3 it stands in for an agent of the v0.3 line: the card
// lists only the 0.3 interfaces and every call goes to the callee's 0.3
// interfaces with the SDK's legacy transports (the server keeps serving 1.0).
//
// Served, all from one DefaultRequestHandler and one InMemoryTaskStore, every
// handler with legacyCompat (v0.3) enabled:
//   http://127.0.0.1:N/.well-known/agent-card.json   the card
//   http://127.0.0.1:N/jsonrpc/   JSON-RPC v1.0 + v0.3 (also /jsonrpc)
//   http://127.0.0.1:N/rest/      HTTP+JSON v1.0 (/rest/message:send ...) + v0.3 (/rest/v1/...)
//   127.0.0.1:M                   gRPC A2AService (v1.0) + LegacyA2AService (v0.3)
// The card lists each binding for protocolVersion 1.0 and 0.3. Push configs
// given by callers live in the SDK's InMemoryPushNotificationStore, and its
// DefaultPushNotificationSender (v0.3-aware) delivers every task event.
// ITK_LOG_LEVEL=INFO or DEBUG logs each call to stderr.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import express from 'express';
import * as grpc from '@grpc/grpc-js';

import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import { createLegacyAwarePushNotificationSender } from '@a2a-js/sdk/compat/v0_3/server';
import { LegacyA2AService, legacyGrpcService } from '@a2a-js/sdk/compat/v0_3/server/grpc';

import { decodeInstruction, encodeInstruction, FILENAME, MEDIA_TYPE } from './instruction.mjs';

const FINISHED = 'task-finished';
const PUSH_TOKEN = 'itk-token';
const HOLD_UPDATES = 5;
const HOLD_INTERVAL_MS = 2000;
// --protocol 0.3: calls go to the 0.3 interfaces of the callee's card only
// (the SDK's legacy transports), like an agent on the SDK's v0.3 line.
let OUTGOING_LEGACY = false;
const OPEN_STATES = new Set([
  TaskState.TASK_STATE_SUBMITTED,
  TaskState.TASK_STATE_WORKING,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);
const BINDINGS = {
  jsonrpc: 'JSONRPC',
  grpc: 'GRPC',
  http_json: 'HTTP+JSON',
  'http+json': 'HTTP+JSON',
  rest: 'HTTP+JSON',
};

const level = (process.env.ITK_LOG_LEVEL ?? 'WARNING').toUpperCase();
const log = (...args) => {
  if (level === 'INFO' || level === 'DEBUG') console.error(new Date().toISOString(), 'itk-js-agent', ...args);
};

const now = () => new Date().toISOString();
const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });

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

class InstructionError extends Error {}

// ------------------------------------------------------------------ reading

/** The instruction in the user message: a binary part, else base64 text. */
function instructionOf(message) {
  const parts = message?.parts ?? [];
  for (const part of parts) {
    if (part.content?.$case === 'raw') {
      let bytes = part.content.value;
      // a2a-sdk's (Python) v0.3 gRPC/REST clients put the base64 text itself
      // into the v0.3 bytes field, so it arrives here as ASCII. An encoded
      // instruction starts with a tag byte (0x0a/0x12/0x1a), never with a
      // base64 letter, so ASCII base64 is decoded once more.
      const ascii = Buffer.from(bytes).toString('latin1');
      if (ascii && /^[A-Za-z0-9+/]+={0,2}$/.test(ascii)) bytes = Buffer.from(ascii, 'base64');
      try {
        return decodeInstruction(bytes);
      } catch (e) {
        throw new InstructionError(`the binary part ${part.filename || '(unnamed)'} is not an itk.Instruction: ${e.message}`);
      }
    }
  }
  for (const part of parts) {
    if (part.content?.$case !== 'text') continue;
    const text = part.content.value.trim();
    if (!text || !/^[A-Za-z0-9+/=\s]+$/.test(text)) continue;
    try {
      return decodeInstruction(Buffer.from(text, 'base64'));
    } catch {
      // not an instruction; try the next part
    }
  }
  throw new InstructionError(
    'no instruction found: want a binary part (application/x-protobuf, instruction.bin) or base64 text holding an itk.Instruction',
  );
}

/** Whether a return node of this agent's own instruction holds the task. */
function holds(inst) {
  if (inst.returnResponse) return inst.returnResponse.holdTask;
  if (inst.steps) return inst.steps.instructions.some(holds);
  return false;
}

const textsOfMessage = (m) => (m?.parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value);

/** Every text in a reply event (and, with history, a task's agent messages). */
function textsOfEvent(event, history = false) {
  const p = event?.payload;
  if (!p) return [];
  if (p.$case === 'message') return textsOfMessage(p.value);
  if (p.$case === 'task') {
    const out = [];
    if (history) for (const m of p.value.history ?? []) if (m.role === Role.ROLE_AGENT) out.push(...textsOfMessage(m));
    out.push(...textsOfMessage(p.value.status?.message));
    return out;
  }
  if (p.$case === 'statusUpdate') return textsOfMessage(p.value.status?.message);
  return [];
}

function taskIdOf(event) {
  const p = event?.payload;
  if (!p) return '';
  if (p.$case === 'task') return p.value.id;
  if (p.$case === 'statusUpdate' || p.$case === 'artifactUpdate') return p.value.taskId;
  return p.value.taskId ?? '';
}

function stateOf(event) {
  const p = event?.payload;
  if (p?.$case === 'task') return p.value.status?.state;
  if (p?.$case === 'statusUpdate') return p.value.status?.state;
  return undefined;
}

// ------------------------------------------------------------------ running

const grpcTarget = (url) => url.replace(/^(https?|grpc):\/\//, '').replace(/\/+$/, '');

async function run(inst) {
  if (inst.returnResponse) return [inst.returnResponse.response];
  if (inst.steps) {
    const out = [];
    for (const step of inst.steps.instructions) out.push(...(await run(step)));
    return out;
  }
  if (inst.callAgent) return callAgent(inst.callAgent);
  throw new InstructionError('an instruction node with no step set');
}

function transportFactory(binding) {
  const legacy = OUTGOING_LEGACY ? { legacyCompat: { enabled: true } } : {};
  if (binding === 'JSONRPC') return new JsonRpcTransportFactory(legacy);
  if (binding === 'HTTP+JSON') return new RestTransportFactory(legacy);
  const grpcFactory = new GrpcTransportFactory(legacy);
  // The card's gRPC url may carry a scheme; grpc-js wants host:port.
  return {
    get protocolName() {
      return grpcFactory.protocolName;
    },
    create: (url, card) => grpcFactory.create(grpcTarget(url), card),
  };
}

async function callAgent(call) {
  const binding = BINDINGS[call.transport.trim().toLowerCase()];
  if (!binding) throw new InstructionError(`unknown transport '${call.transport}'`);
  const resubscribe = Boolean(call.resubscribe);
  let pushNotificationConfig;
  if (call.pushNotification) {
    let url = call.pushNotification.url.replace(/\/+$/, '');
    if (!url) throw new InstructionError('push_notification behaviour without a url');
    if (!url.includes('://')) url = `http://${url}`;
    pushNotificationConfig = {
      tenant: '',
      id: '',
      taskId: '',
      url: `${url}/notifications`,
      token: PUSH_TOKEN,
      authentication: undefined,
    };
  }
  const behaviour = resubscribe ? 'resubscribe' : call.pushNotification ? 'push_notification' : 'send_message';
  log(`call ${call.agentCardUri} over ${binding} (${behaviour}, streaming=${call.streaming})`);
  // The resolver joins the card path WHATWG-style: the base needs its slash.
  const base = call.agentCardUri.endsWith('/') ? call.agentCardUri : `${call.agentCardUri}/`;
  let card;
  try {
    card = await new DefaultAgentCardResolver(OUTGOING_LEGACY ? { legacyCompat: { enabled: true } } : undefined).resolve(base);
  } catch (e) {
    throw new InstructionError(`cannot read the card of ${call.agentCardUri}: ${e.message}`);
  }
  if (OUTGOING_LEGACY) {
    card = { ...card, supportedInterfaces: (card.supportedInterfaces ?? []).filter((i) => /^0\.3(\.|$)/.test(i.protocolVersion)) };
  }
  let client;
  try {
    client = await new ClientFactory({
      transports: [transportFactory(binding)],
      clientConfig: { polling: false, pushNotificationConfig },
    }).createFromAgentCard(card);
  } catch (e) {
    throw new InstructionError(`${call.agentCardUri} offers no ${binding} interface: ${e.message}`);
  }
  const request = {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'raw', value: Buffer.from(encodeInstruction(call.instruction ?? {})) }, metadata: undefined, filename: FILENAME, mediaType: MEDIA_TYPE }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false },
    metadata: undefined,
  };
  try {
    if (resubscribe) return await sendAndResubscribe(client, request);
    if (call.streaming) {
      const out = [];
      for await (const event of client.sendMessageStream(request)) out.push(...textsOfEvent(event));
      return out;
    }
    const result = await client.sendMessage(request);
    // A Task (has status) or a Message (has parts).
    if (result && 'status' in result && !('messageId' in result)) return textsOfMessage(result.status?.message);
    return textsOfMessage(result);
  } catch (e) {
    if (e instanceof InstructionError) throw e;
    throw new InstructionError(`${binding} call to ${call.agentCardUri} failed: ${e?.constructor?.name ?? 'Error'}: ${e?.message ?? e}`);
  }
}

async function sendAndResubscribe(client, request) {
  const abort = new AbortController();
  const stream = client.sendMessageStream(request, { signal: abort.signal });
  let taskId = '';
  try {
    for await (const event of stream) {
      taskId = taskIdOf(event);
      break;
    }
  } finally {
    abort.abort();
    await stream.return?.(undefined).catch(() => {});
  }
  if (!taskId) throw new InstructionError('the streamed send gave no task id in its first event');
  log(`dropped the stream of task ${taskId}, subscribing again`);
  const out = [];
  let finished = false;
  let lastState;
  const sub = client.resubscribeTask({ tenant: '', id: taskId });
  try {
    for await (const event of sub) {
      lastState = stateOf(event) ?? lastState;
      for (const text of textsOfEvent(event, true)) {
        if (text.includes(FINISHED)) finished = true;
        const cleaned = text.split(FINISHED).join('').replace(/^\n+|\n+$/g, '');
        if (cleaned && !out.includes(cleaned)) out.push(cleaned);
      }
      if (finished) break;
    }
  } finally {
    await sub.return?.(undefined).catch(() => {});
  }
  if (!finished) throw new InstructionError(`the subscription to task ${taskId} ended without "${FINISHED}"`);
  if (lastState === undefined || OPEN_STATES.has(lastState)) {
    try {
      await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    } catch (e) {
      log(`cancel of task ${taskId}: ${e.message}`); // it may have ended meanwhile
    }
  }
  return out;
}

class ItkExecutor {
  constructor() {
    this.cancels = new Map(); // taskId -> wake() of a held task
    this.contexts = new Map(); // taskId -> contextId
  }

  cancelTask = async (taskId, eventBus) => {
    const wake = this.cancels.get(taskId);
    this.cancels.delete(taskId);
    eventBus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId: this.contexts.get(taskId) ?? '',
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
      metadata: undefined,
    }));
    wake?.();
  };

  execute = async (requestContext, eventBus) => {
    const { taskId, contextId } = requestContext;
    this.contexts.set(taskId, contextId);
    const status = (state, text) => eventBus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: { state, message: text === undefined ? undefined : agentMessage(text, taskId, contextId), timestamp: now() },
      metadata: undefined,
    }));
    // Every execute() publishes the task first (the SDK requires it).
    eventBus.publish(AgentEvent.task(requestContext.task ?? {
      id: taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
      artifacts: [],
      history: [requestContext.userMessage],
      metadata: undefined,
    }));

    let outputs;
    let hold;
    try {
      const inst = instructionOf(requestContext.userMessage);
      hold = holds(inst);
      outputs = await run(inst);
    } catch (e) {
      log(`task ${taskId} failed: ${e.message}`);
      status(TaskState.TASK_STATE_FAILED, `itk-js-agent failed: ${e.message}`);
      return;
    }
    const answer = outputs.join('\n');
    if (!hold) {
      status(TaskState.TASK_STATE_COMPLETED, answer);
      return;
    }
    status(TaskState.TASK_STATE_WORKING, `${answer}\n${FINISHED}`);
    for (let i = 0; i < HOLD_UPDATES; i++) {
      let timer;
      const canceled = await new Promise((resolve) => {
        this.cancels.set(taskId, () => resolve(true));
        timer = setTimeout(() => resolve(false), HOLD_INTERVAL_MS);
      });
      clearTimeout(timer);
      if (canceled) return; // cancelTask published CANCELED
      this.cancels.delete(taskId);
      status(TaskState.TASK_STATE_WORKING);
    }
    status(TaskState.TASK_STATE_COMPLETED, answer);
  };
}

function agentCard(httpPort, grpcPort, versions) {
  const urls = {
    JSONRPC: `http://127.0.0.1:${httpPort}/jsonrpc/`,
    'HTTP+JSON': `http://127.0.0.1:${httpPort}/rest/`,
    GRPC: `127.0.0.1:${grpcPort}`,
  };
  const supportedInterfaces = [];
  for (const protocolVersion of versions) {
    for (const [protocolBinding, url] of Object.entries(urls)) {
      supportedInterfaces.push({ url, protocolBinding, tenant: '', protocolVersion });
    }
  }
  return {
    name: 'itk-js-agent',
    description: 'ITK agent on the official JS A2A SDK (@a2a-js/sdk)',
    supportedInterfaces,
    provider: undefined,
    version: '1.0.0',
    documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['application/x-protobuf', 'text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{
      id: 'itk',
      name: 'itk',
      description: 'Runs an itk.Instruction: answers, calls agents, holds tasks.',
      tags: ['itk'],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    }],
    signatures: [],
    iconUrl: undefined,
  };
}

function main() {
  const { values } = parseArgs({
    options: { httpPort: { type: 'string' }, grpcPort: { type: 'string' }, protocol: { type: 'string', default: '1.0' } },
  });
  const httpPort = Number(values.httpPort);
  const grpcPort = Number(values.grpcPort);
  if (!httpPort || !grpcPort || !['1.0', '0.3'].includes(values.protocol)) {
    console.error('usage: node js_agent.mjs --httpPort N --grpcPort M [--protocol 1.0|0.3]');
    process.exit(2);
  }
  OUTGOING_LEGACY = values.protocol === '0.3';
  const card = agentCard(httpPort, grpcPort, OUTGOING_LEGACY ? ['0.3'] : ['1.0', '0.3']);
  const pushStore = new InMemoryPushNotificationStore();
  const requestHandler = new DefaultRequestHandler(
    card,
    new InMemoryTaskStore(),
    new ItkExecutor(),
    undefined,
    pushStore,
    createLegacyAwarePushNotificationSender(pushStore),
  );
  const legacyCompat = { enabled: true };
  const userBuilder = UserBuilder.noAuthentication;

  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  app.use('/jsonrpc', jsonRpcHandler({ requestHandler, userBuilder, legacyCompat }));
  app.use('/rest', restHandler({ requestHandler, userBuilder, legacyCompat }));
  const http = app.listen(httpPort, '127.0.0.1');
  http.on('error', (err) => {
    console.error('itk-js-agent: HTTP listen failed:', err);
    process.exit(1);
  });

  const server = new grpc.Server();
  server.addService(A2AService, grpcService({ requestHandler, userBuilder }));
  server.addService(LegacyA2AService, legacyGrpcService({ requestHandler, userBuilder }));
  server.bindAsync(`127.0.0.1:${grpcPort}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error('itk-js-agent: gRPC bind failed:', err);
      process.exit(1);
    }
  });

  const stop = () => {
    server.forceShutdown();
    http.close();
    http.closeAllConnections?.();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
