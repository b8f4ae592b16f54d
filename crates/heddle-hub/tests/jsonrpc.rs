//! Behaviour of `heddle serve`'s agents over JSON-RPC, in process: every
//! request goes through the hub's axum router exactly as it would over TCP.

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use futures::StreamExt;
use heddle_core::v1;
use heddle_hub::{
    AgentProfile, Hub,
    agents::{Conformance, Echo, Writer, WriterStream},
};
use heddle_server::{AgentError, AgentExecutor, Limits, RequestContext, TaskEvents};
use heddle_store::{MemoryStore, Scope, SqliteStore, TaskStore};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const BASE: &str = "http://test.local";

async fn hub_with(store: Arc<dyn TaskStore>, limits: Limits) -> Hub {
    Hub::builder(BASE, store)
        .limits(limits)
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .agent(
            "writer",
            AgentProfile::new("writer", "Writer", "writer", &["t"]),
            Arc::new(Writer),
        )
        .agent(
            "writer-stream",
            AgentProfile::new("writer-stream", "Stream", "stream", &["t"]),
            Arc::new(WriterStream {
                pause: Duration::from_millis(20),
                ..Default::default()
            }),
        )
        .agent(
            "conformance",
            AgentProfile::new("conformance", "Conformance", "tck", &["t"]),
            Arc::new(Conformance {
                resubscribe_window: Duration::from_secs(2),
                v03_pause: Duration::from_millis(200),
            }),
        )
        .default_agent("conformance")
        .build()
        .await
}

async fn app() -> Router {
    hub_with(Arc::new(MemoryStore::default()), Limits::default())
        .await
        .router()
}

fn post(agent: &str, version: Option<&str>, body: &Value) -> Request<Body> {
    let mut b = Request::post(format!("/api/v1/agents/{agent}/a2a"))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(v) = version {
        b = b.header("A2A-Version", v);
    }
    b.body(Body::from(body.to_string())).expect("request")
}

async fn call(app: &Router, agent: &str, version: Option<&str>, body: Value) -> Value {
    let resp = app
        .clone()
        .oneshot(post(agent, version, &body))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)))
}

/// A response's body as JSON.
async fn json_body(resp: axum::response::Response) -> Value {
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)))
}

