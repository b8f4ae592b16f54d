//! One table of behaviour cases, driven over every binding and version by the
//! same code: each [`Wire`] only knows how to phrase an operation and how to
//! read the answer back into the v1.0 model. The HTTP bindings are called in
//! process; gRPC goes over a real TCP listener with the generated clients.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Method, Request, header},
};
use heddle_core::{
    A2aError,
    compat::{v03, v03_proto as conv},
    rpc, v1, v03_proto as pb,
};
use heddle_hub::{
    AgentProfile, Hub,
    agents::{Conformance, Echo, Writer, WriterStream},
};
use heddle_proto::{
    v1::a2a_service_client::A2aServiceClient as V1Client,
    v03::a2a_service_client::A2aServiceClient as V03Client,
};
use heddle_store::MemoryStore;
use http_body_util::BodyExt;
use prost::Message as _;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tower::ServiceExt;

/// Push config rows of the table.
#[path = "bindings/push.rs"]
mod push;

/// What public conformance suites check: endpoints, v0.3 behaviours, errors.
#[path = "bindings/conformance.rs"]
mod conformance;

/// `/metrics` scraped after calls on every wire; `/healthz` and `/readyz`.
#[path = "bindings/metrics.rs"]
mod metrics;

mod common;

use common::{WIRES, Wire};

/// An A2A error as any binding reports it: the A2A error name.
#[derive(Debug, PartialEq, Eq)]
struct Failure(String);

/// The hub's HTTP router, and a channel to its gRPC listener.
struct App {
    router: Router,
    grpc: Channel,
    grpc_addr: SocketAddr,
}

async fn app() -> App {
    app_with(None).await
}

/// The hub, delivering push notifications with `push` when given.
async fn app_with(push: Option<heddle_server::PushOptions>) -> App {
    app_setup(Setup {
        push,
        ..Setup::default()
    })
    .await
}

/// How a test's hub differs from the usual one.
#[derive(Default)]
struct Setup {
    push: Option<heddle_server::PushOptions>,
    versions: Option<heddle_core::VersionSet>,
    conformance: heddle_hub::agents::ConformanceCard,
    default_agent: Option<&'static str>,
}

async fn app_setup(setup: Setup) -> App {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let grpc_addr = listener.local_addr().expect("addr");
    let mut builder = Hub::builder("http://test.local", Arc::new(MemoryStore::default()));
    if let Some(p) = setup.push {
        builder = builder.push(p);
    }
    if let Some(v) = setup.versions {
        builder = builder.card_versions(v);
    }
    if let Some(id) = setup.default_agent {
        builder = builder.default_agent(id);
    }
    let hub = builder
        .grpc_url(grpc_addr.to_string())
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
                ..Default::default()
            }),
        )
        .agent(
            "conformance",
            heddle_hub::agents::conformance_profile(setup.conformance),
            Arc::new(Conformance {
                resubscribe_window: Duration::from_secs(2),
                v03_pause: Duration::from_millis(100),
            }),
        )
        .build()
        .await;
    let routes = hub.grpc_routes().expect("gRPC is on by default");
    tokio::spawn(async move { axum::serve(listener, routes.into_axum_router()).await });
    let grpc = Channel::from_shared(format!("http://{grpc_addr}"))
        .expect("uri")
        .connect_lazy();
    App {
        router: hub.router(),
        grpc,
        grpc_addr,
    }
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

/// The A2A error name in a gRPC status's `google.rpc.Status` details.
fn reason_of_grpc(s: &tonic::Status) -> Failure {
    let status = rpc::Status::decode(s.details()).unwrap_or(rpc::Status {
        code: s.code() as i32,
        message: s.message().to_owned(),
        details: Vec::new(),
    });
    Failure(
        A2aError::from_grpc_status(&status)
            .code
            .spec()
            .reason
            .to_owned(),
    )
}

