//! Caller isolation and authentication on every binding and version.
//!
//! One hub behind `heddle-auth` (API keys, and HS256 JWTs that need the
//! `a2a` scope). Alice creates a task; Bob, authenticated with his own key,
//! tries every operation on it over every wire, and each answer must be
//! TaskNotFound (or, for an operation the agent does not offer, its
//! capability error) and never the task. The [`ROWS`] table lists the
//! operations: a new operation is one row plus its phrasing in [`call`].

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Method, Request, header},
};
use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
    jwt::{JwtVerifier, KeySource, StaticKey},
};
use heddle_core::{A2aError, ErrorCode, compat::v03_proto as conv, rpc, v1, v03_proto as pb};
use heddle_hub::{
    AgentProfile, Hub,
    agents::{Echo, Writer},
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

const SECRET: &[u8] = b"isolation-test-secret-0123456789abcdef";

mod common;

use common::{WIRES, Wire};

impl Wire {
    fn v03(self) -> bool {
        matches!(self, Wire::JsonRpcV03 | Wire::RestV03 | Wire::GrpcV03)
    }
}

/// The operations a caller may attempt on a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get,
    List,
    Cancel,
    Subscribe,
    Continue,
    PushCreate,
    PushGet,
    PushList,
    PushDelete,
}

/// What another caller may see of a task: nothing.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// TaskNotFound.
    TaskNotFound,
    /// A page without the task.
    Unlisted,
}

const ROWS: [(Op, Expect); 9] = [
    (Op::Get, Expect::TaskNotFound),
    (Op::List, Expect::Unlisted),
    (Op::Cancel, Expect::TaskNotFound),
    (Op::Subscribe, Expect::TaskNotFound),
    (Op::Continue, Expect::TaskNotFound),
    (Op::PushCreate, Expect::TaskNotFound),
    (Op::PushGet, Expect::TaskNotFound),
    (Op::PushList, Expect::TaskNotFound),
    (Op::PushDelete, Expect::TaskNotFound),
];

/// A credential.
#[derive(Clone, Debug)]
enum Cred {
    None,
    Key(String),
    Bearer(String),
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// The result, as JSON.
    Ok(Value),
    /// An A2A error, by reason.
    Err(String),
    /// Refused before the binding: HTTP status, or the gRPC code as a number.
    Refused(u16),
    /// The operation does not exist on this wire.
    Absent,
}

struct App {
    router: Router,
    grpc: Channel,
    alice: Cred,
    bob: Cred,
    /// The hub's API keys, to add and revoke keys while it runs.
    keys: ApiKeys,
}

async fn app() -> App {
    app_on(Arc::new(MemoryStore::default())).await
}

async fn app_on(store: Arc<dyn heddle_store::TaskStore>) -> App {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, alice) = keys.create("alice").await.expect("alice");
    let (_, bob) = keys.create("bob").await.expect("bob");
    let jwt = JwtVerifier::new()
        .source(KeySource::Static(vec![
            StaticKey::hmac(None, SECRET).expect("hmac"),
        ]))
        .require_scope("a2a");
    let auth = Authenticator::builder()
        .api_keys(keys.clone())
        .jwt(jwt)
        .build()
        .expect("auth");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let grpc_addr = listener.local_addr().expect("addr");
    let hub = Hub::builder("http://test.local", store)
        .grpc_url(grpc_addr.to_string())
        .authenticator(auth)
        .push(heddle_server::PushOptions::default())
        .agent(
            "writer",
            AgentProfile::new("writer", "Writer", "writer", &["t"]),
            Arc::new(Writer),
        )
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    // A guarded hub never hands out its bare (unguarded) gRPC services.
    assert!(
        hub.grpc_routes().is_none(),
        "bare gRPC routes of a guarded hub"
    );
    let grpc_app = hub.grpc_app().expect("gRPC is on by default");
    tokio::spawn(async move { axum::serve(listener, grpc_app).await });
    let grpc = Channel::from_shared(format!("http://{grpc_addr}"))
        .expect("uri")
        .connect_lazy();
    App {
        router: hub.router(),
        grpc,
        alice: Cred::Key(alice.expose().to_owned()),
        bob: Cred::Key(bob.expose().to_owned()),
        keys,
    }
}