/// A v1.0 call; returns `result` or panics with the error.
async fn v1(app: &Router, agent: &str, method: &str, params: Value) -> Value {
    let r = call(
        app,
        agent,
        Some("1.0"),
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
    .await;
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{method} failed: {r}"))
}

/// A v1.0 call expected to fail; returns `error`.
async fn v1_err(app: &Router, agent: &str, method: &str, params: Value) -> Value {
    let r = call(
        app,
        agent,
        Some("1.0"),
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
    .await;
    r.get("error")
        .cloned()
        .unwrap_or_else(|| panic!("{method} succeeded: {r}"))
}

async fn sse(app: &Router, agent: &str, version: Option<&str>, body: Value) -> Vec<Value> {
    let resp = app
        .clone()
        .oneshot(post(agent, version, &body))
        .await
        .expect("response");
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    parse_sse(&String::from_utf8_lossy(&bytes))
}

fn parse_sse(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data:")))
        .map(|d| serde_json::from_str(d.trim()).expect("event json"))
        .collect()
}

fn user(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

#[tokio::test]
async fn echo_answers_in_the_callers_version() {
    let app = app().await;
    let t = &v1(
        &app,
        "echo",
        "SendMessage",
        json!({"message": user("m1", "hello")}),
    )
    .await["task"];
    assert_eq!(state(t), "TASK_STATE_COMPLETED");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "hello");

    let r = call(&app, "echo", None, json!({"jsonrpc": "2.0", "id": "a", "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}))
    .await;
    let t = &r["result"];
    assert_eq!(
        (t["kind"].as_str(), t["status"]["state"].as_str()),
        (Some("task"), Some("completed"))
    );
    assert_eq!(
        t["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "hi"})
    );

    // The legacy name, in the original TaskSendParams shape.
    let r = call(&app, "echo", None, json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/send",
        "params": {"id": "client-chosen", "sessionId": "s1", "message": {"role": "user", "parts": [{"type": "text", "text": "old"}]}}}))
    .await;
    let err = r.get("error");
    assert!(
        err.is_some_and(|e| e["code"] == -32602),
        "legacy message without messageId is refused: {r}"
    );
    let r = call(&app, "echo", None, json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/send",
        "params": {"sessionId": "s1", "message": {"messageId": "x", "role": "user", "parts": [{"type": "text", "text": "old"}]}}}))
    .await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(r["result"]["contextId"], "s1");
}

#[tokio::test]
async fn writer_flow_pauses_for_input_and_resumes_on_the_same_task() {
    let app = app().await;
    let msg = json!({"messageId": "w1", "role": "ROLE_USER", "parts": [
        {"text": "Summarize this paper."},
        {"raw": "JVBERi0xLjQK", "filename": "paper.pdf", "mediaType": "application/pdf"}]});
    let t = v1(&app, "writer", "SendMessage", json!({"message": msg})).await["task"].clone();
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|q| q.contains("Who is the report for"))
    );
    let id = t["id"].as_str().expect("id");
    let ctx = t["contextId"].as_str().expect("context");

    let answer = json!({"messageId": "w2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "the board"}]});
    let done = v1(&app, "writer", "SendMessage", json!({"message": answer})).await["task"].clone();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert_eq!(done["id"], id);
    assert_eq!(done["contextId"], ctx, "context inferred from the task");
    let report = done["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .expect("report");
    assert!(
        report.contains("the board") && report.contains("paper.pdf"),
        "{report}"
    );
    let users: Vec<_> = done["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .collect();
    assert_eq!(users.len(), 2, "both user messages are in the history");
    // In the order it was said: the request, the question, the answer to it.
    let said: Vec<_> = done["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| m["messageId"].as_str().unwrap_or("(agent)"))
        .collect();
    let pos = |id: &str| said.iter().position(|m| *m == id);
    let question = done["history"]
        .as_array()
        .expect("history")
        .iter()
        .position(|m| {
            m["role"] == "ROLE_AGENT"
                && m["parts"][0]["text"]
                    .as_str()
                    .is_some_and(|q| q.contains("Who is the report for"))
        });
    assert!(
        pos("w1") < question && question < pos("w2"),
        "history order: {said:?}"
    );

    // Terminal tasks take no more messages; unknown ids are not found; contexts must match.
    let again =
        json!({"messageId": "w3", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "more"}]});
    assert_eq!(
        v1_err(&app, "writer", "SendMessage", json!({"message": again})).await["code"],
        -32004
    );
    let ghost =
        json!({"messageId": "w4", "role": "ROLE_USER", "taskId": "nope", "parts": [{"text": "?"}]});
    assert_eq!(
        v1_err(&app, "writer", "SendMessage", json!({"message": ghost})).await["code"],
        -32001
    );
    let t2 = v1(
        &app,
        "writer",
        "SendMessage",
        json!({"message": user("w5", "another")}),
    )
    .await["task"]
        .clone();
    let wrong = json!({"messageId": "w6", "role": "ROLE_USER", "taskId": t2["id"], "contextId": "other", "parts": [{"text": "x"}]});
    let e = v1_err(&app, "writer", "SendMessage", json!({"message": wrong})).await;
    assert_eq!(e["code"], -32602);
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("contextId")),
        "{e}"
    );
}

#[tokio::test]
async fn streaming_sends_the_task_first_then_chunks_in_order() {
    let app = app().await;
    let events = sse(
        &app,
        "writer-stream",
        Some("1.0"),
        json!({"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage",
        "params": {"message": user("s1", "go")}}),
    )
    .await;
    let results: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert!(events.iter().all(|e| e["id"] == 9));
    assert!(
        results[0].get("task").is_some(),
        "task first: {}",
        results[0]
    );
    let mut text = String::new();
    let mut chunks = 0;
    for r in &results {
        if let Some(a) = r.get("artifactUpdate") {
            chunks += 1;
            if a["append"] != true {
                text.clear();
            }
            text.push_str(a["artifact"]["parts"][0]["text"].as_str().unwrap_or(""));
            assert_eq!(a["lastChunk"] == true, chunks == 3);
        }
    }
    assert_eq!(chunks, 3);
    assert_eq!(
        text,
        "Report, part one: the findings. Part two: what they mean. Part three: what to do next."
    );
    assert_eq!(
        results.last().expect("last")["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // v0.3: kind-tagged events, `final` only on the last.
    let events = sse(&app, "writer-stream", None, json!({"jsonrpc": "2.0", "id": 10, "method": "message/stream",
        "params": {"message": {"kind": "message", "messageId": "s2", "role": "user", "parts": [{"kind": "text", "text": "go"}]}}}))
    .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["result"]["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "task",
            "status-update",
            "artifact-update",
            "artifact-update",
            "artifact-update",
            "status-update"
        ]
    );
    let finals: Vec<bool> = events
        .iter()
        .filter(|e| e["result"]["kind"] == "status-update")
        .map(|e| e["result"]["final"] == true)
        .collect();
    assert_eq!(finals, [false, true]);
}

#[tokio::test]
async fn a_direct_message_reply_streams_alone() {
    let app = app().await;
    let events = sse(
        &app,
        "conformance",
        Some("1.0"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"message": user("tck-message-response-1", "hi")}}),
    )
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["result"]["message"]["role"], "ROLE_AGENT");
    let r = v1(
        &app,
        "conformance",
        "SendMessage",
        json!({"message": user("tck-message-response-2", "hi")}),
    )
    .await;
    assert!(r.get("message").is_some() && r.get("task").is_none(), "{r}");
}

