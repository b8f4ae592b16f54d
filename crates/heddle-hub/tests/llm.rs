//! LLM agents (`kind = "llm"`) against a stand-in chat-completions server
//! that speaks the OpenAI wire (streamed `data: {…}` chunks, `[DONE]`,
//! usage in the last chunk, tool-call deltas, error bodies, 429 with
//! `Retry-After`) and records every request, so each test can check what
//! the hub sent. When `HEDDLE_TEST_OPENAI_URL` (with `HEDDLE_TEST_OPENAI_KEY`
//! and `HEDDLE_TEST_OPENAI_MODEL`) names a real endpoint, the send and
//! stream tests run against it too; otherwise they say they were skipped.

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
mod live;

use futures::StreamExt;
use heddle_client::{A2aClient, ClientOptions, SendReply};
use heddle_core::v1::{self, stream_response::Payload};
use heddle_hub::{
    Hub, RemoteSettings,
    llm::{LlmSettings, USAGE_KEY},
    registry::AgentEntry,
    remote::SecretSource,
};
use live::{installed, interop_dir};
use serde_json::{Value, json};

/// The API key the hub is given; never to be seen in a task.
const KEY: &str = "sk-test-5ecret-k3y-value";
/// No step of a test may take longer.
const STEP: Duration = Duration::from_secs(20);

/// What the stand-in answers a request with.
enum Reply {
    /// Streamed text in these pieces, then usage.
    Text(Vec<&'static str>),
    /// A call of `ask_user` with this question.
    Ask(&'static str),
    /// An error status with an OpenAI error body (and `Retry-After`).
    Error(u16, &'static str, Option<&'static str>),
    /// Text chunks every 20 ms, never ending.
    Endless,
    /// One text chunk, then the body ends: no finish reason, no `[DONE]`.
    CutShort,
    /// Stopped by the endpoint's content filter, with usage.
    Filtered,
    /// Text chunks every 300 ms, never ending (past a short deadline).
    Slow,
    /// A whole `chat.completion` as JSON, as an endpoint ignoring `stream` would.
    NotStreamed,
    /// These events, as they are.
    Events(Vec<String>),
    /// Refusal deltas of 64 KiB, never ending.
    EndlessRefusal,
    /// A 500 whose body never ends.
    EndlessError,
}

#[derive(Default)]
struct Standin {
    replies: Mutex<VecDeque<Reply>>,
    /// Each request's body and `Authorization` header.
    seen: Mutex<Vec<(Value, String)>>,
    /// When the hub closed an endless stream.
    closed: Mutex<Option<Instant>>,
}

impl Standin {
    fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.replies.lock().expect("lock").extend(replies);
    }

    fn requests(&self) -> Vec<Value> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({
        "id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "standin-model", "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    });
    format!("data: {c}\n\n")
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    let c = json!({
        "id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "standin-model", "system_fingerprint": null, "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    });
    format!("data: {c}\n\n")
}

/// Records when it is dropped: the hub closed the stream it is in.
struct CloseGuard(Arc<Standin>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        *self.0.closed.lock().expect("lock") = Some(Instant::now());
    }
}

fn sse(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, Infallible>(Bytes::from(e))),
    );
    sse_body(Body::from_stream(stream))
}

