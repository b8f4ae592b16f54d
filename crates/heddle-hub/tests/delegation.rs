//! Multi-hop delegation through the hub, on real listeners: agents that hand
//! their task on with [`A2aClient::delegate`], over mixed bindings and
//! versions (the root over JSON-RPC v0.3, the second hop over gRPC v1.0,
//! the third over REST v1.0). The chain reaches the last agent; a cancel at
//! the root, the hop limit and the root's deadline reach every hop. The
//! chain is one trace, push deliveries included (the spans are exported in
//! process: this file's tests share one global subscriber).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use heddle_client::{A2aClient, Binding, ClientError, ClientOptions, Delegation, SendReply};
use heddle_core::{ProtocolVersion, v1, wkt::Timestamp};
use heddle_hub::AgentProfile;
use heddle_server::{AgentError, AgentExecutor, DELEGATION_EXT, RequestContext, TaskEvents};
use heddle_store::MemoryStore;
use serde_json::json;

/// No step of a test may take longer.
const STEP: Duration = Duration::from_secs(20);

/// What the agents saw: each task they ran, with the chain it arrived with.
#[derive(Default)]
struct Seen {
    tasks: Mutex<Vec<Ran>>,
}

#[derive(Clone, Debug)]
struct Ran {
    agent: &'static str,
    task_id: String,
    /// The agents of the chain the request arrived with, root first.
    chain: Vec<String>,
    max_hops: u32,
    /// This agent, as the next hop names it.
    me: String,
}

impl Seen {
    fn record(&self, agent: &'static str, ctx: &RequestContext) {
        let d = ctx.delegation.as_deref().cloned().unwrap_or_default();
        lock(&self.tasks).push(Ran {
            agent,
            task_id: ctx.task_id.clone(),
            chain: d.chain.iter().map(|h| h.agent.clone()).collect(),
            max_hops: d.max_hops,
            me: ctx.agent.to_string(),
        });
    }

    fn of(&self, agent: &str) -> Option<Ran> {
        lock(&self.tasks).iter().find(|r| r.agent == agent).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands its message on to the agent at `next`, over `binding` in
/// `version`, and completes with what that agent answered.
struct Relay {
    name: &'static str,
    next: Arc<Mutex<String>>,
    binding: Binding,
    version: ProtocolVersion,
    seen: Arc<Seen>,
}

#[async_trait::async_trait]
impl AgentExecutor for Relay {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        self.seen.record(self.name, &ctx);
        events.working(Some("handing the work on")).await?;
        let next = lock(&self.next).clone();
        let client = A2aClient::discover(&next, options(self.binding, self.version))
            .await
            .map_err(|e| AgentError::new(format!("discovering the next agent: {e}")))?;
        let next = client
            .delegate(&ctx, &events)
            .map_err(|e| AgentError::new(format!("the next hop is refused: {e}")))?;
        match next.send_text(&ctx.text()).await {
            Ok(SendReply::Task(t)) if state(&t) == v1::TaskState::Completed => {
                events.artifact_text("relayed", text_of(&t)).await?;
                events.complete(None).await?;
                Ok(())
            }
            Ok(SendReply::Task(t)) => Err(AgentError::new(format!(
                "the next agent's task ended {:?}: {}",
                state(&t),
                reason(&t)
            ))),
            Ok(SendReply::Message(m)) => {
                events.artifact_text("relayed", m.text()).await?;
                events.complete(None).await?;
                Ok(())
            }
            // Our own task is being canceled; the server ends it.
            Err(ClientError::Canceled) => Ok(()),
            Err(e) => Err(AgentError::new(format!("the next agent failed: {e}"))),
        }
    }
}

/// The last hop: holds its task until canceled (or for a long time).
struct Hold {
    seen: Arc<Seen>,
}

#[async_trait::async_trait]
impl AgentExecutor for Hold {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        self.seen.record("hop3", &ctx);
        events.working(Some("holding")).await?;
        if ctx.text() == "quick" {
            events
                .artifact_text("answer", "done at the third hop")
                .await?;
            events.complete(None).await?;
            return Ok(());
        }
        tokio::select! {
            () = ctx.cancel.cancelled() => {}
            () = tokio::time::sleep(Duration::from_secs(60)) => events.complete(None).await?,
        }
        Ok(())
    }
}

fn options(binding: Binding, version: ProtocolVersion) -> ClientOptions {
    ClientOptions {
        bindings: vec![binding],
        version: Some(version),
        retries: 0,
        ..ClientOptions::default()
    }
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
}

fn reason(t: &v1::Task) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .unwrap_or_default()
}

