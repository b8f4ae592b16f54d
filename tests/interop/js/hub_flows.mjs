// What the flow scripts calling agents through a Heddle hub share
// (hub_llm_flows.mjs, hub_mcp_flows.mjs): checks, v1.0 parts and requests,
// a JSON-RPC v1.0 client of a hub agent, and the PASS/FAIL runner.

import { randomUUID } from 'node:crypto';

import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

/** Longest one flow may take. */
const FLOW_TIMEOUT_MS = 30_000;

export class Failure extends Error {}

export function check(cond, what) {
  if (!cond) throw new Failure(what);
}

export const stateName = (s) => TaskState[s] ?? String(s);

export function textOf(parts) {
  return (parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('');
}

/** A v1.0 Part of `$case` (`text`, or `data`: any JSON value). */
export const part = ($case, value) => ({
  content: { $case, value },
  metadata: undefined,
  filename: '',
  mediaType: '',
});

/** A SendMessage request of a user message with `parts`. */
export function userRequest(parts, { taskId = '', contextId = '' } = {}) {
  return {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId,
      taskId,
      role: Role.ROLE_USER,
      parts,
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false },
    metadata: undefined,
  };
}

export const isTask = (r) => r && typeof r === 'object' && 'status' in r && !('messageId' in r);

/** The agent at a hub URL, reached over JSON-RPC v1.0 only. */
export class HubAgent {
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
  }

  async client() {
    const card = await this.resolver.resolve(this.url);
    const keep = card.supportedInterfaces.filter(
      (i) => i.protocolBinding === 'JSONRPC' && !/^0\.3(\.|$)/.test(i.protocolVersion),
    );
    check(keep.length > 0, 'the hub card has no JSON-RPC v1.0 interface');
    return this.factory.createFromAgentCard({ ...card, supportedInterfaces: keep });
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs each `[name, flow]` in turn, bounded, printing `PASS LABEL NAME` or
 * `FAIL LABEL NAME: why`; 1 if any failed, else 0.
 */
export async function runNamedFlows(label, flows) {
  let failed = 0;
  for (const [name, flow] of flows) {
    try {
      await withTimeout(flow(), FLOW_TIMEOUT_MS, name);
      console.log(`PASS ${label} ${name}`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL ${label} ${name}: ${e?.constructor?.name}: ${String(e?.message ?? e).split(/\s+/).join(' ')}`);
      console.error(e?.stack ?? e);
    }
  }
  return failed ? 1 : 0;
}