fn sse_body(body: Body) -> Response {
    (
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn completions(
    State(s): State<Arc<Standin>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    s.seen.lock().expect("lock").push((body, auth));
    let reply = s
        .replies
        .lock()
        .expect("lock")
        .pop_front()
        .unwrap_or(Reply::Text(vec!["ok"]));
    match reply {
        Reply::Text(pieces) => {
            let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
            events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
            events.push(chunk(json!({}), Some("stop")));
            events.push(usage_chunk(11, pieces.len() as u64));
            events.push("data: [DONE]\n\n".to_owned());
            sse(events)
        }
        Reply::Ask(question) => {
            let args = json!({"question": question}).to_string();
            let (a, b) = args.split_at(args.len() / 2);
            sse(vec![
                chunk(
                    json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                        "id": "call_1", "type": "function",
                        "function": {"name": "ask_user", "arguments": ""}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                usage_chunk(20, 7),
                "data: [DONE]\n\n".to_owned(),
            ])
        }
        Reply::Error(status, message, retry_after) => {
            let body = json!({"error": {"message": message, "type": "server_error",
                                        "param": null, "code": null}});
            let mut r = (StatusCode::from_u16(status).expect("status"), Json(body)).into_response();
            if let Some(after) = retry_after {
                r.headers_mut()
                    .insert("retry-after", after.parse().expect("header"));
            }
            r
        }
        Reply::Filtered => sse(vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({}), Some("content_filter")),
            usage_chunk(9, 0),
            "data: [DONE]\n\n".to_owned(),
        ]),
        Reply::NotStreamed => Json(json!({
            "id": "chatcmpl-standin", "object": "chat.completion", "created": 1_700_000_000,
            "model": "standin-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }))
        .into_response(),
        Reply::Slow => {
            let stream = futures::stream::unfold(0u64, |n| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let piece = chunk(json!({"content": format!("slow{n} ")}), None);
                Some((Ok::<_, Infallible>(Bytes::from(piece)), n + 1))
            });
            sse_body(Body::from_stream(stream))
        }
        Reply::Events(events) => sse(events),
        Reply::EndlessRefusal => {
            let piece = chunk(json!({"refusal": "no ".repeat((64 << 10) / 3)}), None);
            let stream = futures::stream::repeat_with(move || {
                Ok::<_, Infallible>(Bytes::from(piece.clone()))
            });
            sse_body(Body::from_stream(stream))
        }
        Reply::EndlessError => {
            let stream = futures::stream::repeat_with(|| {
                Ok::<_, Infallible>(Bytes::from_static(&[b'x'; 4096]))
            });
            (StatusCode::INTERNAL_SERVER_ERROR, Body::from_stream(stream)).into_response()
        }
        Reply::CutShort => sse(vec![chunk(
            json!({"role": "assistant", "content": "Half"}),
            None,
        )]),
        Reply::Endless => {
            let guard = CloseGuard(s.clone());
            let first = chunk(json!({"role": "assistant", "content": ""}), None);
            let stream = futures::stream::unfold((guard, 0u64), |(guard, n)| async move {
                if n > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let piece = chunk(json!({"content": format!("tick{n} ")}), None);
                Some((Ok::<_, Infallible>(Bytes::from(piece)), (guard, n + 1)))
            });
            let head =
                futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(first)) });
            sse_body(Body::from_stream(head.chain(stream)))
        }
    }
}

/// A free local listener and its `http://` base.
async fn listener() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", l.local_addr().expect("addr"));
    (l, base)
}

/// The stand-in, served; its `/v1` base URL.
async fn standin() -> (Arc<Standin>, String) {
    let s = Arc::new(Standin::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(s.clone());
    let (l, base) = listener().await;
    tokio::spawn(async move { axum::serve(l, app).await });
    (s, format!("{base}/v1"))
}

/// A hub serving one llm agent `chat` with `settings`; a client of it.
async fn hub_with(settings: LlmSettings, secrets: SecretSource) -> A2aClient {
    let (l, base) = listener().await;
    let store = Arc::new(heddle_store::MemoryStore::default());
    let hub = Hub::builder(base.clone(), store)
        .remote(RemoteSettings {
            secrets,
            ..RemoteSettings::default()
        })
        .build()
        .await;
    hub.register(AgentEntry::llm("chat", settings))
        .await
        .expect("the llm agent registers");
    let router = hub.router();
    tokio::spawn(async move { axum::serve(l, router).await });
    A2aClient::discover(
        &format!("{base}/api/v1/agents/chat"),
        ClientOptions::default(),
    )
    .await
    .expect("the hub serves the agent's card")
}

/// A hub in front of the stand-in, with a system prompt and a key.
async fn hub() -> (Arc<Standin>, A2aClient) {
    let (s, base_url) = standin().await;
    let mut settings = LlmSettings::new("standin-model", base_url);
    settings.api_key_env = Some("LLM_KEY".into());
    settings.system_prompt = Some("You are terse.".into());
    settings.temperature = Some(0.5);
    settings.max_tokens = Some(64);
    let client = hub_with(settings, SecretSource::from_values([("LLM_KEY", KEY)])).await;
    (s, client)
}

fn request(parts: Vec<v1::Part>, context: &str, task: &str) -> v1::SendMessageRequest {
    let mut m = A2aClient::user_message(parts);
    context.clone_into(&mut m.context_id);
    task.clone_into(&mut m.task_id);
    v1::SendMessageRequest {
        message: Some(m),
        ..Default::default()
    }
}

fn text(t: &str) -> v1::SendMessageRequest {
    request(vec![v1::Part::text(t)], "", "")
}

async fn send(client: &A2aClient, req: v1::SendMessageRequest) -> v1::Task {
    match tokio::time::timeout(STEP, client.send(req))
        .await
        .expect("in time")
        .expect("send")
    {
        SendReply::Task(t) => t,
        SendReply::Message(m) => panic!("a task, not a message: {m:?}"),
    }
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status.as_ref().expect("status").state()
}

fn status_text(t: &v1::Task) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .unwrap_or_default()
}

