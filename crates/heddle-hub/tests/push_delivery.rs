//! Push delivery end to end: the hub's writer agent, a real local HTTP
//! receiver, outages, and the SSRF policy at dial time.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, Method, Request, StatusCode, header},
    response::IntoResponse,
    routing::post,
};
use heddle_client::webhook::{Delivery, PushEvent};
use heddle_core::v1;
use heddle_hub::{Hub, agents::with_demo_agents};
use heddle_server::{PushOptions, PushPolicy};
use heddle_store::{MemoryStore, PushConfigRecord, PushStore, Scope, TaskStore};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// What the receiver saw: each delivery's headers and body, in arrival order.
#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<(HeaderMap, Bytes)>>>);

impl Inbox {
    fn all(&self) -> Vec<(HeaderMap, Bytes)> {
        self.0.lock().expect("inbox").clone()
    }
}

async fn record(State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes) -> StatusCode {
    inbox.0.lock().expect("inbox").push((headers, body));
    StatusCode::OK
}

/// A receiver on `addr` (port 0: any); returns its address.
async fn receiver(addr: SocketAddr, inbox: Inbox) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind receiver");
    let local = listener.local_addr().expect("addr");
    let app = Router::new().route("/hook", post(record)).with_state(inbox);
    tokio::spawn(async move { axum::serve(listener, app).await });
    local
}

fn local_policy() -> PushOptions {
    PushOptions {
        policy: PushPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("cidr")],
            allow_http: true,
        },
        max_attempts: 1000,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        hosts: Vec::new(),
        signer: None,
    }
}

async fn hub(store: Arc<dyn TaskStore>, opts: PushOptions) -> Router {
    with_demo_agents(Hub::builder("http://test.local", store))
        .push(opts)
        .build()
        .await
        .router()
}

async fn rpc(
    app: &Router,
    agent: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let v = rpc_raw(app, agent, version, method, params).await;
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

/// JSON-RPC `method` on `agent`: the whole response, error or result.
async fn rpc_raw(
    app: &Router,
    agent: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri(format!("/api/v1/agents/{agent}/a2a"))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(v) = version {
        b = b.header("A2A-Version", v);
    }
    let req = b
        .body(Body::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
        ))
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("json")
}

/// The writer flow over JSON-RPC v1.0, its first send carrying a push config
/// for `url`. Returns the task id.
async fn writer_flow(app: &Router, url: &str) -> String {
    let first = rpc(
        app,
        "writer",
        Some("1.0"),
        "SendMessage",
        json!({
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Summarize"}]},
            "configuration": {"taskPushNotificationConfig": {
                "url": url, "token": "tok-1",
                "authentication": {"scheme": "Bearer", "credentials": "cred-1"}
            }}
        }),
    )
    .await;
    let task_id = first["task"]["id"].as_str().expect("task id").to_owned();
    rpc(
        app,
        "writer",
        Some("1.0"),
        "SendMessage",
        json!({"message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task_id,
            "parts": [{"text": "the board"}]}}),
    )
    .await;
    task_id
}

/// A short label per event: `task:STATE`, `status:STATE` or `artifact:NAME`.
fn label(d: &Delivery) -> String {
    use v1::stream_response::Payload;
    match &d.event {
        PushEvent::V1(e) => match &e.payload {
            Some(Payload::Task(t)) => format!("task:{}", state_name(t.status.as_ref())),
            Some(Payload::StatusUpdate(u)) => format!("status:{}", state_name(u.status.as_ref())),
            Some(Payload::ArtifactUpdate(a)) => format!(
                "artifact:{}",
                a.artifact.as_ref().map(|a| a.name.as_str()).unwrap_or("")
            ),
            other => format!("{other:?}"),
        },
        PushEvent::V03(t) => format!("v03task:{}", state_name(t.status.as_ref())),
    }
}

fn state_name(s: Option<&v1::TaskStatus>) -> &'static str {
    s.map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
        .as_str_name()
}

/// The writer flow's events, as [`label`] names them.
const WRITER_EVENTS: [&str; 6] = [
    "task:TASK_STATE_SUBMITTED",
    "status:TASK_STATE_WORKING",
    "status:TASK_STATE_INPUT_REQUIRED",
    "status:TASK_STATE_WORKING",
    "artifact:report",
    "status:TASK_STATE_COMPLETED",
];