fn text_of(t: &v1::Task) -> String {
    t.artifacts
        .iter()
        .flat_map(|a| a.parts.iter())
        .filter_map(v1::Part::as_text)
        .collect()
}

/// A hub serving hop1 → hop2 (gRPC v1.0) → hop3 (REST v1.0); returns its
/// HTTP base.
async fn hub(seen: &Arc<Seen>) -> String {
    serve_hub(|base, grpc| {
        let relay = |name, next: &str, binding, version| Relay {
            name,
            next: Arc::new(Mutex::new(format!("{base}/api/v1/agents/{next}"))),
            binding,
            version,
            seen: seen.clone(),
        };
        heddle_hub::Hub::builder(base, Arc::new(MemoryStore::default()))
            .grpc_url(grpc)
            .agent(
                "hop1",
                profile("hop1"),
                Arc::new(relay("hop1", "hop2", Binding::Grpc, ProtocolVersion::V1_0)),
            )
            .agent(
                "hop2",
                profile("hop2"),
                Arc::new(relay("hop2", "hop3", Binding::Rest, ProtocolVersion::V1_0)),
            )
            .agent(
                "hop3",
                profile("hop3"),
                Arc::new(Hold { seen: seen.clone() }),
            )
    })
    .await
}

/// A test agent's profile.
fn profile(id: &str) -> AgentProfile {
    AgentProfile::new(id, id, "a hop of a chain", &["test"])
}

/// Serves the hub `build` makes for its HTTP base and gRPC address, on
/// fresh listeners; returns the HTTP base.
async fn serve_hub(build: impl FnOnce(&str, &str) -> heddle_hub::HubBuilder) -> String {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", http.local_addr().expect("addr"));
    let grpc_addr = grpc.local_addr().expect("addr").to_string();
    let hub = build(&base, &grpc_addr).build().await;
    let grpc_app = hub.grpc_app().expect("gRPC");
    let router = hub.router();
    tokio::spawn(async move { axum::serve(http, router).await });
    tokio::spawn(async move { axum::serve(grpc, grpc_app).await });
    base
}

async fn client(base: &str, id: &str, binding: Binding, version: ProtocolVersion) -> A2aClient {
    A2aClient::discover(
        &format!("{base}/api/v1/agents/{id}"),
        options(binding, version),
    )
    .await
    .expect("discover")
}

