//! What the registry, admin, discovery and remote-registry tests share: a
//! hub on real listeners, and plain HTTP calls to it (over TCP with
//! reqwest, or in process with `oneshot`). Each file uses part of it.
#![allow(dead_code)]

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{HeaderMap, Request, StatusCode},
};
use heddle_client::reqwest;
use heddle_hub::{Hub, HubBuilder};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// No single request of a test may take longer.
pub const STEP: Duration = Duration::from_secs(10);

/// A listener on a free local port, and its `host:port`.
pub async fn bind() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    (l, addr)
}

/// A hub serving on its own HTTP and gRPC listeners.
pub struct Served {
    pub hub: Hub,
    /// `http://host:port`, the hub's public URL.
    pub base: String,
    /// `host:port` of the gRPC listener.
    pub grpc: String,
}

/// Builds the hub `build(public_url, grpc_addr)` makes and serves it on
/// fresh listeners (for as long as the test's runtime runs).
pub async fn serve(build: impl FnOnce(String, String) -> HubBuilder) -> Served {
    let (http, http_addr) = bind().await;
    let (grpc, grpc_addr) = bind().await;
    let base = format!("http://{http_addr}");
    let hub = build(base.clone(), grpc_addr.clone()).build().await;
    let grpc_app = hub.grpc_app().expect("gRPC is on by default");
    let router = hub.router();
    tokio::spawn(async move { axum::serve(http, router).await });
    tokio::spawn(async move { axum::serve(grpc, grpc_app).await });
    Served {
        hub,
        base,
        grpc: grpc_addr,
    }
}

/// A v1.0 user message with one text part, as JSON.
pub fn user_message(text: &str) -> Value {
    json!({
        "messageId": format!("m-{}", next_id()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    })
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What an HTTP call answered.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body as JSON (`Null` when it is not JSON).
    pub json: Value,
    pub text: String,
}

impl Answer {
    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// Calls a real listener; panics if no answer comes within [`STEP`].
pub async fn call(req: reqwest::RequestBuilder) -> Answer {
    let resp = tokio::time::timeout(STEP, req.send())
        .await
        .expect("an answer in time")
        .expect("an answer");
    let status = StatusCode::from_u16(resp.status().as_u16()).expect("status");
    let mut headers = HeaderMap::new();
    for (k, v) in resp.headers() {
        if let (Ok(k), Ok(v)) = (
            axum::http::HeaderName::from_bytes(k.as_str().as_bytes()),
            axum::http::HeaderValue::from_bytes(v.as_bytes()),
        ) {
            headers.append(k, v);
        }
    }
    let text = tokio::time::timeout(STEP, resp.text())
        .await
        .expect("the whole body in time")
        .expect("a body");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        json,
        text,
    }
}

/// A JSON-RPC v1.0 call to the agent `id` of the hub at `base`.
pub async fn jsonrpc(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    method: &str,
    params: Value,
) -> Answer {
    call(
        http.post(format!("{base}/api/v1/agents/{id}/a2a"))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})),
    )
    .await
}

/// The card of the agent `id` of the hub at `base`.
pub async fn card(http: &reqwest::Client, base: &str, id: &str) -> Answer {
    call(http.get(format!(
        "{base}/api/v1/agents/{id}/.well-known/agent-card.json"
    )))
    .await
}

/// A 404 of the hub's dispatch: the JSON naming the missing agent.
pub fn is_no_agent(a: &Answer, id: &str) -> bool {
    a.status == StatusCode::NOT_FOUND
        && a.json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("no agent \"{id}\"")))
}

/// The state of the task a JSON-RPC v1.0 SendMessage answered.
pub fn sent_state(a: &Answer) -> &str {
    a.json["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
}

/// An in-process request to `router`, with an optional bearer token and
/// body.
pub async fn oneshot(
    router: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Body>,
) -> Answer {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(body.unwrap_or_else(Body::empty)).expect("request");
    let resp = tokio::time::timeout(STEP, router.clone().oneshot(req))
        .await
        .expect("an answer in time")
        .expect("an answer");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.expect("a body").to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Answer {
        status,
        headers,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    }
}

/// `Authorization: Bearer {token}`.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A hub store in memory.
pub fn memory() -> Arc<heddle_store::MemoryStore> {
    Arc::new(heddle_store::MemoryStore::default())
}

/// `tests/interop`, where `tests/interop/setup.sh` installs the official SDKs.
pub fn interop_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// Whether `needed` (installed by `tests/interop/setup.sh`) exists; if
/// not, says the test that needs `what` is skipped, or fails when
/// HEDDLE_REQUIRE_INTEROP=1.
pub fn installed(needed: &std::path::Path, what: &str) -> bool {
    if needed.exists() {
        return true;
    }
    assert!(
        std::env::var("HEDDLE_REQUIRE_INTEROP").as_deref() != Ok("1"),
        "HEDDLE_REQUIRE_INTEROP=1 but {} is missing: run tests/interop/setup.sh",
        needed.display()
    );
    println!(
        "skipped: the {what} test needs tests/interop/setup.sh (no {})",
        needed.display()
    );
    false
}

/// Runs an official SDK's flow script (`program script args…`, at most two
/// minutes) and checks it exits 0 having printed `passes` lines starting
/// `PASS `; what it printed, for the test's output.
pub async fn run_flows(
    program: &std::path::Path,
    script: &std::path::Path,
    args: &[&str],
    passes: usize,
) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .arg(script)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client ends in time")
    .expect("the client runs");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{printed}");
    assert!(
        out.status.success(),
        "{} {args:?}:\n{printed}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        printed.lines().filter(|l| l.starts_with("PASS ")).count(),
        passes,
        "{} {args:?}:\n{printed}",
        script.display()
    );
    printed
}