#[tokio::test]
async fn history_length_truncates_per_version() {
    let app = app().await;
    let t = v1(
        &app,
        "writer",
        "SendMessage",
        json!({"message": user("h1", "brief")}),
    )
    .await["task"]
        .clone();
    let id = t["id"].clone();
    let full = v1(&app, "writer", "GetTask", json!({"id": id})).await;
    let n = full["history"].as_array().map_or(0, Vec::len);
    assert!(n >= 2, "user message and the agent's WORKING note: {full}");
    let none = v1(
        &app,
        "writer",
        "GetTask",
        json!({"id": id, "historyLength": 0}),
    )
    .await;
    assert!(none.get("history").is_none(), "0 means no history in v1.0");
    let one = v1(
        &app,
        "writer",
        "GetTask",
        json!({"id": id, "historyLength": 1}),
    )
    .await;
    assert_eq!(one["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        one["history"][0],
        full["history"][n - 1],
        "the most recent one"
    );
    // v0.3: historyLength 0 means no limit.
    let r = call(&app, "writer", None, json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": id, "historyLength": 0}})).await;
    assert_eq!(r["result"]["history"].as_array().map(Vec::len), Some(n));
    assert_eq!(
        v1_err(
            &app,
            "writer",
            "GetTask",
            json!({"id": id, "historyLength": -1})
        )
        .await["code"],
        -32602
    );
}

#[tokio::test]
async fn list_tasks_pages_newest_first_with_filters() {
    let app = app().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let t = v1(
            &app,
            "echo",
            "SendMessage",
            json!({"message": {"messageId": format!("l{i}"), "role": "ROLE_USER",
            "contextId": if i % 2 == 0 { "even" } else { "odd" }, "parts": [{"text": "x"}]}}),
        )
        .await;
        ids.push(t["task"]["id"].as_str().expect("id").to_owned());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = v1(
            &app,
            "echo",
            "ListTasks",
            json!({"pageSize": 2, "pageToken": token}),
        )
        .await;
        assert_eq!(page["totalSize"], 5);
        assert_eq!(page["pageSize"], 2);
        for t in page["tasks"].as_array().expect("tasks") {
            assert!(t.get("artifacts").is_none(), "artifacts only when asked");
            seen.push(t["id"].as_str().expect("id").to_owned());
        }
        pages += 1;
        token = page["nextPageToken"]
            .as_str()
            .expect("nextPageToken always present")
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    ids.reverse();
    assert_eq!(seen, ids, "newest first, no gaps or duplicates");
    let even = v1(
        &app,
        "echo",
        "ListTasks",
        json!({"contextId": "even", "includeArtifacts": true}),
    )
    .await;
    assert_eq!(even["totalSize"], 3);
    assert!(even["tasks"][0]["artifacts"].is_array());
    let done = v1(
        &app,
        "echo",
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING"}),
    )
    .await;
    assert_eq!(done["totalSize"], 0);
    assert_eq!(done["nextPageToken"], "");
    assert_eq!(
        v1_err(&app, "echo", "ListTasks", json!({"pageSize": 0})).await["code"],
        -32602
    );
    assert_eq!(
        v1_err(&app, "echo", "ListTasks", json!({"pageToken": "garbage"})).await["code"],
        -32602
    );
    assert_eq!(
        v1_err(
            &app,
            "echo",
            "ListTasks",
            json!({"status": "TASK_STATE_BOGUS"})
        )
        .await["code"],
        -32602
    );
}

#[tokio::test]
async fn cancel_stops_a_running_task_and_refuses_finished_ones() {
    let app = app().await;
    let t = v1(
        &app,
        "conformance",
        "SendMessage",
        json!({"message": user("test-resubscribe-message-id-1", "wait"),
        "configuration": {"returnImmediately": true}}),
    )
    .await["task"]
        .clone();
    assert!(
        matches!(state(&t), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{t}"
    );
    let canceled = v1(&app, "conformance", "CancelTask", json!({"id": t["id"]})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    // A second cancel changes nothing and says so: TaskNotCancelable
    // (v1 §3.1.5 names an already canceled task).
    assert_eq!(
        v1_err(&app, "conformance", "CancelTask", json!({"id": t["id"]})).await["code"],
        -32002
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        state(&v1(&app, "conformance", "GetTask", json!({"id": t["id"]})).await),
        "TASK_STATE_CANCELED",
        "stays canceled"
    );

    let done = v1(
        &app,
        "echo",
        "SendMessage",
        json!({"message": user("c2", "x")}),
    )
    .await["task"]
        .clone();
    let e = v1_err(&app, "echo", "CancelTask", json!({"id": done["id"]})).await;
    assert_eq!(e["code"], -32002);
    assert_eq!(e["data"][0]["reason"], "TASK_NOT_CANCELABLE");
    assert_eq!(
        v1_err(&app, "echo", "CancelTask", json!({"id": "missing"})).await["code"],
        -32001
    );

    // An interrupted task (no agent running) cancels directly.
    let w = v1(
        &app,
        "writer",
        "SendMessage",
        json!({"message": user("c3", "brief")}),
    )
    .await["task"]
        .clone();
    assert_eq!(
        state(&v1(&app, "writer", "CancelTask", json!({"id": w["id"]})).await),
        "TASK_STATE_CANCELED"
    );
}

#[tokio::test]
async fn subscribers_get_the_snapshot_then_the_same_events() {
    let app = app().await;
    let t = v1(
        &app,
        "conformance",
        "SendMessage",
        json!({"message": user("test-resubscribe-message-id-2", "wait"),
        "configuration": {"returnImmediately": true}}),
    )
    .await["task"]
        .clone();
    let sub =
        json!({"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": t["id"]}});
    let (a, b) = tokio::join!(
        sse(&app, "conformance", Some("1.0"), sub.clone()),
        sse(&app, "conformance", Some("1.0"), sub.clone())
    );
    assert_eq!(a[0]["result"]["task"]["id"], t["id"], "snapshot first");
    let tail = |v: &[Value]| {
        v.iter()
            .skip(1)
            .map(|e| e["result"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(tail(&a), tail(&b), "every subscriber sees the same events");
    assert_eq!(
        a.last().expect("last")["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Terminal now: subscribing is refused.
    assert_eq!(
        v1_err(
            &app,
            "conformance",
            "SubscribeToTask",
            json!({"id": t["id"]})
        )
        .await["code"],
        -32004
    );
}

#[tokio::test]
async fn a_dropped_stream_does_not_cancel_the_task() {
    let app = app().await;
    let resp = app
        .clone()
        .oneshot(post(
            "writer-stream",
            Some("1.0"),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user("d1", "go")}}),
        ))
        .await
        .expect("response");
    let mut body = resp.into_body().into_data_stream();
    let first = body.next().await.expect("first event").expect("bytes");
    let first = parse_sse(&String::from_utf8_lossy(&first));
    let id = first[0]["result"]["task"]["id"].clone();
    drop(body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = v1(&app, "writer-stream", "GetTask", json!({"id": id})).await;
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(t["artifacts"][0]["parts"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn every_reachable_error_has_its_code() {
    let app = app().await;
    let raw = |body: &'static str, ct: &'static str| {
        Request::post("/api/v1/agents/echo/a2a")
            .header(header::CONTENT_TYPE, ct)
            .body(Body::from(body))
            .expect("req")
    };
    let get = |r: axum::response::Response| async move {
        serde_json::from_slice::<Value>(&r.into_body().collect().await.expect("body").to_bytes())
            .expect("json")
    };
    let r = get(app
        .clone()
        .oneshot(raw("{not json", "application/json"))
        .await
        .expect("resp"))
    .await;
    assert_eq!(
        (r["error"]["code"].clone(), r["id"].clone()),
        (json!(-32700), Value::Null)
    );
    let r = get(app
        .clone()
        .oneshot(raw(
            r#"{"jsonrpc":"1.0","id":4,"method":"GetTask"}"#,
            "application/json",
        ))
        .await
        .expect("resp"))
    .await;
    assert_eq!(
        (r["error"]["code"].clone(), r["id"].clone()),
        (json!(-32600), json!(4))
    );
    let r = get(app
        .clone()
        .oneshot(raw(
            r#"{"jsonrpc":"2.0","id":4,"method":"GetTask","params":{"id":"x"}}"#,
            "text/plain",
        ))
        .await
        .expect("resp"))
    .await;
    assert_eq!(r["error"]["code"], -32005);
    assert_eq!(
        v1_err(&app, "echo", "NoSuchMethod", json!({})).await["code"],
        -32601
    );
    let e = v1_err(
        &app,
        "echo",
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
    )
    .await;
    assert_eq!(e["code"], -32602);
    assert_eq!(
        e["data"][1]["fieldViolations"][0]["field"],
        "message.messageId"
    );
    let e = v1_err(&app, "echo", "SendMessage", json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "y"}]}})).await;
    assert_eq!(
        e["data"][1]["fieldViolations"][0]["field"],
        "message.parts[0]"
    );
    assert_eq!(
        v1_err(&app, "echo", "GetTask", json!({"id": "missing"})).await["data"][0]["reason"],
        "TASK_NOT_FOUND"
    );
    let e = v1_err(
        &app,
        "echo",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "t", "url": "https://x"}),
    )
    .await;
    assert_eq!(e["code"], -32003);
    let e = v1_err(&app, "echo", "GetExtendedAgentCard", json!({})).await;
    assert_eq!(e["code"], -32004, "no extended card declared: {e}");
    let r = call(
        &app,
        "echo",
        Some("99.0"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32009);
    let r = call(
        &app,
        "echo",
        Some("1.0"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}),
    )
    .await;
    assert_eq!(
        r["error"]["code"], -32601,
        "a v0.3 name under A2A-Version 1.0"
    );
    let r = call(
        &app,
        "echo",
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
    )
    .await;
    assert!(
        r.get("result").is_some(),
        "header-less v1.0 method names are served as v1.0: {r}"
    );
}

/// An agent whose card declares what the tests need: an extended card and a required extension.
struct Plain;

#[async_trait::async_trait]
impl AgentExecutor for Plain {
    async fn execute(&self, _: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.complete(None).await?;
        Ok(())
    }
}

#[tokio::test]
async fn declared_capabilities_produce_their_errors() {
    let mut card = heddle_hub::card_for(
        BASE,
        "strict",
        &AgentProfile::new("strict", "Strict", "d", &["t"]),
        Default::default(),
    );
    if let Some(c) = card.capabilities.as_mut() {
        c.extended_agent_card = Some(true);
        c.extensions.push(v1::AgentExtension {
            uri: "https://ext.example/needed".into(),
            required: true,
            ..Default::default()
        });
    }
    let handler = heddle_server::RequestHandler::new(
        "strict",
        card,
        Arc::new(Plain),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let app = heddle_server::AgentRoutes::new(handler)
        .jsonrpc_at("/a2a")
        .router();
    let app = Router::new().nest("/api/v1/agents/strict", app);
    assert_eq!(
        v1_err(&app, "strict", "GetTask", json!({"id": "x"})).await["code"],
        -32008
    );
    let req = Request::post("/api/v1/agents/strict/a2a")
        .header(header::CONTENT_TYPE, "application/json")
        .header("A2A-Version", "1.0")
        .header(
            "A2A-Extensions",
            "https://ext.example/other, https://ext.example/needed",
        )
        .body(Body::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}).to_string(),
        ))
        .expect("req");
    let r: Value = serde_json::from_slice(
        &app.oneshot(req)
            .await
            .expect("resp")
            .into_body()
            .collect()
            .await
            .expect("b")
            .to_bytes(),
    )
    .expect("json");
    assert_eq!(
        r["error"]["code"], -32007,
        "declared but not configured: {r}"
    );
}