fn token(scope: &str) -> Cred {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        + 300;
    let t = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "carol", "exp": exp, "scope": scope}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET),
    )
    .expect("sign");
    Cred::Bearer(t)
}

// ---- phrasing -----------------------------------------------------------------------

fn reason_of_code(code: i64) -> String {
    ErrorCode::from_jsonrpc(code).map_or(format!("code {code}"), |c| c.spec().reason.to_owned())
}

fn first_sse(bytes: &[u8]) -> Option<Value> {
    String::from_utf8_lossy(bytes)
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data:")))
        .find_map(|d| serde_json::from_str(d.trim()).ok())
}

async fn http(
    app: &App,
    cred: &Cred,
    method: Method,
    uri: &str,
    version: Option<&str>,
    body: Option<Value>,
) -> (u16, Option<Value>) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(v) = version {
        b = b.header("A2A-Version", v);
    }
    b = match cred {
        Cred::None => b,
        Cred::Key(k) => b.header("api-key", k),
        Cred::Bearer(t) => b.header(header::AUTHORIZATION, format!("Bearer {t}")),
    };
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string())),
        None => b.body(Body::empty()),
    }
    .expect("request");
    let resp = app.router.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    // Streams: only the first event matters (and the task may never end).
    let body = resp.into_body();
    let bytes = if sse {
        let mut body = body;
        let mut buf = Vec::new();
        while let Ok(Some(Ok(frame))) =
            tokio::time::timeout(Duration::from_secs(2), body.frame()).await
        {
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
            }
            if first_sse(&buf).is_some() {
                break;
            }
        }
        return (status, first_sse(&buf));
    } else {
        body.collect().await.expect("body").to_bytes()
    };
    (status, serde_json::from_slice(&bytes).ok())
}

fn grpc_outcome<T: serde::Serialize>(r: Result<tonic::Response<T>, tonic::Status>) -> Outcome {
    match r {
        Ok(r) => Outcome::Ok(serde_json::to_value(r.into_inner()).expect("json")),
        Err(s) => grpc_err(&s),
    }
}

fn grpc_err(s: &tonic::Status) -> Outcome {
    match s.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            Outcome::Refused(s.code() as u16)
        }
        _ => {
            let status = rpc::Status::decode(s.details()).unwrap_or(rpc::Status {
                code: s.code() as i32,
                message: s.message().to_owned(),
                details: Vec::new(),
            });
            Outcome::Err(
                A2aError::from_grpc_status(&status)
                    .code
                    .spec()
                    .reason
                    .to_owned(),
            )
        }
    }
}

fn grpc_req<T>(w: Wire, cred: &Cred, agent: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let m = r.metadata_mut();
    match w {
        Wire::GrpcV03 => m.insert("a2a-tenant", agent.parse().expect("ascii")),
        _ => m.insert("a2a-version", "1.0".parse().expect("ascii")),
    };
    match cred {
        Cred::None => {}
        Cred::Key(k) => {
            m.insert("api-key", k.parse().expect("ascii"));
        }
        Cred::Bearer(t) => {
            m.insert(
                "authorization",
                format!("Bearer {t}").parse().expect("ascii"),
            );
        }
    }
    r
}

fn user_message(w: Wire, text: &str, task_id: Option<&str>) -> v1::Message {
    let _ = w;
    v1::Message {
        message_id: format!("m-{}", rand_id()),
        role: v1::Role::User as i32,
        parts: vec![v1::Part::text(text)],
        task_id: task_id.unwrap_or_default().to_owned(),
        ..Default::default()
    }
}

fn rand_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// Sends a new message (no task) and returns the task as v1.0 JSON.
async fn create_task(app: &App, w: Wire, cred: &Cred, agent: &str) -> v1::Task {
    match call(app, w, cred, agent, Op::Continue, None).await {
        Outcome::Ok(v) => {
            let t = v.get("task").cloned().unwrap_or(v);
            let t = if w == Wire::JsonRpcV03 {
                serde_json::from_value::<heddle_core::compat::v03::Task>(t)
                    .expect("v0.3 task")
                    .to_v1()
                    .expect("upgrade")
            } else if w.v03() {
                conv::task_to_v1(&serde_json::from_value::<pb::Task>(t).expect("v0.3 task"))
            } else {
                serde_json::from_value(t).expect("v1 task")
            };
            assert!(!t.id.is_empty(), "{w:?}");
            t
        }
        other => panic!("{w:?}: creating a task: {other:?}"),
    }
}