/// The `messages` of a recorded request, as `(role, content)`.
fn messages(req: &Value) -> Vec<(String, Value)> {
    req["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().expect("role").to_owned(),
                m["content"].clone(),
            )
        })
        .collect()
}

fn said(role: &str, content: &str) -> (String, Value) {
    (role.to_owned(), json!(content))
}

#[tokio::test]
async fn a_blocking_send_answers_with_one_artifact_and_records_usage() {
    let (s, client) = hub().await;
    s.script([Reply::Text(vec!["Hello", ", ", "world."])]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert_eq!(task.artifacts.len(), 1);
    assert_eq!(task.artifacts[0].text(), "Hello, world.");
    let usage = &task.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert_eq!(
        usage,
        &json!({"model": "standin-model", "promptTokens": 11, "completionTokens": 3,
                "totalTokens": 14, "calls": 1})
    );
    // The stored task says the same.
    let stored = client.get_task(&task.id, None).await.expect("get");
    assert_eq!(stored.metadata, task.metadata);

    let seen = s.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1);
    let (req, auth) = &seen[0];
    assert_eq!(auth, &format!("Bearer {KEY}"));
    assert_eq!(req["model"], "standin-model");
    assert_eq!(req["stream"], true);
    assert_eq!(req["stream_options"]["include_usage"], true);
    assert_eq!(req["temperature"], 0.5);
    assert_eq!(req["max_tokens"], 64);
    assert_eq!(req["tools"][0]["function"]["name"], "ask_user");
    assert_eq!(
        messages(req),
        [said("system", "You are terse."), said("user", "Hi")]
    );
}

/// The artifact chunks of a stream, and its last status.
async fn stream_events(
    client: &A2aClient,
    req: v1::SendMessageRequest,
) -> (Vec<v1::TaskArtifactUpdateEvent>, v1::TaskState) {
    let mut events = tokio::time::timeout(STEP, client.send_streaming(req))
        .await
        .expect("in time")
        .expect("stream");
    let mut chunks = Vec::new();
    let mut last = v1::TaskState::Unspecified;
    while let Some(ev) = tokio::time::timeout(STEP, events.next())
        .await
        .expect("in time")
    {
        match ev.expect("event").payload {
            Some(Payload::ArtifactUpdate(a)) => chunks.push(a),
            Some(Payload::StatusUpdate(s)) => {
                last = s.status.expect("status").state();
            }
            Some(Payload::Task(t)) => last = state(&t),
            _ => {}
        }
    }
    (chunks, last)
}

fn chunk_texts(chunks: &[v1::TaskArtifactUpdateEvent]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| c.artifact.as_ref().expect("artifact").text())
        .collect()
}

