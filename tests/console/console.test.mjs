// The console, end to end, in headless Chromium. run.sh starts the hubs and
// sets the environment; each test leaves a screenshot in SCREENSHOTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const HUB = process.env.HUB_URL;
const ADMIN_TOKEN = process.env.ADMIN_TOKEN;
const USER_KEY = process.env.USER_KEY;
const REMOTE_CARD_URL = process.env.REMOTE_CARD_URL;
const SHOTS = process.env.SCREENSHOTS;
const WAIT = { timeout: 15000 };

let browser;
let page;

async function shot(name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}
async function signIn(kind, secret) {
  await page.goto(`${HUB}/console#/signin`);
  await page.selectOption('#kind', kind);
  await page.fill('#credential', secret);
  await page.click('button[type=submit]');
  await page.waitForSelector('#who strong', WAIT);
}
async function signOut() {
  await page.click('#who button');
  await page.waitForSelector('#credential', WAIT);
}
async function state() {
  return (await page.textContent('#task-state')).trim();
}
async function waitState(want) {
  await page.waitForFunction((w) => document.querySelector('#task-state')?.textContent.trim() === w, want, WAIT);
}

before(async () => {
  for (const [k, v] of Object.entries({ HUB, ADMIN_TOKEN, USER_KEY, REMOTE_CARD_URL, SHOTS })) {
    assert.ok(v, `${k} is set by run.sh`);
  }
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
  page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
  page.on('pageerror', (e) => { throw e; });
});
after(async () => { await browser?.close(); });

test('the first view is small and a signed-out visitor is sent to sign in', async () => {
  let bytes = 0;
  page.on('response', async (r) => { if (r.url().startsWith(`${HUB}/console`)) bytes += (await r.body()).length; });
  await page.goto(`${HUB}/console`);
  await page.waitForSelector('#credential', WAIT);
  page.removeAllListeners('response');
  assert.ok(bytes < 100 * 1024, `first view is ${bytes} bytes`);
  await shot('01-sign-in');
});

test('a wrong key is refused without being repeated', async () => {
  await page.selectOption('#kind', 'apiKey');
  await page.fill('#credential', 'hdk_0000000000000000_notakey');
  await page.click('button[type=submit]');
  await page.waitForSelector('p.error', WAIT);
  const html = await page.content();
  assert.ok(!html.includes('notakey'), 'the refused key is not on the page');
});

test('signing in with an API key shows who is signed in, and no secret', async () => {
  await signIn('apiKey', USER_KEY);
  const who = await page.textContent('#who');
  assert.match(who, /key:/);
  assert.ok(!(await page.isVisible('#nav-admin')), 'no admin link for a plain key');
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === 'heddle_console');
  assert.ok(session?.httpOnly && session.sameSite === 'Strict', 'HttpOnly, SameSite=Strict session cookie');
  assert.ok(!(await page.content()).includes(USER_KEY), 'the key is not on the page');
  assert.equal(await page.evaluate(() => document.cookie), '', 'the page cannot read the cookie');
});

test('the writer agent is found by search', async () => {
  await page.fill('#q', 'writer');
  await page.click('form[role=search] button');
  await page.waitForSelector('article.agent a[href="#/agent/writer"]', WAIT);
  const names = await page.$$eval('article.agent h2', (els) => els.map((e) => e.textContent));
  assert.ok(names.length >= 1);
  await shot('02-catalog-search');
  await page.click('article.agent a[href="#/agent/writer"]');
  await page.waitForSelector('pre[aria-label="Agent card"]', WAIT);
  const v1 = await page.textContent('pre[aria-label="Agent card"]');
  assert.match(v1, /supportedInterfaces/);
  await page.click('.tabs button:has-text("v0.3")');
  const v03 = await page.textContent('pre[aria-label="Agent card"]');
  assert.match(v03, /additionalInterfaces/);
  assert.doesNotMatch(v03, /supportedInterfaces/);
  await shot('03-agent-card');
});

