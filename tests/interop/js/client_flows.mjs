// Interop flows: the official JS A2A SDK (@a2a-js/sdk 1.x) against `heddle serve`.
//
// Usage: node client_flows.mjs BASE_URL VERSION [BINDING]
//   BASE_URL  e.g. http://127.0.0.1:8080/api/v1/agents  (agents live at BASE_URL/{id})
//   VERSION   "1.0" or "0.3"
//   BINDING   "JSONRPC" (default), "HTTP+JSON" (1.0 only) or "GRPC"
//
// The card handed to ClientFactory keeps only the agent's interfaces for
// BINDING and VERSION, so the factory builds exactly that transport:
//   JSONRPC 1.0    JsonRpcTransport          (A2A-Version: 1.0)
//   JSONRPC 0.3    LegacyJsonRpcTransport    (JsonRpcTransportFactory({ legacyCompat }))
//   HTTP+JSON 1.0  RestTransport             (RestTransportFactory)
//   GRPC 1.0       GrpcTransport             (@a2a-js/sdk/client/grpc GrpcTransportFactory;
//                                             lf.a2a.v1.A2AService, tenant field = agent id)
//   GRPC 0.3       LegacyGrpcTransport       (GrpcTransportFactory({ legacyCompat });
//                                             a2a.v1.A2AService, `a2a-tenant` metadata
//                                             added by a client CallInterceptor)
//
// Prints `PASS js-v1 echo` (or FAIL ...) per flow; exits 1 if any flow failed.
// Labels: js-v1, js-v0.3 (JSON-RPC), js-rest-v1, js-grpc-v1, js-grpc-v0.3.

import { randomUUID } from 'node:crypto';

import * as grpc from '@grpc/grpc-js';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { isLegacyAgentCard, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';

// A tiny but well-formed PDF (one empty page).
const PDF_BYTES = Buffer.from(
  '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n' +
    '2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n' +
    '3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n' +
    'trailer<</Root 1 0 R>>\n%%EOF\n',
  'latin1',
);
const STREAM_TEXT =
  'Report, part one: the findings. Part two: what they mean. Part three: what to do next.';
const WRITER_ANSWER = 'For the board, one page.';
const CANCEL_PREFIX = 'test-resubscribe-message-id';

class Failure extends Error {}

function check(cond, what) {
  if (!cond) throw new Failure(what);
}

const stateName = (s) => TaskState[s] ?? String(s);

function textOf(parts) {
  return (parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('');
}

const textPart = (text) => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: '',
});

