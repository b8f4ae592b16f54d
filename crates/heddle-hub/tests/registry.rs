//! The live registry: agents registered, changed and removed while the hub
//! runs are served (or gone) on every binding from the next request on;
//! API registrations outlive a restart on SQLite; and churning the registry
//! cuts no stream and shows no caller a half-registered agent.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use heddle_client::{A2aClient, reqwest};
use heddle_core::v1::{self, send_message_response::Payload};
use heddle_hub::{
    AdminAccess, Hub, HubBuilder, RegistryError,
    agents::{
        DemoOptions, WRITER_STREAM_CHUNKS, WriterStream, demo_builtins, with_demo_agents_using,
    },
    registry::AgentEntry,
};
use heddle_proto::v1::a2a_service_client::A2aServiceClient;
use heddle_store::{SqliteStore, TaskStore};
use serde_json::{Value, json};
use tonic::transport::Channel;

mod live;

use live::{
    Answer, bearer, call, card, is_no_agent, jsonrpc, memory, sent_state, serve, user_message,
};

const TOKEN: &str = "registry-test-admin-token";

/// The demo executors as builtins, and no agent served.
fn bare(public: String, store: Arc<dyn TaskStore>) -> HubBuilder {
    demo_builtins(Hub::builder(public, store), DemoOptions::default())
}

async fn grpc_send(addr: &str, tenant: &str, text: &str) -> Result<v1::Task, tonic::Status> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut req = tonic::Request::new(v1::SendMessageRequest {
        tenant: tenant.to_owned(),
        message: Some(A2aClient::user_message(vec![v1::Part::text(text)])),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("a2a-version", "1.0".parse().expect("ascii"));
    let answer = tokio::time::timeout(live::STEP, A2aServiceClient::new(channel).send_message(req))
        .await
        .expect("a gRPC answer in time")?;
    match answer.into_inner().payload {
        Some(Payload::Task(t)) => Ok(t),
        other => panic!("not a task: {other:?}"),
    }
}

fn task_state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
}

