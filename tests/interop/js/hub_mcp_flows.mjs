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

import { TaskState } from '@a2a-js/sdk';

import { Failure, HubAgent, check, isTask, part, runNamedFlows, stateName, textOf, userRequest } from './hub_flows.mjs';

const dataOf = (parts) => (parts ?? []).filter((p) => p.content?.$case === 'data').map((p) => p.content.value);

const toolCall = (tool, args) => userRequest([part('data', { tool, arguments: args })]);

class Runner extends HubAgent {
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

  run() {
    return runNamedFlows('js-hub-mcp', [
      ['call', () => this.flowCall()],
      ['stream', () => this.flowStream()],
      ['tool-error', () => this.flowToolError()],
      ['bad-arguments', () => this.flowBadArguments()],
    ]);
  }
}

if (process.argv.length !== 3) {
  console.error('usage: node hub_mcp_flows.mjs AGENT_URL');
  process.exit(2);
}
process.exit(await new Runner(process.argv[2]).run());
