// Heddle console. Talks to the hub only through its public APIs (discovery,
// each agent's card and JSON-RPC endpoint, the admin and wallet APIs), as
// any client could. Text from the hub or an agent is always put in the page
// as text, never as markup.
'use strict';

const main = () => document.getElementById('main');
let me = { signedIn: false, auth: {} };
// What the current view holds open: its streams end and its object URLs
// are freed when another view takes its place.
let viewAbort = new AbortController();
let viewUrls = [];
function newView() {
  viewAbort.abort();
  viewAbort = new AbortController();
  for (const u of viewUrls) URL.revokeObjectURL(u);
  viewUrls = [];
}

// ---- small helpers -------------------------------------------------------

/** An element: h('div', {class: 'x', onclick: f}, 'text', child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const svgNs = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const enc = encodeURIComponent;
const pretty = (v) => JSON.stringify(v, null, 2);
const shortState = (st) => String(st || 'unknown').replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
const TERMINAL = ['completed', 'failed', 'canceled', 'rejected'];
function show(...nodes) { main().replaceChildren(...nodes.flat(2).filter((n) => n !== null && n !== undefined && n !== false)); }
function fail(where, err) { return h('p', { class: 'error', role: 'alert' }, `${where}: ${err.message || err}`); }
function randomHex(bytes) {
  const a = new Uint8Array(bytes); crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}
function when(ms) { return ms ? new Date(ms).toLocaleString() : ''; }
function badge(text, tone, label) { return h('span', { class: `badge ${tone || ''}`, title: label || text }, text); }

// ---- the hub's APIs ------------------------------------------------------

/** One HTTP call; the session cookie rides along, and its CSRF token. */
async function api(method, path, body, headers) {
  const hs = Object.assign({ Accept: 'application/json' }, headers || {});
  if (body !== undefined) hs['Content-Type'] = 'application/json';
  if (me.csrf) hs['x-heddle-csrf'] = me.csrf;
  const res = await fetch(path, {
    method, headers: hs, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  return { ok: res.ok, status: res.status, json, text };
}
function problemText(r) {
  const j = r.json || {};
  return j.detail || (j.error && j.error.message) || j.title || `HTTP ${r.status}`;
}

/** The REST request a JSON-RPC call stands for, for the raw wire view. */
function restOf(agent, method, params) {
  const base = `/api/v1/agents/${enc(agent)}/rest`;
  switch (method) {
    case 'SendMessage': return `POST ${base}/message:send\n${pretty(params)}`;
    case 'SendStreamingMessage': return `POST ${base}/message:stream\n${pretty(params)}`;
    case 'GetTask': return `GET ${base}/tasks/${enc(params.id)}`;
    case 'CancelTask': return `POST ${base}/tasks/${enc(params.id)}:cancel`;
    case 'ListTasks': return `GET ${base}/tasks`;
    default: return '';
  }
}

/** Where the raw JSON-RPC requests and answers of a view are shown. */
class Wire {
  constructor() {
    this.list = h('ol', { class: 'wire' });
    this.el = h('details', { class: 'panel' }, h('summary', {}, 'Raw wire (JSON-RPC, and the REST equivalent)'), this.list);
  }
  add(kind, body, rest) {
    this.list.append(h('li', {},
      h('strong', {}, kind), h('pre', {}, typeof body === 'string' ? body : pretty(body)),
      rest ? h('details', {}, h('summary', {}, 'as REST'), h('pre', {}, rest)) : null));
  }
}

class RpcError extends Error {
  constructor(e) { super(`${e.message || 'error'} (code ${e.code})`); this.code = e.code; this.data = e.data; }
}

let rpcSeq = 0;
function rpcHeaders(trace) {
  return { 'A2A-Version': '1.0', traceparent: `00-${trace}-${randomHex(8)}-01` };
}
async function rpc(agent, method, params, wire, trace) {
  const req = { jsonrpc: '2.0', id: ++rpcSeq, method, params };
  if (wire) wire.add('request', req, restOf(agent, method, params));
  const r = await api('POST', `/api/v1/agents/${enc(agent)}/a2a`, req, rpcHeaders(trace || randomHex(16)));
  if (wire) wire.add('response', r.json || r.text);
  if (!r.json) throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  if (r.json.error) throw new RpcError(r.json.error);
  if (!r.ok && !r.json.result) throw new Error(problemText(r));
  return r.json.result;
}

/** A streaming call: each SSE event's result goes to onEvent as it comes. */
async function rpcStream(agent, method, params, wire, trace, onEvent, signal) {
  const req = { jsonrpc: '2.0', id: ++rpcSeq, method, params };
  if (wire) wire.add('request', req, restOf(agent, method, params));
  const hs = Object.assign({ Accept: 'text/event-stream', 'Content-Type': 'application/json' }, rpcHeaders(trace));
  if (me.csrf) hs['x-heddle-csrf'] = me.csrf;
  const res = await fetch(`/api/v1/agents/${enc(agent)}/a2a`, {
    method: 'POST', headers: hs, credentials: 'same-origin', body: JSON.stringify(req), signal: signal || viewAbort.signal,
  });
  const type = res.headers.get('content-type') || '';
  if (!type.startsWith('text/event-stream')) {
    const text = await res.text();
    if (wire) wire.add('response', text);
    let j = null; try { j = JSON.parse(text); } catch (_) { j = null; }
    if (j && j.error) throw new RpcError(j.error);
    throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const dispatch = (block) => {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
    if (!data) return;
    let j; try { j = JSON.parse(data); } catch (_) { return; }
    if (wire) wire.add('event', j);
    if (j.error) throw new RpcError(j.error);
    if (j.result) onEvent(j.result);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
      dispatch(block);
    }
  }
  dispatch(buf + dec.decode());
}

// ---- session ---------------------------------------------------------------

async function loadSession() {
  const r = await api('GET', '/console/session');
  me = r.json || { signedIn: false, auth: {} };
  renderWho();
}
function renderWho() {
  const who = document.getElementById('who');
  document.getElementById('nav-admin').hidden = !me.admin;
  if (me.signedIn) {
    who.replaceChildren(...[h('span', {}, 'Signed in as ', h('strong', {}, me.id)), me.admin ? badge('admin', 'ok') : null,
      h('button', { class: 'quiet', onclick: signOut }, 'Sign out')].filter(Boolean));
  } else {
    who.replaceChildren(h('a', { href: '#/signin' }, 'Sign in'));
  }
}
async function signOut() {
  await api('DELETE', '/console/session');
  me = { signedIn: false, auth: me.auth };
  renderWho();
  location.hash = '#/signin';
}
function signInView() {
  const kind = h('select', { id: 'kind', name: 'kind' },
    h('option', { value: 'apiKey' }, 'API key'),
    h('option', { value: 'bearer' }, 'Bearer token (or the hub\'s admin token)'));
  const cred = h('input', { id: 'credential', name: 'credential', type: 'password', autocomplete: 'off', required: true });
  const out = h('p', { role: 'status' });
  const form = h('form', { class: 'panel', onsubmit: async (e) => {
    e.preventDefault();
    out.textContent = 'Checking…';
    const r = await api('POST', '/console/session', { kind: kind.value, credential: cred.value });
    cred.value = '';
    if (!r.ok) { out.textContent = problemText(r); out.className = 'error'; return; }
    await loadSession();
    location.hash = '#/';
  } },
  h('label', { for: 'kind' }, 'Credential'), kind,
  h('label', { for: 'credential' }, 'Secret'), cred,
  h('p', { class: 'muted' }, 'The secret is checked by the hub and kept there; this page gets a session cookie it cannot read.'),
  h('p', { class: 'muted' }, 'The hub\'s admin token opens the admin pages; on a hub that takes API keys, agents answer keys, so sign in with a key to try them.'),
  h('button', { type: 'submit' }, 'Sign in'), out);
  show(h('h1', {}, 'Sign in'), form,
    me.auth && !me.auth.required ? h('p', {}, 'This hub\'s agents are open: ', h('a', { href: '#/' }, 'continue without signing in'), '.') : null);
  cred.focus();
}

// ---- catalog ---------------------------------------------------------------

function signatureBadge(sig, what) {
  const tone = { verified: 'ok', absent: '', unverifiable: 'warn', invalid: 'bad' }[sig] || '';
  return sig ? badge(`${what}: ${sig}`, tone, `${what} signature ${sig}`) : null;
}
function priceText(p) {
  if (!p) return null;
  const per = { per_task: 'task', per_token: 'token', per_minute: 'minute', subscription: '30 days' }[p.model] || p.model;
  return `${p.rate} ${p.currency} per ${per}`;
}
async function catalogView(query) {
  const params = new URLSearchParams(query);
  const field = (id, label, type) => [h('label', { for: id }, label),
    h('input', { id, name: id, type: type || 'search', value: params.get(id) || '' })];
  const kind = h('select', { id: 'kind', name: 'kind' }, ['', 'builtin', 'remote', 'llm', 'mcp'].map((k) =>
    h('option', { value: k, selected: params.get('kind') === k }, k || 'any')));
  const form = h('form', { class: 'filters', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const id of ['q', 'tag', 'skill']) { const v = document.getElementById(id).value.trim(); if (v) q.set(id, v); }
    if (kind.value) q.set('kind', kind.value);
    location.hash = `#/?${q}`;
  } },
  h('div', {}, field('q', 'Search')), h('div', {}, field('tag', 'Tag')), h('div', {}, field('skill', 'Skill')),
  h('div', {}, h('label', { for: 'kind' }, 'Kind'), kind), h('button', { type: 'submit' }, 'Search'));
  const list = h('div', { class: 'grid', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  show(h('h1', {}, 'Agents'), form, list);
  const r = await api('GET', `/api/v1/agents?${params}&pageSize=200`);
  if (!r.ok) { list.replaceChildren(fail('Listing', problemText(r))); return; }
  const agents = r.json.agents || [];
  if (!agents.length) { list.replaceChildren(h('p', {}, 'No agent matches.')); return; }
  list.replaceChildren(...agents.map((a) => h('article', { class: 'panel agent' },
    h('h2', {}, h('a', { href: `#/agent/${enc(a.id)}` }, a.name || a.id)),
    h('p', { class: 'muted' }, a.id), h('p', {}, a.description || ''),
    h('div', { class: 'row' }, badge(a.kind), signatureBadge(a.signature, 'card'),
      a.kind === 'remote' ? signatureBadge(a.upstreamSignature || 'unknown', 'upstream') : null,
      a.health ? badge(`upstream ${a.health.state}`, { ok: 'ok', failing: 'bad' }[a.health.state], a.health.checkedAt ? `last call ${when(a.health.checkedAt)}` : 'no call yet') : null,
      a.price ? badge(priceText(a.price), 'warn') : null),
    h('p', { class: 'muted' }, (a.tags || []).concat((a.skills || []).map((sk) => `skill: ${sk.name || sk.id}`)).join(' · ')),
    h('div', { class: 'row' }, h('a', { href: `#/chat/${enc(a.id)}` }, 'Try it'), h('a', { href: `#/agent/${enc(a.id)}` }, 'Card and tasks')))));
}

// ---- one agent: card, skills, recent tasks -----------------------------------

const V03_ONLY = ['url', 'preferredTransport', 'protocolVersion', 'additionalInterfaces', 'supportsAuthenticatedExtendedCard'];
const V1_ONLY = ['supportedInterfaces'];
function cardIn(card, version) {
  const drop = version === '1.0' ? V03_ONLY : V1_ONLY;
  const c = Object.assign({}, card);
  for (const k of drop) delete c[k];
  return c;
}
async function fetchCard(id) {
  const r = await api('GET', `/api/v1/agents/${enc(id)}/.well-known/agent-card.json`);
  if (!r.ok || !r.json) throw new Error(problemText(r));
  return r.json;
}
const MANIFEST_EXT = 'https://heddle.dev/extensions/a2ahub-manifest/v1';
function inputSchemaOf(card) {
  const exts = (card.capabilities && card.capabilities.extensions) || [];
  const m = exts.find((e) => e.uri === MANIFEST_EXT);
  return m && m.params && m.params.input_schema;
}
async function agentView(id) {
  show(h('p', { class: 'muted' }, 'Loading…'));
  let card;
  try { card = await fetchCard(id); } catch (e) { show(fail(`Agent ${id}`, e)); return; }
  const pre = h('pre', { tabindex: 0, 'aria-label': 'Agent card' }, pretty(cardIn(card, '1.0')));
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  for (const v of ['1.0', '0.3', 'as served']) {
    tabs.append(h('button', { role: 'tab', 'aria-selected': v === '1.0' ? 'true' : 'false', onclick: (e) => {
      for (const b of tabs.children) b.setAttribute('aria-selected', 'false');
      e.target.setAttribute('aria-selected', 'true');
      pre.textContent = pretty(v === 'as served' ? card : cardIn(card, v));
    } }, `v${v}`.replace('vas served', 'as served')));
  }
  const schema = inputSchemaOf(card);
  const skills = (card.skills || []).map((sk) => h('div', { class: 'panel' },
    h('h3', {}, sk.name || sk.id), h('p', {}, sk.description || ''),
    (sk.tags || []).length ? h('p', { class: 'muted' }, `Tags: ${sk.tags.join(', ')}`) : null,
    (sk.examples || []).length ? h('div', {}, h('strong', {}, 'Examples'), h('ul', {}, sk.examples.map((x) => h('li', {}, x)))) : null,
    h('p', { class: 'muted' }, `Input: ${(sk.inputModes || card.defaultInputModes || []).join(', ')} · Output: ${(sk.outputModes || card.defaultOutputModes || []).join(', ')}`)));
  const tasks = h('div', {}, h('p', { class: 'muted' }, 'Loading tasks…'));
  show(h('h1', {}, card.name || id), h('p', {}, card.description || ''),
    h('p', {}, h('a', { href: `#/chat/${enc(id)}` }, 'Try it')),
    h('h2', {}, 'Card'), tabs, pre,
    h('h2', {}, 'Skills'), ...skills,
    schema ? [h('h2', {}, 'Input schema'), h('pre', {}, pretty(schema))] : [],
    h('h2', {}, 'Your recent tasks'), tasks);
  try {
    const res = await rpc(id, 'ListTasks', { pageSize: 20, historyLength: 0 });
    const list = res.tasks || [];
    tasks.replaceChildren(list.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Task'), h('th', {}, 'State'), h('th', {}, 'Updated'))),
      h('tbody', {}, list.map((t) => h('tr', {}, h('td', {}, h('a', { href: `#/task/${enc(id)}/${enc(t.id)}` }, t.id)),
        h('td', {}, shortState(t.status && t.status.state)), h('td', {}, t.status && t.status.timestamp ? new Date(t.status.timestamp).toLocaleString() : '')))))
      : h('p', { class: 'muted' }, 'No tasks yet.'));
  } catch (e) { tasks.replaceChildren(fail('Tasks', e)); }
}

// ---- try it: a chat with an agent ----------------------------------------------

function partsView(parts) {
  return (parts || []).map((p) => {
    if (p.text !== undefined) return h('p', {}, p.text);
    if (p.data !== undefined) return h('pre', {}, pretty(p.data));
    if (p.raw !== undefined) {
      let bytes;
      try { bytes = Uint8Array.from(atob(p.raw), (c) => c.charCodeAt(0)); } catch (_) { return h('p', { class: 'error' }, 'A file part whose bytes are not base64.'); }
      // Always a download, never a page: an agent's bytes must not open as
      // a document of the hub's own origin, whatever type it claims.
      const url = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
      viewUrls.push(url);
      return h('p', {}, h('a', { href: url, download: p.filename || 'file' }, `Download ${p.filename || 'file'}`), ` (${p.mediaType || 'bytes'}, ${bytes.length} bytes)`);
    }
    if (p.url !== undefined) {
      const safe = /^https?:/i.test(p.url);
      return h('p', {}, safe ? h('a', { href: p.url, rel: 'noopener noreferrer', target: '_blank' }, p.filename || p.url) : p.url);
    }
    return h('pre', {}, pretty(p));
  });
}
function textOf(parts) { return (parts || []).filter((p) => p.text !== undefined).map((p) => p.text).join('\n'); }

/** A form for a data part, from a JSON Schema's top-level properties. */
function schemaForm(schema) {
  const props = (schema && typeof schema.properties === 'object' && schema.properties) || {};
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const fields = Object.entries(props).filter(([, def]) => def && typeof def === 'object').map(([name, def]) => {
    const id = `data-${name}`;
    let input;
    if (Array.isArray(def.enum)) input = h('select', { id, name }, h('option', { value: '' }, ''), def.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
    else if (def.type === 'boolean') input = h('input', { id, name, type: 'checkbox' });
    else if (def.type === 'number' || def.type === 'integer') input = h('input', { id, name, type: 'number', step: def.type === 'integer' ? '1' : 'any' });
    else if (def.type === 'object' || def.type === 'array') input = h('textarea', { id, name, placeholder: 'JSON' });
    else input = h('input', { id, name, type: 'text' });
    return { name, def, input, el: h('div', {}, h('label', { for: id }, name + (required.has(name) ? ' (required)' : '')), def.description ? h('p', { class: 'muted' }, def.description) : null, input) };
  });
  const read = () => {
    const out = {};
    for (const f of fields) {
      const i = f.input;
      if (i.type === 'checkbox') { if (i.checked) out[f.name] = true; continue; }
      if (i.value === '') continue;
      if (i.tagName === 'SELECT') out[f.name] = JSON.parse(i.value);
      else if (i.type === 'number') out[f.name] = Number(i.value);
      else if (i.tagName === 'TEXTAREA') out[f.name] = JSON.parse(i.value);
      else out[f.name] = i.value;
    }
    return out;
  };
  return { el: h('fieldset', {}, h('legend', {}, 'Data part (from the agent\'s input schema)'), fields.map((f) => f.el)), read, empty: !fields.length };
}
function fileToPart(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onerror = () => reject(r.error);
    r.onload = () => {
      const b64 = String(r.result).replace(/^data:[^,]*,/, '');
      resolve({ raw: b64, mediaType: file.type || 'application/octet-stream', filename: file.name });
    };
    r.readAsDataURL(file);
  });
}
function keepTimeline(agent, taskId, line) {
  if (!taskId) return;
  const key = `timeline:${agent}/${taskId}`;
  const list = JSON.parse(sessionStorage.getItem(key) || '[]');
  list.push(line);
  sessionStorage.setItem(key, JSON.stringify(list.slice(-200)));
}
async function chatView(id) {
  show(h('p', { class: 'muted' }, 'Loading…'));
  let card;
  try { card = await fetchCard(id); } catch (e) { show(fail(`Agent ${id}`, e)); return; }
  const streaming = !!(card.capabilities && card.capabilities.streaming);
  const chat = { taskId: null, contextId: null, state: null, trace: randomHex(16), artifacts: new Map(), busy: false };
  const wire = new Wire();
  const transcript = h('div', { class: 'transcript', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation' });
  const stateEl = h('span', { id: 'task-state', class: 'badge' }, 'no task yet');
  const taskLink = h('span', {});
  const text = h('textarea', { id: 'message', name: 'message', placeholder: 'Write a message', rows: 3 });
  const files = h('input', { id: 'files', name: 'files', type: 'file', multiple: true });
  const useStream = h('input', { id: 'use-stream', type: 'checkbox', checked: streaming, disabled: !streaming });
  const schema = schemaForm(inputSchemaOf(card));
  const sendBtn = h('button', { type: 'submit', id: 'send' }, 'Send');
  const cancelBtn = h('button', { type: 'button', class: 'danger', id: 'cancel', disabled: true, onclick: cancel }, 'Cancel task');
  const newBtn = h('button', { type: 'button', class: 'quiet', onclick: () => { newView(); chatView(id); } }, 'New conversation');
  const add = (node) => { transcript.append(node); transcript.scrollTop = transcript.scrollHeight; };
  const setState = (st, ts) => {
    chat.state = shortState(st);
    stateEl.textContent = chat.state;
    stateEl.className = `badge ${chat.state === 'completed' ? 'ok' : TERMINAL.includes(chat.state) ? 'bad' : chat.state.endsWith('required') ? 'warn' : ''}`;
    cancelBtn.disabled = !chat.taskId || TERMINAL.includes(chat.state);
    keepTimeline(id, chat.taskId, { state: chat.state, at: ts || new Date().toISOString() });
    text.placeholder = chat.state.endsWith('required') ? 'The agent asks for input: answer here' : 'Write a message';
  };
  const bindTask = (t) => {
    if (!t.id || chat.taskId === t.id) return;
    chat.taskId = t.id; chat.contextId = t.contextId;
    sessionStorage.setItem(`trace:${id}/${t.id}`, chat.trace);
    taskLink.replaceChildren(' ', h('a', { href: `#/task/${enc(id)}/${enc(t.id)}` }, 'Inspect task'));
  };
  const artifact = (a, append) => {
    let box = chat.artifacts.get(a.artifactId);
    if (!box) {
      box = h('div', { class: 'msg artifact', 'data-artifact': a.artifactId }, h('p', { class: 'who muted' }, `Artifact ${a.name || a.artifactId}`));
      chat.artifacts.set(a.artifactId, box);
      add(box);
    } else if (!append) {
      box.replaceChildren(box.firstChild);
    }
    box.append(...partsView(a.parts).map((el) => { el.classList.add('chunk'); return el; }));
    transcript.scrollTop = transcript.scrollHeight;
  };
  const agentMessage = (m) => { if (m && (m.parts || []).length) add(h('div', { class: 'msg' }, h('p', { class: 'who muted' }, card.name || id), ...partsView(m.parts))); };
  const onEvent = (ev) => {
    if (ev.task) {
      bindTask(ev.task);
      setState(ev.task.status && ev.task.status.state, ev.task.status && ev.task.status.timestamp);
      for (const a of ev.task.artifacts || []) artifact(a, false);
      if (ev.task.status && ev.task.status.message) agentMessage(ev.task.status.message);
    } else if (ev.statusUpdate) {
      const u = ev.statusUpdate;
      bindTask({ id: u.taskId, contextId: u.contextId });
      add(h('p', { class: 'status' }, `${new Date().toLocaleTimeString()} · ${shortState(u.status && u.status.state)}`));
      setState(u.status && u.status.state, u.status && u.status.timestamp);
      if (u.status && u.status.message) agentMessage(u.status.message);
    } else if (ev.artifactUpdate) {
      const u = ev.artifactUpdate;
      bindTask({ id: u.taskId, contextId: u.contextId });
      artifact(u.artifact, !!u.append);
    } else if (ev.message) {
      agentMessage(ev.message);
    }
  };
  async function send(e) {
    e.preventDefault();
    if (chat.busy) return;
    const parts = [];
    if (text.value.trim()) parts.push({ text: text.value });
    try {
      for (const f of files.files) parts.push(await fileToPart(f));
      if (!schema.empty) { const d = schema.read(); if (Object.keys(d).length) parts.push({ data: d, mediaType: 'application/json' }); }
    } catch (err) { add(fail('Message', err)); return; }
    if (!parts.length) { add(h('p', { class: 'error', role: 'alert' }, 'Write a message, attach a file or fill the data form.')); return; }
    const message = { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts };
    if (chat.taskId && !TERMINAL.includes(chat.state)) message.taskId = chat.taskId;
    if (chat.contextId) message.contextId = chat.contextId;
    add(h('div', { class: 'msg user' }, h('p', { class: 'who muted' }, 'You'), ...partsView(parts)));
    text.value = ''; files.value = '';
    chat.busy = true; sendBtn.disabled = true;
    try {
      if (useStream.checked) await rpcStream(id, 'SendStreamingMessage', { message }, wire, chat.trace, onEvent);
      else onEvent(await rpc(id, 'SendMessage', { message }, wire, chat.trace));
    } catch (err) { add(fail('The agent answered', err)); }
    chat.busy = false; sendBtn.disabled = false;
    text.focus();
  }
  async function cancel() {
    if (!chat.taskId) return;
    cancelBtn.disabled = true;
    try { onEvent({ task: await rpc(id, 'CancelTask', { id: chat.taskId }, wire, chat.trace) }); } catch (err) { add(fail('Cancel', err)); cancelBtn.disabled = false; }
  }
  show(h('h1', {}, `Try ${card.name || id}`),
    h('p', { class: 'row' }, 'Task: ', stateEl, taskLink),
    transcript,
    h('form', { class: 'panel', onsubmit: send },
      h('label', { for: 'message' }, 'Message'), text,
      h('label', { for: 'files' }, 'Files'), files,
      schema.empty ? null : schema.el,
      h('p', {}, h('label', { class: 'inline', for: 'use-stream' }, useStream, streaming ? 'Stream the answer' : 'Stream the answer (this agent does not stream)')),
      h('div', { class: 'row' }, sendBtn, cancelBtn, newBtn)),
    wire.el);
  text.focus();
}

// ---- task inspector ----------------------------------------------------------

const DELEGATION_EXT = 'https://heddle.dev/extensions/delegation/v1';
/** The hub agent id a child's interface URL names, when it is this hub's. */
function localAgent(url) {
  try {
    const u = new URL(url, location.href);
    if (u.origin !== location.origin) return null;
    const m = u.pathname.match(/^\/api\/v1\/agents\/([^/]+)\//);
    return m ? decodeURIComponent(m[1]) : null;
  } catch (_) { return null; }
}
async function treeOf(agent, task, depth, seen) {
  const children = (((task.metadata || {})[DELEGATION_EXT] || {}).children || []);
  const items = [];
  for (const c of children.slice(0, 50)) {
    const a = localAgent(c.agent);
    const key = `${a}/${c.taskId}`;
    if (!a) { items.push(h('li', {}, `${c.taskId} at ${c.agent} (another server: not read)`)); continue; }
    const link = h('a', { href: `#/task/${enc(a)}/${enc(c.taskId)}` }, `${a} / ${c.taskId}`);
    if (seen.has(key) || depth > 8 || seen.size > 200) { items.push(h('li', {}, link)); continue; }
    seen.add(key);
    try {
      const t = await rpc(a, 'GetTask', { id: c.taskId, historyLength: 0 });
      items.push(h('li', {}, link, ` · ${shortState(t.status && t.status.state)}`, await treeOf(a, t, depth + 1, seen)));
    } catch (e) { items.push(h('li', {}, link, ` · ${e.message}`)); }
  }
  return items.length ? h('ul', {}, items) : null;
}
async function taskView(agent, taskId) {
  const signal = viewAbort.signal;
  show(h('p', { class: 'muted' }, 'Loading…'));
  const wire = new Wire();
  let task;
  try { task = await rpc(agent, 'GetTask', { id: taskId }, wire); } catch (e) { if (!signal.aborted) show(h('h1', {}, 'Task'), fail(`Task ${taskId}`, e), wire.el); return; }
  // Another view took the page while this one loaded.
  if (signal.aborted) return;
  const st = task.status || {};
  const seen = JSON.parse(sessionStorage.getItem(`timeline:${agent}/${taskId}`) || '[]');
  const timeline = h('ol', { class: 'timeline' }, seen.map((l) => h('li', {}, `${new Date(l.at).toLocaleString()} · ${l.state}`)),
    h('li', {}, `${st.timestamp ? new Date(st.timestamp).toLocaleString() : 'now'} · ${shortState(st.state)} (as stored)`));
  const history = (task.history || []).map((m) => h('div', { class: `msg ${m.role === 'ROLE_USER' ? 'user' : ''}` },
    h('p', { class: 'who muted' }, m.role === 'ROLE_USER' ? 'Caller' : 'Agent'), ...partsView(m.parts)));
  const artifacts = (task.artifacts || []).map((a) => h('div', { class: 'msg artifact' },
    h('p', { class: 'who muted' }, `Artifact ${a.name || a.artifactId}`), a.description ? h('p', {}, a.description) : null, ...partsView(a.parts)));
  const trace = sessionStorage.getItem(`trace:${agent}/${taskId}`);
  const push = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const tree = h('div', { class: 'tree' });
  show(h('h1', {}, 'Task ', h('code', {}, taskId)),
    h('div', { class: 'panel' },
      h('p', {}, 'Agent: ', h('a', { href: `#/agent/${enc(agent)}` }, agent), ' · State: ', badge(shortState(st.state), shortState(st.state) === 'completed' ? 'ok' : '')),
      h('p', {}, `Context: ${task.contextId || ''}`),
      h('p', {}, 'Trace id: ', trace ? h('code', {}, trace) : h('span', { class: 'muted' }, 'not known here (the task was not started from this browser session)'))),
    h('h2', {}, 'Timeline'), timeline,
    st.message ? [h('h2', {}, 'Status message'), h('div', { class: 'msg' }, ...partsView(st.message.parts))] : [],
    h('h2', {}, 'History'), history.length ? history : h('p', { class: 'muted' }, 'No messages kept.'),
    h('h2', {}, 'Artifacts'), artifacts.length ? artifacts : h('p', { class: 'muted' }, 'No artifacts.'),
    h('h2', {}, 'Delegation'), tree,
    h('h2', {}, 'Push notifications'), push,
    task.metadata ? [h('h2', {}, 'Metadata'), h('pre', {}, pretty(task.metadata))] : [],
    wire.el);
  treeOf(agent, task, 0, new Set()).then((t) => tree.replaceChildren(t || h('p', { class: 'muted' }, 'This task delegated nothing.')));
  if (!TERMINAL.includes(shortState(st.state))) follow(agent, taskId, shortState(st.state), timeline, wire, signal);
  const rows = [];
  try {
    const cfgs = await rpc(agent, 'ListTaskPushNotificationConfigs', { taskId });
    for (const c of cfgs.configs || []) rows.push(h('tr', {}, h('td', {}, c.id || ''), h('td', {}, c.url || ''), h('td', {}, 'registered')));
  } catch (e) { rows.push(h('tr', {}, h('td', { colspan: 3 }, e.message))); }
  if (me.admin) {
    const r = await api('GET', `/api/v1/admin/push/deliveries?agent=${enc(agent)}&task=${enc(taskId)}`);
    for (const d of (r.json && r.json.pending) || []) {
      rows.push(h('tr', {}, h('td', {}, d.configId), h('td', {}, d.receiver),
        h('td', {}, d.attempts ? `waiting: ${d.attempts} attempts so far (${d.lastError || ''}); next at ${when(d.nextAttemptMs)}` : 'waiting: not tried yet')));
    }
    for (const d of (r.json && r.json.dead) || []) {
      rows.push(h('tr', {}, h('td', {}, d.configId), h('td', {}, d.receiver), h('td', {}, `gave up after ${d.attempts} attempts: ${d.lastError || ''}`)));
    }
  }
  push.replaceChildren(rows.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Config'), h('th', {}, 'Receiver'), h('th', {}, 'Deliveries'))), h('tbody', {}, rows))
    : h('p', { class: 'muted' }, 'No push notification configs.'));
}
/** Adds each state a running task enters to the timeline, as it happens.
 * The subscription's first event is the task as it stands: not news. An
 * agent that does not stream is not followed. */
async function follow(agent, taskId, stored, timeline, wire, signal) {
  let card;
  try { card = await fetchCard(agent); } catch (_) { return; }
  if (signal.aborted || !(card.capabilities && card.capabilities.streaming)) return;
  let last = stored;
  const line = (state, at) => {
    if (signal.aborted || state === last) return;
    last = state;
    timeline.append(h('li', {}, `${new Date(at || Date.now()).toLocaleString()} · ${state} (live)`));
    keepTimeline(agent, taskId, { state, at: at || new Date().toISOString() });
  };
  rpcStream(agent, 'SubscribeToTask', { id: taskId }, wire, randomHex(16), (ev) => {
    const st = ev.statusUpdate && ev.statusUpdate.status;
    if (st) line(shortState(st.state), st.timestamp);
  }, signal).catch((e) => { if (!signal.aborted) timeline.append(h('li', { class: 'muted' }, `Not following: ${e.message}`)); });
}
function tasksView() {
  const agent = h('input', { id: 'agent', type: 'text', required: true });
  const task = h('input', { id: 'task', type: 'text', required: true });
  show(h('h1', {}, 'Inspect a task'), h('form', { class: 'panel', onsubmit: (e) => {
    e.preventDefault(); location.hash = `#/task/${enc(agent.value.trim())}/${enc(task.value.trim())}`;
  } }, h('label', { for: 'agent' }, 'Agent id'), agent, h('label', { for: 'task' }, 'Task id'), task, h('p', {}, h('button', { type: 'submit' }, 'Open'))),
  h('p', { class: 'muted' }, 'Each agent\'s page lists your recent tasks.'));
}

// ---- admin -------------------------------------------------------------------

async function adminView() {
  if (!me.admin) { show(h('h1', {}, 'Admin'), h('p', {}, 'Sign in with an admin\'s credentials to see this page.')); return; }
  const agents = h('div', { id: 'admin-agents' }, h('p', { class: 'muted' }, 'Loading…'));
  const keys = h('div', {});
  const wallets = h('div', {});
  show(h('h1', {}, 'Admin'), h('h2', {}, 'Agents'), agents, registerForms(), h('h2', {}, 'API keys'), keys, h('h2', {}, 'Wallets and usage'), wallets);
  loadAgents(agents);
  loadKeys(keys);
  walletPanel(wallets);
}
/** A registration as the admin API lists it, back in the form it takes. */
function entryOf(listed, change) {
  const entry = Object.assign({}, listed, change);
  delete entry.cardUrl;
  return entry;
}
async function loadAgents(box) {
  const r = await api('GET', '/api/v1/admin/agents');
  if (!r.ok) { box.replaceChildren(fail('Agents', problemText(r))); return; }
  const list = r.json.agents || [];
  const act = async (method, path, body) => {
    const a = await api(method, path, body);
    if (!a.ok) alert(problemText(a));
    loadAgents(box);
  };
  box.replaceChildren(h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Agent'), h('th', {}, 'Kind'), h('th', {}, 'State'), h('th', {}, 'Actions'))),
    h('tbody', {}, list.map((a) => h('tr', { 'data-agent': a.id }, h('td', {}, h('a', { href: `#/agent/${enc(a.id)}` }, a.id), ),
      h('td', {}, a.kind), h('td', {}, a.enabled ? 'enabled' : 'disabled'),
      h('td', { class: 'row' },
        h('button', { class: 'quiet', onclick: () => act('PUT', `/api/v1/admin/agents/${enc(a.id)}`, entryOf(a, { enabled: !a.enabled })) }, a.enabled ? 'Disable' : 'Enable'),
        a.kind === 'remote' ? h('button', { class: 'quiet', onclick: () => act('POST', `/api/v1/admin/agents/${enc(a.id)}/refresh`) }, 'Refresh') : null,
        h('button', { class: 'danger', onclick: () => { if (confirm(`Remove ${a.id}?`)) act('DELETE', `/api/v1/admin/agents/${enc(a.id)}`); } }, 'Remove')))))));
}
function registerForms() {
  const out = h('div', { role: 'status', id: 'register-result' });
  const id = h('input', { id: 'reg-id', type: 'text', placeholder: 'weather' });
  const url = h('input', { id: 'reg-url', type: 'url', placeholder: 'https://agent.example/.well-known/agent-card.json' });
  const http = h('input', { id: 'reg-http', type: 'checkbox' });
  const byUrl = h('form', { class: 'panel', onsubmit: async (e) => {
    e.preventDefault();
    const body = { id: id.value.trim(), kind: 'remote', card_url: url.value.trim() };
    if (http.checked) body.allow_http = true;
    const r = await api('POST', '/api/v1/admin/agents', body);
    out.replaceChildren(r.ok ? h('p', {}, 'Registered ', h('a', { href: `#/agent/${enc(r.json.id)}` }, r.json.id), '.') : fail('Registration', problemText(r)));
    if (r.ok) loadAgents(document.getElementById('admin-agents'));
  } }, h('h3', {}, 'Register a remote agent from its card URL'),
  h('label', { for: 'reg-id' }, 'Agent id'), id, h('label', { for: 'reg-url' }, 'Card URL'), url,
  h('p', {}, h('label', { class: 'inline', for: 'reg-http' }, http, 'Allow plain http (local tests only)')),
  h('button', { type: 'submit' }, 'Register'));
  const manifest = h('textarea', { id: 'manifest', rows: 10, 'aria-describedby': 'manifest-errors', placeholder: '{"agent_name": "…", "endpoint": "https://…", "skills": ["…"], …}' });
  const errors = h('ul', { id: 'manifest-errors', class: 'violations', 'aria-live': 'polite' });
  const byManifest = h('form', { class: 'panel', onsubmit: async (e) => {
    e.preventDefault();
    errors.replaceChildren(); manifest.classList.remove('field-error');
    let doc;
    try { doc = JSON.parse(manifest.value); } catch (err) { errors.append(h('li', {}, `Not JSON: ${err.message}`)); manifest.classList.add('field-error'); return; }
    const r = await api('POST', '/api/v1/admin/agents', doc);
    if (r.ok) { out.replaceChildren(h('p', {}, 'Registered ', h('a', { href: `#/agent/${enc(r.json.id)}` }, r.json.id), '.')); return; }
    manifest.classList.add('field-error');
    const list = (r.json && r.json.errors) || [];
    if (!list.length) errors.append(h('li', {}, problemText(r)));
    for (const v of list) errors.append(h('li', {}, h('code', {}, (v.pointer || '').replace(/^\/manifest/, '') || '(the manifest)'), ` ${v.detail}`));
  } }, h('h3', {}, 'Register from an a2ahub manifest'),
  h('div', { class: 'split' }, h('div', {}, h('label', { for: 'manifest' }, 'Manifest (JSON)'), manifest),
    h('div', {}, h('p', { class: 'muted' }, 'Schema violations appear here, each with the field it concerns.'), errors)),
  h('button', { type: 'submit' }, 'Register'));
  return h('div', {}, byUrl, byManifest, out);
}
async function loadKeys(box) {
  const r = await api('GET', '/api/v1/admin/keys');
  if (!r.ok) { box.replaceChildren(h('p', { class: 'muted' }, problemText(r))); return; }
  const name = h('input', { id: 'key-name', type: 'text', required: true });
  const shown = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'panel', onsubmit: async (e) => {
    e.preventDefault();
    const c = await api('POST', '/api/v1/admin/keys', { name: name.value });
    if (!c.ok) { shown.replaceChildren(fail('New key', problemText(c))); return; }
    // Shown once: the hub keeps only its hash, and this page forgets it on the next view.
    const secret = h('p', { class: 'secret', id: 'new-key' }, c.json.key);
    c.json.key = null;
    await loadKeys(box);
    box.prepend(h('div', { class: 'panel' }, h('p', {}, `Key "${c.json.name}" (caller ${c.json.caller}). Copy it now: it is not shown again.`), secret));
  } }, h('label', { for: 'key-name' }, 'New key\'s name'), name, h('p', {}, h('button', { type: 'submit' }, 'Create key')), shown);
  const rows = (r.json.keys || []).map((k) => h('tr', {}, h('td', {}, k.name), h('td', {}, h('code', {}, k.caller)),
    h('td', {}, when(k.createdAt * 1000)), h('td', {}, k.revokedAt ? `revoked ${when(k.revokedAt * 1000)}` : h('button', { class: 'danger', onclick: async () => {
      const d = await api('DELETE', `/api/v1/admin/keys/${enc(k.id)}`); if (!d.ok) alert(problemText(d)); loadKeys(box);
    } }, 'Revoke'))));
  box.replaceChildren(form, h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Caller id'), h('th', {}, 'Created'), h('th', {}, ''))), h('tbody', {}, rows)));
}
/** The balance after each entry, as a line over time. The history may
 * start after the wallet did, so the line is drawn back from the balance
 * now: each entry's balance is the next one's minus that entry. */
function chart(entries, balances) {
  const currency = (balances[0] && balances[0].currency) || (entries[0] && entries[0].currency);
  const mine = entries.filter((e) => e.currency === currency);
  if (mine.length < 2) return h('p', { class: 'muted' }, 'Not enough entries for a chart.');
  const now = Number(((balances.find((b) => b.currency === currency)) || { amount: 0 }).amount);
  let bal = now;
  const points = [];
  for (const e of mine) { points.push([e.at, bal]); bal -= Number(e.amount); }
  points.reverse();
  const [x0, x1] = [points[0][0], points[points.length - 1][0] || points[0][0] + 1];
  const ys = points.map((p) => p[1]);
  const [y0, y1] = [Math.min(0, ...ys), Math.max(...ys, 1e-9)];
  const W = 600, H = 160, P = 24;
  const X = (t) => P + ((t - x0) / Math.max(1, x1 - x0)) * (W - 2 * P);
  const Y = (v) => H - P - ((v - y0) / Math.max(1e-9, y1 - y0)) * (H - 2 * P);
  return s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H + 10}`, role: 'img', 'aria-label': `Balance in ${currency} over time` },
    s('polyline', { points: points.map(([t, v]) => `${X(t).toFixed(1)},${Y(v).toFixed(1)}`).join(' ') }),
    s('text', { x: P, y: 14 }, `${Math.round(y1 * 100) / 100} ${currency}`), s('text', { x: P, y: H + 6 }, new Date(x0).toLocaleString()),
    s('text', { x: W - P, y: H + 6, 'text-anchor': 'end' }, new Date(x1).toLocaleString()));
}
function walletPanel(box) {
  const owner = h('input', { id: 'wallet-owner', type: 'text', list: 'wallet-callers', placeholder: 'key:… or anonymous' });
  const callers = h('datalist', { id: 'wallet-callers' }, h('option', { value: 'anonymous' }));
  const out = h('div', { 'aria-live': 'polite' });
  const load = async () => {
    const o = owner.value.trim();
    if (!o) return;
    const [b, hist] = await Promise.all([api('GET', `/api/v1/admin/wallets/${enc(o)}`), api('GET', `/api/v1/admin/wallets/${enc(o)}/history?limit=200`)]);
    if (!b.ok) { out.replaceChildren(fail('Wallet', problemText(b))); return; }
    const entries = (hist.json && hist.json.entries) || [];
    const amount = h('input', { id: 'topup-amount', type: 'number', step: 'any', min: '0', required: true });
    const currency = h('input', { id: 'topup-currency', type: 'text', value: 'USD', required: true });
    out.replaceChildren(
      h('p', {}, 'Balances: ', (b.json.balances || []).map((x) => `${x.amount} ${x.currency}`).join(', ') || 'none'),
      chart(entries, b.json.balances || []),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'When'), h('th', {}, 'Kind'), h('th', {}, 'Amount'), h('th', {}, 'Memo'))),
        h('tbody', {}, entries.map((e) => h('tr', {}, h('td', {}, when(e.at)), h('td', {}, e.kind), h('td', {}, `${e.amount} ${e.currency}`), h('td', {}, e.memo || ''))))),
      h('form', { class: 'panel', onsubmit: async (e) => {
        e.preventDefault();
        const t = await api('POST', `/api/v1/admin/wallets/${enc(o)}/topup`, { amount: Number(amount.value), currency: currency.value.trim(), memo: 'console top-up' });
        if (!t.ok) { alert(problemText(t)); return; }
        load();
      } }, h('label', { for: 'topup-amount' }, 'Top up'), amount, h('label', { for: 'topup-currency' }, 'Currency'), currency, h('p', {}, h('button', { type: 'submit' }, 'Top up'))));
  };
  box.replaceChildren(h('form', { class: 'panel', onsubmit: (e) => { e.preventDefault(); load(); } },
    h('label', { for: 'wallet-owner' }, 'Caller'), owner, callers, h('p', {}, h('button', { type: 'submit' }, 'Show wallet'))), out);
  api('GET', '/api/v1/admin/keys').then((r) => {
    for (const k of (r.json && r.json.keys) || []) callers.append(h('option', { value: k.caller }));
  });
}

// ---- routing -----------------------------------------------------------------

async function route() {
  const hash = location.hash || '#/';
  const [path, query] = hash.slice(1).split('?');
  newView();
  try {
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    if (me.auth && me.auth.required && !me.signedIn && parts[0] !== 'signin') { location.hash = '#/signin'; return; }
    switch (parts[0]) {
      case undefined: await catalogView(query || ''); break;
      case 'signin': signInView(); break;
      case 'agent': await agentView(parts[1]); break;
      case 'chat': await chatView(parts[1]); break;
      case 'task': await taskView(parts[1], parts[2]); break;
      case 'tasks': tasksView(); break;
      case 'admin': await adminView(); break;
      default: show(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/' }, 'Back to the catalog')));
    }
  } catch (e) { show(fail('This page', e)); }
  document.title = `${(main().querySelector('h1') || {}).textContent || 'Heddle'} · Heddle console`;
}
window.addEventListener('hashchange', route);
loadSession().then(route, (e) => show(fail('The hub', e)));