/// `op` on `task_id` over `w` as `cred` (`Continue` without a task starts one).
async fn call(
    app: &App,
    w: Wire,
    cred: &Cred,
    agent: &str,
    op: Op,
    task_id: Option<&str>,
) -> Outcome {
    let id = task_id.unwrap_or_default();
    let msg = user_message(w, "Summarize this", task_id);
    match w {
        Wire::JsonRpcV1 | Wire::JsonRpcV03 => {
            let v03 = w == Wire::JsonRpcV03;
            let message = if v03 {
                let mut m = json!({"kind": "message", "messageId": msg.message_id, "role": "user",
                    "parts": [{"kind": "text", "text": "Summarize this"}]});
                if !id.is_empty() {
                    m["taskId"] = json!(id);
                }
                m
            } else {
                serde_json::to_value(&msg).expect("json")
            };
            let (method, params) = match (op, v03) {
                (Op::Get, false) => ("GetTask", json!({"id": id})),
                (Op::Get, true) => ("tasks/get", json!({"id": id})),
                (Op::List, false) => ("ListTasks", json!({})),
                (Op::List, true) => return Outcome::Absent,
                (Op::Cancel, false) => ("CancelTask", json!({"id": id})),
                (Op::Cancel, true) => ("tasks/cancel", json!({"id": id})),
                (Op::Subscribe, false) => ("SubscribeToTask", json!({"id": id})),
                (Op::Subscribe, true) => ("tasks/resubscribe", json!({"id": id})),
                (Op::Continue, false) => ("SendMessage", json!({"message": message})),
                (Op::Continue, true) => ("message/send", json!({"message": message})),
                (Op::PushCreate, false) => (
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": id, "id": "c1", "url": "https://hooks.test/a2a"}),
                ),
                (Op::PushCreate, true) => (
                    "tasks/pushNotificationConfig/set",
                    json!({"taskId": id, "pushNotificationConfig": {"id": "c1", "url": "https://hooks.test/a2a"}}),
                ),
                (Op::PushGet, false) => (
                    "GetTaskPushNotificationConfig",
                    json!({"taskId": id, "id": "c1"}),
                ),
                (Op::PushGet, true) => (
                    "tasks/pushNotificationConfig/get",
                    json!({"id": id, "pushNotificationConfigId": "c1"}),
                ),
                (Op::PushList, false) => ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
                (Op::PushList, true) => ("tasks/pushNotificationConfig/list", json!({"id": id})),
                (Op::PushDelete, false) => (
                    "DeleteTaskPushNotificationConfig",
                    json!({"taskId": id, "id": "c1"}),
                ),
                (Op::PushDelete, true) => (
                    "tasks/pushNotificationConfig/delete",
                    json!({"id": id, "pushNotificationConfigId": "c1"}),
                ),
            };
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let (status, v) = http(
                app,
                cred,
                Method::POST,
                &format!("/api/v1/agents/{agent}/a2a"),
                (!v03).then_some("1.0"),
                Some(body),
            )
            .await;
            if status == 401 || status == 403 {
                return Outcome::Refused(status);
            }
            let v = v.unwrap_or_else(|| panic!("{w:?} {op:?}: no JSON answer ({status})"));
            match v.get("error") {
                Some(e) => Outcome::Err(reason_of_code(e["code"].as_i64().unwrap_or(0))),
                None => Outcome::Ok(v["result"].clone()),
            }
        }
        Wire::RestV1 | Wire::RestV03 => {
            let v03 = w == Wire::RestV03;
            let base = format!(
                "/api/v1/agents/{agent}/rest{}",
                if v03 { "/v1" } else { "" }
            );
            let send_body = if v03 {
                serde_json::to_value(conv::send_request_from_v1(&v1::SendMessageRequest {
                    message: Some(msg.clone()),
                    ..Default::default()
                }))
                .expect("json")
            } else {
                json!({"message": msg})
            };
            let cfgs = format!("{base}/tasks/{id}/pushNotificationConfigs");
            let (method, uri, body) = match op {
                Op::Get => (Method::GET, format!("{base}/tasks/{id}"), None),
                Op::List if v03 => return Outcome::Absent,
                Op::List => (Method::GET, format!("{base}/tasks"), None),
                Op::Cancel => (Method::POST, format!("{base}/tasks/{id}:cancel"), None),
                Op::Subscribe => (Method::POST, format!("{base}/tasks/{id}:subscribe"), None),
                Op::Continue => (
                    Method::POST,
                    format!("{base}/message:send"),
                    Some(send_body),
                ),
                Op::PushCreate => (
                    Method::POST,
                    cfgs,
                    Some(if v03 {
                        json!({"pushNotificationConfig": {"id": "c1", "url": "https://hooks.test/a2a"}})
                    } else {
                        json!({"id": "c1", "url": "https://hooks.test/a2a"})
                    }),
                ),
                Op::PushGet => (Method::GET, format!("{cfgs}/c1"), None),
                Op::PushList => (Method::GET, cfgs, None),
                Op::PushDelete => (Method::DELETE, format!("{cfgs}/c1"), None),
            };
            let (status, v) = http(app, cred, method, &uri, (!v03).then_some("1.0"), body).await;
            match status {
                401 | 403 => Outcome::Refused(status),
                200..=299 => Outcome::Ok(v.unwrap_or(Value::Null)),
                _ => Outcome::Err(
                    v.as_ref()
                        .and_then(|v| v["error"]["details"].as_array())
                        .and_then(|d| d.iter().find_map(|x| x["reason"].as_str()))
                        .unwrap_or("?")
                        .to_owned(),
                ),
            }
        }
        Wire::GrpcV1 => {
            let mut c = V1Client::new(app.grpc.clone());
            let tenant = agent.to_owned();
            match op {
                Op::Get => grpc_outcome(
                    c.get_task(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::GetTaskRequest {
                            tenant,
                            id: id.into(),
                            history_length: None,
                        },
                    ))
                    .await,
                ),
                Op::List => grpc_outcome(
                    c.list_tasks(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::ListTasksRequest {
                            tenant,
                            ..Default::default()
                        },
                    ))
                    .await,
                ),
                Op::Cancel => grpc_outcome(
                    c.cancel_task(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::CancelTaskRequest {
                            tenant,
                            id: id.into(),
                            metadata: None,
                        },
                    ))
                    .await,
                ),
                Op::Subscribe => {
                    match c
                        .subscribe_to_task(grpc_req(
                            w,
                            cred,
                            agent,
                            v1::SubscribeToTaskRequest {
                                tenant,
                                id: id.into(),
                            },
                        ))
                        .await
                    {
                        Ok(s) => match s.into_inner().message().await {
                            Ok(Some(e)) => Outcome::Ok(serde_json::to_value(e).expect("json")),
                            Ok(None) => Outcome::Ok(Value::Null),
                            Err(s) => grpc_err(&s),
                        },
                        Err(s) => grpc_err(&s),
                    }
                }
                Op::Continue => grpc_outcome(
                    c.send_message(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::SendMessageRequest {
                            tenant,
                            message: Some(msg),
                            ..Default::default()
                        },
                    ))
                    .await,
                ),
                Op::PushCreate => grpc_outcome(
                    c.create_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::TaskPushNotificationConfig {
                            tenant,
                            id: "c1".into(),
                            task_id: id.into(),
                            url: "https://hooks.test/a2a".into(),
                            ..Default::default()
                        },
                    ))
                    .await,
                ),
                Op::PushGet => grpc_outcome(
                    c.get_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::GetTaskPushNotificationConfigRequest {
                            tenant,
                            task_id: id.into(),
                            id: "c1".into(),
                        },
                    ))
                    .await,
                ),
                Op::PushList => grpc_outcome(
                    c.list_task_push_notification_configs(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::ListTaskPushNotificationConfigsRequest {
                            tenant,
                            task_id: id.into(),
                            ..Default::default()
                        },
                    ))
                    .await,
                ),
                Op::PushDelete => grpc_outcome(
                    c.delete_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        v1::DeleteTaskPushNotificationConfigRequest {
                            tenant,
                            task_id: id.into(),
                            id: "c1".into(),
                        },
                    ))
                    .await
                    .map(|r| r.map(|_| ())),
                ),
            }
        }
        Wire::GrpcV03 => {
            let mut c = V03Client::new(app.grpc.clone());
            let name = conv::task_name(id);
            let cfg_name = format!("{name}/pushNotificationConfigs/c1");
            match op {
                Op::Get => grpc_outcome(
                    c.get_task(grpc_req(
                        w,
                        cred,
                        agent,
                        pb::GetTaskRequest {
                            name,
                            history_length: 0,
                        },
                    ))
                    .await,
                ),
                Op::List => Outcome::Absent,
                Op::Cancel => grpc_outcome(
                    c.cancel_task(grpc_req(w, cred, agent, pb::CancelTaskRequest { name }))
                        .await,
                ),
                Op::Subscribe => {
                    match c
                        .task_subscription(grpc_req(
                            w,
                            cred,
                            agent,
                            pb::TaskSubscriptionRequest { name },
                        ))
                        .await
                    {
                        Ok(s) => match s.into_inner().message().await {
                            Ok(Some(e)) => Outcome::Ok(serde_json::to_value(e).expect("json")),
                            Ok(None) => Outcome::Ok(Value::Null),
                            Err(s) => grpc_err(&s),
                        },
                        Err(s) => grpc_err(&s),
                    }
                }
                Op::Continue => grpc_outcome(
                    c.send_message(grpc_req(
                        w,
                        cred,
                        agent,
                        conv::send_request_from_v1(&v1::SendMessageRequest {
                            message: Some(msg),
                            ..Default::default()
                        }),
                    ))
                    .await
                    .map(|r| r.map(|r| conv::send_response_to_v1(&r))),
                ),
                Op::PushCreate => grpc_outcome(
                    c.create_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        pb::CreateTaskPushNotificationConfigRequest {
                            parent: name,
                            config_id: "c1".into(),
                            config: Some(pb::TaskPushNotificationConfig {
                                name: cfg_name,
                                push_notification_config: Some(pb::PushNotificationConfig {
                                    id: "c1".into(),
                                    url: "https://hooks.test/a2a".into(),
                                    ..Default::default()
                                }),
                            }),
                        },
                    ))
                    .await,
                ),
                Op::PushGet => grpc_outcome(
                    c.get_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        pb::GetTaskPushNotificationConfigRequest { name: cfg_name },
                    ))
                    .await,
                ),
                Op::PushList => grpc_outcome(
                    c.list_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        pb::ListTaskPushNotificationConfigRequest {
                            parent: name,
                            ..Default::default()
                        },
                    ))
                    .await,
                ),
                Op::PushDelete => grpc_outcome(
                    c.delete_task_push_notification_config(grpc_req(
                        w,
                        cred,
                        agent,
                        pb::DeleteTaskPushNotificationConfigRequest { name: cfg_name },
                    ))
                    .await
                    .map(|r| r.map(|_| ())),
                ),
            }
        }
    }
}