/// A request for `text`, carrying `delegation` when given, returning at once.
fn request(
    text: &str,
    delegation: Option<serde_json::Value>,
    wait: bool,
) -> v1::SendMessageRequest {
    let mut message = A2aClient::user_message(vec![v1::Part::text(text)]);
    if let Some(d) = delegation {
        let mut m = serde_json::Map::new();
        m.insert(DELEGATION_EXT.to_owned(), d);
        message.metadata = Some(heddle_core::wkt::Struct(m));
    }
    v1::SendMessageRequest {
        message: Some(message),
        configuration: Some(v1::SendMessageConfiguration {
            return_immediately: !wait,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(reply: SendReply) -> v1::Task {
    match reply {
        SendReply::Task(t) => t,
        SendReply::Message(m) => panic!("expected a task, got a message: {}", m.text()),
    }
}

/// Waits until `agent` has run a task.
async fn ran(seen: &Seen, agent: &str) -> Ran {
    let start = Instant::now();
    loop {
        if let Some(r) = seen.of(agent) {
            return r;
        }
        assert!(start.elapsed() < STEP, "{agent} never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until task `id` of `c`'s agent is in `want`; returns when.
async fn until_state(c: &A2aClient, id: &str, want: v1::TaskState) -> Instant {
    let start = Instant::now();
    loop {
        let t = c.get_task(id, None).await.expect("get task");
        if state(&t) == want {
            return Instant::now();
        }
        assert!(
            start.elapsed() < STEP,
            "task {id} stayed {:?}, not {want:?}: {}",
            state(&t),
            reason(&t)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_chain_over_three_bindings_carries_its_context_and_completes() {
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;
    let t = task_of(
        tokio::time::timeout(STEP, root.send(request("quick", None, true)))
            .await
            .expect("in time")
            .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));
    assert_eq!(text_of(&t), "done at the third hop");

    let (hop1, hop2, hop3) = (
        ran(&seen, "hop1").await,
        ran(&seen, "hop2").await,
        ran(&seen, "hop3").await,
    );
    assert!(hop1.chain.is_empty(), "the root's request has no chain");
    assert_eq!(hop2.chain, vec![hop1.me.clone()]);
    assert_eq!(hop3.chain, vec![hop1.me.clone(), hop2.me.clone()]);
    assert!(hop3.me.contains("/api/v1/agents/hop3"), "{}", hop3.me);
    assert_eq!(hop3.max_hops, heddle_api_default_hops());

    // The chain names each parent's task: the third hop's request says
    // which task of the second it works for.
    let rest3 = client(&base, "hop3", Binding::Rest, ProtocolVersion::V1_0).await;
    let t3 = rest3
        .get_task(&hop3.task_id, None)
        .await
        .expect("hop3 task");
    let first = t3.history.first().expect("history");
    let carried = Delegation::from_metadata(first.metadata.as_ref())
        .expect("well formed")
        .expect("carried");
    let parents: Vec<&str> = carried.chain.iter().map(|h| h.task_id.as_str()).collect();
    assert_eq!(parents, vec![hop1.task_id.as_str(), hop2.task_id.as_str()]);

    // And each parent's task names the task its call made: the tree, root down.
    let children = |t: &v1::Task| -> Vec<String> {
        heddle_client::delegation::children_of(t.metadata.as_ref())
            .into_iter()
            .map(|h| h.task_id)
            .collect()
    };
    assert_eq!(children(&t), vec![hop2.task_id.clone()]);
    let grpc2 = client(&base, "hop2", Binding::Grpc, ProtocolVersion::V1_0).await;
    let t2 = grpc2
        .get_task(&hop2.task_id, None)
        .await
        .expect("hop2 task");
    assert_eq!(children(&t2), vec![hop3.task_id.clone()]);
    assert!(children(&t3).is_empty());
}

fn heddle_api_default_hops() -> u32 {
    heddle_client::delegation::DEFAULT_MAX_HOPS
}

#[tokio::test]
async fn a_cancel_at_the_root_ends_all_three_tasks_within_a_second() {
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;
    let t = task_of(root.send(request("hold", None, false)).await.expect("send"));
    let hop3 = ran(&seen, "hop3").await;
    let hop2 = ran(&seen, "hop2").await;

    let c2 = client(&base, "hop2", Binding::Grpc, ProtocolVersion::V1_0).await;
    let c3 = client(&base, "hop3", Binding::Rest, ProtocolVersion::V1_0).await;
    let asked = Instant::now();
    root.cancel_task(&t.id).await.expect("cancel the root");
    let ends = [
        until_state(&root, &t.id, v1::TaskState::Canceled).await,
        until_state(&c2, &hop2.task_id, v1::TaskState::Canceled).await,
        until_state(&c3, &hop3.task_id, v1::TaskState::Canceled).await,
    ];
    let slowest = ends
        .iter()
        .map(|e| e.duration_since(asked))
        .max()
        .unwrap_or_default();
    assert!(
        slowest < Duration::from_secs(1),
        "the chain took {slowest:?} to end"
    );
}

#[tokio::test]
async fn a_hop_limit_of_two_refuses_the_third_hop() {
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;
    let t = task_of(
        tokio::time::timeout(
            STEP,
            root.send(request("quick", Some(json!({ "maxHops": 2 })), true)),
        )
        .await
        .expect("in time")
        .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Failed);
    assert!(
        reason(&t).contains("the hop limit of 2 is reached"),
        "{}",
        reason(&t)
    );
    assert_eq!(ran(&seen, "hop2").await.max_hops, 2);
    assert!(seen.of("hop3").is_none(), "the third hop must not run");
}

#[tokio::test]
async fn an_agent_refuses_a_chain_past_its_limit_or_through_itself() {
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let c3 = client(&base, "hop3", Binding::Rest, ProtocolVersion::V1_0).await;
    let me = c3.interface().url.clone();
    let hop = |agent: &str| json!({ "agent": agent, "taskId": "t-1" });
    let cases = [
        (
            json!({ "maxHops": 2, "chain": [hop("https://a.example/"), hop("https://b.example/")] }),
            "hop limit of 2",
        ),
        (json!({ "chain": [hop(&me)] }), "already in the chain"),
        (json!({ "deadline": "2001-01-01T00:00:00Z" }), "deadline"),
        (json!({ "maxHops": "many" }), "malformed"),
    ];
    for (delegation, why) in cases {
        let err = c3
            .send(request("quick", Some(delegation.clone()), true))
            .await
            .expect_err("refused");
        let ClientError::A2a(e) = &err else {
            panic!("{delegation}: not an A2A error: {err}");
        };
        let want = if why == "malformed" {
            heddle_core::ErrorCode::InvalidParams
        } else {
            heddle_core::ErrorCode::DelegationRefused
        };
        assert_eq!(e.code, want, "{delegation}: {e}");
        assert!(e.message.contains(why), "{delegation}: {e}");
    }
    assert!(seen.of("hop3").is_none(), "a refused request runs nothing");
}

#[tokio::test]
async fn the_roots_deadline_stops_every_hop() {
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;
    let deadline = Timestamp::from_millis(Timestamp::now().as_millis() + 1_500);
    let t = task_of(
        root.send(request(
            "hold",
            Some(json!({ "deadline": deadline.to_string() })),
            false,
        ))
        .await
        .expect("send"),
    );
    let hop3 = ran(&seen, "hop3").await;
    let hop2 = ran(&seen, "hop2").await;
    let c2 = client(&base, "hop2", Binding::Grpc, ProtocolVersion::V1_0).await;
    let c3 = client(&base, "hop3", Binding::Rest, ProtocolVersion::V1_0).await;
    until_state(&root, &t.id, v1::TaskState::Failed).await;
    let failed = root.get_task(&t.id, None).await.expect("get");
    assert!(reason(&failed).contains("deadline"), "{}", reason(&failed));
    // Each hop's server holds its task to the same deadline; a hop whose
    // caller stopped first is canceled by it instead.
    for (c, id) in [(&c2, &hop2.task_id), (&c3, &hop3.task_id)] {
        let start = Instant::now();
        loop {
            let s = state(&c.get_task(id, None).await.expect("get"));
            if matches!(s, v1::TaskState::Failed | v1::TaskState::Canceled) {
                break;
            }
            assert!(start.elapsed() < STEP, "task {id} is still {s:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let over = Timestamp::now().as_millis() - deadline.as_millis();
    assert!(over < 1_000, "the chain ended {over} ms after its deadline");
}

#[path = "support/python_sdk.rs"]
mod python_sdk;

/// Heddle → the official Python SDK → Heddle: the Python agent knows
/// nothing of delegation, but relays the message's metadata, so the third
/// agent still sees the chain (without the Python hop, which did not add
/// itself).
#[tokio::test]
async fn a_python_sdk_agent_in_the_middle_passes_the_chain_on() {
    let Some(python) = python_sdk::start().await else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    // hop1 hands on to the Python agent instead of hop2.
    let hop1_next = {
        let relay = Relay {
            name: "hop1",
            next: Arc::new(Mutex::new(python.url.clone())),
            binding: Binding::JsonRpc,
            version: ProtocolVersion::V1_0,
            seen: seen.clone(),
        };
        serve_one("via-python", relay).await
    };
    let root = client(
        &hop1_next,
        "via-python",
        Binding::Rest,
        ProtocolVersion::V1_0,
    )
    .await;
    let ask = format!("relay {base}/api/v1/agents/hop3 quick");
    let t = task_of(
        tokio::time::timeout(STEP, root.send(request(&ask, None, true)))
            .await
            .expect("in time")
            .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));
    assert_eq!(text_of(&t), "done at the third hop");
    let (hop1, hop3) = (ran(&seen, "hop1").await, ran(&seen, "hop3").await);
    assert_eq!(hop3.chain, vec![hop1.me]);
}

/// A hub serving only `agent` as `id`; returns its HTTP base.
async fn serve_one(id: &str, agent: impl AgentExecutor) -> String {
    serve_hub(|base, _| {
        heddle_hub::Hub::builder(base, Arc::new(MemoryStore::default())).agent(
            id,
            profile(id),
            Arc::new(agent),
        )
    })
    .await
}

/// A hub of the demo agents, and research's task on "tides" as the first
/// turn left it: the hub's base URL, a client of research, the task.
async fn research_asked() -> (String, A2aClient, v1::Task) {
    let base = serve_hub(|base, _| {
        heddle_hub::agents::with_demo_agents(heddle_hub::Hub::builder(
            base,
            Arc::new(MemoryStore::default()),
        ))
    })
    .await;
    let research = client(&base, "research", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let asked = task_of(
        tokio::time::timeout(STEP, research.send(request("tides", None, true)))
            .await
            .expect("in time")
            .expect("send"),
    );
    (base, research, asked)
}

/// The demo chain: research asks the writer for a report (the writer's
/// question comes back as research's own), then the summarizer; research's
/// task names both tasks it made.
#[tokio::test]
async fn the_research_demo_delegates_to_the_writer_and_the_summarizer() {
    let (base, research, asked) = research_asked().await;
    assert_eq!(
        state(&asked),
        v1::TaskState::InputRequired,
        "{}",
        reason(&asked)
    );
    assert!(
        reason(&asked).contains("Who is the report for"),
        "{}",
        reason(&asked)
    );

    let mut answer = A2aClient::user_message(vec![v1::Part::text("the harbour board")]);
    answer.task_id.clone_from(&asked.id);
    let done = task_of(
        tokio::time::timeout(
            STEP,
            research.send(v1::SendMessageRequest {
                message: Some(answer),
                ..Default::default()
            }),
        )
        .await
        .expect("in time")
        .expect("answer"),
    );
    assert_eq!(state(&done), v1::TaskState::Completed, "{}", reason(&done));
    let names: Vec<&str> = done.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["report", "summary"]);
    assert!(text_of(&done).contains("Report for the harbour board"));

    let children = heddle_client::delegation::children_of(done.metadata.as_ref());
    let agents: Vec<&str> = children
        .iter()
        .map(|h| h.agent.rsplit("/agents/").next().unwrap_or_default())
        .collect();
    assert_eq!(children.len(), 2, "{children:?}");
    assert!(agents[0].starts_with("writer"), "{agents:?}");
    assert!(agents[1].starts_with("summarizer"), "{agents:?}");
    let writer = client(&base, "writer", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let report = writer
        .get_task(&children[0].task_id, None)
        .await
        .expect("the writer's task");
    assert_eq!(state(&report), v1::TaskState::Completed);
}

/// The spans every test of this file makes, exported in process; the
/// W3C propagator installed, as `heddle serve --otlp-endpoint` does.
fn exported_spans() -> &'static opentelemetry_sdk::trace::InMemorySpanExporter {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::{Layer as _, layer::SubscriberExt as _};
    static EXPORTER: std::sync::OnceLock<opentelemetry_sdk::trace::InMemorySpanExporter> =
        std::sync::OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let only_a2a = tracing_subscriber::filter::Targets::new()
            .with_target(heddle_server::trace::TARGET, tracing::Level::INFO);
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("delegation-test"))
            .with_filter(only_a2a);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only subscriber");
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        exporter
    })
}

/// One trace from the root's caller down the three hops, over JSON-RPC
/// v0.3, gRPC v1.0 and REST v1.0: every request and run of the chain has
/// the caller's trace id, with the A2A attributes on each request.
#[tokio::test]
async fn the_chain_is_one_trace_across_bindings() {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let exporter = exported_spans();
    let seen = Arc::new(Seen::default());
    let base = hub(&seen).await;
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;
    let span = tracing::info_span!(target: "a2a", "test.root");
    let trace_id = span.context().span().span_context().trace_id();
    let t = task_of(
        tokio::time::timeout(STEP, root.send(request("quick", None, true)))
            .instrument(span.clone())
            .await
            .expect("in time")
            .expect("send"),
    );
    drop(span);
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));
    let ids = [
        ran(&seen, "hop1").await.task_id,
        ran(&seen, "hop2").await.task_id,
        ran(&seen, "hop3").await.task_id,
    ];
    let attr = |s: &opentelemetry_sdk::trace::SpanData, key: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    // Each run's span ends as its task does; wait for the third.
    let start = Instant::now();
    let spans = loop {
        let spans = exporter.get_finished_spans().expect("spans");
        let runs = spans
            .iter()
            .filter(|s| s.name == "a2a.execute")
            .filter(|s| attr(s, "a2a.task_id").is_some_and(|id| ids.contains(&id)))
            .count();
        if runs == 3 {
            break spans;
        }
        assert!(start.elapsed() < STEP, "{runs} of 3 runs exported");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ours: Vec<_> = spans
        .iter()
        .filter(|s| attr(s, "a2a.task_id").is_some_and(|id| ids.contains(&id)))
        .collect();
    assert!(
        ours.iter().all(|s| s.span_context.trace_id() == trace_id),
        "a span left the trace: {:?}",
        ours.iter()
            .map(|s| (s.name.to_string(), s.span_context.trace_id()))
            .collect::<Vec<_>>()
    );
    // Each run says the state it left its task in.
    let states: Vec<Option<String>> = ours
        .iter()
        .filter(|s| s.name == "a2a.execute")
        .map(|s| attr(s, "a2a.state"))
        .collect();
    assert_eq!(states, vec![Some("TASK_STATE_COMPLETED".to_owned()); 3]);
    // The requests that made the three tasks, one per binding and version.
    let mut sends: Vec<(String, String, String)> = ours
        .iter()
        .filter(|s| s.name == "a2a.request")
        .filter_map(|s| {
            Some((
                attr(s, "a2a.method")?,
                attr(s, "a2a.binding")?,
                attr(s, "a2a.version")?,
            ))
        })
        .filter(|(m, _, _)| m == "SendMessage")
        .collect();
    sends.sort();
    assert_eq!(
        sends,
        vec![
            ("SendMessage".into(), "grpc".into(), "1.0".into()),
            ("SendMessage".into(), "jsonrpc".into(), "0.3".into()),
            ("SendMessage".into(), "rest".into(), "1.0".into()),
        ]
    );
}

/// Asks a question; the answer is worked on for a while before the task
/// completes (as a remote or model agent does).
struct SlowAsker;

#[async_trait::async_trait]
impl AgentExecutor for SlowAsker {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if ctx.task.is_none() {
            events.input_required("who is it for?").await?;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        events
            .artifact_text("answer", format!("written for {}", ctx.text()))
            .await?;
        events.complete(None).await?;
        Ok(())
    }
}

/// Asks its child's question back, then hands the answer to the child's
/// waiting task (the policy "the parent asks").
struct AsksBack {
    next: Arc<Mutex<String>>,
}

#[async_trait::async_trait]
impl AgentExecutor for AsksBack {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let next = lock(&self.next).clone();
        let client = A2aClient::discover(&next, options(Binding::Rest, ProtocolVersion::V1_0))
            .await
            .map_err(|e| AgentError::new(e.to_string()))?;
        let child = client
            .delegate(&ctx, &events)
            .map_err(|e| AgentError::new(e.to_string()))?;
        let mut message = A2aClient::user_message(vec![v1::Part::text(ctx.text())]);
        if let Some(prior) = ctx.task.as_deref() {
            let waiting = heddle_client::delegation::children_of(prior.metadata.as_ref());
            message.task_id = waiting
                .last()
                .map(|h| h.task_id.clone())
                .unwrap_or_default();
        }
        let reply = child
            .send(v1::SendMessageRequest {
                message: Some(message),
                ..Default::default()
            })
            .await
            .map_err(|e| AgentError::new(e.to_string()))?;
        let t = task_of(reply);
        match state(&t) {
            v1::TaskState::InputRequired => events.input_required(&reason(&t)).await?,
            v1::TaskState::Completed => {
                events.artifact_text("answer", text_of(&t)).await?;
                events.complete(None).await?;
            }
            s => return Err(AgentError::new(format!("the child ended {s:?}"))),
        }
        Ok(())
    }
}

/// A reply handed to a child's waiting task is answered with the task after
/// the child's turn, even when the child works a while before its first
/// event; and the parent's task names the child once, across both turns.
#[tokio::test]
async fn a_reply_to_a_waiting_child_waits_for_its_turn() {
    let base = serve_hub(|base, _| {
        heddle_hub::Hub::builder(base, Arc::new(MemoryStore::default()))
            .agent(
                "parent",
                profile("parent"),
                Arc::new(AsksBack {
                    next: Arc::new(Mutex::new(format!("{base}/api/v1/agents/child"))),
                }),
            )
            .agent("child", profile("child"), Arc::new(SlowAsker))
    })
    .await;
    let parent = client(&base, "parent", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let asked = task_of(
        tokio::time::timeout(STEP, parent.send(request("a report", None, true)))
            .await
            .expect("in time")
            .expect("send"),
    );
    assert_eq!(
        state(&asked),
        v1::TaskState::InputRequired,
        "{}",
        reason(&asked)
    );
    assert_eq!(reason(&asked), "who is it for?");
    let mut answer = A2aClient::user_message(vec![v1::Part::text("the board")]);
    answer.task_id.clone_from(&asked.id);
    let done = task_of(
        tokio::time::timeout(
            STEP,
            parent.send(v1::SendMessageRequest {
                message: Some(answer),
                ..Default::default()
            }),
        )
        .await
        .expect("in time")
        .expect("answer"),
    );
    assert_eq!(state(&done), v1::TaskState::Completed, "{}", reason(&done));
    assert_eq!(text_of(&done), "written for the board");
    let children = heddle_client::delegation::children_of(done.metadata.as_ref());
    assert_eq!(children.len(), 1, "{children:?}");
}

/// Completes at once.
struct Quick;

#[async_trait::async_trait]
impl AgentExecutor for Quick {
    async fn execute(&self, _ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(None).await?;
        events.complete(Some("done")).await?;
        Ok(())
    }
}

/// A task's push deliveries continue its caller's trace: each goes out in
/// an `a2a.push` span of the caller's trace id, and the receiver gets that
/// span's `traceparent`.
#[tokio::test]
async fn push_deliveries_carry_the_callers_trace() {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let exporter = exported_spans();
    let got: Arc<Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
    let keep = got.clone();
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap,
                  axum::Json(body): axum::Json<serde_json::Value>| {
                let keep = keep.clone();
                async move {
                    let parent = headers
                        .get("traceparent")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    lock(&keep).push((parent, body));
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hook = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, receiver).await });
    let base = serve_hub(|base, grpc| {
        heddle_hub::Hub::builder(base, Arc::new(MemoryStore::default()))
            .grpc_url(grpc)
            .push(heddle_server::PushOptions {
                policy: heddle_server::PushPolicy {
                    allow: vec!["127.0.0.1/32".parse().expect("cidr")],
                    allow_http: true,
                },
                ..heddle_server::PushOptions::default()
            })
            .agent("pushed", profile("pushed"), Arc::new(Quick))
    })
    .await;

    let caller = client(&base, "pushed", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let span = tracing::info_span!(target: "a2a", "test.push-root");
    let trace_id = span.context().span().span_context().trace_id();
    let req = v1::SendMessageRequest {
        message: Some(A2aClient::user_message(vec![v1::Part::text("go")])),
        configuration: Some(v1::SendMessageConfiguration {
            task_push_notification_config: Some(v1::TaskPushNotificationConfig {
                url: hook,
                token: "t".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let t = task_of(
        tokio::time::timeout(STEP, caller.send(req))
            .instrument(span.clone())
            .await
            .expect("in time")
            .expect("send"),
    );
    drop(span);
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));

    let start = Instant::now();
    let deliveries = loop {
        let seen = lock(&got).clone();
        let last = seen
            .iter()
            .any(|(_, body)| body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED");
        if last {
            break seen;
        }
        assert!(start.elapsed() < STEP, "no COMPLETED delivery: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let want = format!("{trace_id}");
    for (parent, body) in &deliveries {
        // 00-{trace id}-{span id}-{flags}
        let got_trace = parent.split('-').nth(1).unwrap_or_default();
        assert_eq!(got_trace, want, "a delivery left the trace: {body}");
    }
    let start = Instant::now();
    loop {
        let spans = exporter.get_finished_spans().expect("spans");
        let pushes = spans
            .iter()
            .filter(|s| s.name == "a2a.push" && s.span_context.trace_id() == trace_id)
            .count();
        if pushes >= deliveries.len() {
            break;
        }
        assert!(start.elapsed() < STEP, "{pushes} a2a.push spans exported");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A hub of three priced agents, each delegating to the next (JSON-RPC,
/// then gRPC, then REST), its ledger in `store`.
async fn priced_chain(store: &Arc<MemoryStore>, seen: &Arc<Seen>) -> String {
    use heddle_hub::{
        market::price::{PriceSpec, PricingModel},
        registry::AgentEntry,
    };
    let priced = |id: &str, builtin: &str, rate: f64| {
        let mut e = AgentEntry::builtin(id, builtin);
        e.pricing = Some(PriceSpec {
            model: PricingModel::PerTask,
            rate: json!(rate),
            currency: "USD".into(),
            skills: Default::default(),
        });
        e
    };
    let store = store.clone();
    serve_hub(|base, grpc| {
        let relay = |name, next: &str, binding, version| Relay {
            name,
            next: Arc::new(Mutex::new(format!("{base}/api/v1/agents/{next}"))),
            binding,
            version,
            seen: seen.clone(),
        };
        heddle_hub::Hub::builder(base, store)
            .grpc_url(grpc)
            .builtin(
                "relay-to-hop2",
                profile("hop1"),
                Arc::new(relay("hop1", "hop2", Binding::Grpc, ProtocolVersion::V1_0)),
            )
            .builtin(
                "relay-to-hop3",
                profile("hop2"),
                Arc::new(relay("hop2", "hop3", Binding::Rest, ProtocolVersion::V1_0)),
            )
            .builtin(
                "last",
                profile("hop3"),
                Arc::new(Hold { seen: seen.clone() }),
            )
            .entry(priced("hop1", "relay-to-hop2", 0.10))
            .entry(priced("hop2", "relay-to-hop3", 0.20))
            .entry(priced("hop3", "last", 0.30))
    })
    .await
}

/// What the open hub's callers' wallet, hold and each hop's earnings are,
/// in cents, once every reservation is settled.
async fn settled_books(store: &MemoryStore) -> (i64, i64, [i64; 3]) {
    use heddle_store::{Account, LedgerStore as _};
    let start = Instant::now();
    loop {
        let open = store.open_reservations(10).await.expect("reservations");
        if open.is_empty() {
            break;
        }
        assert!(start.elapsed() < STEP, "still open: {open:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let balance = |a: Account| async move { store.balance(&a, "USD").await.expect("balance") };
    let wallet = balance(Account::Wallet("anonymous".into())).await;
    let held = balance(Account::Held("anonymous".into())).await;
    let mut earned = [0; 3];
    for (i, e) in earned.iter_mut().enumerate() {
        *e = balance(Account::Earnings(format!("hop{}", i + 1))).await;
    }
    (wallet, held, earned)
}

/// A root request handing a budget down its chain.
fn with_chain_budget(amount: &str) -> v1::SendMessageRequest {
    request(
        "quick",
        Some(json!({"budget": {"remaining": {"amount": amount, "currency": "USD"}}})),
        true,
    )
}

/// The root's budget pays every hop of a chain through the hub (JSON-RPC
/// v0.3, gRPC, REST): each hop's hold is carved out of the root's, so the
/// chain spends at most that budget, and a hop it cannot pay for is refused
/// even though the wallet itself has plenty.
#[tokio::test]
async fn the_roots_budget_pays_every_hop_and_never_goes_negative() {
    use heddle_store::{Account, LedgerStore as _};
    let store = Arc::new(MemoryStore::default());
    let seen = Arc::new(Seen::default());
    let base = priced_chain(&store, &seen).await;
    store
        .top_up("anonymous", "USD", 1000, "test")
        .await
        .expect("top up");
    let root = client(&base, "hop1", Binding::JsonRpc, ProtocolVersion::V0_3).await;

    // 0.70 handed down: 0.10 + 0.20 + 0.30 fits.
    let t = task_of(
        tokio::time::timeout(STEP, root.send(with_chain_budget("0.70")))
            .await
            .expect("in time")
            .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));
    let (wallet, held, earned) = settled_books(&store).await;
    assert_eq!((wallet, held, earned), (940, 0, [10, 20, 30]));
    // One hold was made from the wallet, the root's; the hops were carved out of it.
    let reserves =
        heddle_store::contract::all_entries(store.as_ref(), &Account::Wallet("anonymous".into()))
            .await
            .into_iter()
            .filter(|e| e.kind == "reserve")
            .count();
    assert_eq!(reserves, 1);

    // 0.50 handed down: the third hop would take it past what the root keeps.
    let t = task_of(
        tokio::time::timeout(STEP, root.send(with_chain_budget("0.50")))
            .await
            .expect("in time")
            .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Failed);
    assert!(reason(&t).contains("Budget exceeded"), "{}", reason(&t));
    assert_eq!(
        lock(&seen.tasks)
            .iter()
            .filter(|r| r.agent == "hop3")
            .count(),
        1,
        "the third hop ran only for the budget that could pay it"
    );
    let (wallet, held, earned) = settled_books(&store).await;
    assert!(wallet >= 0 && held == 0, "{wallet} {held}");
    // The failed tasks paid nothing (per_task charges completed tasks).
    assert_eq!((wallet, earned), (940, [10, 20, 30]));

    // Further down a chain, `budget.remaining` is information: a hop
    // reached with no hold is paid by its caller, its estimate only.
    let hop3 = client(&base, "hop3", Binding::Rest, ProtocolVersion::V1_0).await;
    let down_the_chain = json!({
        "chain": [{"agent": "https://elsewhere.example/a2a", "taskId": "t-0"}],
        "budget": {"remaining": {"amount": "50.00", "currency": "USD"}}
    });
    let t = task_of(
        tokio::time::timeout(
            STEP,
            hop3.send(request("quick", Some(down_the_chain), true)),
        )
        .await
        .expect("in time")
        .expect("send"),
    );
    assert_eq!(state(&t), v1::TaskState::Completed, "{}", reason(&t));
    let (wallet, _, earned) = settled_books(&store).await;
    assert_eq!((wallet, earned), (910, [10, 20, 60]));
}

/// A cancel of a task that waits for its caller reaches the tasks it
/// delegated: research, waiting on the writer's question it asked back,
/// is canceled, and the writer's waiting task ends CANCELED too.
#[tokio::test]
async fn canceling_a_waiting_parent_cancels_its_waiting_child() {
    let (base, research, asked) = research_asked().await;
    assert_eq!(
        state(&asked),
        v1::TaskState::InputRequired,
        "{}",
        reason(&asked)
    );
    let children = heddle_client::delegation::children_of(asked.metadata.as_ref());
    assert_eq!(children.len(), 1, "{children:?}");
    let writer = client(&base, "writer", Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let waiting = writer
        .get_task(&children[0].task_id, None)
        .await
        .expect("the writer's task");
    assert_eq!(state(&waiting), v1::TaskState::InputRequired);

    let start = Instant::now();
    let canceled = research.cancel_task(&asked.id).await.expect("cancel");
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    let child = writer
        .get_task(&children[0].task_id, None)
        .await
        .expect("the writer's task");
    assert_eq!(state(&child), v1::TaskState::Canceled, "{}", reason(&child));
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}