/// Calls the writer's `method` every 50 ms until `done` holds for the answer;
/// fails the test with the last answer once `deadline` passes.
async fn rpc_until(
    app: &Router,
    method: &str,
    params: Value,
    deadline: tokio::time::Instant,
    done: impl Fn(&Value) -> bool,
) {
    loop {
        let answer = rpc_raw(app, "writer", Some("1.0"), method, params.clone()).await;
        if done(&answer) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{method} never answered as expected: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `done` holds for the inbox, or panics after `within`.
async fn wait_for(inbox: &Inbox, within: Duration, done: impl Fn(&[(HeaderMap, Bytes)]) -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if done(&inbox.all()) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; inbox has {} deliveries",
            inbox.all().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The deliveries, parsed, with duplicates (same delivery id) dropped.
fn deduplicated(all: &[(HeaderMap, Bytes)]) -> Vec<Delivery> {
    let mut seen = std::collections::HashSet::new();
    all.iter()
        .map(|(h, b)| Delivery::parse(h, b).expect("a delivery the client helper reads"))
        .filter(|d| seen.insert(d.id.clone().expect("a delivery id")))
        .collect()
}

#[tokio::test]
async fn a_writer_flow_is_delivered_in_order_with_its_headers() {
    let inbox = Inbox::default();
    let addr = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    let app = hub(Arc::new(MemoryStore::default()), local_policy()).await;
    let task_id = writer_flow(&app, &format!("http://{addr}/hook")).await;
    wait_for(&inbox, Duration::from_secs(10), |all| {
        all.len() >= WRITER_EVENTS.len()
    })
    .await;
    let all = inbox.all();
    let labels: Vec<_> = deduplicated(&all).iter().map(label).collect();
    assert_eq!(labels, WRITER_EVENTS);
    for (h, _) in &all {
        let get = |n: &str| {
            h.get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(get("content-type"), "application/a2a+json");
        assert_eq!(get("authorization"), "Bearer cred-1");
        assert_eq!(get("x-a2a-notification-token"), "tok-1");
        assert_eq!(get("a2a-version"), "1.0");
    }
    let ids: std::collections::HashSet<_> = all
        .iter()
        .map(|(h, _)| h.get("x-a2a-delivery-id").cloned().expect("delivery id"))
        .collect();
    assert_eq!(ids.len(), all.len(), "every delivery has its own id");
    assert!(
        deduplicated(&all).iter().all(|d| d.task_id() == task_id),
        "every event is about the task"
    );
    // `/metrics` counts each delivery, and the outbox empties (the last
    // attempt is counted once the hub has the receiver's answer).
    let delivered = "heddle_push_deliveries_total{agent=\"writer\",outcome=\"delivered\"}";
    let count = |metrics: &str| -> Option<usize> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(delivered))
            .and_then(|n| n.trim().parse().ok())
    };
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = scrape(&app).await;
        if metrics.contains("heddle_push_outbox_pending 0") && count(&metrics) == Some(all.len()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        metrics.contains("heddle_push_outbox_pending 0"),
        "{metrics}"
    );
    assert_eq!(count(&metrics), Some(all.len()), "{metrics}");
}

/// `/metrics` as text.
async fn scrape(app: &Router) -> String {
    let req = Request::get("/metrics")
        .body(Body::empty())
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn a_v03_config_gets_the_whole_task_each_time() {
    let inbox = Inbox::default();
    let addr = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    let app = hub(Arc::new(MemoryStore::default()), local_policy()).await;
    let first = rpc(
        &app,
        "writer",
        None,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
            "parts": [{"kind": "text", "text": "Summarize"}]}}),
    )
    .await;
    let task_id = first["id"].as_str().expect("task id").to_owned();
    rpc(
        &app,
        "writer",
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task_id, "pushNotificationConfig": {"url": format!("http://{addr}/hook"), "token": "t03"}}),
    )
    .await;
    rpc(
        &app,
        "writer",
        None,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "m2", "role": "user", "taskId": task_id,
            "parts": [{"kind": "text", "text": "the board"}]}}),
    )
    .await;
    wait_for(&inbox, Duration::from_secs(10), |all| all.len() >= 3).await;
    let all = inbox.all();
    for (h, b) in &all {
        assert_eq!(h.get("content-type").expect("type"), "application/json");
        assert_eq!(h.get("x-a2a-notification-token").expect("token"), "t03");
        let v: Value = serde_json::from_slice(b).expect("json");
        assert_eq!(v["kind"], "task", "{v}");
        assert_eq!(v["id"], json!(task_id));
    }
    let labels: Vec<_> = deduplicated(&all).iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "v03task:TASK_STATE_WORKING",
            "v03task:TASK_STATE_WORKING",
            "v03task:TASK_STATE_COMPLETED"
        ]
    );
    match &deduplicated(&all)[2].event {
        PushEvent::V03(t) => assert_eq!(t.artifacts[0].name, "report"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_receiver_down_for_ten_seconds_still_gets_every_event_once_in_order() {
    // Find a free port, then leave it closed: the receiver is "down".
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let app = hub(Arc::new(MemoryStore::default()), local_policy()).await;
    writer_flow(&app, &format!("http://{addr}/hook")).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let inbox = Inbox::default();
    receiver(addr, inbox.clone()).await;
    wait_for(&inbox, Duration::from_secs(15), |all| {
        deduplicated(all).len() >= WRITER_EVENTS.len()
    })
    .await;
    // Let any straggling retry arrive before judging duplicates.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let labels: Vec<_> = deduplicated(&inbox.all()).iter().map(label).collect();
    assert_eq!(labels, WRITER_EVENTS);
}

/// A delivery to a target stored without the creation check (e.g. created
/// under a laxer policy) is refused when dialed, and dead-lettered with the
/// reason; the receiver sees nothing.
async fn refused_at_dial_time(url: &str, opts: PushOptions) -> String {
    let store = Arc::new(MemoryStore::default());
    let app = hub(store.clone(), opts).await;
    // A task to hang the config on, via the echo agent.
    let sent = rpc(
        &app,
        "echo",
        Some("1.0"),
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
               "configuration": {"returnImmediately": false}}),
    )
    .await;
    let task_id = sent["task"]["id"].as_str().expect("id").to_owned();
    // The anonymous caller's scope, as the hub's handler uses it.
    let scope = Scope::new("echo", "");
    let target = PushConfigRecord {
        config: v1::TaskPushNotificationConfig {
            task_id: task_id.clone(),
            id: "c".into(),
            url: url.into(),
            ..Default::default()
        },
        version: "1.0".into(),
    };
    store
        .put_push_config(&scope, &target)
        .await
        .expect("config");
    store
        .enqueue_deliveries(vec![heddle_store::NewDelivery {
            id: "d1".into(),
            scope,
            task_id,
            target,
            content_type: "application/a2a+json".into(),
            body: b"{}".to_vec(),
            traceparent: String::new(),
            tracestate: String::new(),
        }])
        .await
        .expect("enqueue");
    // Nobody wakes the worker: it finds the delivery when it polls the outbox.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(70);
    loop {
        let dead = store.dead_deliveries(10).await.expect("dead");
        if let Some(d) = dead.first() {
            assert_eq!(d.attempts, 1, "a refusal is not retried");
            return d.last_error.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never dead-lettered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn dial_time_refuses_literal_internal_addresses() {
    let strict = PushOptions {
        policy: PushPolicy {
            allow: Vec::new(),
            allow_http: true,
        },
        ..local_policy()
    };
    for (url, needle) in [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://[::1]:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/hook", "private"),
    ] {
        let err = refused_at_dial_time(url, strict.clone()).await;
        assert!(err.contains(needle), "{url}: {err}");
    }
}

#[tokio::test]
async fn dial_time_refuses_a_name_that_resolves_to_loopback() {
    let inbox = Inbox::default();
    let addr = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    // A name only the resolver ties to 127.0.0.1 (creation cannot tell).
    let hosts = vec![("hooks.internal.test".to_owned(), addr.ip())];
    let url = format!("http://hooks.internal.test:{}/hook", addr.port());
    let strict = PushOptions {
        policy: PushPolicy {
            allow: Vec::new(),
            allow_http: true,
        },
        hosts: hosts.clone(),
        ..local_policy()
    };
    let err = refused_at_dial_time(&url, strict).await;
    assert!(
        err.contains("resolves to 127.0.0.1") && err.contains("loopback"),
        "{err}"
    );
    assert!(inbox.all().is_empty(), "the receiver must see nothing");
    // Control: allow-listed, the same name is delivered to.
    let app = hub(
        Arc::new(MemoryStore::default()),
        PushOptions {
            hosts,
            ..local_policy()
        },
    )
    .await;
    writer_flow(&app, &url).await;
    wait_for(&inbox, Duration::from_secs(10), |all| {
        all.len() >= WRITER_EVENTS.len()
    })
    .await;
}

async fn redirect(State(to): State<String>) -> impl IntoResponse {
    (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)])
}

#[tokio::test]
async fn redirects_to_loopback_are_not_followed() {
    // The target: another loopback address, which the policy does not allow.
    let inbox = Inbox::default();
    let target = receiver("127.0.0.2:0".parse().expect("addr"), inbox.clone()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let redirector = listener.local_addr().expect("addr");
    let app = Router::new()
        .route("/hook", post(redirect))
        .with_state(format!("http://{target}/hook"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let err = refused_at_dial_time(&format!("http://{redirector}/hook"), local_policy()).await;
    assert!(err.contains("redirects are not followed"), "{err}");
    assert!(
        inbox.all().is_empty(),
        "the redirect target must see nothing"
    );
}

#[tokio::test]
async fn signed_deliveries_verify_against_the_served_jwks() {
    use heddle_client::webhook::verify_jwt;
    let inbox = Inbox::default();
    let addr = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    let signer = heddle_server::push::PushSigner::generate("http://test.local").expect("key");
    let app = hub(
        Arc::new(MemoryStore::default()),
        PushOptions {
            signer: Some(Arc::new(signer)),
            ..local_policy()
        },
    )
    .await;
    let req = Request::builder()
        .uri("/.well-known/jwks.json")
        .body(Body::empty())
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("jwks");
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&bytes).expect("a JWK set");

    writer_flow(&app, &format!("http://{addr}/hook")).await;
    wait_for(&inbox, Duration::from_secs(10), |all| {
        all.len() >= WRITER_EVENTS.len()
    })
    .await;
    for (h, b) in inbox.all() {
        let claims = verify_jwt(&h, &b, &jwks, Some("http://test.local")).expect("verifies");
        assert_eq!(
            Some(claims.jti.as_str()),
            h.get("x-a2a-delivery-id").and_then(|v| v.to_str().ok())
        );
        // Another body, another issuer, or no JWT: refused.
        assert!(verify_jwt(&h, b"{\"tampered\":true}", &jwks, None).is_err());
        assert!(verify_jwt(&h, &b, &jwks, Some("https://elsewhere.example")).is_err());
        let mut stripped = h.clone();
        stripped.remove("x-a2a-notification-jwt");
        assert!(verify_jwt(&stripped, &b, &jwks, None).is_err());
    }
}

/// A store that keeps tasks only (the memory store without its push side).
struct TasksOnly(MemoryStore);

#[async_trait::async_trait]
impl TaskStore for TasksOnly {
    async fn load(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<v1::Task>, heddle_store::StoreError> {
        self.0.load(scope, task_id).await
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), heddle_store::StoreError> {
        self.0.save(scope, task).await
    }

    async fn list(
        &self,
        scope: &Scope,
        query: &heddle_store::ListQuery,
    ) -> Result<heddle_store::ListPage, heddle_store::StoreError> {
        self.0.list(scope, query).await
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, heddle_store::StoreError> {
        self.0.fail_interrupted(reason).await
    }
}

#[tokio::test]
async fn push_needs_a_store_that_keeps_push_configs() {
    let store = Arc::new(TasksOnly(MemoryStore::default()));
    let built = with_demo_agents(Hub::builder("http://test.local", store.clone()))
        .push(local_policy())
        .try_build()
        .await;
    assert!(matches!(
        built,
        Err(heddle_hub::BuildError::Push(
            heddle_server::push::PushError::NoStore
        ))
    ));
    // Without push the same store serves.
    let hub = with_demo_agents(Hub::builder("http://test.local", store))
        .try_build()
        .await;
    assert!(hub.is_ok());
}

/// A task whose receiver is down, with a backlog longer than the worker
/// reads at once, does not hold back another task's deliveries: the worker
/// reads each task's first delivery, not the outbox's oldest rows.
#[tokio::test]
async fn one_tasks_backlog_does_not_hold_back_another_tasks_deliveries() {
    let store = Arc::new(MemoryStore::default());
    let inbox = Inbox::default();
    let up = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    // A port nothing listens on: every attempt is refused, and retried.
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let scope = Scope::new("writer", "anonymous");
    let item = |task: &str, n: usize, to: SocketAddr| heddle_store::NewDelivery {
        id: format!("{task}-{n}"),
        scope: scope.clone(),
        task_id: task.into(),
        target: PushConfigRecord {
            config: v1::TaskPushNotificationConfig {
                task_id: task.into(),
                id: "c1".into(),
                url: format!("http://{to}/hook"),
                ..Default::default()
            },
            version: "1.0".into(),
        },
        content_type: "application/json".into(),
        body: b"{}".to_vec(),
        traceparent: String::new(),
        tracestate: String::new(),
    };
    let backlog = (0..1500).map(|n| item("stuck", n, down)).collect();
    store.enqueue_deliveries(backlog).await.expect("enqueue");
    store
        .enqueue_deliveries(vec![item("other", 0, up)])
        .await
        .expect("enqueue");
    let notifier =
        heddle_server::PushNotifier::new(store.clone(), local_policy()).expect("notifier");
    let worker = notifier.start().await.expect("worker");
    wait_for(&inbox, Duration::from_secs(5), |all| !all.is_empty()).await;
    worker.abort();
    let all = inbox.all();
    assert_eq!(
        all[0].0[heddle_server::push::DELIVERY_ID_HEADER]
            .to_str()
            .ok(),
        Some("other-0")
    );
    assert_eq!(store.pending_count().await.expect("count"), 1500);
}

/// Retention deletes an ended task's push configs once its deliveries are
/// out (the task stays), then the task itself once it is old enough.
#[tokio::test]
async fn retention_deletes_ended_tasks_and_then_their_configs() {
    let inbox = Inbox::default();
    let addr = receiver("127.0.0.1:0".parse().expect("addr"), inbox.clone()).await;
    let retention = heddle_hub::retention::Retention {
        tasks: Some(Duration::from_secs(2)),
        push_configs: Some(Duration::ZERO),
        every: Duration::from_millis(50),
    };
    let app = with_demo_agents(Hub::builder(
        "http://test.local",
        Arc::new(MemoryStore::default()),
    ))
    .push(local_policy())
    .retention(retention)
    .build()
    .await
    .router();
    let task_id = writer_flow(&app, &format!("http://{addr}/hook")).await;
    wait_for(&inbox, Duration::from_secs(10), |all| {
        all.len() >= WRITER_EVENTS.len()
    })
    .await;
    let ended = tokio::time::Instant::now();

    rpc_until(
        &app,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task_id}),
        ended + Duration::from_secs(5),
        |listed| listed["result"]["configs"].as_array().map_or(0, Vec::len) == 0,
    )
    .await;
    let got = rpc_raw(
        &app,
        "writer",
        Some("1.0"),
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the task stays: {got}"
    );

    rpc_until(
        &app,
        "GetTask",
        json!({"id": task_id}),
        ended + Duration::from_secs(8),
        |got| got["error"]["code"] == json!(-32001),
    )
    .await;
    assert!(
        ended.elapsed() >= Duration::from_millis(1500),
        "not before it was old enough: {:?}",
        ended.elapsed()
    );
}

#[tokio::test]
async fn an_admin_reads_one_tasks_deliveries_waiting_and_given_up() {
    // A receiver that is always down for maintenance.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let down = Router::new().route("/hook", post(|| async { StatusCode::SERVICE_UNAVAILABLE }));
    tokio::spawn(async move { axum::serve(listener, down).await });
    let opts = PushOptions {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(300),
        max_backoff: Duration::from_millis(300),
        ..local_policy()
    };
    let app = with_demo_agents(Hub::builder(
        "http://test.local",
        Arc::new(MemoryStore::default()),
    ))
    .push(opts)
    .admin(heddle_hub::AdminAccess::default().token("push-admin-token-0123456789"))
    .build()
    .await
    .router();
    let task_id = writer_flow(&app, &format!("http://{addr}/hook")).await;
    let path = format!("/api/v1/admin/push/deliveries?agent=writer&task={task_id}");
    let read = |auth: Option<&'static str>| admin_get(&app, path.clone(), auth);
    assert_eq!(read(None).await.0, StatusCode::UNAUTHORIZED);
    let admin = Some("Bearer push-admin-token-0123456789");
    // Waiting, with the failed attempts counted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = read(admin).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let tried = body["pending"]
            .as_array()
            .and_then(|p| p.first())
            .is_some_and(|d| d["attempts"].as_u64() >= Some(1));
        if tried {
            assert!(
                body["pending"][0]["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("503")),
                "{body}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never tried: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Then given up, every event of the task.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = read(admin).await;
        let pending = body["pending"].as_array().map_or(0, Vec::len);
        let dead = body["dead"].as_array().cloned().unwrap_or_default();
        if pending == 0 && !dead.is_empty() {
            assert!(
                dead.iter()
                    .all(|d| d["attempts"] == 3 && d["taskId"] == task_id),
                "{body}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never given up: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Another task's deliveries are not listed.
    let other = "/api/v1/admin/push/deliveries?agent=writer&task=not-a-task";
    assert_eq!(
        admin_get(&app, other.to_owned(), admin).await.1,
        json!({"pending": [], "dead": []})
    );
}

/// A GET of `path` with `auth` as the Authorization header: the status and
/// the JSON body.
async fn admin_get(app: &Router, path: String, auth: Option<&str>) -> (StatusCode, Value) {
    let mut req = axum::http::Request::get(path);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = app
        .clone()
        .oneshot(req.body(axum::body::Body::empty()).expect("request"))
        .await
        .expect("answer");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
    )
}