/// Sends `text` to `id` over JSON-RPC, REST and gRPC; each must complete
/// with the echo of `text`.
async fn answers_on_every_binding(http: &reqwest::Client, base: &str, grpc: &str, id: &str) {
    let rpc = jsonrpc(
        http,
        base,
        id,
        "SendMessage",
        json!({"message": user_message("over json-rpc")}),
    )
    .await;
    assert_eq!(sent_state(&rpc), "TASK_STATE_COMPLETED", "{}", rpc.text);
    assert_eq!(
        rpc.json["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "over json-rpc"
    );
    let rest = call(
        http.post(format!("{base}/api/v1/agents/{id}/rest/message:send"))
            .header("A2A-Version", "1.0")
            .json(&json!({"message": user_message("over rest")})),
    )
    .await;
    assert_eq!(rest.status, 200, "{}", rest.text);
    assert_eq!(
        rest.json["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{}",
        rest.text
    );
    let t = grpc_send(grpc, id, "over grpc").await.expect("gRPC send");
    assert_eq!(task_state(&t), v1::TaskState::Completed);
    assert_eq!(t.artifacts[0].text(), "over grpc");
}

/// Neither the card, JSON-RPC, REST nor gRPC reach `id`.
async fn gone_on_every_binding(http: &reqwest::Client, base: &str, grpc: &str, id: &str) {
    let c = card(http, base, id).await;
    assert!(is_no_agent(&c, id), "card: {} {}", c.status, c.text);
    let rpc = jsonrpc(
        http,
        base,
        id,
        "SendMessage",
        json!({"message": user_message("x")}),
    )
    .await;
    assert!(
        is_no_agent(&rpc, id),
        "json-rpc: {} {}",
        rpc.status,
        rpc.text
    );
    let rest = call(
        http.post(format!("{base}/api/v1/agents/{id}/rest/message:send"))
            .header("A2A-Version", "1.0")
            .json(&json!({"message": user_message("x")})),
    )
    .await;
    assert!(
        is_no_agent(&rest, id),
        "rest: {} {}",
        rest.status,
        rest.text
    );
    let status = grpc_send(grpc, id, "x").await.expect_err("gRPC refuses");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
}

#[tokio::test]
async fn a_builtin_registered_while_running_is_served_on_every_binding_until_removed() {
    let s = serve(|public, grpc| bare(public, memory()).grpc_url(grpc)).await;
    let http = reqwest::Client::new();
    gone_on_every_binding(&http, &s.base, &s.grpc, "late").await;

    let mut entry = AgentEntry::builtin("late", "echo");
    entry.name = Some("Late echo".into());
    s.hub.register(entry).await.expect("register");
    let c = card(&http, &s.base, "late").await;
    assert_eq!(c.status, 200, "{}", c.text);
    assert_eq!(c.json["name"], "Late echo");
    let urls: Vec<&str> = c.json["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter_map(|i| i["url"].as_str())
        .collect();
    let agent = format!("{}/api/v1/agents/late", s.base);
    assert!(urls.contains(&format!("{agent}/a2a").as_str()), "{urls:?}");
    assert!(urls.contains(&format!("{agent}/rest").as_str()), "{urls:?}");
    assert!(urls.contains(&s.grpc.as_str()) || urls.iter().any(|u| u.ends_with(&s.grpc)));
    answers_on_every_binding(&http, &s.base, &s.grpc, "late").await;

    let gone = s.hub.remove("late").await.expect("remove");
    assert_eq!(gone.id, "late");
    gone_on_every_binding(&http, &s.base, &s.grpc, "late").await;
    assert!(s.hub.entry("late").is_none());
}

#[tokio::test]
async fn a_disabled_agent_is_not_served_until_enabled_again() {
    let s = serve(|public, grpc| bare(public, memory()).grpc_url(grpc)).await;
    let http = reqwest::Client::new();
    let entry = s
        .hub
        .register(AgentEntry::builtin("toggle", "echo"))
        .await
        .expect("register");
    answers_on_every_binding(&http, &s.base, &s.grpc, "toggle").await;

    let mut off = entry.clone();
    off.enabled = false;
    s.hub.update(off).await.expect("disable");
    gone_on_every_binding(&http, &s.base, &s.grpc, "toggle").await;
    // Kept, though not served.
    assert_eq!(s.hub.entry("toggle").map(|e| e.enabled), Some(false));

    s.hub.update(entry).await.expect("enable");
    answers_on_every_binding(&http, &s.base, &s.grpc, "toggle").await;
}

#[tokio::test]
async fn refused_registrations_name_the_reason_and_change_nothing() {
    let hub = bare("http://test.local".into(), memory())
        .entry(AgentEntry::builtin("echo", "echo"))
        .build()
        .await;
    let before = hub.entries();

    let e = hub
        .register(AgentEntry::builtin("echo", "writer"))
        .await
        .expect_err("the id is taken");
    assert!(
        matches!(e, RegistryError::Exists(ref id) if id == "echo"),
        "{e}"
    );
    let e = hub
        .register(AgentEntry::builtin("ghost", "no-such-executor"))
        .await
        .expect_err("no such builtin");
    assert!(
        matches!(e, RegistryError::UnknownBuiltin(ref name, _) if name == "no-such-executor"),
        "{e}"
    );
    for id in ["Bad Id", "", "../up", "-dash"] {
        let e = hub
            .register(AgentEntry::builtin(id, "echo"))
            .await
            .expect_err("a bad id");
        assert!(
            matches!(e, RegistryError::Invalid(ref why) if why.field == "id"),
            "{id:?}: {e}"
        );
    }
    let e = hub
        .update(AgentEntry::builtin("ghost", "echo"))
        .await
        .expect_err("nothing to update");
    assert!(matches!(e, RegistryError::NotFound(_)), "{e}");
    let e = hub.remove("ghost").await.expect_err("nothing to remove");
    assert!(matches!(e, RegistryError::NotFound(_)), "{e}");
    assert_eq!(hub.entries(), before);
}

// ---- persistence --------------------------------------------------------------------

fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn TaskStore> {
    Arc::new(SqliteStore::open_path(dir.path().join("hub.db")).expect("sqlite"))
}

fn ids(hub: &Hub) -> Vec<String> {
    hub.entries().into_iter().map(|e| e.id).collect()
}

async fn card_status(hub: &Hub, id: &str) -> u16 {
    live::oneshot(
        &hub.router(),
        "GET",
        &format!("/api/v1/agents/{id}/.well-known/agent-card.json"),
        &[],
        None,
    )
    .await
    .status
    .as_u16()
}

#[tokio::test]
async fn api_registrations_outlive_a_restart_on_sqlite_and_removals_stay_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = |store| {
        bare("http://test.local".into(), store)
            .entry(AgentEntry::builtin("echo", "echo"))
            .build()
    };
    let hub = start(sqlite(&dir)).await;
    let mut kept = AgentEntry::builtin("kept", "writer");
    kept.tags = vec!["reports".into()];
    kept.public = false;
    kept.owner = Some("key:owner".into());
    hub.register(kept.clone()).await.expect("kept");
    hub.register(AgentEntry::builtin("dropped", "echo"))
        .await
        .expect("dropped");
    hub.remove("dropped").await.expect("remove");
    hub.register(AgentEntry::builtin("renamed", "echo"))
        .await
        .expect("renamed");
    let mut renamed = AgentEntry::builtin("renamed", "echo");
    renamed.name = Some("A new name".into());
    hub.update(renamed.clone()).await.expect("update");
    drop(hub);

    let hub = start(sqlite(&dir)).await;
    assert_eq!(ids(&hub), ["echo", "kept", "renamed"]);
    assert_eq!(hub.entry("kept"), Some(kept));
    assert_eq!(hub.entry("renamed"), Some(renamed));
    assert_eq!(card_status(&hub, "kept").await, 200);
    assert_eq!(card_status(&hub, "dropped").await, 404);
    let card = hub.agent("renamed").expect("served").handler.card().clone();
    assert_eq!(card.name, "A new name");
    assert!(hub.grpc_router().resolve("dropped", "tenant").is_err());
}

#[tokio::test]
async fn config_entries_are_reread_at_each_start_and_an_api_change_of_one_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let with_description = |id: &str, d: &str| {
        let mut e = AgentEntry::builtin(id, "echo");
        e.description = Some(d.into());
        e
    };
    let hub = bare("http://test.local".into(), sqlite(&dir))
        .entry(with_description("echo", "first config"))
        .entry(with_description("plain", "first config"))
        .entry(with_description("stays", "first config"))
        .build()
        .await;
    let mut changed = with_description("echo", "changed by an admin");
    changed.tags = vec!["changed".into()];
    hub.update(changed.clone()).await.expect("update echo");
    let mut off = with_description("plain", "first config");
    off.enabled = false;
    hub.update(off.clone()).await.expect("disable plain");
    drop(hub);

    // The config changed meanwhile: each entry says something else, and
    // there is a new one.
    let hub = bare("http://test.local".into(), sqlite(&dir))
        .entry(with_description("echo", "second config"))
        .entry(with_description("plain", "second config"))
        .entry(with_description("stays", "second config"))
        .entry(with_description("fresh", "second config"))
        .build()
        .await;
    assert_eq!(ids(&hub), ["echo", "fresh", "plain", "stays"]);
    // Changed through the API: the change wins over the config.
    assert_eq!(hub.entry("echo"), Some(changed));
    let card = hub.agent("echo").expect("served").handler.card().clone();
    assert_eq!(card.description, "changed by an admin");
    assert_eq!(hub.entry("plain"), Some(off));
    assert_eq!(card_status(&hub, "plain").await, 404);
    assert!(
        hub.grpc_router().resolve("plain", "tenant").is_err(),
        "a disabled agent is served over gRPC after a restart"
    );
    // Untouched by the API: the config as it is now.
    for id in ["stays", "fresh"] {
        assert_eq!(
            hub.entry(id).and_then(|e| e.description).as_deref(),
            Some("second config"),
            "{id}"
        );
        assert_eq!(card_status(&hub, id).await, 200, "{id}");
    }
}

// ---- under load -----------------------------------------------------------------------

/// One SendStreamingMessage to `writer-stream`, read to its end: the
/// chunks' texts and the last state. Adds a permit to `opened` at its
/// first event.
async fn stream_once(
    http: reqwest::Client,
    base: String,
    opened: Arc<tokio::sync::Semaphore>,
    finished: Arc<AtomicUsize>,
) -> (Vec<String>, String) {
    let resp = http
        .post(format!("{base}/api/v1/agents/writer-stream/a2a"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user_message("go")}}),
        )
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let (mut chunks, mut last, mut first) = (Vec::new(), String::new(), true);
    while let Some(bytes) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&bytes.expect("stream bytes")));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let v: Value = serde_json::from_str(data.trim()).expect("JSON event");
            let r = &v["result"];
            assert!(r.is_object(), "an error event: {v}");
            if first {
                opened.add_permits(1);
                first = false;
            }
            if let Some(parts) = r["artifactUpdate"]["artifact"]["parts"].as_array() {
                chunks.extend(
                    parts
                        .iter()
                        .filter_map(|p| p["text"].as_str().map(str::to_owned)),
                );
            }
            if let Some(s) = r["statusUpdate"]["status"]["state"].as_str() {
                s.clone_into(&mut last);
            }
        }
    }
    finished.fetch_add(1, Ordering::SeqCst);
    (chunks, last)
}