/// The `ErrorInfo` of a gRPC status, as (reason, domain).
fn error_info_of_grpc(s: &tonic::Status) -> (String, String) {
    let status = rpc::Status::decode(s.details()).expect("status details");
    let info = status
        .details
        .iter()
        .find(|a| a.type_url == rpc::ERROR_INFO_TYPE)
        .map(|a| rpc::ErrorInfo::decode(a.value.as_slice()).expect("error info"))
        .expect("an ErrorInfo");
    (info.reason, info.domain)
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
            Wire::JsonRpcV03 | Wire::RestV03 | Wire::GrpcV03 => None,
            _ => Some("1.0"),
        }
    }

    fn is_v03(self) -> bool {
        matches!(self, Wire::JsonRpcV03 | Wire::RestV03 | Wire::GrpcV03)
    }

    /// A gRPC request: v1.0 names its version; v0.3 names the agent in metadata.
    fn grpc_request<T>(self, agent: &str, message: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(message);
        let (key, value) = match self {
            Wire::GrpcV03 => ("a2a-tenant", agent),
            _ => ("a2a-version", "1.0"),
        };
        r.metadata_mut()
            .insert(key, value.parse().expect("metadata value"));
        r
    }

    fn v1_client(app: &App) -> V1Client<Channel> {
        V1Client::new(app.grpc.clone())
    }

    fn v03_client(app: &App) -> V03Client<Channel> {
        V03Client::new(app.grpc.clone())
    }

    async fn rpc(
        self,
        app: &App,
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
            &app.router,
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
        app: &App,
        method: Method,
        agent: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let (status, bytes) = http(
            &app.router,
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

    /// The message as this wire spells it (gRPC wires: the v1.0 JSON, turned
    /// into protobuf when sent).
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
        app: &App,
        agent: &str,
        message: Value,
        non_blocking: bool,
    ) -> Result<v1::Task, Failure> {
        let grpc_send = |tenant: &str| v1::SendMessageRequest {
            tenant: tenant.to_owned(),
            message: Some(serde_json::from_value(message.clone()).expect("v1 message")),
            configuration: Some(v1::SendMessageConfiguration {
                return_immediately: non_blocking,
                ..Default::default()
            }),
            metadata: None,
        };
        if self == Wire::RestV03 {
            // ProtoJSON of the v0.3 proto, under `/v1/`.
            let body =
                serde_json::to_value(conv::send_request_from_v1(&grpc_send(""))).expect("json");
            let v = self
                .rest(app, Method::POST, agent, "/v1/message:send", Some(body))
                .await?;
            let r: pb::SendMessageResponse = serde_json::from_value(v).expect("v0.3 send response");
            use v1::send_message_response::Payload;
            return match conv::send_response_to_v1(&r).payload {
                Some(Payload::Task(t)) => Ok(t),
                other => panic!("{self:?}: expected a task, got {other:?}"),
            };
        }
        let sent = match self {
            Wire::GrpcV1 => Some(
                Self::v1_client(app)
                    .send_message(self.grpc_request(agent, grpc_send(agent)))
                    .await
                    .map(|r| r.into_inner()),
            ),
            Wire::GrpcV03 => Some(
                Self::v03_client(app)
                    .send_message(
                        self.grpc_request(agent, conv::send_request_from_v1(&grpc_send(""))),
                    )
                    .await
                    .map(|r| conv::send_response_to_v1(&r.into_inner())),
            ),
            _ => None,
        };
        if let Some(sent) = sent {
            use v1::send_message_response::Payload;
            return match sent.map_err(|s| reason_of_grpc(&s))?.payload {
                Some(Payload::Task(t)) => Ok(t),
                other => panic!("{self:?}: expected a task, got {other:?}"),
            };
        }
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
        app: &App,
        agent: &str,
        id: &str,
        history: Option<i32>,
    ) -> Result<v1::Task, Failure> {
        let r = match self {
            Wire::GrpcV1 => {
                let req = v1::GetTaskRequest {
                    tenant: agent.into(),
                    id: id.into(),
                    history_length: history,
                };
                return Self::v1_client(app)
                    .get_task(self.grpc_request(agent, req))
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|s| reason_of_grpc(&s));
            }
            Wire::GrpcV03 => {
                let req = pb::GetTaskRequest {
                    name: conv::task_name(id),
                    history_length: history.unwrap_or(0),
                };
                return Self::v03_client(app)
                    .get_task(self.grpc_request(agent, req))
                    .await
                    .map(|r| conv::task_to_v1(&r.into_inner()))
                    .map_err(|s| reason_of_grpc(&s));
            }
            Wire::RestV03 => {
                let q = history
                    .map(|h| format!("?historyLength={h}"))
                    .unwrap_or_default();
                let v = self
                    .rest(app, Method::GET, agent, &format!("/v1/tasks/{id}{q}"), None)
                    .await?;
                let t: pb::Task = serde_json::from_value(v).expect("v0.3 task");
                return Ok(conv::task_to_v1(&t));
            }
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

    async fn cancel(self, app: &App, agent: &str, id: &str) -> Result<v1::Task, Failure> {
        let r = match self {
            Wire::GrpcV1 => {
                let req = v1::CancelTaskRequest {
                    tenant: agent.into(),
                    id: id.into(),
                    metadata: None,
                };
                return Self::v1_client(app)
                    .cancel_task(self.grpc_request(agent, req))
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|s| reason_of_grpc(&s));
            }
            Wire::GrpcV03 => {
                let req = pb::CancelTaskRequest {
                    name: conv::task_name(id),
                };
                return Self::v03_client(app)
                    .cancel_task(self.grpc_request(agent, req))
                    .await
                    .map(|r| conv::task_to_v1(&r.into_inner()))
                    .map_err(|s| reason_of_grpc(&s));
            }
            Wire::RestV03 => {
                let v = self
                    .rest(
                        app,
                        Method::POST,
                        agent,
                        &format!("/v1/tasks/{id}:cancel"),
                        None,
                    )
                    .await?;
                let t: pb::Task = serde_json::from_value(v).expect("v0.3 task");
                return Ok(conv::task_to_v1(&t));
            }
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

    async fn stream(self, app: &App, agent: &str, message: Value) -> Vec<v1::StreamResponse> {
        let req = || v1::SendMessageRequest {
            tenant: agent.into(),
            message: Some(serde_json::from_value(message.clone()).expect("v1 message")),
            ..Default::default()
        };
        let mut events = Vec::new();
        match self {
            Wire::GrpcV1 => {
                let mut s = Self::v1_client(app)
                    .send_streaming_message(self.grpc_request(agent, req()))
                    .await
                    .expect("stream")
                    .into_inner();
                while let Some(e) = s.message().await.expect("event") {
                    events.push(e);
                }
                return events;
            }
            Wire::GrpcV03 => {
                let req = conv::send_request_from_v1(&req());
                let mut s = Self::v03_client(app)
                    .send_streaming_message(self.grpc_request(agent, req))
                    .await
                    .expect("stream")
                    .into_inner();
                let mut finals = Vec::new();
                while let Some(e) = s.message().await.expect("event") {
                    if let Some(pb::stream_response::Payload::StatusUpdate(u)) = &e.payload {
                        finals.push(u.r#final);
                    }
                    events.push(conv::stream_response_to_v1(&e));
                }
                assert_eq!(
                    finals.last(),
                    Some(&true),
                    "v0.3 marks the last status final"
                );
                assert!(
                    finals.iter().rev().skip(1).all(|f| !f),
                    "only the last is final"
                );
                return events;
            }
            _ => {}
        }
        let (uri, body) = match self {
            Wire::RestV03 => (
                format!("/api/v1/agents/{agent}/rest/v1/message:stream"),
                serde_json::to_value(conv::send_request_from_v1(&req())).expect("json"),
            ),
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
            Wire::GrpcV1 | Wire::GrpcV03 => unreachable!("answered above"),
        };
        let (_, bytes) = http(&app.router, Method::POST, &uri, self.version(), Some(body)).await;
        sse_data(&bytes)
            .iter()
            .map(|d| match self {
                Wire::RestV1 => self.event(d),
                Wire::RestV03 => {
                    let e: pb::StreamResponse =
                        serde_json::from_value(d.clone()).expect("v0.3 event");
                    conv::stream_response_to_v1(&e)
                }
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
        let id_prefix = if w.is_v03() {
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
        // A second cancel changes nothing (v1 §3.3.1) and says so with
        // TaskNotCancelable (v1 §3.1.5 names an already canceled task).
        assert_eq!(
            w.cancel(&app, "conformance", &t.id)
                .await
                .expect_err("already canceled"),
            Failure("TASK_NOT_CANCELABLE".into()),
            "{w:?}"
        );
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
    for w in [Wire::JsonRpcV1, Wire::RestV1, Wire::GrpcV1] {
        for i in 0..3 {
            w.send(&app, "echo", w.message(&format!("l{i}"), "x", None), false)
                .await
                .expect("send");
        }
        let grpc_list = |page_size: i32| {
            let req = v1::ListTasksRequest {
                tenant: "echo".into(),
                page_size: Some(page_size),
                ..Default::default()
            };
            let mut client = Wire::v1_client(&app);
            async move {
                client
                    .list_tasks(w.grpc_request("echo", req))
                    .await
                    .map(|r| serde_json::to_value(r.into_inner()).expect("json"))
                    .map_err(|s| reason_of_grpc(&s))
            }
        };
        let page = match w {
            Wire::RestV1 => {
                w.rest(&app, Method::GET, "echo", "/tasks?pageSize=2", None)
                    .await
            }
            Wire::GrpcV1 => grpc_list(2).await,
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
            Wire::GrpcV1 => grpc_list(0).await,
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
        &app.router,
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
    assert_eq!(
        app.router
            .clone()
            .oneshot(req)
            .await
            .expect("resp")
            .status(),
        415
    );
    let (status, _) = http(
        &app.router,
        Method::GET,
        "/api/v1/agents/echo/rest/tasks/x",
        Some("99.0"),
        None,
    )
    .await;
    assert_eq!(status, 400, "unsupported version");
    let (status, body) = http(
        &app.router,
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
        &app.router,
        Method::GET,
        &format!("/api/v1/agents/echo/rest/echo/tasks/{}", t.id),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    // The card lists the REST interface.
    let (_, card) = http(
        &app.router,
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
    assert_eq!(
        bindings,
        [
            "JSONRPC",
            "HTTP+JSON",
            "GRPC",
            "JSONRPC",
            "HTTP+JSON",
            "GRPC"
        ]
    );
}

#[tokio::test]
async fn grpc_routes_by_tenant_and_checks_the_version() {
    let app = app().await;
    let mut v1c = Wire::v1_client(&app);
    let send = |tenant: &str| v1::SendMessageRequest {
        tenant: tenant.into(),
        message: Some(v1::Message::new(
            "g1",
            v1::Role::User,
            vec![v1::Part::text("hi")],
        )),
        ..Default::default()
    };
    // No a2a-version: the package names 1.0.
    let ok = v1c
        .send_message(tonic::Request::new(send("echo")))
        .await
        .expect("header-less v1 call");
    assert!(ok.into_inner().payload.is_some());
    for version in ["0.3", "99.0"] {
        let mut req = tonic::Request::new(send("echo"));
        req.metadata_mut()
            .insert("a2a-version", version.parse().expect("value"));
        let e = v1c.send_message(req).await.expect_err(version);
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{version}");
        assert_eq!(
            reason_of_grpc(&e),
            Failure("VERSION_NOT_SUPPORTED".into()),
            "{version}"
        );
    }
    let e = v1c
        .send_message(Wire::GrpcV1.grpc_request("", send("nobody")))
        .await
        .expect_err("unknown tenant");
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert_eq!(
        error_info_of_grpc(&e),
        ("TENANT_NOT_FOUND".to_owned(), "heddle".to_owned())
    );
    let e = v1c
        .send_message(Wire::GrpcV1.grpc_request("", send("")))
        .await
        .expect_err("several agents, no default");
    assert_eq!(reason_of_grpc(&e), Failure("INVALID_PARAMS".into()));
    let e = v1c
        .create_task_push_notification_config(Wire::GrpcV1.grpc_request(
            "echo",
            v1::TaskPushNotificationConfig {
                tenant: "echo".into(),
                task_id: "t".into(),
                url: "https://hook".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("push");
    assert_eq!(
        reason_of_grpc(&e),
        Failure("PUSH_NOTIFICATION_NOT_SUPPORTED".into())
    );
    // v0.3: a2a-version 1.0 belongs to the other service; a bad name is InvalidParams.
    let mut v03c = Wire::v03_client(&app);
    let mut req = Wire::GrpcV03.grpc_request(
        "echo",
        pb::GetTaskRequest {
            name: "tasks/x".into(),
            history_length: 0,
        },
    );
    req.metadata_mut()
        .insert("a2a-version", "1.0".parse().expect("value"));
    let e = v03c.get_task(req).await.expect_err("wrong version");
    assert_eq!(reason_of_grpc(&e), Failure("VERSION_NOT_SUPPORTED".into()));
    let e = v03c
        .get_task(Wire::GrpcV03.grpc_request(
            "echo",
            pb::GetTaskRequest {
                name: "x".into(),
                history_length: 0,
            },
        ))
        .await
        .expect_err("bad name");
    assert_eq!(reason_of_grpc(&e), Failure("INVALID_PARAMS".into()));
}

#[tokio::test]
async fn cards_list_the_grpc_interfaces_and_v03_grpc_serves_the_card() {
    let app = app().await;
    let (_, card) = http(
        &app.router,
        Method::GET,
        "/api/v1/agents/writer/.well-known/agent-card.json",
        None,
        None,
    )
    .await;
    let card: v1::AgentCard =
        heddle_core::card::parse_card(&serde_json::from_slice(&card).expect("card json"))
            .expect("card");
    let ifaces: Vec<(&str, &str, &str, &str)> = card
        .supported_interfaces
        .iter()
        .map(|i| {
            (
                i.protocol_binding.as_str(),
                i.protocol_version.as_str(),
                i.url.as_str(),
                i.tenant.as_str(),
            )
        })
        .collect();
    let bare = app.grpc_addr.to_string();
    let url = format!("http://{bare}");
    assert_eq!(
        ifaces,
        [
            (
                "JSONRPC",
                "1.0",
                "http://test.local/api/v1/agents/writer/a2a",
                ""
            ),
            (
                "HTTP+JSON",
                "1.0",
                "http://test.local/api/v1/agents/writer/rest",
                ""
            ),
            ("GRPC", "1.0", bare.as_str(), "writer"),
            (
                "JSONRPC",
                "0.3",
                "http://test.local/api/v1/agents/writer/a2a",
                ""
            ),
            (
                "HTTP+JSON",
                "0.3",
                "http://test.local/api/v1/agents/writer/rest",
                ""
            ),
            ("GRPC", "0.3", url.as_str(), "writer"),
        ]
    );
    let old = Wire::v03_client(&app)
        .get_agent_card(Wire::GrpcV03.grpc_request("writer", pb::GetAgentCardRequest {}))
        .await
        .expect("v0.3 card")
        .into_inner();
    assert_eq!(old.name, "Writer");
    assert_eq!(old.url, "http://test.local/api/v1/agents/writer/a2a");
    assert!(
        old.additional_interfaces
            .iter()
            .any(|i| i.transport == "GRPC" && i.url == url)
    );
    // The v1.0 extended card is not declared by the hub's agents.
    let e = Wire::v1_client(&app)
        .get_extended_agent_card(Wire::GrpcV1.grpc_request(
            "writer",
            v1::GetExtendedAgentCardRequest {
                tenant: "writer".into(),
            },
        ))
        .await
        .expect_err("no extended card");
    assert_eq!(reason_of_grpc(&e), Failure("UNSUPPORTED_OPERATION".into()));
}

#[tokio::test]
async fn grpc_health_and_reflection_answer() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let app = app().await;
    let mut health = HealthClient::new(app.grpc.clone());
    for service in ["", "lf.a2a.v1.A2AService", "a2a.v1.A2AService"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health")
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let ask = |m: MessageRequest| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    };
    let requests = vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "lf.a2a.v1.A2AService".into(),
        )),
        ask(MessageRequest::FileContainingSymbol("a2a.v1.Task".into())),
        ask(MessageRequest::FileByFilename(
            "google/protobuf/struct.proto".into(),
        )),
    ];
    let mut answers = ServerReflectionClient::new(app.grpc.clone())
        .server_reflection_info(futures::stream::iter(requests))
        .await
        .expect("reflection")
        .into_inner();
    let mut responses = Vec::new();
    while let Some(r) = answers.message().await.expect("answer") {
        responses.push(r.message_response.expect("response"));
    }
    let MessageResponse::ListServicesResponse(list) = &responses[0] else {
        panic!("list services: {:?}", responses[0]);
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    for expected in [
        "lf.a2a.v1.A2AService",
        "a2a.v1.A2AService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    for (i, file) in [
        (1, "lf/a2a/v1/a2a.proto"),
        (2, "a2a/v1/a2a.proto"),
        (3, "google/protobuf/struct.proto"),
    ] {
        let MessageResponse::FileDescriptorResponse(fd) = &responses[i] else {
            panic!("{file}: {:?}", responses[i]);
        };
        let decoded = prost_types_name(&fd.file_descriptor_proto[0]);
        assert_eq!(decoded, file);
    }
}

/// The `name` (field 1) of an encoded `FileDescriptorProto`.
fn prost_types_name(bytes: &[u8]) -> String {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Named {
        #[prost(string, tag = "1")]
        name: String,
    }
    Named::decode(bytes).expect("file descriptor").name
}

/// A gRPC call made by hand: `(grpc-status, grpc-message, answer frames)`,
/// the status read from the headers (trailers-only) or from the trailers.
async fn raw_grpc(
    routes: &Router,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> (String, String, Vec<u8>) {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = routes
        .clone()
        .oneshot(b.body(body.into()).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), 200, "gRPC answers are HTTP 200");
    let (parts, body) = resp.into_parts();
    let collected = body.collect().await.expect("body");
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let field = |name: &str| {
        parts
            .headers
            .get(name)
            .or_else(|| trailers.get(name))
            .map(|v| v.to_str().expect("ascii").to_owned())
            .unwrap_or_default()
    };
    (
        field("grpc-status"),
        field("grpc-message"),
        collected.to_bytes().to_vec(),
    )
}

fn grpc_frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Unary calls skip tonic's per-call codec (`heddle_server::grpc::Unary`):
/// the answers are still ordinary gRPC, malformed frames get the status codes
/// tonic gives them, and compressed requests tonic's own answer.
#[tokio::test]
async fn grpc_unary_calls_answer_and_refuse_like_tonic() {
    let hub = Hub::builder("http://test.local", Arc::new(MemoryStore::default()))
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    let routes = hub.grpc_routes().expect("gRPC").into_axum_router();
    let send = v1::SendMessageRequest {
        message: Some(v1::Message::new(
            "raw-1",
            v1::Role::User,
            vec![v1::Part::text("hi")],
        )),
        ..Default::default()
    }
    .encode_to_vec();
    let path = "/lf.a2a.v1.A2AService/SendMessage";

    let (code, _, body) = raw_grpc(&routes, path, &[], grpc_frame(0, &send)).await;
    assert_eq!(code, "0");
    let answer = v1::SendMessageResponse::decode(&body[5..]).expect("one answer message");
    assert_eq!(
        body[..5],
        grpc_frame(0, &body[5..])[..5],
        "one uncompressed frame"
    );
    let Some(v1::send_message_response::Payload::Task(task)) = answer.payload else {
        panic!("echo answers with a task: {answer:?}");
    };

    let get_task = |id: &str| {
        let request = v1::GetTaskRequest {
            id: id.into(),
            ..Default::default()
        };
        let frame = heddle_core::grpc_frame::encode(&request).expect("small");
        raw_grpc(&routes, "/lf.a2a.v1.A2AService/GetTask", &[], frame)
    };
    // A trailers-only error from the handler: an unknown task.
    let (code, _, body) = get_task("no-such-task").await;
    assert_eq!((code.as_str(), body.len()), ("5", 0));
    let (code, _, body) = get_task(&task.id).await;
    assert_eq!(code, "0");
    assert_eq!(v1::Task::decode(&body[5..]).expect("task").id, task.id);

    // Framing errors, and what tonic says to a compressed message.
    let gzip = [("grpc-encoding", "gzip")];
    let cases = [
        (&[][..], Vec::new(), "13"),
        (&[], vec![0, 0], "13"),
        (&[], grpc_frame(1, &send), "13"),
        (&[], grpc_frame(0, &send)[..9].to_vec(), "13"),
        (&[], [0, 0x7f, 0xff, 0xff, 0xff].to_vec(), "11"),
        (&gzip, grpc_frame(1, &send), "12"),
    ];
    for (headers, body, want) in cases {
        let (code, message, _) = raw_grpc(&routes, path, headers, body.clone()).await;
        assert_eq!(code, want, "{headers:?} {body:?}: {message}");
    }
    // A message split over several DATA frames is put back together; one
    // larger than the limit (8 MiB) is OUT_OF_RANGE however it is framed.
    let whole = grpc_frame(0, &send);
    let chunks: Vec<Result<Vec<u8>, std::convert::Infallible>> =
        whole.chunks(7).map(|c| Ok(c.to_vec())).collect();
    let split = Body::from_stream(futures::stream::iter(chunks));
    let (code, message, body) = raw_grpc(&routes, path, &[], split).await;
    assert_eq!(code, "0", "{message}");
    assert!(v1::SendMessageResponse::decode(&body[5..]).is_ok());
    // The limit is exact however the message is framed: a GetTask padded to
    // exactly 8 MiB with an unknown field (which protobuf skips) and sent in
    // 1 MiB frames is read and answered (NOT_FOUND: no such task); one byte
    // more is OUT_OF_RANGE.
    let padded = |len: usize| {
        let mut message = v1::GetTaskRequest {
            id: "no-such-task".into(),
            ..Default::default()
        }
        .encode_to_vec();
        // Field 1000, length-delimited: a 2-byte key and, for a length
        // between 2^21 and 2^28, a 4-byte varint.
        let pad = len - message.len() - 6;
        prost::encoding::encode_key(
            1000,
            prost::encoding::WireType::LengthDelimited,
            &mut message,
        );
        prost::encoding::encode_varint(pad as u64, &mut message);
        message.resize(message.len() + pad, 0);
        assert_eq!(message.len(), len, "padded as meant");
        let frames: Vec<Result<Vec<u8>, std::convert::Infallible>> = grpc_frame(0, &message)
            .chunks(1 << 20)
            .map(|c| Ok(c.to_vec()))
            .collect();
        Body::from_stream(futures::stream::iter(frames))
    };
    let get = "/lf.a2a.v1.A2AService/GetTask";
    let (code, message, _) = raw_grpc(&routes, get, &[], padded(8 << 20)).await;
    assert_eq!(
        code, "5",
        "a message of exactly the limit is served: {message}"
    );
    let (code, message, _) = raw_grpc(&routes, get, &[], padded((8 << 20) + 1)).await;
    assert_eq!(code, "11", "{message}");
    // grpc-message is percent-encoded on the wire.
    assert!(
        message.contains("larger%20than%20the%20message%20limit"),
        "{message}"
    );

    // The v0.3 service takes the same path.
    let (code, message, _) = raw_grpc(
        &routes,
        "/a2a.v1.A2AService/GetTask",
        &[],
        grpc_frame(
            0,
            &pb::GetTaskRequest {
                name: "not-a-task-name".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, "3", "{message}");
}

/// A caller's `grpc-timeout` bounds every gRPC call, unary or streaming, in
/// both versions: past it the call ends with DEADLINE_EXCEEDED (a stream
/// after what it carried so far), and the agent's task goes on.
#[tokio::test]
async fn grpc_timeout_ends_unary_and_streaming_calls_with_deadline_exceeded() {
    let hub = Hub::builder("http://test.local", Arc::new(MemoryStore::default()))
        .agent(
            "slow",
            AgentProfile::new("slow", "Slow", "one chunk a minute", &["t"]),
            Arc::new(WriterStream {
                pause: Duration::from_secs(60),
                ..Default::default()
            }),
        )
        .build()
        .await;
    let routes = hub.grpc_routes().expect("gRPC").into_axum_router();
    let v1_send = v1::SendMessageRequest {
        message: Some(v1::Message::new(
            "deadline-1",
            v1::Role::User,
            vec![v1::Part::text("go")],
        )),
        ..Default::default()
    };
    let v03_send = conv::send_request_from_v1(&v1_send).encode_to_vec();
    let v1_send = v1_send.encode_to_vec();
    let calls = [
        ("/lf.a2a.v1.A2AService/SendMessage", &v1_send, false),
        ("/lf.a2a.v1.A2AService/SendStreamingMessage", &v1_send, true),
        ("/a2a.v1.A2AService/SendMessage", &v03_send, false),
        ("/a2a.v1.A2AService/SendStreamingMessage", &v03_send, true),
    ];
    for (path, body, streaming) in calls {
        let started = std::time::Instant::now();
        let (code, message, frames) = tokio::time::timeout(
            Duration::from_secs(10),
            raw_grpc(
                &routes,
                path,
                &[("grpc-timeout", "300m")],
                grpc_frame(0, body),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: the call outlived its grpc-timeout"));
        assert_eq!(code, "4", "{path}: DEADLINE_EXCEEDED, not {message}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(5),
            "{path}: ended after {took:?}"
        );
        if streaming {
            assert!(
                !frames.is_empty(),
                "{path}: what the stream carried before the deadline still went out"
            );
        }
    }
}
