//! One table of behaviour cases, driven over every binding and version by the
//! same code: each [`Wire`] only knows how to phrase an operation and how to
//! read the answer back into the v1.0 model.

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Method, Request, header},
};
use heddle_core::{compat::v03, v1};
use heddle_hub::{
    AgentProfile, Hub,
    agents::{Conformance, Echo, Writer, WriterStream},
};
use heddle_store::MemoryStore;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// The ways a caller can reach an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    JsonRpcV1,
    JsonRpcV03,
    RestV1,
}

const WIRES: [Wire; 3] = [Wire::JsonRpcV1, Wire::JsonRpcV03, Wire::RestV1];

/// An A2A error as any binding reports it: the A2A error name.
#[derive(Debug, PartialEq, Eq)]
struct Failure(String);

async fn app() -> Router {
    Hub::builder("http://test.local", Arc::new(MemoryStore::default()))
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
            AgentProfile::new("writer-stream", "Stream", "s", &["t"]),
            Arc::new(WriterStream {
                pause: Duration::from_millis(10),
            }),
        )
        .agent(
            "conformance",
            AgentProfile::new("conformance", "Conformance", "c", &["t"]),
            Arc::new(Conformance {
                resubscribe_window: Duration::from_secs(2),
                v03_pause: Duration::from_millis(100),
            }),
        )
        .build()
        .await
        .router()
}

async fn http(
    app: &Router,
    method: Method,
    uri: &str,
    version: Option<&str>,
    body: Option<Value>,
) -> (u16, Vec<u8>) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(v) = version {
        b = b.header("A2A-Version", v);
    }
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string())),
        None => b.body(Body::empty()),
    }
    .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    (
        status,
        resp.into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec(),
    )
}

fn sse_data(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data:")))
        .map(|d| serde_json::from_str(d.trim()).expect("event json"))
        .collect()
}

fn reason_of_jsonrpc(err: &Value) -> Failure {
    let code = err["code"].as_i64().unwrap_or(0);
    Failure(
        heddle_core::ErrorCode::from_jsonrpc(code)
            .map_or(format!("code {code}"), |c| c.spec().reason.to_owned()),
    )
}

fn reason_of_rest(body: &[u8]) -> Failure {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let reason = v["error"]["details"]
        .as_array()
        .and_then(|d| d.iter().find_map(|x| x["reason"].as_str()))
        .unwrap_or("?");
    Failure(reason.to_owned())
}