/// The task state of any wire's task JSON, upper-cased (`input-required`, `TASK_STATE_INPUT_REQUIRED`).
fn state_of(v: &Value) -> String {
    v["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

// ---- the tests ------------------------------------------------------------------------

#[tokio::test]
async fn another_caller_cannot_touch_a_task_on_any_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = heddle_store::SqliteStore::open_path(dir.path().join("tasks.db")).expect("sqlite");
    for store in [
        Arc::new(MemoryStore::default()) as Arc<dyn heddle_store::TaskStore>,
        Arc::new(sqlite),
    ] {
        isolation_holds(&app_on(store).await).await;
    }
}

async fn isolation_holds(app: &App) {
    for w in WIRES {
        let task = create_task(app, w, &app.alice, "writer").await;
        assert_eq!(
            task.status.as_ref().map(|s| s.state()),
            Some(v1::TaskState::InputRequired),
            "{w:?}"
        );
        for (op, expect) in ROWS {
            let got = call(app, w, &app.bob, "writer", op, Some(&task.id)).await;
            let ok = match (&got, expect) {
                (Outcome::Absent, _) => true,
                (Outcome::Err(r), Expect::TaskNotFound) => r == "TASK_NOT_FOUND",
                (Outcome::Ok(v), Expect::Unlisted) => !v.to_string().contains(&task.id),
                _ => false,
            };
            assert!(ok, "{w:?} {op:?} by another caller: {got:?}");
        }
        // The owner still has it, untouched by the other caller's cancel.
        let mine = call(app, w, &app.alice, "writer", Op::Get, Some(&task.id)).await;
        match &mine {
            Outcome::Ok(v) => assert!(state_of(v).contains("INPUT"), "{w:?}: {}", state_of(v)),
            other => panic!("{w:?}: the owner lost its task: {other:?}"),
        }
        if let Outcome::Ok(page) = call(app, w, &app.alice, "writer", Op::List, None).await {
            assert!(page.to_string().contains(&task.id), "{w:?}: owner's list");
        }
    }
}

#[tokio::test]
async fn a_new_key_reusing_a_revoked_keys_name_gets_none_of_its_tasks() {
    let app = app().await;
    let (_, old) = app.keys.create("ci").await.expect("ci");
    let old = Cred::Key(old.expose().to_owned());
    let mut tasks = Vec::new();
    for w in WIRES {
        let task = create_task(&app, w, &old, "writer").await;
        let push = call(&app, w, &old, "writer", Op::PushCreate, Some(&task.id)).await;
        assert!(
            matches!(push, Outcome::Ok(_) | Outcome::Absent),
            "{w:?}: {push:?}"
        );
        tasks.push((w, task.id));
    }
    assert_eq!(app.keys.revoke("ci").await.expect("revoke").len(), 1);
    let (_, new) = app.keys.create("ci").await.expect("the name is free again");
    let new = Cred::Key(new.expose().to_owned());
    for (w, id) in &tasks {
        for (op, expect) in ROWS {
            let got = call(&app, *w, &new, "writer", op, Some(id)).await;
            let ok = match (&got, expect) {
                (Outcome::Absent, _) => true,
                (Outcome::Err(r), Expect::TaskNotFound) => r == "TASK_NOT_FOUND",
                (Outcome::Ok(v), Expect::Unlisted) => !v.to_string().contains(id.as_str()),
                _ => false,
            };
            assert!(ok, "{w:?} {op:?} by the new \"ci\": {got:?}");
        }
        let got = call(&app, *w, &old, "writer", Op::Get, Some(id)).await;
        assert!(matches!(got, Outcome::Refused(401 | 16)), "{w:?}: {got:?}");
    }
}

#[tokio::test]
async fn a_task_is_not_found_through_another_agent_or_tenant() {
    let app = app().await;
    for w in WIRES {
        let task = create_task(&app, w, &app.alice, "writer").await;
        let got = call(&app, w, &app.alice, "echo", Op::Get, Some(&task.id)).await;
        assert_eq!(got, Outcome::Err("TASK_NOT_FOUND".into()), "{w:?}");
        let got = call(&app, w, &app.alice, "echo", Op::Cancel, Some(&task.id)).await;
        assert_eq!(got, Outcome::Err("TASK_NOT_FOUND".into()), "{w:?}");
    }
}

#[tokio::test]
async fn calls_without_credentials_are_refused_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        for op in [Op::Get, Op::Continue, Op::Subscribe] {
            let got = call(&app, w, &Cred::None, "writer", op, Some("t1")).await;
            let want = match w {
                Wire::GrpcV1 | Wire::GrpcV03 => tonic::Code::Unauthenticated as u16,
                _ => 401,
            };
            assert_eq!(got, Outcome::Refused(want), "{w:?} {op:?}");
        }
        let forged = Cred::Key("hdk_0123456789abcdef_forged".into());
        let got = call(&app, w, &forged, "writer", Op::Get, Some("t1")).await;
        assert!(matches!(got, Outcome::Refused(401 | 16)), "{w:?}: {got:?}");
    }
    // The listing and the cards stay public, and the cards say what to send.
    let (status, listing) =
        http(&app, &Cred::None, Method::GET, "/api/v1/agents", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        listing.expect("json")["agents"].as_array().map(Vec::len),
        Some(2)
    );
    let (status, card) = http(
        &app,
        &Cred::None,
        Method::GET,
        "/api/v1/agents/writer/.well-known/agent-card.json",
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let card = card.expect("card");
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
        "api-key"
    );
    assert_eq!(card["securitySchemes"]["apiKey"]["type"], "apiKey");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(
        card["securityRequirements"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(card["security"], json!([{"apiKey": []}, {"bearer": []}]));
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
}

#[tokio::test]
async fn a_token_without_the_required_scope_is_forbidden_on_every_wire() {
    let app = app().await;
    let unscoped = token("openid");
    let scoped = token("openid a2a");
    for w in WIRES {
        let got = call(&app, w, &unscoped, "writer", Op::Get, Some("t1")).await;
        let want = match w {
            Wire::GrpcV1 | Wire::GrpcV03 => tonic::Code::PermissionDenied as u16,
            _ => 403,
        };
        assert_eq!(got, Outcome::Refused(want), "{w:?}");
        // With the scope, the token's subject is a caller like any other.
        let task = create_task(&app, w, &scoped, "writer").await;
        let got = call(&app, w, &app.alice, "writer", Op::Get, Some(&task.id)).await;
        assert_eq!(got, Outcome::Err("TASK_NOT_FOUND".into()), "{w:?}");
    }
}

#[tokio::test]
async fn authenticated_callers_get_the_extended_card_on_every_wire() {
    let app = app().await;
    let skill = |v: &Value| v.to_string().contains("private-tasks");
    for (version, method) in [
        (Some("1.0"), "GetExtendedAgentCard"),
        (None, "agent/getAuthenticatedExtendedCard"),
    ] {
        let (status, v) = http(
            &app,
            &app.alice,
            Method::POST,
            "/api/v1/agents/writer/a2a",
            version,
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})),
        )
        .await;
        let v = v.expect("json");
        assert_eq!(status, 200, "{method}");
        assert!(skill(&v["result"]), "{method}: {v}");
    }
    for (version, path) in [(Some("1.0"), "extendedAgentCard"), (None, "v1/card")] {
        let (status, v) = http(
            &app,
            &app.alice,
            Method::GET,
            &format!("/api/v1/agents/writer/rest/{path}"),
            version,
            None,
        )
        .await;
        assert_eq!(status, 200, "{path}");
        assert!(skill(&v.expect("json")), "{path}");
    }
    let card = V1Client::new(app.grpc.clone())
        .get_extended_agent_card(grpc_req(
            Wire::GrpcV1,
            &app.alice,
            "writer",
            v1::GetExtendedAgentCardRequest {
                tenant: "writer".into(),
            },
        ))
        .await
        .expect("v1 gRPC extended card")
        .into_inner();
    assert!(card.skills.iter().any(|s| s.id == "private-tasks"));
    let card = V03Client::new(app.grpc.clone())
        .get_agent_card(grpc_req(
            Wire::GrpcV03,
            &app.alice,
            "writer",
            pb::GetAgentCardRequest {},
        ))
        .await
        .expect("v0.3 gRPC card")
        .into_inner();
    assert!(card.skills.iter().any(|s| s.id == "private-tasks"));
    // v0.3 gRPC reads the public card this way: anonymous callers get it.
    let public = V03Client::new(app.grpc.clone())
        .get_agent_card(grpc_req(
            Wire::GrpcV03,
            &Cred::None,
            "writer",
            pb::GetAgentCardRequest {},
        ))
        .await
        .expect("v0.3 gRPC public card")
        .into_inner();
    assert!(!public.skills.iter().any(|s| s.id == "private-tasks"));
    // gRPC health stays public too.
    let health = tonic_health::pb::health_client::HealthClient::new(app.grpc.clone())
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await;
    assert!(health.is_ok(), "{health:?}");
    // Anonymous: refused before the binding.
    let got = V1Client::new(app.grpc.clone())
        .get_extended_agent_card(grpc_req(
            Wire::GrpcV1,
            &Cred::None,
            "writer",
            v1::GetExtendedAgentCardRequest {
                tenant: "writer".into(),
            },
        ))
        .await;
    assert_eq!(
        got.expect_err("anonymous").code(),
        tonic::Code::Unauthenticated
    );
}