let writerTask;
test("the writer's multi-turn flow: a PDF and an instruction, its question answered in place, the report", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'console-'));
  const pdf = join(dir, 'brief.pdf');
  writeFileSync(pdf, '%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n');
  await page.goto(`${HUB}/console#/chat/writer`);
  await page.waitForSelector('#message', WAIT);
  await page.fill('#message', 'Write up the attached brief.');
  await page.setInputFiles('#files', pdf);
  await page.click('#send');
  await waitState('input-required');
  assert.match(await page.textContent('.transcript'), /Who is the report for/);
  assert.match(await page.textContent('.transcript'), /brief\.pdf/);
  await shot('04-writer-question');
  await page.fill('#message', 'The board, one page.');
  await page.click('#send');
  await waitState('completed');
  const report = await page.textContent('.msg.artifact');
  assert.match(report, /board/i);
  writerTask = await page.getAttribute('a:has-text("Inspect task")', 'href');
  assert.ok(writerTask);
  await shot('05-writer-report');
});

test('the task inspector shows the history, the artifacts, the timeline and the trace id', async () => {
  await page.click('a:has-text("Inspect task")');
  await page.waitForSelector('h2:has-text("History")', WAIT);
  const text = await page.textContent('main');
  const history = await page.$$eval('h2:has-text("History") ~ .msg', (els) => els.map((e) => e.textContent));
  assert.ok(history.some((m) => m.includes('The board, one page')), history.join('\n'));
  assert.ok(history.some((m) => m.includes('Who is the report for')), history.join('\n'));
  assert.match(await page.textContent('.msg.artifact'), /Report for The board/);
  assert.doesNotMatch(text, /\[object /);
  assert.match(text, /input-required/);
  assert.match(text, /Trace id: [0-9a-f]{32}/);
  await page.click('summary:has-text("Raw wire")');
  assert.match(await page.textContent('.wire'), /"method": "GetTask"/);
  await shot('06-task-inspector');
});

test("writer-stream's three chunks arrive one by one", async () => {
  await page.goto(`${HUB}/console#/chat/writer-stream`);
  await page.waitForSelector('#message', WAIT);
  // Each chunk's arrival time, as the page adds it.
  await page.evaluate(() => {
    window.chunkTimes = [];
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) {
        if (n.classList?.contains('chunk')) window.chunkTimes.push(performance.now());
      }
    }).observe(document.querySelector('.transcript'), { childList: true, subtree: true });
  });
  await page.fill('#message', 'Stream me a report.');
  await page.click('#send');
  await page.waitForFunction(() => window.chunkTimes.length >= 1, null, WAIT);
  await shot('07-stream-first-chunk');
  await waitState('completed');
  const times = await page.evaluate(() => window.chunkTimes);
  assert.equal(times.length, 3, `three chunks, got ${times.length}`);
  for (let i = 1; i < 3; i++) {
    assert.ok(times[i] - times[i - 1] > 60, `chunk ${i + 1} came ${times[i] - times[i - 1]} ms after chunk ${i}`);
  }
  assert.match(await page.textContent('.msg.artifact'), /part one.*Part two.*Part three/s);
  await page.click('summary:has-text("Raw wire")');
  assert.match(await page.textContent('.wire'), /artifactUpdate/);
  await shot('08-stream-done');
});

test('a task is canceled from the chat', async () => {
  await page.goto(`${HUB}/console#/chat/writer`);
  await page.waitForSelector('#message', WAIT);
  await page.fill('#message', 'A report I will not need.');
  await page.click('#send');
  await waitState('input-required');
  await page.click('#cancel');
  await waitState('canceled');
  assert.ok(await page.isDisabled('#cancel'));
  await shot('09-canceled');
});