#[tokio::test]
async fn batches_answer_each_request_and_skip_notifications() {
    let app = app().await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "missing"}},
        {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "missing"}},
        {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": user("b1", "x")}},
        {"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage", "params": {"message": user("b2", "x")}},
        5
    ]);
    let r = call(&app, "echo", Some("1.0"), batch).await;
    let arr = r.as_array().expect("array");
    assert_eq!(arr.len(), 4, "the notification is not answered: {r}");
    assert_eq!(arr[0]["error"]["code"], -32001);
    assert_eq!(
        arr[1]["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(arr[2]["error"]["code"], -32600, "streams cannot be batched");
    assert_eq!(arr[3]["error"]["code"], -32600);
    let only_notes = json!([{"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}]);
    let resp = app
        .clone()
        .oneshot(post("echo", Some("1.0"), &only_notes))
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn limits_give_clear_errors() {
    let limits = Limits {
        max_body_bytes: 4096,
        max_parts: 2,
        ..Limits::default()
    };
    let app = hub_with(Arc::new(MemoryStore::default()), limits)
        .await
        .router();
    let parts: Vec<Value> = (0..3).map(|i| json!({"text": i.to_string()})).collect();
    let e = v1_err(
        &app,
        "echo",
        "SendMessage",
        json!({"message": {"messageId": "p", "role": "ROLE_USER", "parts": parts}}),
    )
    .await;
    assert_eq!(e["data"][1]["fieldViolations"][0]["field"], "message.parts");
    let big = "x".repeat(5000);
    let resp = app
        .clone()
        .oneshot(post(
            "echo",
            Some("1.0"),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user("big", &big)}}),
        ))
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Still a JSON-RPC answer: an error with no request id (none was read).
    let e = json_body(resp).await;
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["code"], -32600, "{e}");
}

/// `max_streams` holds for the hub, not per agent, and a refusal is
/// retryable: HTTP 429 with `Retry-After`, JSON-RPC -32029.
#[tokio::test]
async fn the_stream_cap_is_hub_wide_and_its_refusal_says_when_to_retry() {
    let limits = Limits {
        max_streams: 1,
        ..Limits::default()
    };
    let app = hub_with(Arc::new(MemoryStore::default()), limits)
        .await
        .router();
    let t = v1(
        &app,
        "conformance",
        "SendMessage",
        json!({"message": user("test-resubscribe-message-id-3", "w"),
        "configuration": {"returnImmediately": true}}),
    )
    .await["task"]
        .clone();
    let open = app
        .clone()
        .oneshot(post("conformance", Some("1.0"), &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": t["id"]}})))
        .await
        .expect("resp");
    assert_eq!(open.status(), StatusCode::OK);
    // Another agent's stream counts against the same cap.
    let resp = app
        .clone()
        .oneshot(post(
            "writer-stream",
            Some("1.0"),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage",
                "params": {"message": user("s2", "go")}}),
        ))
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    let body = json_body(resp).await;
    assert_eq!(body["id"], 2);
    assert_eq!(body["error"]["code"], -32029);
    assert_eq!(body["error"]["data"][0]["reason"], "RESOURCE_EXHAUSTED");
    assert_eq!(
        body["error"]["data"][0]["metadata"]["retryAfterSeconds"],
        "1"
    );
    drop(open);
}

#[tokio::test]
async fn a_batch_past_the_cap_is_refused_whole() {
    let limits = Limits {
        max_batch: 2,
        ..Limits::default()
    };
    let app = hub_with(Arc::new(MemoryStore::default()), limits)
        .await
        .router();
    let call =
        |i: u32| json!({"jsonrpc": "2.0", "id": i, "method": "GetTask", "params": {"id": "x"}});
    let resp = app
        .clone()
        .oneshot(post(
            "echo",
            Some("1.0"),
            &json!([call(1), call(2), call(3)]),
        ))
        .await
        .expect("resp");
    let body = json_body(resp).await;
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(body["id"], Value::Null);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 2"))
    );
    let resp = app
        .clone()
        .oneshot(post("echo", Some("1.0"), &json!([call(1), call(2)])))
        .await
        .expect("resp");
    let body = json_body(resp).await;
    assert_eq!(body.as_array().map(Vec::len), Some(2), "{body}");
}