#[tokio::test]
async fn a_streaming_send_gets_the_tokens_as_chunks_in_order() {
    let (s, client) = hub().await;
    s.script([Reply::Text(vec!["One", " two", " three", "."])]);
    let (chunks, last) = stream_events(&client, text("Count")).await;
    assert_eq!(last, v1::TaskState::Completed);
    assert_eq!(chunk_texts(&chunks), ["One", " two", " three", "."]);
    let flags: Vec<(bool, bool)> = chunks.iter().map(|c| (c.append, c.last_chunk)).collect();
    assert_eq!(
        flags,
        [(false, false), (true, false), (true, false), (true, true)]
    );
    let ids: Vec<&str> = chunks
        .iter()
        .map(|c| c.artifact.as_ref().expect("artifact").artifact_id.as_str())
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one artifact: {ids:?}");
}

#[tokio::test]
async fn a_context_is_the_conversation_sent_to_the_model() {
    let (s, client) = hub().await;
    s.script([
        Reply::Text(vec!["Hi Ada."]),
        Reply::Text(vec!["Your name is Ada."]),
    ]);
    let first = send(&client, text("My name is Ada.")).await;
    let second = send(
        &client,
        request(
            vec![v1::Part::text("What is my name?")],
            &first.context_id,
            "",
        ),
    )
    .await;
    assert_eq!(state(&second), v1::TaskState::Completed);
    assert_ne!(first.id, second.id);
    let reqs = s.requests();
    assert_eq!(
        messages(&reqs[1]),
        [
            said("system", "You are terse."),
            said("user", "My name is Ada."),
            said("assistant", "Hi Ada."),
            said("user", "What is my name?"),
        ]
    );
    // Another context starts afresh.
    send(&client, text("Who am I?")).await;
    assert_eq!(
        messages(&s.requests()[2]),
        [said("system", "You are terse."), said("user", "Who am I?")]
    );
}

#[tokio::test]
async fn the_history_budget_drops_the_oldest_turns() {
    let (s, base_url) = standin().await;
    let mut settings = LlmSettings::new("standin-model", base_url);
    settings.history_messages = 2;
    let client = hub_with(
        settings,
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    s.script([
        Reply::Text(vec!["a1"]),
        Reply::Text(vec!["a2"]),
        Reply::Text(vec!["a3"]),
    ]);
    let first = send(&client, text("q1")).await;
    let ctx = first.context_id.clone();
    send(&client, request(vec![v1::Part::text("q2")], &ctx, "")).await;
    send(&client, request(vec![v1::Part::text("q3")], &ctx, "")).await;
    let seen = s.seen.lock().expect("lock").clone();
    assert_eq!(seen[2].1, "", "no key configured, none sent");
    assert_eq!(
        messages(&seen[2].0),
        [
            said("user", "q2"),
            said("assistant", "a2"),
            said("user", "q3")
        ]
    );
}

#[tokio::test]
async fn ask_user_waits_for_input_and_the_reply_continues() {
    let (s, client) = hub().await;
    s.script([
        Reply::Ask("Which city?"),
        Reply::Text(vec!["Sunny in Paris."]),
    ]);
    let asked = send(&client, text("What's the weather?")).await;
    assert_eq!(state(&asked), v1::TaskState::InputRequired, "{asked:?}");
    assert_eq!(status_text(&asked), "Which city?");
    let done = send(
        &client,
        request(vec![v1::Part::text("Paris")], &asked.context_id, &asked.id),
    )
    .await;
    assert_eq!(state(&done), v1::TaskState::Completed, "{done:?}");
    assert_eq!(done.id, asked.id);
    assert_eq!(done.artifacts[0].text(), "Sunny in Paris.");
    assert_eq!(
        messages(&s.requests()[1]),
        [
            said("system", "You are terse."),
            said("user", "What's the weather?"),
            said("assistant", "Which city?"),
            said("user", "Paris"),
        ]
    );
    // Both calls' tokens, summed on the task.
    let usage = &done.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert_eq!(usage["promptTokens"], 31);
    assert_eq!(usage["completionTokens"], 8);
    assert_eq!(usage["calls"], 2);

    // A later task of the context sees the exchange in the order it was said.
    s.script([Reply::Text(vec!["Yes."])]);
    send(
        &client,
        request(vec![v1::Part::text("Umbrella?")], &asked.context_id, ""),
    )
    .await;
    assert_eq!(
        messages(&s.requests()[2]),
        [
            said("system", "You are terse."),
            said("user", "What's the weather?"),
            said("assistant", "Which city?"),
            said("user", "Paris"),
            said("assistant", "Sunny in Paris."),
            said("user", "Umbrella?"),
        ]
    );
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let (s, client) = hub().await;
    s.script([
        Reply::Error(429, "Rate limit reached", Some("1")),
        Reply::Text(vec!["Done."]),
    ]);
    let started = Instant::now();
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(s.requests().len(), 2);
}

#[tokio::test]
async fn a_429_past_the_deadline_fails_the_task_saying_so() {
    let (s, base_url) = standin().await;
    let mut settings = LlmSettings::new("standin-model", base_url);
    settings.timeout_secs = 2;
    let client = hub_with(
        settings,
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    s.script([Reply::Error(429, "Slow down", Some("30"))]);
    let started = Instant::now();
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no pointless wait"
    );
    let why = status_text(&task);
    assert!(why.contains("429") && why.contains("Slow down"), "{why}");
}

#[tokio::test]
async fn a_429_past_the_retry_cap_fails_the_task_saying_so() {
    let (s, client) = hub().await;
    s.script((0..6).map(|_| Reply::Error(429, "Busy", Some("0"))));
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("retry cap (5 retries)"), "{why}");
    assert_eq!(s.requests().len(), 6);
}

