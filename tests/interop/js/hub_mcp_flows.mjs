// The official JS A2A client (@a2a-js/sdk 1.x) calling, through a Heddle hub,
// an MCP agent (`kind = "mcp"`) whose server is python/mcp_server.py, all its
// tools skills (crates/heddle-hub/tests/mcp.rs serves it). Each flow calls a
// tool with a data part {"tool": NAME, "arguments": {...}} (as for
// tests/interop/python/hub_mcp_flows.py):
//
//   call           add(2, 3): COMPLETED, one artifact with a data part
//                  {"sum": 5} (the structuredContent)
//   stream         slow(3 steps, 50 ms), streamed: WORKING status messages
//                  "step 1", "step 2", "step 3" (the MCP progress), an
//                  artifact "done after 3 steps", the last status COMPLETED
//   tool-error     fail("no such city"): FAILED, the reason as the status
//                  message
//   bad-arguments  add("two", 3): refused before any task with JSON-RPC
//                  -32602 (the SDK throws RequestMalformedError, its
//                  envelopeCode -32602)
//
// Usage: node hub_mcp_flows.mjs AGENT_URL
//   AGENT_URL  the hub's URL of the agent, e.g. http://127.0.0.1:8080/api/v1/agents/tools
//
// Runs over JSON-RPC v1.0. Prints `PASS js-hub-mcp FLOW` (or FAIL ...) per
// flow; exits 1 if any flow failed.

import { randomUUID } from 'node:crypto';

import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const FLOW_TIMEOUT_MS = 30_000;

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

const dataOf = (parts) => (parts ?? []).filter((p) => p.content?.$case === 'data').map((p) => p.content.value);

// The v1.0 Part: `data` holds any JSON value (google.protobuf.Value).
const dataPart = (value) => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: '',
});

function toolCall(tool, args) {
  return {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [dataPart({ tool, arguments: args })],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false },
    metadata: undefined,
  };
}

const isTask = (r) => r && typeof r === 'object' && 'status' in r && !('messageId' in r);

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

class Runner {
  constructor(url) {
    // The trailing slash keeps the last path segment when the resolver
    // resolves `.well-known/agent-card.json` against it.
    this.url = `${url.replace(/\/+$/, '')}/`;
    this.resolver = new DefaultAgentCardResolver({});
    this.factory = new ClientFactory({
      transports: [new JsonRpcTransportFactory({})],
      cardResolver: this.resolver,
      clientConfig: { polling: false },
    });
    this.failed = 0;
  }

  async client() {
    const card = await this.resolver.resolve(this.url);
    const keep = card.supportedInterfaces.filter(
      (i) => i.protocolBinding === 'JSONRPC' && !/^0\.3(\.|$)/.test(i.protocolVersion),
    );
    check(keep.length > 0, 'the hub card has no JSON-RPC v1.0 interface');
    return this.factory.createFromAgentCard({ ...card, supportedInterfaces: keep });
  }

  async send(client, tool, args) {
    const result = await client.sendMessage(toolCall(tool, args));
    check(isTask(result), `send result is not a task: ${JSON.stringify(result)}`);
    return result;
  }

  async flowCall() {
    const client = await this.client();
    const task = await this.send(client, 'add', { a: 2, b: 3 });
    check(
      task.status.state === TaskState.TASK_STATE_COMPLETED,
      `state ${stateName(task.status.state)}: ${JSON.stringify(textOf(task.status.message?.parts))}`,
    );
    check(task.artifacts.length === 1, `${task.artifacts.length} artifacts`);
    // JSON has one number type: 5 and 5.0 both parse to 5.
    const data = dataOf(task.artifacts[0].parts);
    check(
      data.some(
        (d) => d && typeof d === 'object' && !Array.isArray(d) && Object.keys(d).length === 1 && Number(d.sum) === 5 && typeof d.sum === 'number',
      ),
      `no data part {"sum": 5} in ${JSON.stringify(data)} (text ${JSON.stringify(textOf(task.artifacts[0].parts))})`,
    );
  }

  async flowStream() {
    const client = await this.client();
    const working = [];
    const artifacts = [];
    let last;
    for await (const event of client.sendMessageStream(toolCall('slow', { steps: 3, delay_ms: 50 }))) {
      const kind = event.payload?.$case;
      const value = event.payload?.value;
      if (kind === 'artifactUpdate') {
        artifacts.push(textOf(value.artifact?.parts));
      } else if (kind === 'statusUpdate') {
        last = value.status?.state;
        if (last === TaskState.TASK_STATE_WORKING) working.push(textOf(value.status?.message?.parts));
      }
    }
    // The progress messages, in order, among the WORKING ones (the first
    // says "calling the MCP tool ...").
    let at = 0;
    for (const want of ['step 1', 'step 2', 'step 3']) {
      const i = working.indexOf(want, at);
      check(i >= 0, `WORKING messages ${JSON.stringify(working)}`);
      at = i + 1;
    }
    check(artifacts.includes('done after 3 steps'), `artifacts ${JSON.stringify(artifacts)}`);
    check(last === TaskState.TASK_STATE_COMPLETED, `stream ended ${stateName(last)}`);
  }

  async flowToolError() {
    const client = await this.client();
    const task = await this.send(client, 'fail', { reason: 'no such city' });
    check(task.status.state === TaskState.TASK_STATE_FAILED, `state ${stateName(task.status.state)}`);
    const why = textOf(task.status.message?.parts);
    check(why.includes('no such city'), `status message ${JSON.stringify(why)}`);
  }

  async flowBadArguments() {
    const client = await this.client();
    let result;
    try {
      result = await client.sendMessage(toolCall('add', { a: 'two', b: 3 }));
    } catch (e) {
      if (e instanceof Failure) throw e;
      // The JSON-RPC transport throws the error class mapped from the code
      // (-32602 is RequestMalformedError) and keeps the code as envelopeCode.
      check(
        e?.envelopeCode === -32602,
        `${e?.constructor?.name} (name ${e?.name}, envelopeCode ${e?.envelopeCode}): ${e?.message}`,
      );
      check(String(e.message).includes('input schema'), `message ${JSON.stringify(e.message)}`);
      return;
    }
    throw new Failure(`arguments breaking the schema gave ${JSON.stringify(result)}, want JSON-RPC error -32602`);
  }

  async run() {
    for (const [name, flow] of [
      ['call', () => this.flowCall()],
      ['stream', () => this.flowStream()],
      ['tool-error', () => this.flowToolError()],
      ['bad-arguments', () => this.flowBadArguments()],
    ]) {
      try {
        await withTimeout(flow(), FLOW_TIMEOUT_MS, name);
        console.log(`PASS js-hub-mcp ${name}`);
      } catch (e) {
        this.failed += 1;
        console.log(`FAIL js-hub-mcp ${name}: ${e?.constructor?.name}: ${String(e?.message ?? e).split(/\s+/).join(' ')}`);
        console.error(e?.stack ?? e);
      }
    }
    return this.failed ? 1 : 0;
  }
}

if (process.argv.length !== 3) {
  console.error('usage: node hub_mcp_flows.mjs AGENT_URL');
  process.exit(2);
}
process.exit(await new Runner(process.argv[2]).run());