/// 100 registrations and 100 removals of `tmp-0` … `tmp-7` through the
/// admin API, about four of them served at any time.
async fn churn(http: reqwest::Client, base: String) {
    let admin = format!("{base}/api/v1/admin/agents");
    let remove = |i: usize| {
        let http = http.clone();
        let url = format!("{admin}/tmp-{}", i % 8);
        async move {
            let a = call(http.delete(url).header("authorization", bearer(TOKEN))).await;
            assert_eq!(a.status, 204, "remove: {}", a.text);
        }
    };
    for i in 0..100 {
        let a = call(
            http.post(&admin)
                .header("authorization", bearer(TOKEN))
                .json(
                    &json!({"id": format!("tmp-{}", i % 8), "kind": "builtin", "builtin": "echo"}),
                ),
        )
        .await;
        assert_eq!(a.status, 201, "register: {}", a.text);
        if i >= 4 {
            remove(i - 4).await;
        }
    }
    for i in 96..100 {
        remove(i).await;
    }
}

/// What the poller saw.
#[derive(Debug, Default)]
struct Seen {
    missing: usize,
    cards: usize,
    tasks: usize,
}

/// Calls `tmp-*` until `stop`: every answer is a "no agent" 404 or a whole
/// success, never anything else.
async fn poll(http: reqwest::Client, base: String, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut k = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let id = format!("tmp-{}", k % 8);
        k += 1;
        let c = card(&http, &base, &id).await;
        if is_no_agent(&c, &id) {
            seen.missing += 1;
        } else {
            whole_card(&c, &base, &id);
            seen.cards += 1;
        }
        let text = format!("poll {k}");
        let sent = jsonrpc(
            &http,
            &base,
            &id,
            "SendMessage",
            json!({"message": user_message(&text)}),
        )
        .await;
        if is_no_agent(&sent, &id) {
            seen.missing += 1;
        } else {
            assert_eq!(sent.status, 200, "{id}: {}", sent.text);
            assert_eq!(
                sent_state(&sent),
                "TASK_STATE_COMPLETED",
                "{id}: {}",
                sent.text
            );
            assert_eq!(
                sent.json["result"]["task"]["artifacts"][0]["parts"][0]["text"], text,
                "{id}: {}",
                sent.text
            );
            seen.tasks += 1;
        }
    }
    seen
}