#[tokio::test]
async fn without_history_the_continued_task_is_still_sent() {
    let (s, base_url) = standin().await;
    let mut settings = LlmSettings::new("standin-model", base_url);
    settings.history_messages = 0;
    let client = hub_with(
        settings,
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    s.script([Reply::Ask("Which city?"), Reply::Text(vec!["Sunny."])]);
    let asked = send(&client, text("What's the weather?")).await;
    assert_eq!(state(&asked), v1::TaskState::InputRequired, "{asked:?}");
    let done = send(
        &client,
        request(vec![v1::Part::text("Paris")], &asked.context_id, &asked.id),
    )
    .await;
    assert_eq!(state(&done), v1::TaskState::Completed, "{done:?}");
    assert_eq!(
        messages(&s.requests()[1]),
        [
            said("user", "What's the weather?"),
            said("assistant", "Which city?"),
            said("user", "Paris"),
        ]
    );
    // A new task of the context starts afresh.
    send(
        &client,
        request(vec![v1::Part::text("Umbrella?")], &asked.context_id, ""),
    )
    .await;
    assert_eq!(messages(&s.requests()[2]), [said("user", "Umbrella?")]);
}

#[tokio::test]
async fn an_absurd_retry_after_fails_the_task_or_waits_a_bounded_time() {
    let (s, client) = hub().await;
    s.script([Reply::Error(
        429,
        "Come back never",
        Some("18446744073709551615"),
    )]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(
        why.contains("429") && why.contains("Come back never"),
        "{why}"
    );

    // A date past year 9999 is unreadable: the backoff applies instead.
    s.script([
        Reply::Error(429, "Later", Some("Fri, 31 Dec 99999 23:59:59 GMT")),
        Reply::Text(vec!["Done."]),
    ]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert_eq!(s.requests().len(), 3);
}

/// A tool-call delta: `index`, with `name` when given, and `args`.
fn tool_delta(index: u64, name: Option<&str>, args: &str) -> String {
    let mut function = json!({"arguments": args});
    if let Some(n) = name {
        function["name"] = json!(n);
    }
    chunk(
        json!({"tool_calls": [{"index": index, "type": "function", "function": function}]}),
        None,
    )
}

#[tokio::test]
async fn an_answer_past_its_bounds_fails_the_task_saying_so() {
    let (s, client) = hub().await;
    s.script([Reply::EndlessRefusal]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(
        why.contains("answer") && why.contains("longer than"),
        "{why}"
    );

    let mut many: Vec<String> = (0..100)
        .map(|i| tool_delta(i, Some("ask_user"), "{}"))
        .collect();
    many.push("data: [DONE]\n\n".to_owned());
    s.script([Reply::Events(many)]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("more than 8 tool calls"), "{why}");

    // A refusal within the bounds is the reason, shortened for a person.
    let long = "no ".repeat(2000);
    s.script([Reply::Events(vec![
        chunk(json!({"refusal": long}), None),
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ])]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.starts_with("the model refused: no no"), "{why}");
    assert!(why.chars().count() < 1100 && why.ends_with('…'), "{why}");
}

#[tokio::test]
async fn a_tool_name_repeated_in_every_delta_is_the_name_once() {
    let (s, client) = hub().await;
    s.script([Reply::Events(vec![
        tool_delta(0, Some("ask_user"), "{\"question\":"),
        tool_delta(0, Some("ask_user"), "\"Which city?\"}"),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ])]);
    let task = send(&client, text("Book a flight")).await;
    assert_eq!(state(&task), v1::TaskState::InputRequired, "{task:?}");
    assert_eq!(status_text(&task), "Which city?");
}

#[tokio::test]
async fn an_upstream_500_fails_the_task_with_a_reason_and_no_key() {
    let (s, client) = hub().await;
    s.script([Reply::Error(
        500,
        "The server had an error processing your request (key sk-test-5ecret-k3y-value)",
        None,
    )]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("500"), "{why}");
    assert!(why.contains("had an error processing"), "{why}");
    assert!(!why.contains(KEY), "{why}");
    let all = format!("{task:?}");
    assert!(!all.contains(KEY), "the key is nowhere in the task");
}

#[tokio::test]
async fn an_endless_error_body_is_read_only_so_far() {
    let (s, client) = hub().await;
    s.script([Reply::EndlessError]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("500") && why.contains("larger than"), "{why}");
}

#[tokio::test]
async fn a_filtered_answer_fails_the_task_and_still_records_usage() {
    let (s, client) = hub().await;
    s.script([Reply::Filtered]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("content filter"), "{why}");
    let usage = &task.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert_eq!(usage["promptTokens"], 9);
}

#[tokio::test]
async fn an_answer_past_the_deadline_or_not_streamed_fails_the_task_saying_so() {
    let (s, base_url) = standin().await;
    let mut settings = LlmSettings::new("standin-model", base_url);
    settings.timeout_secs = 1;
    let client = hub_with(
        settings,
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    s.script([Reply::Slow, Reply::NotStreamed]);
    let started = Instant::now();
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let why = status_text(&task);
    assert!(
        why.contains("did not finish answering within the 1 s deadline"),
        "{why}"
    );
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("not a stream"), "{why}");
}

#[tokio::test]
async fn a_stream_cut_short_fails_the_task() {
    let (s, client) = hub().await;
    s.script([Reply::CutShort]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("ended before the answer did"), "{why}");
}

#[tokio::test]
async fn a_stream_with_bare_cr_line_ends_and_an_open_last_event_is_read() {
    let (s, client) = hub().await;
    let events = [
        chunk(json!({"role": "assistant", "content": "Bare"}), None),
        chunk(json!({"content": " CR"}), Some("stop")),
        usage_chunk(4, 2),
    ]
    .into_iter()
    .map(|e| e.replace('\n', "\r"))
    .chain(["data: [DONE]".to_owned()])
    .collect();
    s.script([Reply::Events(events)]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert_eq!(task.artifacts[0].text(), "Bare CR");
    let usage = &task.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert_eq!(usage["totalTokens"], 6);
}

#[tokio::test]
async fn huge_token_counts_saturate() {
    let (s, client) = hub().await;
    let usage = json!({"choices": [], "usage": {"prompt_tokens": u64::MAX,
                        "completion_tokens": u64::MAX}});
    s.script([Reply::Events(vec![
        chunk(json!({"content": "Hi"}), Some("stop")),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_owned(),
    ])]);
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    let usage = &task.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert_eq!(usage["totalTokens"], u64::MAX);
}

#[tokio::test]
async fn a_query_in_the_base_url_stays_a_query() {
    let (s, base_url) = standin().await;
    let client = hub_with(
        LlmSettings::new(
            "standin-model",
            format!("{base_url}?api-version=2024-06-01"),
        ),
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert_eq!(s.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_the_task_saying_so() {
    // A port nothing listens on.
    let (l, base) = listener().await;
    drop(l);
    let client = hub_with(
        LlmSettings::new("m", format!("{base}/v1")),
        SecretSource::from_values(Vec::<(String, String)>::new()),
    )
    .await;
    let task = send(&client, text("Hi")).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("cannot reach the model endpoint"), "{why}");
}

// Two workers: the stand-in's stream, the hub and the client do not wait
// on one thread (a busy CI box makes a single-threaded runtime's turns long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_closes_the_upstream_stream_within_100_ms() {
    let (s, client) = hub().await;
    s.script([Reply::Endless]);
    let mut events = client
        .send_streaming(text("Go on forever"))
        .await
        .expect("stream");
    let mut task_id = String::new();
    let mut chunks = 0;
    while chunks < 3 {
        let ev = tokio::time::timeout(STEP, events.next())
            .await
            .expect("in time")
            .expect("an event")
            .expect("event");
        match ev.payload {
            Some(Payload::Task(t)) => task_id = t.id,
            Some(Payload::StatusUpdate(u)) => task_id = u.task_id,
            Some(Payload::ArtifactUpdate(a)) => {
                task_id = a.task_id;
                chunks += 1;
            }
            _ => {}
        }
    }
    assert!(s.closed.lock().expect("lock").is_none());
    let canceled = client.cancel_task(&task_id).await.expect("cancel");
    // The rule: closed by the time CancelTask has answered, give or take
    // 100 ms; measured from its answer, not its request (whose time is the
    // hub's and the box's, not the close's).
    let answered = Instant::now();
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    let deadline = answered + Duration::from_secs(2);
    let closed = loop {
        if let Some(at) = *s.closed.lock().expect("lock") {
            break at;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream stream was never closed"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let took = closed.saturating_duration_since(answered);
    eprintln!("the stand-in saw the stream closed {took:?} after the cancel was answered");
    assert!(
        took < Duration::from_millis(100),
        "closed {took:?} after the cancel"
    );
}

#[tokio::test]
async fn images_go_as_vision_parts_and_other_files_are_refused() {
    let (s, client) = hub().await;
    let task = send(
        &client,
        request(
            vec![
                v1::Part::text("What is this?"),
                v1::Part::url("https://img.example/cat.png", "image/png"),
                v1::Part::data(json!({"hint": "animal"})),
            ],
            "",
            "",
        ),
    )
    .await;
    assert_eq!(state(&task), v1::TaskState::Completed);
    let sent = messages(&s.requests()[0]);
    assert_eq!(
        sent[1].1,
        json!([
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://img.example/cat.png"}},
            {"type": "text", "text": "{\"hint\":\"animal\"}"},
        ])
    );

    let refused = send(
        &client,
        request(
            vec![v1::Part::url(
                "https://docs.example/a.pdf",
                "application/pdf",
            )],
            "",
            "",
        ),
    )
    .await;
    assert_eq!(state(&refused), v1::TaskState::Failed);
    let why = status_text(&refused);
    assert!(why.contains("application/pdf"), "{why}");
    let http = send(
        &client,
        request(
            vec![v1::Part::url("http://img.example/cat.png", "image/png")],
            "",
            "",
        ),
    )
    .await;
    assert_eq!(state(&http), v1::TaskState::Failed);
    let why = status_text(&http);
    assert!(why.contains("must be https"), "{why}");
    assert_eq!(
        s.requests().len(),
        1,
        "nothing was sent for the refused parts"
    );
}

#[tokio::test]
async fn a_missing_key_secret_is_refused_at_registration() {
    let store = Arc::new(heddle_store::MemoryStore::default());
    let hub = Hub::builder("http://127.0.0.1:9", store)
        .remote(RemoteSettings {
            secrets: SecretSource::from_values(Vec::<(String, String)>::new()),
            ..RemoteSettings::default()
        })
        .build()
        .await;
    let mut settings = LlmSettings::new("m", "https://api.example/v1");
    settings.api_key_env = Some("NOT_SET_ANYWHERE".into());
    let err = hub
        .register(AgentEntry::llm("chat", settings))
        .await
        .expect_err("no key");
    assert!(err.to_string().contains("NOT_SET_ANYWHERE"), "{err}");
    let far = AgentEntry::llm("far", LlmSettings::new("m", "http://llm.example/v1"));
    let err = hub
        .register(far)
        .await
        .expect_err("plain http off loopback");
    assert!(err.to_string().contains("llm.base_url"), "{err}");
}

/// Runs an official SDK's client flows (`script AGENT_URL`) against an llm
/// agent whose stand-in is scripted for them: send, stream, ask_user.
async fn sdk_client_flows(program: &std::path::Path, script: &std::path::Path) {
    let (s, client) = hub().await;
    s.script([
        Reply::Text(vec!["Hello", ", ", "world."]),
        Reply::Text(vec!["One", " two", " three", "."]),
        Reply::Ask("Which city?"),
        Reply::Text(vec!["Sunny in Paris."]),
    ]);
    let agent = client.interface().url.trim_end_matches("/a2a").to_owned();
    live::run_flows(program, script, &[&agent], 3).await;
}

/// The official Python client through the hub
/// (`tests/interop/python/hub_llm_flows.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_sends_streams_and_answers_through_the_hub() {
    let python = interop_dir().join(".venv/bin/python");
    if installed(&python, "Python a2a-sdk") {
        sdk_client_flows(&python, &interop_dir().join("python/hub_llm_flows.py")).await;
    }
}

/// The official JS client through the hub
/// (`tests/interop/js/hub_llm_flows.mjs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_js_client_sends_streams_and_answers_through_the_hub() {
    let modules = interop_dir().join("node_modules/@a2a-js/sdk");
    if installed(&modules, "JS @a2a-js/sdk") {
        sdk_client_flows(
            std::path::Path::new("node"),
            &interop_dir().join("js/hub_llm_flows.mjs"),
        )
        .await;
    }
}

/// A real endpoint, when the environment names one.
fn real_endpoint() -> Option<(LlmSettings, SecretSource)> {
    let Ok(url) = std::env::var("HEDDLE_TEST_OPENAI_URL") else {
        eprintln!(
            "skipped: the real-endpoint LLM tests (set HEDDLE_TEST_OPENAI_URL, \
             HEDDLE_TEST_OPENAI_KEY and HEDDLE_TEST_OPENAI_MODEL to run them)"
        );
        return None;
    };
    let model = std::env::var("HEDDLE_TEST_OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let mut settings = LlmSettings::new(model, url);
    settings.max_tokens = Some(64);
    settings.system_prompt = Some("Answer in one short sentence.".into());
    let mut secrets = Vec::new();
    if let Ok(key) = std::env::var("HEDDLE_TEST_OPENAI_KEY") {
        settings.api_key_env = Some("HEDDLE_TEST_OPENAI_KEY".into());
        secrets.push(("HEDDLE_TEST_OPENAI_KEY".to_owned(), key));
    }
    Some((settings, SecretSource::from_values(secrets)))
}

#[tokio::test]
async fn a_real_endpoint_answers_a_send_and_a_stream() {
    let Some((settings, secrets)) = real_endpoint() else {
        return;
    };
    let client = hub_with(settings, secrets).await;
    let task = send(&client, text("Say hello.")).await;
    assert_eq!(state(&task), v1::TaskState::Completed, "{task:?}");
    assert!(!task.artifacts[0].text().is_empty());
    let usage = &task.metadata.as_ref().expect("metadata").0[USAGE_KEY];
    assert!(usage["promptTokens"].as_u64().unwrap_or(0) > 0, "{usage}");

    let (chunks, last) = stream_events(&client, text("Count to five.")).await;
    assert_eq!(last, v1::TaskState::Completed);
    assert!(!chunks.is_empty());
    assert!(chunks.last().is_some_and(|c| c.last_chunk));
    assert!(!chunks[0].append && chunks[1..].iter().all(|c| c.append));
}