#[tokio::test]
async fn cards_are_served_at_both_names_with_validators() {
    let app = app().await;
    for path in [
        "/api/v1/agents/echo/.well-known/agent-card.json",
        "/api/v1/agents/echo/.well-known/agent.json",
        "/.well-known/agent-card.json",
    ] {
        let resp = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).expect("req"))
            .await
            .expect("resp");
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert!(
            resp.headers()[header::CACHE_CONTROL]
                .to_str()
                .is_ok_and(|v| v.contains("max-age"))
        );
        let etag = resp.headers()[header::ETAG].clone();
        assert!(resp.headers().contains_key(header::LAST_MODIFIED));
        let card: Value =
            serde_json::from_slice(&resp.into_body().collect().await.expect("b").to_bytes())
                .expect("json");
        assert!(
            card["supportedInterfaces"][0]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with(BASE)),
            "absolute URLs"
        );
        assert_eq!(card["protocolVersion"], "0.3.0");
        let again = app
            .clone()
            .oneshot(
                Request::get(path)
                    .header(header::IF_NONE_MATCH, etag)
                    .body(Body::empty())
                    .expect("req"),
            )
            .await
            .expect("resp");
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    }
    let root: Value = {
        let resp = app
            .clone()
            .oneshot(
                Request::get("/.well-known/agent-card.json")
                    .body(Body::empty())
                    .expect("req"),
            )
            .await
            .expect("r");
        serde_json::from_slice(&resp.into_body().collect().await.expect("b").to_bytes())
            .expect("json")
    };
    assert_eq!(
        root["name"], "Conformance",
        "the default agent's card at the root"
    );
    let list: Value = {
        let resp = app
            .clone()
            .oneshot(
                Request::get("/api/v1/agents")
                    .body(Body::empty())
                    .expect("req"),
            )
            .await
            .expect("r");
        serde_json::from_slice(&resp.into_body().collect().await.expect("b").to_bytes())
            .expect("json")
    };
    assert_eq!(list["agents"].as_array().map(Vec::len), Some(4));
    // Listed by id.
    let echo = list["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == "echo"))
        .expect("echo is listed");
    assert_eq!(
        echo["cardUrl"],
        format!("{BASE}/api/v1/agents/echo/.well-known/agent-card.json")
    );
    assert_eq!(list["agents"][0]["id"], "conformance");
}