/// A card served whole: the echo's, with the hub's interfaces for `id`.
fn whole_card(c: &Answer, base: &str, id: &str) {
    assert_eq!(c.status, 200, "{id}: {} {}", c.status, c.text);
    assert_eq!(c.json["name"], "Echo", "{id}: {}", c.text);
    let urls: Vec<&str> = c.json["supportedInterfaces"]
        .as_array()
        .unwrap_or_else(|| panic!("{id}: no interfaces: {}", c.text))
        .iter()
        .filter_map(|i| i["url"].as_str())
        .collect();
    for path in ["a2a", "rest"] {
        let url = format!("{base}/api/v1/agents/{id}/{path}");
        assert!(urls.contains(&url.as_str()), "{id}: {url} not in {urls:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_churn_cuts_no_stream_and_shows_no_half_registered_agent() {
    const STREAMS: usize = 64;
    let started = Instant::now();
    let s = serve(|public, grpc| {
        with_demo_agents_using(
            Hub::builder(public, memory())
                .grpc_url(grpc)
                .admin(AdminAccess::default().token(TOKEN)),
            WriterStream {
                pause: Duration::from_millis(1500),
                ..Default::default()
            },
        )
    })
    .await;
    let http = reqwest::Client::new();
    let opened = Arc::new(tokio::sync::Semaphore::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let streams: Vec<_> = (0..STREAMS)
        .map(|_| {
            tokio::spawn(stream_once(
                http.clone(),
                s.base.clone(),
                opened.clone(),
                finished.clone(),
            ))
        })
        .collect();
    let all_open = tokio::time::timeout(live::STEP, opened.acquire_many(STREAMS as u32))
        .await
        .expect("every stream opens in time")
        .expect("permits");
    all_open.forget();

    let stop = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(poll(http.clone(), s.base.clone(), stop.clone()));
    tokio::time::timeout(Duration::from_secs(15), churn(http.clone(), s.base.clone()))
        .await
        .expect("the churn ends in time");
    let ended_during_churn = finished.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let seen = tokio::time::timeout(live::STEP, poller)
        .await
        .expect("the poller ends")
        .expect("the poller saw only whole answers");
    assert_eq!(
        ended_during_churn, 0,
        "streams ended before the churn did: it did not run under load"
    );
    // The poller saw both states, so it raced the churn.
    assert!(
        seen.missing > 0 && seen.cards > 0 && seen.tasks > 0,
        "{seen:?}"
    );

    let joined: Vec<String> = WRITER_STREAM_CHUNKS
        .iter()
        .map(|c| (*c).to_owned())
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        let (chunks, last) = tokio::time::timeout(live::STEP, stream)
            .await
            .unwrap_or_else(|_| panic!("stream {i} hangs"))
            .expect("stream task");
        assert_eq!(last, "TASK_STATE_COMPLETED", "stream {i}");
        assert_eq!(chunks, joined, "stream {i}");
    }
    assert!(
        s.hub.entries().iter().all(|e| !e.id.starts_with("tmp-")),
        "{:?}",
        ids(&s.hub)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