function userMessage(parts, { taskId = '', contextId = '', messageId } = {}) {
  return {
    messageId: messageId ?? randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function sendRequest(message, returnImmediately = false) {
  return {
    tenant: '',
    message,
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  };
}

function isTask(result) {
  return result && typeof result === 'object' && 'status' in result && !('messageId' in result);
}

const LABELS = {
  'JSONRPC 1.0': 'js-v1',
  'JSONRPC 0.3': 'js-v0.3',
  'HTTP+JSON 1.0': 'js-rest-v1',
  'GRPC 1.0': 'js-grpc-v1',
  'GRPC 0.3': 'js-grpc-v0.3',
};

// The card's v0.3 gRPC url is `http://host:port`; grpc-js wants `host:port`.
const grpcTarget = (url) => url.replace(/^(https?|grpc):\/\//, '').replace(/\/+$/, '');

class Runner {
  constructor(base, version, binding = 'JSONRPC') {
    this.base = base.replace(/\/+$/, '');
    this.version = version;
    this.binding = binding;
    this.legacy = version === '0.3';
    this.label = LABELS[`${binding} ${version}`];
    this.failed = 0;
    // JSONRPC: [A2A-Version header, method]; HTTP+JSON: [header, 'VERB path'];
    // GRPC: [a2a-version metadata, method path, a2a-tenant metadata].
    this.wire = [];
    this.fetchImpl = async (url, init) => {
      const path = new URL(String(url)).pathname;
      if (!path.endsWith('/.well-known/agent-card.json')) {
        const headers = new Headers(init?.headers);
        const header = headers.get('A2A-Version') ?? '';
        if (this.binding === 'JSONRPC') {
          if (init?.method === 'POST' && typeof init.body === 'string') {
            let method = '';
            try {
              method = JSON.parse(init.body).method ?? '';
            } catch {
              /* not JSON-RPC */
            }
            this.wire.push([header, method]);
          }
        } else {
          this.wire.push([header, `${init?.method ?? 'GET'} ${path}`]);
        }
      }
      return fetch(url, init);
    };
    const legacyCompat = this.legacy ? { legacyCompat: { enabled: true } } : {};
    this.resolver = new DefaultAgentCardResolver({ fetchImpl: this.fetchImpl, ...legacyCompat });
    // Records every gRPC call (method path and metadata) on the wire.
    const recorder = (options, nextCall) =>
      new grpc.InterceptingCall(nextCall(options), {
        start: (metadata, listener, next) => {
          const get = (k) => String(metadata.get(k)[0] ?? '');
          this.wire.push([get('a2a-version'), options.method_definition.path, get('a2a-tenant')]);
          next(metadata, listener);
        },
      });
    const grpcFactory = new GrpcTransportFactory({ grpcCallOptions: { interceptors: [recorder] }, ...legacyCompat });
    const transports = {
      JSONRPC: new JsonRpcTransportFactory({ fetchImpl: this.fetchImpl, ...legacyCompat }),
      'HTTP+JSON': new RestTransportFactory({ fetchImpl: this.fetchImpl, ...legacyCompat }),
      // Same factory, with the card's url turned into a grpc-js target.
      GRPC: {
        get protocolName() {
          return grpcFactory.protocolName;
        },
        create: (url, card) => grpcFactory.create(grpcTarget(url), card),
      },
    };
    // v0.3 gRPC has no `tenant` field: the agent id travels as `a2a-tenant`
    // metadata, which the legacy transport builds from serviceParameters.
    const tenantMetadata = {
      async before(args) {
        const iface = (args.agentCard.supportedInterfaces ?? []).find((i) => i.protocolBinding === 'GRPC');
        args.options = {
          ...args.options,
          serviceParameters: { ...args.options?.serviceParameters, 'a2a-tenant': iface?.tenant ?? '' },
        };
      },
      async after() {},
    };
    this.factory = new ClientFactory({
      transports: [transports[binding]],
      cardResolver: this.resolver,
      clientConfig: {
        polling: false,
        ...(binding === 'GRPC' && this.legacy ? { interceptors: [tenantMetadata] } : {}),
      },
    });
    this.echoTask = undefined;
    this.writerTaskId = '';
  }

  // The trailing slash matters: DefaultAgentCardResolver resolves the card
  // path with WHATWG URL rules (new URL('.well-known/agent-card.json', base)),
  // which would drop a last path segment that has no trailing slash.
  agentUrl(agent) {
    return `${this.base}/${agent}/`;
  }

  /** Card discovery with the SDK's resolver, client from ClientFactory. */
  async client(agent) {
    const card = await this.resolver.resolve(this.agentUrl(agent));
    // Keep only the interfaces the card advertises for this run's binding and
    // protocol version (the factory prefers 1.0 whenever the card offers it).
    const keep = card.supportedInterfaces.filter(
      (i) => i.protocolBinding === this.binding && /^0\.3(\.|$)/.test(i.protocolVersion) === this.legacy,
    );
    check(keep.length > 0, `${agent} card has no ${this.binding} ${this.version} interface`);
    if (this.binding === 'GRPC') check(keep[0].tenant === agent, `${agent} GRPC interface tenant '${keep[0].tenant}'`);
    const client = await this.factory.createFromAgentCard({ ...card, supportedInterfaces: keep });
    const want = this.legacy ? '0.3' : '1.0';
    check(client.protocolVersion === want, `factory negotiated ${client.protocolVersion}, wanted ${want}`);
    check(client.transport.protocolName === this.binding || client.transport.base?.protocolName === this.binding,
      `factory built a ${client.transport.protocolName ?? client.transport.base?.protocolName} transport`);
    return client;
  }

  checkWire(since, flow) {
    const calls = this.wire.slice(since);
    if (flow === 'card') return; // plain GETs of the card only
    if (this.binding === 'GRPC') {
      const service = this.legacy ? '/a2a.v1.A2AService/' : '/lf.a2a.v1.A2AService/';
      check(calls.length > 0, 'no gRPC call was recorded');
      for (const [version, method, tenant] of calls) {
        check(method.startsWith(service), `${this.label} called ${method}, want ${service}*`);
        check(version === this.version, `${method} sent a2a-version '${version}'`);
        if (this.legacy) check(tenant !== '', `${method} sent no a2a-tenant metadata`);
      }
      return;
    }
    if (this.binding === 'HTTP+JSON') {
      check(calls.length > 0, 'no REST request was recorded');
      for (const [header, call] of calls) {
        const path = call.split(' ')[1];
        check(header === '1.0', `REST ${call} with A2A-Version '${header}'`);
        check(path.includes('/rest/') && !path.includes('/rest/v1/'), `REST v1.0 request to ${call}`);
      }
      return;
    }
    for (const [header, method] of calls) {
      if (this.legacy) {
        check(header === '0.3' && method.includes('/'), `v0.3 run sent ${method} with A2A-Version '${header}'`);
      } else {
        check(header === '1.0' && !method.includes('/'), `v1.0 run sent ${method} with A2A-Version '${header}'`);
      }
    }
  }

  async sendBlocking(client, message, returnImmediately = false) {
    const result = await client.sendMessage(sendRequest(message, returnImmediately));
    check(isTask(result), `send result is not a task: ${JSON.stringify(result)}`);
    return result;
  }

  // ------------------------------------------------------------------ flows

  async flowCard() {
    const res = await fetch(`${this.agentUrl('echo')}.well-known/agent-card.json`);
    check(res.ok, `GET agent card: HTTP ${res.status}`);
    const raw = await res.json();
    const card = await this.resolver.resolve(this.agentUrl('echo'));
    const versions = [...new Set(card.supportedInterfaces.map((i) => i.protocolVersion))].sort();
    check(JSON.stringify(versions) === '["0.3","1.0"]', `supportedInterfaces versions ${versions}`);
    // What a v0.3-only reader sees: the card without supportedInterfaces.
    const { supportedInterfaces, ...legacyOnly } = raw;
    check(isLegacyAgentCard(legacyOnly), 'card without supportedInterfaces is not a v0.3 card');
    const legacyCard = parseLegacyAgentCard(legacyOnly);
    check(legacyCard.supportedInterfaces.length >= 1, 'v0.3 view of the card has no interface');
    const iface = legacyCard.supportedInterfaces[0];
    check(iface.protocolBinding === 'JSONRPC' && iface.protocolVersion.startsWith('0.3'),
      `v0.3 view of the card: ${JSON.stringify(iface)}`);
    const v03 = supportedInterfaces.find((i) => i.protocolVersion === '0.3');
    check(iface.url === v03.url, `card url ${iface.url} != 0.3 interface url ${v03.url}`);
  }

  async flowEcho() {
    const client = await this.client('echo');
    const task = await this.sendBlocking(client, userMessage([textPart('hello')]));
    check(task.status.state === TaskState.TASK_STATE_COMPLETED, `echo state ${stateName(task.status.state)}`);
    check(task.artifacts.length === 1, `echo has ${task.artifacts.length} artifacts`);
    const got = textOf(task.artifacts[0].parts);
    check(got === 'hello', `echo artifact text ${JSON.stringify(got)}`);
    this.echoTask = task;
  }

  async flowWriter() {
    const client = await this.client('writer');
    const first = await this.sendBlocking(
      client,
      userMessage([
        textPart('Please write a report on the attached notes.'),
        {
          content: { $case: 'raw', value: PDF_BYTES },
          metadata: undefined,
          filename: 'notes.pdf',
          mediaType: 'application/pdf',
        },
      ]),
    );
    check(first.status.state === TaskState.TASK_STATE_INPUT_REQUIRED,
      `writer first state ${stateName(first.status.state)}`);
    const question = textOf(first.status.message?.parts);
    check(question.trim() !== '', 'INPUT_REQUIRED without a question');
    const second = await this.sendBlocking(
      client,
      userMessage([textPart(WRITER_ANSWER)], { taskId: first.id, contextId: first.contextId }),
    );
    check(second.id === first.id, 'second turn made a new task');
    check(second.status.state === TaskState.TASK_STATE_COMPLETED,
      `writer second state ${stateName(second.status.state)}`);
    const reports = second.artifacts.filter((a) => a.name === 'report');
    check(reports.length === 1,
      `artifacts ${JSON.stringify(second.artifacts.map((a) => a.name))}, want one "report"`);
    const report = textOf(reports[0].parts);
    check(report.includes(WRITER_ANSWER), `report does not mention the answer: ${JSON.stringify(report)}`);
    this.writerTaskId = first.id;
  }

  async flowStream() {
    const client = await this.client('writer-stream');
    const kinds = [];
    const artifacts = new Map();
    let lastChunkSeen = false;
    let finalState;
    let taskId = '';
    // @a2a-js/sdk 1.3.0's LegacyGrpcTransport drops `append` when it maps a
    // v0.3 TaskArtifactUpdateEvent (FromProto.taskArtifactUpdateEvent copies
    // lastChunk only), so every chunk arrives with append=false. There, chunks
    // of a known artifact are appended regardless, and the run records it.
    const appendDropped = this.binding === 'GRPC' && this.legacy;
    let note;
    for await (const event of client.sendMessageStream(sendRequest(userMessage([textPart('Write the report.')])))) {
      const kind = event.payload?.$case;
      const value = event.payload?.value;
      kinds.push(kind);
      if (kind === 'task') {
        taskId = value.id;
        finalState = value.status?.state;
      } else if (kind === 'statusUpdate') {
        check(value.taskId === taskId, 'status update for another task');
        finalState = value.status?.state;
        if (!kinds.includes('artifactUpdate')) {
          check(finalState === TaskState.TASK_STATE_WORKING, `status before the artifacts is ${stateName(finalState)}`);
        }
      } else if (kind === 'artifactUpdate') {
        check(value.taskId === taskId, 'artifact update for another task');
        check(!lastChunkSeen, 'chunk after lastChunk');
        const id = value.artifact.artifactId;
        if (appendDropped && !value.append && artifacts.has(id)) {
          note = 'SDK dropped append on v0.3 gRPC chunks; appended by artifactId';
          artifacts.get(id).push(...value.artifact.parts);
        } else if (value.append) {
          check(artifacts.has(id), 'append to an unknown artifact');
          artifacts.get(id).push(...value.artifact.parts);
        } else {
          artifacts.set(id, [...value.artifact.parts]);
        }
        lastChunkSeen = value.lastChunk;
      } else {
        throw new Failure(`unexpected stream event ${kind}`);
      }
    }
    check(kinds[0] === 'task', `first event is ${kinds[0]}`);
    const chunks = kinds.filter((k) => k === 'artifactUpdate').length;
    check(chunks === 3, `${chunks} artifact chunks, want 3`);
    check(lastChunkSeen, 'no chunk had lastChunk=true');
    check(kinds.slice(0, kinds.indexOf('artifactUpdate')).includes('statusUpdate'),
      `no WORKING status before the artifacts: ${kinds}`);
    check(kinds[kinds.length - 1] === 'statusUpdate', `stream ended with ${kinds[kinds.length - 1]}`);
    check(finalState === TaskState.TASK_STATE_COMPLETED, `stream final state ${stateName(finalState)}`);
    check(artifacts.size === 1, `${artifacts.size} artifacts`);
    const text = textOf([...artifacts.values()][0]);
    check(text === STREAM_TEXT, `accumulated ${JSON.stringify(text)}`);
    return note;
  }

  async flowGet() {
    check(this.writerTaskId !== '', 'writer flow did not run');
    const client = await this.client('writer');
    const task = await client.getTask({ tenant: '', id: this.writerTaskId, historyLength: 1 });
    check(task.id === this.writerTaskId, 'GetTask returned another task');
    check(task.history.length === 1, `historyLength 1 gave ${task.history.length} messages`);
    check(task.status.state === TaskState.TASK_STATE_COMPLETED, `writer task state ${stateName(task.status.state)}`);
  }

  async flowList() {
    check(this.echoTask, 'echo flow did not run');
    const client = await this.client('echo');
    // A second echo task so that pageSize 1 needs at least two pages.
    await this.sendBlocking(client, userMessage([textPart('again')]));
    const listRequest = (extra) => ({
      tenant: '',
      contextId: '',
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: '',
      statusTimestampAfter: undefined,
      ...extra,
    });
    const listed = await client.listTasks(listRequest({}));
    const allIds = listed.tasks.map((t) => t.id);
    check(allIds.includes(this.echoTask.id), 'ListTasks does not contain the echo task');
    const seen = [];
    let token = '';
    let pages = 0;
    for (;;) {
      const page = await client.listTasks(listRequest({ pageSize: 1, pageToken: token }));
      pages += 1;
      check(page.tasks.length <= 1, `pageSize 1 gave ${page.tasks.length}`);
      seen.push(...page.tasks.map((t) => t.id));
      token = page.nextPageToken;
      if (!token) break;
      check(pages < 1000, 'page chain does not end');
    }
    check(pages >= 2, `pageSize 1 over ${allIds.length} tasks gave 1 page`);
    check(new Set(seen).size === seen.length, 'a task appeared on two pages');
    if (!listed.nextPageToken) {
      // The unpaged call returned them all.
      check(seen.length === allIds.length && allIds.every((id) => seen.includes(id)),
        'paged ids differ from the unpaged list');
    }
  }

  async flowCancel() {
    check(this.echoTask, 'echo flow did not run');
    const client = await this.client('conformance');
    const task = await this.sendBlocking(
      client,
      // v1.0: this messageId prefix keeps the conformance agent WORKING for
      // ~10 s. v0.3: any message is WORKING for ~1.5 s (then INPUT_REQUIRED).
      userMessage([textPart('cancel me')], {
        messageId: this.legacy ? randomUUID() : `${CANCEL_PREFIX}-${randomUUID()}`,
      }),
      true,
    );
    check([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(task.status.state),
      `non-blocking send state ${stateName(task.status.state)}`);
    const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    check(canceled.id === task.id, 'cancel returned another task');
    check(canceled.status.state === TaskState.TASK_STATE_CANCELED, `after cancel: ${stateName(canceled.status.state)}`);
    // Cancel again: the task is already CANCELED. Record what happens.
    let againNote;
    try {
      const again = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
      againNote = `second cancel -> task ${stateName(again.status.state)}`;
    } catch (e) {
      againNote = `second cancel -> ${e?.name ?? e}`;
    }
    // Cancel a COMPLETED task: TaskNotCancelable (-32002).
    const echoClient = await this.client('echo');
    let error;
    try {
      const got = await echoClient.cancelTask({ tenant: '', id: this.echoTask.id, metadata: undefined });
      error = new Failure(`canceling a completed task returned ${stateName(got.status.state)}, want TaskNotCancelable`);
    } catch (e) {
      check(e instanceof TaskNotCancelableError,
        `canceling a completed task threw ${e?.name}: ${e?.message}, want TaskNotCancelableError`);
      // envelopeCode is the JSON-RPC error code; REST and gRPC errors have none.
      if (this.binding === 'JSONRPC') check(e.envelopeCode === -32002, `TaskNotCancelable with code ${e.envelopeCode}`);
    }
    if (error) throw error;
    return againNote;
  }

  async run() {
    const flows = [
      ['card', () => this.flowCard()],
      ['echo', () => this.flowEcho()],
      ['writer', () => this.flowWriter()],
      ['stream', () => this.flowStream()],
      ['get', () => this.flowGet()],
    ];
    if (!this.legacy) flows.push(['list', () => this.flowList()]); // no ListTasks in v0.3
    flows.push(['cancel', () => this.flowCancel()]);
    for (const [name, flow] of flows) {
      const since = this.wire.length;
      let timer;
      try {
        const timeout = new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Failure('timed out after 60 s')), 60_000);
        });
        const note = await Promise.race([flow(), timeout]);
        this.checkWire(since, name);
        console.log(`PASS ${this.label} ${name}${note ? ` (${note})` : ''}`);
      } catch (e) {
        this.failed += 1;
        const why = String(e?.message ?? e).replace(/\s+/g, ' ');
        console.log(`FAIL ${this.label} ${name}: ${e?.name ?? 'Error'}: ${why}`);
        console.error(e);
      } finally {
        clearTimeout(timer);
      }
    }
    return this.failed ? 1 : 0;
  }
}

const [base, version, binding = 'JSONRPC'] = process.argv.slice(2);
if (!base || !LABELS[`${binding} ${version}`]) {
  console.error('usage: node client_flows.mjs BASE_URL 1.0|0.3 [JSONRPC|HTTP+JSON|GRPC]');
  process.exit(2);
}
process.exitCode = await new Runner(base, version, binding).run();