#[tokio::test]
async fn tasks_survive_a_restart_and_running_ones_are_failed() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("heddle.db");
    let id = {
        let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open_path(&path).expect("open"));
        let app = hub_with(store.clone(), Limits::default()).await.router();
        let t = v1(
            &app,
            "writer",
            "SendMessage",
            json!({"message": user("r1", "brief")}),
        )
        .await["task"]
            .clone();
        assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
        // A task a crashed process left WORKING.
        let mut stale: v1::Task = serde_json::from_value(t.clone()).expect("task");
        stale.id = "stale-task".into();
        stale.status = Some(v1::TaskStatus {
            state: v1::TaskState::Working as i32,
            ..Default::default()
        });
        store
            .save(&Scope::new("writer", ""), &stale)
            .await
            .expect("save");
        t["id"].as_str().expect("id").to_owned()
    };
    let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open_path(&path).expect("reopen"));
    let app = hub_with(store, Limits::default()).await.router();
    let answer = json!({"messageId": "r2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "the board"}]});
    let done = v1(&app, "writer", "SendMessage", json!({"message": answer})).await["task"].clone();
    assert_eq!(
        state(&done),
        "TASK_STATE_COMPLETED",
        "continued after the restart"
    );
    let stale = v1(&app, "writer", "GetTask", json!({"id": "stale-task"})).await;
    assert_eq!(state(&stale), "TASK_STATE_FAILED");
    assert!(
        stale["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("restarted"))
    );
}

#[tokio::test]
async fn v03_conformance_tasks_stay_open_for_the_suite() {
    let app = app().await;
    let r = call(&app, "conformance", None, json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "v3", "role": "user", "parts": [{"kind": "text", "text": "hi"}]},
        "configuration": {"blocking": false}}}))
    .await;
    assert!(
        matches!(
            r["result"]["status"]["state"].as_str(),
            Some("submitted" | "working")
        ),
        "{r}"
    );
    let r = call(&app, "conformance", None, json!({"jsonrpc": "2.0", "id": 2, "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "v4", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}))
    .await;
    assert_eq!(r["result"]["status"]["state"], "input-required", "{r}");
    let id = r["result"]["id"].clone();
    let r = call(
        &app,
        "conformance",
        None,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": id}}),
    )
    .await;
    assert_eq!(r["result"]["status"]["state"], "canceled");
    let r = call(&app, "conformance", None, json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/pushNotificationConfig/get", "params": {"id": id}})).await;
    assert_eq!(r["error"]["code"], -32003);
}

#[tokio::test]
async fn a_404_says_in_json_what_was_not_found() {
    let app = app().await;
    for (path, says) in [
        ("/api/v1/agents/nobody/a2a", "no agent \"nobody\""),
        ("/api/v1/agents/echo/nope", "has no endpoint"),
        ("/elsewhere", "nothing at"),
    ] {
        let resp = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).expect("req"))
            .await
            .expect("resp");
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        let body = json_body(resp).await;
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{path}: {body}"
        );
    }
}

