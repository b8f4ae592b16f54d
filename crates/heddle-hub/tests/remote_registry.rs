//! Remote agents registered while the hub runs, through its admin API:
//! a Heddle upstream (served, then stopped: the kept card is still served
//! and calls fail in time), and the official Python and JS SDK servers of
//! the interop suite, used through the hub over JSON-RPC v1.0, JSON-RPC
//! v0.3 and gRPC with multi-turn, streaming, resubscribe and cancel, the
//! Python one by the official Python client too
//! (`tests/interop/python/hub_remote_flows.py`).

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use heddle_client::{A2aClient, Binding, ClientOptions, EventStream, SendReply, reqwest};
use heddle_core::{
    ProtocolVersion,
    v1::{self, stream_response::Payload},
};
use heddle_hub::{
    AdminAccess, Hub, RemoteSettings,
    agents::{DemoOptions, demo_builtins},
    registry::AgentEntry,
    remote::{RemoteOptions, RemoteTimeouts},
};
use heddle_store::{SqliteStore, TaskStore};
use serde_json::json;

mod live;

use live::{Served, bearer, call, card, installed, interop_dir};

const TOKEN: &str = "remote-registry-admin-token";

/// The wires a caller reaches the hub over.
const WIRES: [(Binding, ProtocolVersion); 3] = [
    (Binding::JsonRpc, ProtocolVersion::V1_0),
    (Binding::JsonRpc, ProtocolVersion::V0_3),
    (Binding::Grpc, ProtocolVersion::V1_0),
];

/// No step of a test may take longer.
const STEP: Duration = Duration::from_secs(20);

/// Short upstream timeouts, so a dead upstream is noticed quickly.
fn short() -> RemoteSettings {
    RemoteSettings {
        options: RemoteOptions {
            timeouts: RemoteTimeouts {
                connect: Duration::from_secs(1),
                call: Duration::from_secs(1),
                idle: Duration::from_secs(2),
            },
            ..RemoteOptions::default()
        },
        ..RemoteSettings::default()
    }
}

/// A hub with no agent, admins by [`TOKEN`], upstream calls as `short`.
async fn hub_on(store: Arc<dyn TaskStore>) -> Served {
    live::serve(move |public, grpc| {
        Hub::builder(public, store)
            .grpc_url(grpc)
            .admin(AdminAccess::default().token(TOKEN))
            .remote(short())
    })
    .await
}

/// Registers a remote agent through the admin API; the answer.
async fn register(hub: &Served, id: &str, card_url: &str) -> live::Answer {
    call(
        reqwest::Client::new()
            .post(format!("{}/api/v1/admin/agents", hub.base))
            .header("authorization", bearer(TOKEN))
            .json(&json!({"id": id, "kind": "remote", "card_url": card_url, "allow_http": true})),
    )
    .await
}

async fn caller(hub: &str, id: &str, binding: Binding, version: ProtocolVersion) -> A2aClient {
    let opts = ClientOptions {
        bindings: vec![binding],
        version: Some(version),
        retries: 0,
        ..ClientOptions::default()
    };
    A2aClient::discover(&format!("{hub}/api/v1/agents/{id}"), opts)
        .await
        .expect("discover the hub's card")
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
}

fn status_text(t: &v1::Task) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .unwrap_or_default()
}

fn request(text: &str, task_id: &str) -> v1::SendMessageRequest {
    let mut m = A2aClient::user_message(vec![v1::Part::text(text)]);
    task_id.clone_into(&mut m.task_id);
    v1::SendMessageRequest {
        message: Some(m),
        ..Default::default()
    }
}

async fn send(c: &A2aClient, text: &str, task_id: &str) -> v1::Task {
    match tokio::time::timeout(STEP, c.send(request(text, task_id)))
        .await
        .expect("an answer in time")
        .expect("send")
    {
        SendReply::Task(t) => t,
        SendReply::Message(m) => panic!("a message, not a task: {}", m.text()),
    }
}