test('the task inspector follows a running task live', async () => {
  await page.goto(`${HUB}/console#/chat/writer`);
  await page.waitForSelector('#message', WAIT);
  await page.fill('#message', 'A report to follow.');
  await page.click('#send');
  await waitState('input-required');
  const href = await page.getAttribute('a:has-text("Inspect task")', 'href');
  const [agent, id] = href.replace('#/task/', '').split('/').map(decodeURIComponent);
  await page.click('a:has-text("Inspect task")');
  await page.waitForSelector('h2:has-text("Timeline")', WAIT);
  // Answered from elsewhere: the open inspector sees the task move on.
  const answer = await fetch(`${HUB}/api/v1/agents/${agent}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'api-key': USER_KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: {
      messageId: `answer-${id}`, role: 'ROLE_USER', taskId: id, parts: [{ text: 'The team.' }] } } }),
  });
  assert.equal(answer.status, 200);
  await page.waitForFunction(() => /completed \(live\)/.test(document.querySelector('.timeline').textContent), null, WAIT);
  await shot('10-inspector-live');
});

test('a data part is made from the form the input schema gives, and checked by the hub', async () => {
  const r = await fetch(`${HUB}/api/v1/admin/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ id: 'forecast', kind: 'remote', card_url: REMOTE_CARD_URL, allow_http: true, manifest: {
      agent_name: 'Forecast', endpoint: 'https://forecast.example/a2a', skills: ['forecast'],
      input_schema: { type: 'object', required: ['city'], properties: {
        city: { type: 'string', description: 'Where the forecast is for' },
        days: { type: 'integer', minimum: 1, maximum: 7 } } },
      output_schema: { type: 'object' },
      pricing: { model: 'per_task', rate: 0.01, currency: 'USD' } } }),
  });
  assert.equal(r.status, 201, await r.text());
  // The agent is priced: the user's wallet pays.
  const owner = `key:${USER_KEY.split('_')[1]}`;
  const topup = await fetch(`${HUB}/api/v1/admin/wallets/${encodeURIComponent(owner)}/topup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ amount: 1, currency: 'USD' }),
  });
  assert.equal(topup.status, 200, await topup.text());
  await page.goto(`${HUB}/console#/chat/forecast`);
  await page.waitForSelector('#data-city', WAIT);
  await page.uncheck('#use-stream');
  await page.fill('#data-city', 'Oslo');
  await page.fill('#data-days', '9');
  await page.click('#send');
  await page.waitForSelector('.transcript .error', WAIT);
  assert.match(await page.textContent('.transcript .error'), /greater than the maximum of 7/);
  await page.fill('#data-city', 'Oslo');
  await page.fill('#data-days', '3');
  await page.click('#send');
  await waitState('completed');
  await page.click('summary:has-text("Raw wire")');
  assert.match(await page.textContent('.wire'), /"city": "Oslo",\s*"days": 3/);
  await shot('11-data-form');
  await page.goto(`${HUB}/console#/?q=forecast`);
  await page.waitForSelector('article.agent a[href="#/agent/forecast"]', WAIT);
  assert.match(await page.textContent('article.agent'), /0\.01 USD per task/);
});