impl Wire {
    fn version(self) -> Option<&'static str> {
        match self {
            Wire::JsonRpcV03 => None,
            _ => Some("1.0"),
        }
    }

    async fn rpc(
        self,
        app: &Router,
        agent: &str,
        v1_method: &str,
        v03_method: &str,
        params: Value,
    ) -> Result<Value, Failure> {
        let method = if self == Wire::JsonRpcV03 {
            v03_method
        } else {
            v1_method
        };
        let (_, body) = http(
            app,
            Method::POST,
            &format!("/api/v1/agents/{agent}/a2a"),
            self.version(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})),
        )
        .await;
        let v: Value = serde_json::from_slice(&body).expect("json");
        match v.get("error") {
            Some(e) => Err(reason_of_jsonrpc(e)),
            None => Ok(v["result"].clone()),
        }
    }

    async fn rest(
        self,
        app: &Router,
        method: Method,
        agent: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let (status, bytes) = http(
            app,
            method,
            &format!("/api/v1/agents/{agent}/rest{path}"),
            self.version(),
            body,
        )
        .await;
        if status == 200 {
            Ok(serde_json::from_slice(&bytes).expect("json"))
        } else {
            Err(reason_of_rest(&bytes))
        }
    }

    /// The message as this wire spells it.
    fn message(self, id: &str, text: &str, task_id: Option<&str>) -> Value {
        let mut m = match self {
            Wire::JsonRpcV03 => {
                json!({"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "text", "text": text}]})
            }
            _ => json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}),
        };
        if let Some(t) = task_id {
            m["taskId"] = json!(t);
        }
        m
    }

    /// Reads a task in this wire's form back into v1.0.
    fn task(self, v: &Value) -> v1::Task {
        match self {
            Wire::JsonRpcV03 => serde_json::from_value::<v03::Task>(v.clone())
                .expect("v0.3 task")
                .to_v1()
                .expect("upgrade"),
            _ => serde_json::from_value(v.clone()).expect("v1 task"),
        }
    }

    /// Reads a stream event back into v1.0.
    fn event(self, v: &Value) -> v1::StreamResponse {
        match self {
            Wire::JsonRpcV03 => serde_json::from_value::<v03::StreamEvent>(v.clone())
                .expect("event")
                .to_v1()
                .expect("upgrade"),
            _ => serde_json::from_value(v.clone()).expect("v1 event"),
        }
    }

    async fn send(
        self,
        app: &Router,
        agent: &str,
        message: Value,
        non_blocking: bool,
    ) -> Result<v1::Task, Failure> {
        let config = match self {
            Wire::JsonRpcV03 => json!({"blocking": !non_blocking}),
            _ => json!({"returnImmediately": non_blocking}),
        };
        let params = json!({"message": message, "configuration": config});
        let r = match self {
            Wire::RestV1 => {
                self.rest(app, Method::POST, agent, "/message:send", Some(params))
                    .await?
            }
            _ => {
                self.rpc(app, agent, "SendMessage", "message/send", params)
                    .await?
            }
        };
        Ok(match self {
            Wire::JsonRpcV03 => self.task(&r),
            _ => self.task(&r["task"]),
        })
    }

    async fn get(
        self,
        app: &Router,
        agent: &str,
        id: &str,
        history: Option<i32>,
    ) -> Result<v1::Task, Failure> {
        let r = match self {
            Wire::RestV1 => {
                let q = history
                    .map(|h| format!("?historyLength={h}"))
                    .unwrap_or_default();
                self.rest(app, Method::GET, agent, &format!("/tasks/{id}{q}"), None)
                    .await?
            }
            _ => {
                let mut p = json!({"id": id});
                if let Some(h) = history {
                    p["historyLength"] = json!(h);
                }
                self.rpc(app, agent, "GetTask", "tasks/get", p).await?
            }
        };
        Ok(self.task(&r))
    }

    async fn cancel(self, app: &Router, agent: &str, id: &str) -> Result<v1::Task, Failure> {
        let r = match self {
            // `%3A` for the colon, as some clients send it.
            Wire::RestV1 => {
                self.rest(
                    app,
                    Method::POST,
                    agent,
                    &format!("/tasks/{id}%3Acancel"),
                    None,
                )
                .await?
            }
            _ => {
                self.rpc(app, agent, "CancelTask", "tasks/cancel", json!({"id": id}))
                    .await?
            }
        };
        Ok(self.task(&r))
    }

    async fn stream(self, app: &Router, agent: &str, message: Value) -> Vec<v1::StreamResponse> {
        let (uri, body) = match self {
            Wire::RestV1 => (
                format!("/api/v1/agents/{agent}/rest/message:stream"),
                json!({"message": message}),
            ),
            Wire::JsonRpcV1 => (
                format!("/api/v1/agents/{agent}/a2a"),
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}),
            ),
            Wire::JsonRpcV03 => (
                format!("/api/v1/agents/{agent}/a2a"),
                json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}),
            ),
        };
        let (_, bytes) = http(app, Method::POST, &uri, self.version(), Some(body)).await;
        sse_data(&bytes)
            .iter()
            .map(|d| match self {
                Wire::RestV1 => self.event(d),
                _ => self.event(&d["result"]),
            })
            .collect()
    }
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

#[tokio::test]
async fn send_returns_the_completed_task_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let t = w
            .send(&app, "echo", w.message("m1", "hello", None), false)
            .await
            .expect("send");
        assert_eq!(state(&t), v1::TaskState::Completed, "{w:?}");
        assert_eq!(t.artifacts[0].text(), "hello", "{w:?}");
    }
}

#[tokio::test]
async fn the_writer_flow_is_the_same_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let t = w
            .send(&app, "writer", w.message("w1", "Summarize", None), false)
            .await
            .expect("first");
        assert_eq!(state(&t), v1::TaskState::InputRequired, "{w:?}");
        let done = w
            .send(
                &app,
                "writer",
                w.message("w2", "the board", Some(&t.id)),
                false,
            )
            .await
            .expect("answer");
        assert_eq!(state(&done), v1::TaskState::Completed, "{w:?}");
        assert!(done.artifacts[0].text().contains("the board"), "{w:?}");
        // A message to the finished task is refused alike.
        let again = w
            .send(&app, "writer", w.message("w3", "more", Some(&t.id)), false)
            .await;
        assert_eq!(
            again.expect_err("terminal"),
            Failure("UNSUPPORTED_OPERATION".into()),
            "{w:?}"
        );
    }
}

#[tokio::test]
async fn streams_carry_the_task_then_three_chunks_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let events = w
            .stream(&app, "writer-stream", w.message("s1", "go", None))
            .await;
        use v1::stream_response::Payload;
        assert!(
            matches!(events[0].payload, Some(Payload::Task(_))),
            "{w:?}: task first"
        );
        let mut text = String::new();
        for e in &events {
            if let Some(Payload::ArtifactUpdate(a)) = &e.payload {
                if !a.append {
                    text.clear();
                }
                text.push_str(
                    &a.artifact
                        .as_ref()
                        .map(v1::Artifact::text)
                        .unwrap_or_default(),
                );
            }
        }
        assert_eq!(
            text,
            "Report, part one: the findings. Part two: what they mean. Part three: what to do next.",
            "{w:?}"
        );
        let last = events.last().and_then(|e| match &e.payload {
            Some(Payload::StatusUpdate(u)) => u.status.as_ref().map(|s| s.state()),
            _ => None,
        });
        assert_eq!(last, Some(v1::TaskState::Completed), "{w:?}");
    }
}