/// A store failure is the operator's to read, not the caller's: the answer
/// names a correlation id, never the store's own text.
#[tokio::test]
async fn a_store_failure_reaches_the_caller_as_a_correlation_id_only() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("tasks.db");
    let store = SqliteStore::open_path(&path).expect("store");
    let app = hub_with(Arc::new(store), Limits::default()).await.router();
    let task = v1(
        &app,
        "echo",
        "SendMessage",
        json!({"message": user("m1", "hello")}),
    )
    .await["task"]
        .clone();
    let id = task["id"].as_str().expect("id").to_owned();
    // Another process damages the row.
    let raw = rusqlite::Connection::open(&path).expect("open");
    raw.execute("UPDATE tasks SET body = x'ffffffff0a'", [])
        .expect("damage");
    drop(raw);

    let e = v1_err(&app, "echo", "GetTask", json!({"id": id})).await;
    let message = e["message"].as_str().unwrap_or_default();
    assert_eq!(e["code"], -32603, "{e}");
    assert!(message.contains("correlation id"), "{message}");
    for detail in ["corrupt", "decode", "sqlite", &id] {
        assert!(
            !message.to_lowercase().contains(detail),
            "{detail} in {message}"
        );
    }
    assert!(!e.to_string().contains("corrupt"), "{e}");

    let resp = app
        .clone()
        .oneshot(
            Request::get(format!("/api/v1/agents/echo/rest/tasks/{id}"))
                .header("A2A-Version", "1.0")
                .body(Body::empty())
                .expect("req"),
        )
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = String::from_utf8_lossy(&resp.into_body().collect().await.expect("b").to_bytes())
        .into_owned();
    assert!(
        body.contains("correlation id") && !body.contains("corrupt"),
        "{body}"
    );
}