test('a plain key gets no admin page', async () => {
  await page.goto(`${HUB}/console#/admin`);
  await page.waitForSelector('h1:has-text("Admin")', WAIT);
  assert.match(await page.textContent('main'), /admin's credentials/);
});

test('an admin registers a remote agent from its card URL and finds it in the catalog', async () => {
  await signOut();
  await signIn('bearer', ADMIN_TOKEN);
  assert.ok(await page.isVisible('#nav-admin'));
  await page.click('#nav-admin');
  await page.waitForSelector('#reg-url', WAIT);
  await page.fill('#reg-id', 'far-echo');
  await page.fill('#reg-url', REMOTE_CARD_URL);
  await page.check('#reg-http');
  await page.click('form:has(#reg-url) button[type=submit]');
  await page.waitForSelector('#register-result a[href="#/agent/far-echo"]', WAIT);
  await page.waitForSelector('tr[data-agent="far-echo"]', WAIT);
  await shot('12-admin-registered');
  await page.goto(`${HUB}/console#/?kind=remote`);
  await page.waitForSelector('article.agent a[href="#/agent/far-echo"]', WAIT);
  const card = await page.textContent('article.agent:has(a[href="#/agent/far-echo"])');
  assert.match(card, /remote/);
  assert.match(card, /upstream: absent/);
  await shot('13-catalog-remote');
  assert.ok(!(await page.content()).includes(ADMIN_TOKEN), 'the admin token is not on the page');
});

test('a broken manifest shows its violations beside the field', async () => {
  await page.goto(`${HUB}/console#/admin`);
  await page.waitForSelector('#manifest', WAIT);
  await page.fill('#manifest', JSON.stringify({ agent_name: 'Broken', endpoint: 'not a url', skills: 'none' }));
  await page.click('form:has(#manifest) button[type=submit]');
  await page.waitForSelector('#manifest-errors li', WAIT);
  const errors = await page.$$eval('#manifest-errors li', (els) => els.map((e) => e.textContent));
  assert.ok(errors.some((e) => e.includes('/skills')), errors.join('\n'));
  assert.ok(await page.$eval('#manifest', (el) => el.classList.contains('field-error')));
  await shot('14-manifest-violations');
});

test('a new API key is shown once, and the remote agent can be disabled and removed', async () => {
  await page.fill('#key-name', 'console-made');
  await page.click('form:has(#key-name) button[type=submit]');
  await page.waitForSelector('#new-key', WAIT);
  const key = (await page.textContent('#new-key')).trim();
  assert.match(key, /^hdk_/);
  await shot('15-new-key');
  await page.reload();
  await page.waitForSelector('#key-name', WAIT);
  assert.ok(!(await page.content()).includes(key), 'the key is gone after a reload');
  await page.click('tr[data-agent="far-echo"] button:has-text("Disable")');
  await page.waitForSelector('tr[data-agent="far-echo"] button:has-text("Enable")', WAIT);
  page.once('dialog', (d) => d.accept());
  await page.click('tr[data-agent="far-echo"] button:has-text("Remove")');
  await page.waitForFunction(() => !document.querySelector('tr[data-agent="far-echo"]'), null, WAIT);
  await shot('16-admin-after');
});

test("a caller's wallet is topped up and its balance charted over time", async () => {
  const caller = (await page.textContent('tr:has-text("console-user") code')).trim();
  await page.fill('#wallet-owner', caller);
  await page.click('form:has(#wallet-owner) button');
  await page.waitForSelector('#topup-amount', WAIT);
  const balance = async () => Number((await page.textContent('main')).match(/Balances: ([0-9.]+) USD/)[1]);
  const before = await balance();
  for (const amount of ['5', '2.5']) {
    await page.fill('#topup-amount', amount);
    await page.click('form:has(#topup-amount) button');
    await page.waitForFunction((a) => document.querySelector('main').textContent.includes(`${a} USD`), amount, WAIT);
  }
  await page.waitForFunction((b) => document.querySelector('main').textContent.includes(`Balances: ${b} USD`), String(Math.round((before + 7.5) * 100) / 100), WAIT);
  const points = await page.getAttribute('svg.chart polyline', 'points');
  assert.ok(points.trim().split(' ').length >= 3, points);
  await shot('17-wallet');
});

test("an open hub's console shows its catalog without signing in", async () => {
  const open = new URL(REMOTE_CARD_URL).origin;
  await page.goto(`${open}/console`);
  await page.waitForSelector('article.agent a[href="#/agent/echo"]', WAIT);
  assert.match(await page.textContent('#who'), /Sign in/);
  await page.goto(`${open}/console#/chat/echo`);
  await page.waitForSelector('#message', WAIT);
  await page.fill('#message', 'hello, open hub');
  await page.click('#send');
  await waitState('completed');
  assert.match(await page.textContent('.msg.artifact'), /hello, open hub/);
  await shot('18-open-hub');
});

test('every control has a label and the catalog search works from the keyboard', async () => {
  const unlabelled = async () => page.$$eval('main input, main select, main textarea, main button', (els) => els
    .filter((e) => e.type !== 'hidden')
    .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !(e.tagName === 'BUTTON' && e.textContent.trim()))
    .map((e) => e.outerHTML.slice(0, 80)));
  for (const view of ['#/', '#/agent/writer', '#/chat/writer', '#/admin', '#/tasks']) {
    await page.goto(`${HUB}/console${view}`);
    await page.waitForSelector('main h1', WAIT);
    await page.waitForLoadState('networkidle');
    assert.deepEqual(await unlabelled(), [], view);
  }
  await page.goto(`${HUB}/console#/`);
  await page.waitForSelector('#q', WAIT);
  await page.focus('#q');
  await page.keyboard.type('stream');
  await page.keyboard.press('Enter');
  await page.waitForSelector('article.agent a[href="#/agent/writer-stream"]', WAIT);
  const found = await page.$$eval('article.agent h2', (els) => els.map((e) => e.textContent));
  assert.ok(!found.includes('Report writer'), found.join(', '));
});

test('the console is usable at phone width', async () => {
  await page.setViewportSize({ width: 380, height: 800 });
  await page.goto(`${HUB}/console#/`);
  await page.waitForSelector('article.agent', WAIT);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow} px wider than the phone`);
  await shot('19-phone');
});