#[tokio::test]
async fn get_truncates_history_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let t = w
            .send(&app, "writer", w.message("h1", "brief", None), false)
            .await
            .expect("send");
        let full = w.get(&app, "writer", &t.id, None).await.expect("get");
        assert!(full.history.len() >= 2, "{w:?}");
        let one = w.get(&app, "writer", &t.id, Some(1)).await.expect("get 1");
        assert_eq!(one.history.len(), 1, "{w:?}");
        assert_eq!(
            w.get(&app, "writer", "missing", None)
                .await
                .expect_err("missing"),
            Failure("TASK_NOT_FOUND".into()),
            "{w:?}"
        );
    }
}

#[tokio::test]
async fn cancel_behaves_alike_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let id_prefix = if w == Wire::JsonRpcV03 {
            "any"
        } else {
            "test-resubscribe-message-id"
        };
        let t = w
            .send(
                &app,
                "conformance",
                w.message(&format!("{id_prefix}-c"), "wait", None),
                true,
            )
            .await
            .expect("send");
        let c = w.cancel(&app, "conformance", &t.id).await.expect("cancel");
        assert_eq!(state(&c), v1::TaskState::Canceled, "{w:?}");
        let done = w
            .send(&app, "echo", w.message("e", "x", None), false)
            .await
            .expect("echo");
        assert_eq!(
            w.cancel(&app, "echo", &done.id).await.expect_err("done"),
            Failure("TASK_NOT_CANCELABLE".into()),
            "{w:?}"
        );
    }
}

#[tokio::test]
async fn list_pages_alike_on_the_v1_wires() {
    let app = app().await;
    for w in [Wire::JsonRpcV1, Wire::RestV1] {
        for i in 0..3 {
            w.send(&app, "echo", w.message(&format!("l{i}"), "x", None), false)
                .await
                .expect("send");
        }
        let page = match w {
            Wire::RestV1 => {
                w.rest(&app, Method::GET, "echo", "/tasks?pageSize=2", None)
                    .await
            }
            _ => {
                w.rpc(&app, "echo", "ListTasks", "", json!({"pageSize": 2}))
                    .await
            }
        }
        .expect("list");
        assert_eq!(page["tasks"].as_array().map(Vec::len), Some(2), "{w:?}");
        assert!(
            page["nextPageToken"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "{w:?}"
        );
        let bad = match w {
            Wire::RestV1 => {
                w.rest(&app, Method::GET, "echo", "/tasks?pageSize=0", None)
                    .await
            }
            _ => {
                w.rpc(&app, "echo", "ListTasks", "", json!({"pageSize": 0}))
                    .await
            }
        };
        assert_eq!(
            bad.expect_err("invalid"),
            Failure("INVALID_PARAMS".into()),
            "{w:?}"
        );
    }
}

#[tokio::test]
async fn rest_speaks_http_statuses_and_google_rpc_status() {
    let app = app().await;
    let (status, body) = http(
        &app,
        Method::GET,
        "/api/v1/agents/echo/rest/tasks/nope",
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["status"], "NOT_FOUND");
    assert_eq!(v["error"]["details"][0]["domain"], "a2a-protocol.org");
    let req = Request::post("/api/v1/agents/echo/rest/message:send")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("hi"))
        .expect("req");
    assert_eq!(app.clone().oneshot(req).await.expect("resp").status(), 415);
    let (status, _) = http(
        &app,
        Method::GET,
        "/api/v1/agents/echo/rest/tasks/x",
        Some("99.0"),
        None,
    )
    .await;
    assert_eq!(status, 400, "unsupported version");
    let (status, body) = http(
        &app,
        Method::POST,
        "/api/v1/agents/echo/rest/tasks/x/pushNotificationConfigs",
        Some("1.0"),
        Some(json!({"url": "https://x"})),
    )
    .await;
    assert_eq!(
        (status, reason_of_rest(&body)),
        (400, Failure("PUSH_NOTIFICATION_NOT_SUPPORTED".into()))
    );
    // The tenant prefix routes the same.
    let t = Wire::RestV1
        .send(&app, "echo", Wire::RestV1.message("tn", "x", None), false)
        .await
        .expect("send");
    let (status, _) = http(
        &app,
        Method::GET,
        &format!("/api/v1/agents/echo/rest/echo/tasks/{}", t.id),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    // The card lists the REST interface.
    let (_, card) = http(
        &app,
        Method::GET,
        "/api/v1/agents/echo/.well-known/agent-card.json",
        None,
        None,
    )
    .await;
    let card: Value = serde_json::from_slice(&card).expect("card");
    let bindings: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .expect("ifaces")
        .iter()
        .filter_map(|i| i["protocolBinding"].as_str())
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON", "JSONRPC"]);
}