/// A send that fails on the store leaves nothing behind in the registry of
/// live tasks (before, a `returnImmediately` send kept its entry for good).
#[tokio::test]
async fn a_send_the_store_refuses_leaves_no_live_task_behind() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("tasks.db");
    let store = SqliteStore::open_path(&path).expect("store");
    let hub = hub_with(Arc::new(store), Limits::default()).await;
    let app = hub.router();
    let raw = rusqlite::Connection::open(&path).expect("open");
    raw.execute_batch("DROP TABLE tasks").expect("damage");
    drop(raw);
    for attempt in 0..3 {
        let e = v1_err(
            &app,
            "echo",
            "SendMessage",
            json!({"message": user(&format!("m{attempt}"), "hello"),
                "configuration": {"returnImmediately": true}}),
        )
        .await;
        assert_eq!(e["code"], -32603, "{e}");
    }
    let handler = &hub.agent("echo").expect("echo").handler;
    assert_eq!(handler.live_tasks(), 0);
}

/// Each call of a JSON-RPC batch counts against its caller's rate, not the
/// batch once: a batch cannot multiply a caller's rate by the batch cap.
#[tokio::test]
async fn every_call_of_a_batch_counts_against_the_callers_rate() {
    use std::num::NonZeroU32;
    // One call a minute after a burst of four: nothing refills during the test.
    let limits = heddle_server::limit::CallerLimits::new(
        NonZeroU32::new(1),
        NonZeroU32::new(4).expect("4"),
        100,
    );
    let app = Hub::builder(BASE, Arc::new(MemoryStore::default()))
        .caller_limits(limits)
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await
        .router();
    let get = |i: usize| json!({"jsonrpc": "2.0", "id": i, "method": "GetTask", "params": {"id": "none"}});
    let send = |body: Value| {
        let app = app.clone();
        async move {
            app.oneshot(post("echo", Some("1.0"), &body))
                .await
                .expect("resp")
        }
    };
    // A batch of five is more than the burst: refused whole, never partly run.
    let resp = send(Value::Array((0..5).map(get).collect())).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().contains_key(header::RETRY_AFTER));
    assert_eq!(json_body(resp).await["error"]["code"], -32029);
    // Its HTTP request took one of the four; a batch of three takes the rest,
    // and is answered whole.
    let resp = send(Value::Array((0..3).map(get).collect())).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json_body(resp).await.as_array().map(Vec::len), Some(3));
    // Counted as one, the batch would have left two for this call.
    let resp = send(get(9)).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// Callers without an id share nothing but their address: one anonymous
/// client at its running-task cap does not stop another one.
#[tokio::test]
async fn anonymous_callers_are_limited_per_address() {
    use std::net::SocketAddr;
    let limits = heddle_server::limit::CallerLimits::new(None, std::num::NonZeroU32::MIN, 1);
    let app = Hub::builder(BASE, Arc::new(MemoryStore::default()))
        .caller_limits(limits)
        .agent(
            "slow",
            AgentProfile::new("slow", "Slow", "slow", &["t"]),
            Arc::new(WriterStream {
                pause: Duration::from_secs(30),
                ..Default::default()
            }),
        )
        .build()
        .await
        .router();
    let send_from = |ip: [u8; 4]| {
        let app = app.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": user("m", "go"), "configuration": {"returnImmediately": true}}});
            let mut req = post("slow", Some("1.0"), &body);
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(SocketAddr::from((ip, 4000))));
            app.oneshot(req).await.expect("resp").status()
        }
    };
    assert_eq!(send_from([192, 0, 2, 1]).await, StatusCode::OK);
    assert_eq!(
        send_from([192, 0, 2, 1]).await,
        StatusCode::TOO_MANY_REQUESTS,
        "the same address is at its cap"
    );
    assert_eq!(
        send_from([192, 0, 2, 2]).await,
        StatusCode::OK,
        "another address is not"
    );
}
