// The official JS A2A client (@a2a-js/sdk 1.x) calling, through a Heddle hub,
// an LLM agent (`kind = "llm"`) whose endpoint is the stand-in
// chat-completions server of crates/heddle-hub/tests/llm.rs. That test scripts
// the stand-in's answers in the order of these flows (as for
// tests/interop/python/hub_llm_flows.py):
//
//   send       "Hello, world." in one artifact, usage on the task's metadata
//   stream     "One", " two", " three", "." as chunks of one artifact, the
//              last one marked lastChunk
//   ask-user   the model asks "Which city?" (INPUT_REQUIRED); the reply
//              "Paris" gets "Sunny in Paris."
//
// Usage: node hub_llm_flows.mjs AGENT_URL
//   AGENT_URL  the hub's URL of the agent, e.g. http://127.0.0.1:8080/api/v1/agents/chat
//
// Runs over JSON-RPC v1.0. Prints `PASS js-hub-llm FLOW` (or FAIL ...) per
// flow; exits 1 if any flow failed.

import { TaskState } from '@a2a-js/sdk';

import { HubAgent, check, isTask, part, runNamedFlows, stateName, textOf, userRequest } from './hub_flows.mjs';

const USAGE_KEY = 'https://heddle.dev/extensions/usage/v1';

const request = (text, ids) => userRequest([part('text', text)], ids);

class Runner extends HubAgent {
  async send(client, text, task) {
    const result = await client.sendMessage(
      request(text, task ? { taskId: task.id, contextId: task.contextId } : {}),
    );
    check(isTask(result), `send result is not a task: ${JSON.stringify(result)}`);
    return result;
  }

  async flowSend() {
    const client = await this.client();
    const task = await this.send(client, 'Hi');
    check(task.status.state === TaskState.TASK_STATE_COMPLETED, `state ${stateName(task.status.state)}`);
    check(task.artifacts.length === 1, `${task.artifacts.length} artifacts`);
    const got = textOf(task.artifacts[0].parts);
    check(got === 'Hello, world.', `artifact ${JSON.stringify(got)}`);
    const usage = task.metadata?.[USAGE_KEY];
    check(usage && usage.promptTokens > 0, `usage in ${JSON.stringify(task.metadata)}`);
  }

  async flowStream() {
    const client = await this.client();
    const chunks = [];
    const flags = [];
    let last;
    for await (const event of client.sendMessageStream(request('Count'))) {
      const kind = event.payload?.$case;
      const value = event.payload?.value;
      if (kind === 'artifactUpdate') {
        chunks.push(textOf(value.artifact.parts));
        flags.push([value.append, value.lastChunk]);
      } else if (kind === 'statusUpdate') {
        last = value.status?.state;
      }
    }
    check(JSON.stringify(chunks) === JSON.stringify(['One', ' two', ' three', '.']), `chunks ${JSON.stringify(chunks)}`);
    check(
      JSON.stringify(flags) === JSON.stringify([[false, false], [true, false], [true, false], [true, true]]),
      `append/lastChunk ${JSON.stringify(flags)}`,
    );
    check(last === TaskState.TASK_STATE_COMPLETED, `stream ended ${stateName(last)}`);
  }

  async flowAskUser() {
    const client = await this.client();
    const asked = await this.send(client, "What's the weather?");
    check(asked.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, `first turn ${stateName(asked.status.state)}`);
    const question = textOf(asked.status.message?.parts);
    check(question === 'Which city?', `question ${JSON.stringify(question)}`);
    const done = await this.send(client, 'Paris', asked);
    check(done.id === asked.id, 'the reply made another task');
    check(done.status.state === TaskState.TASK_STATE_COMPLETED, `second turn ${stateName(done.status.state)}`);
    const got = textOf(done.artifacts[0].parts);
    check(got === 'Sunny in Paris.', `answer ${JSON.stringify(got)}`);
  }

  run() {
    return runNamedFlows('js-hub-llm', [
      ['send', () => this.flowSend()],
      ['stream', () => this.flowStream()],
      ['ask-user', () => this.flowAskUser()],
    ]);
  }
}

if (process.argv.length !== 3) {
  console.error('usage: node hub_llm_flows.mjs AGENT_URL');
  process.exit(2);
}
process.exit(await new Runner(process.argv[2]).run());