async fn next(s: &mut EventStream) -> Option<v1::StreamResponse> {
    tokio::time::timeout(STEP, s.next())
        .await
        .expect("an event in time")
        .map(|e| e.expect("a good event"))
}

fn task_id_of(ev: &v1::StreamResponse) -> String {
    match ev.payload.as_ref().expect("payload") {
        Payload::Task(t) => t.id.clone(),
        Payload::StatusUpdate(u) => u.task_id.clone(),
        Payload::ArtifactUpdate(a) => a.task_id.clone(),
        Payload::Message(m) => panic!("a message: {}", m.text()),
    }
}

fn final_state(ev: &v1::StreamResponse) -> Option<v1::TaskState> {
    match ev.payload.as_ref()? {
        Payload::StatusUpdate(u) => u.status.as_ref().map(v1::TaskStatus::state),
        Payload::Task(t) => Some(state(t)),
        _ => None,
    }
    .filter(|s| s.is_terminal() || s.is_interrupted())
}

// ---- a Heddle upstream, up then down ------------------------------------------------

/// A Heddle hub serving the demo `echo`, in a runtime of its own: stopping
/// it closes its listener and every connection to it.
struct Upstream {
    /// The echo agent's base URL.
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    fn start() -> Self {
        let (ready, url) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let (l, addr) = live::bind().await;
                let hub = demo_builtins(
                    Hub::builder(format!("http://{addr}"), live::memory()),
                    DemoOptions::default(),
                )
                .entry(AgentEntry::builtin("echo", "echo"))
                .build()
                .await;
                tokio::spawn(async move { axum::serve(l, hub.router()).await });
                ready
                    .send(format!("http://{addr}/api/v1/agents/echo"))
                    .expect("the test waits");
                let _ = stopped.await;
            });
            // Dropping the runtime ends every task of the upstream.
            rt.shutdown_timeout(Duration::from_secs(1));
        });
        Self {
            url: url.recv().expect("the upstream starts"),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().expect("the upstream stops");
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop();
    }
}

fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn TaskStore> {
    Arc::new(SqliteStore::open_path(dir.path().join("hub.db")).expect("sqlite"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heddle_upstream_registered_at_run_time_is_served_and_its_card_outlives_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut upstream = Upstream::start();
    let hub = hub_on(sqlite(&dir)).await;
    let http = reqwest::Client::new();

    let made = register(&hub, "up", &upstream.url).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert!(made.json["upstream_card"].is_object(), "{}", made.text);
    assert_eq!(made.json["upstream_signature"], "absent", "{}", made.text);
    assert_eq!(listed(&http, &hub.base).await["health"]["state"], "unknown");
    for (binding, version) in WIRES {
        let wire = format!("{binding:?} {version}");
        let c = caller(&hub.base, "up", binding, version).await;
        assert_eq!(c.card().name, "Echo", "{wire}");
        let t = send(&c, &format!("hello over {wire}"), "").await;
        assert_eq!(state(&t), v1::TaskState::Completed, "{wire}");
        assert_eq!(t.artifacts[0].text(), format!("hello over {wire}"));
    }
    let up = listed(&http, &hub.base).await;
    assert_eq!(up["health"]["state"], "ok", "{up}");
    assert_eq!(up["upstreamSignature"], "absent", "{up}");

    upstream.stop();
    // The kept card is still served, with the hub's interfaces.
    let kept = card(&http, &hub.base, "up").await;
    assert_eq!(kept.status, 200, "{}", kept.text);
    assert_eq!(kept.json["name"], "Echo");
    // A call fails in time, with a task that says why.
    let c = caller(&hub.base, "up", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let started = Instant::now();
    let failed = send(&c, "anyone there?", "").await;
    let took = started.elapsed();
    assert_eq!(state(&failed), v1::TaskState::Failed, "{failed:?}");
    assert!(
        status_text(&failed).contains("could not be reached"),
        "{:?}",
        status_text(&failed)
    );
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(listed(&http, &hub.base).await["health"]["state"], "failing");
    // Counted as an upstream error of that agent, and only that one.
    let metrics = http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("heddle_upstream_errors_total"))
        .collect();
    assert_eq!(
        errors,
        ["heddle_upstream_errors_total{agent=\"up\"} 1"],
        "{metrics}"
    );
    // Refreshing needs the upstream: a 502 problem, and the agent stays.
    let refresh = call(
        http.post(format!("{}/api/v1/admin/agents/up/refresh", hub.base))
            .header("authorization", bearer(TOKEN)),
    )
    .await;
    assert_eq!(refresh.status, 502, "{}", refresh.text);
    assert_eq!(refresh.content_type(), "application/problem+json");
    assert_eq!(refresh.json["status"], 502);
    assert_eq!(card(&http, &hub.base, "up").await.status, 200);

    // A hub started again on the same store, the upstream still down,
    // serves the card it kept.
    let again = hub_on(sqlite(&dir)).await;
    let kept = card(&http, &again.base, "up").await;
    assert_eq!(kept.status, 200, "{}", kept.text);
    assert_eq!(kept.json["name"], "Echo");
    let urls = kept.text;
    assert!(
        urls.contains(&again.base),
        "the new hub's interfaces: {urls}"
    );
}

/// The remote agent `up` as discovery lists it.
async fn listed(http: &reqwest::Client, base: &str) -> serde_json::Value {
    let list = call(http.get(format!("{base}/api/v1/agents"))).await;
    list.json["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == "up").cloned())
        .unwrap_or_else(|| panic!("up is listed: {}", list.text))
}

// ---- the official SDK servers as upstreams --------------------------------------------

async fn free_port() -> u16 {
    let (l, addr) = live::bind().await;
    drop(l);
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

/// Starts `program script HTTP_PORT GRPC_PORT` (killed on drop) and
/// registers it on `hub` as `id` once it serves its card.
async fn start_sdk_server(
    hub: &Served,
    id: &str,
    program: PathBuf,
    script: &str,
) -> tokio::process::Child {
    let (http_port, grpc_port) = (free_port().await, free_port().await);
    let server = tokio::process::Command::new(program)
        .arg(interop_dir().join("servers").join(script))
        .arg(http_port.to_string())
        .arg(grpc_port.to_string())
        .current_dir(interop_dir())
        .kill_on_drop(true)
        .spawn()
        .expect("start the SDK server");
    let url = format!("http://127.0.0.1:{http_port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let made = register(hub, id, &url).await;
        if made.status == 201 {
            break;
        }
        assert!(
            made.status == 502 && Instant::now() < deadline,
            "{script} never registered: {} {}",
            made.status,
            made.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server
}

/// Every flow of the SDK servers' skills through the hub, over `wire`.
async fn sdk_flows(c: &A2aClient, wire: &str) {
    let t = send(c, "echo over the hub", "").await;
    assert_eq!(state(&t), v1::TaskState::Completed, "{wire}");
    assert_eq!(t.artifacts[0].text(), "over the hub", "{wire}");

    // Multi-turn, on the hub's task id.
    let asked = send(c, "write", "").await;
    assert_eq!(state(&asked), v1::TaskState::InputRequired, "{wire}");
    let done = send(c, "for Ann", &asked.id).await;
    assert_eq!(
        (done.id.as_str(), state(&done)),
        (asked.id.as_str(), v1::TaskState::Completed),
        "{wire}"
    );
    assert!(
        done.artifacts[0].text().contains("Ann"),
        "{wire}: {:?}",
        done.artifacts
    );

    // Streaming: the three chunks, then COMPLETED.
    let mut s = c
        .send_streaming(request("stream", ""))
        .await
        .expect("stream");
    let mut chunks = Vec::new();
    let mut last = None;
    while let Some(ev) = next(&mut s).await {
        if let Some(Payload::ArtifactUpdate(a)) = &ev.payload {
            chunks.push(
                a.artifact
                    .as_ref()
                    .map(v1::Artifact::text)
                    .unwrap_or_default(),
            );
        }
        last = final_state(&ev).or(last);
    }
    assert_eq!(chunks, ["one ", "two ", "three"], "{wire}");
    assert_eq!(last, Some(v1::TaskState::Completed), "{wire}");

    // Resubscribe to a waiting task, then cancel it: the subscription ends
    // with CANCELED.
    let mut s = c.send_streaming(request("wait", "")).await.expect("stream");
    let id = task_id_of(&next(&mut s).await.expect("a first event"));
    drop(s);
    let mut sub = tokio::time::timeout(STEP, c.subscribe(&id))
        .await
        .expect("in time")
        .expect("subscribe");
    assert_eq!(
        task_id_of(&next(&mut sub).await.expect("a snapshot")),
        id,
        "{wire}"
    );
    let canceled = tokio::time::timeout(STEP, c.cancel_task(&id))
        .await
        .expect("in time")
        .expect("cancel");
    assert_eq!(state(&canceled), v1::TaskState::Canceled, "{wire}");
    assert!(
        !status_text(&canceled).contains("upstream:"),
        "{wire}: the upstream cancel failed: {}",
        status_text(&canceled)
    );
    let mut last = None;
    while let Some(ev) = next(&mut sub).await {
        last = final_state(&ev).or(last);
    }
    assert_eq!(
        last,
        Some(v1::TaskState::Canceled),
        "{wire}: the subscription"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_agent_registered_at_run_time_works_through_the_hub() {
    let venv = interop_dir().join(".venv/bin/python");
    let Some(python) = installed(&venv, "Python a2a-sdk").then(|| venv.clone()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = hub_on(sqlite(&dir)).await;
    let _server = start_sdk_server(&hub, "py", python.clone(), "python_server.py").await;
    for (binding, version) in WIRES {
        let wire = format!("py via {binding:?} {version}");
        let c = caller(&hub.base, "py", binding, version).await;
        sdk_flows(&c, &wire).await;
    }
    // The official Python client as the caller, over each binding and
    // version of the hub's card.
    let agent = format!("{}/api/v1/agents/py", hub.base);
    for (version, binding) in [
        ("1.0", "JSONRPC"),
        ("0.3", "JSONRPC"),
        ("1.0", "HTTP+JSON"),
        ("1.0", "GRPC"),
        ("0.3", "GRPC"),
    ] {
        live::run_flows(
            &python,
            &interop_dir().join("python/hub_remote_flows.py"),
            &[agent.as_str(), version, binding],
            4,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_sdk_agent_registered_at_run_time_sends_and_streams_through_the_hub() {
    let modules = interop_dir().join("node_modules/@a2a-js/sdk");
    let Some(node) = installed(&modules, "JS @a2a-js/sdk").then(|| PathBuf::from("node")) else {
        return;
    };
    let hub = hub_on(live::memory()).await;
    let _server = start_sdk_server(&hub, "js", node, "js_server.mjs").await;
    for (binding, version) in WIRES {
        let wire = format!("js via {binding:?} {version}");
        let c = caller(&hub.base, "js", binding, version).await;
        let t = send(&c, "echo over the hub", "").await;
        assert_eq!(state(&t), v1::TaskState::Completed, "{wire}");
        assert_eq!(t.artifacts[0].text(), "over the hub", "{wire}");
        let mut s = c
            .send_streaming(request("stream", ""))
            .await
            .expect("stream");
        let mut chunks = Vec::new();
        let mut last = None;
        while let Some(ev) = next(&mut s).await {
            if let Some(Payload::ArtifactUpdate(a)) = &ev.payload {
                chunks.push(
                    a.artifact
                        .as_ref()
                        .map(v1::Artifact::text)
                        .unwrap_or_default(),
                );
            }
            last = final_state(&ev).or(last);
        }
        assert_eq!(chunks, ["one ", "two ", "three"], "{wire}");
        assert_eq!(last, Some(v1::TaskState::Completed), "{wire}");
    }
}
