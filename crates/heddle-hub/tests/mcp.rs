//! MCP agents (`kind = "mcp"`) against real MCP servers from the
//! registries, installed by `tests/interop/setup.sh`: the reference
//! "everything" server (npm `@modelcontextprotocol/server-everything`) over
//! stdio and streamable HTTP, and a small server written with the official
//! Python `mcp` package (`tests/interop/python/mcp_server.py`) that can
//! report progress, fail, crash, learn a tool and log what it saw. Without
//! them each test says it was skipped.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

mod live;

use futures::StreamExt;
use heddle_client::{A2aClient, ClientError, ClientOptions, SendReply};
use heddle_core::{
    ErrorCode,
    v1::{self, part::Content, stream_response::Payload},
};
use heddle_hub::{
    Hub, RegistryError, RemoteSettings,
    mcp::{McpSettings, TOOLS_EXTENSION},
    registry::AgentEntry,
    remote::SecretSource,
};
use live::{installed, interop_dir};
use serde_json::{Value, json};

/// No step of a test may take longer.
const STEP: Duration = Duration::from_secs(30);
/// A secret handed to a server through `secret_env`.
const TOKEN: &str = "mcp-test-t0ken-value";

fn python() -> Option<PathBuf> {
    let p = interop_dir().join(".venv/bin/python");
    installed(&p, "Python mcp server").then_some(p)
}

fn everything() -> Option<PathBuf> {
    let p =
        interop_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    installed(&p, "MCP everything server").then_some(p)
}

/// Our Python server over stdio, logging to `log`.
fn ours_stdio(python: &Path, log: &Path) -> McpSettings {
    let script = interop_dir().join("python/mcp_server.py");
    let mut s = McpSettings::stdio(
        python.to_string_lossy(),
        &[&script.to_string_lossy(), "stdio"],
    );
    s.env
        .insert("MCP_TEST_LOG".into(), log.to_string_lossy().into_owned());
    s
}

/// A hub serving `entries`, and its base URL.
async fn hub(entries: Vec<AgentEntry>) -> (Hub, String) {
    let (l, addr) = live::bind().await;
    let base = format!("http://{addr}");
    let hub = Hub::builder(base.clone(), live::memory())
        .remote(RemoteSettings {
            secrets: SecretSource::from_values([("MCP_TOKEN", TOKEN)]),
            ..RemoteSettings::default()
        })
        .build()
        .await;
    for e in entries {
        let id = e.id.clone();
        tokio::time::timeout(STEP, hub.register(e))
            .await
            .expect("registers in time")
            .unwrap_or_else(|e| panic!("{id} registers: {e}"));
    }
    let router = hub.router();
    tokio::spawn(async move { axum::serve(l, router).await });
    (hub, base)
}

async fn client(base: &str, id: &str) -> A2aClient {
    A2aClient::discover(
        &format!("{base}/api/v1/agents/{id}"),
        ClientOptions::default(),
    )
    .await
    .expect("the hub serves the agent's card")
}

fn request(parts: Vec<v1::Part>) -> v1::SendMessageRequest {
    v1::SendMessageRequest {
        message: Some(A2aClient::user_message(parts)),
        ..Default::default()
    }
}

fn call(tool: &str, arguments: Value) -> v1::SendMessageRequest {
    request(vec![v1::Part::data(
        json!({"tool": tool, "arguments": arguments}),
    )])
}

async fn try_send(
    client: &A2aClient,
    req: v1::SendMessageRequest,
) -> Result<v1::Task, ClientError> {
    match tokio::time::timeout(STEP, client.send(req))
        .await
        .expect("in time")?
    {
        SendReply::Task(t) => Ok(t),
        SendReply::Message(m) => panic!("a task, not a message: {m:?}"),
    }
}

async fn send(client: &A2aClient, req: v1::SendMessageRequest) -> v1::Task {
    try_send(client, req).await.expect("send")
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

fn parts(t: &v1::Task) -> &[v1::Part] {
    assert_eq!(state(t), v1::TaskState::Completed, "{t:?}");
    assert_eq!(t.artifacts.len(), 1, "{t:?}");
    &t.artifacts[0].parts
}

fn data_of(t: &v1::Task) -> Value {
    parts(t)
        .iter()
        .find_map(|p| match &p.content {
            Some(Content::Data(d)) => Some(d.0.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no data part in {t:?}"))
}

/// The status texts and artifact texts of a streamed call, and its last state.
async fn stream(
    client: &A2aClient,
    req: v1::SendMessageRequest,
) -> (Vec<String>, Vec<String>, v1::TaskState) {
    let mut events = tokio::time::timeout(STEP, client.send_streaming(req))
        .await
        .expect("in time")
        .expect("stream");
    let (mut statuses, mut artifacts, mut last) =
        (Vec::new(), Vec::new(), v1::TaskState::Unspecified);
    while let Some(ev) = tokio::time::timeout(STEP, events.next())
        .await
        .expect("in time")
    {
        match ev.expect("event").payload {
            Some(Payload::StatusUpdate(s)) => {
                let status = s.status.expect("status");
                last = status.state();
                statuses.push(status.message.map(|m| m.text()).unwrap_or_default());
            }
            Some(Payload::ArtifactUpdate(a)) => {
                artifacts.push(a.artifact.expect("artifact").text());
            }
            Some(Payload::Task(t)) => last = state(&t),
            _ => {}
        }
    }
    (statuses, artifacts, last)
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until `cond` holds for the server's log.
async fn wait_log(log: &Path, what: &str, cond: impl Fn(&[String]) -> bool) -> Vec<String> {
    let until = tokio::time::Instant::now() + STEP;
    loop {
        let lines = log_lines(log);
        if cond(&lines) {
            return lines;
        }
        assert!(tokio::time::Instant::now() < until, "{what}: {lines:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn started(lines: &[String]) -> Vec<u32> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("started ")?.trim().parse().ok())
        .collect()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Starts an HTTP MCP server and waits until it accepts connections.
async fn spawn_http(mut cmd: tokio::process::Command, port: u16) -> tokio::process::Child {
    let child = cmd
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the MCP server starts");
    let until = tokio::time::Instant::now() + STEP;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < until,
            "the MCP server listens in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_over_stdio_is_an_agent_with_a_skill_per_tool() {
    let Some(server) = everything() else { return };
    let mut settings = McpSettings::stdio("node", &[&server.to_string_lossy(), "stdio"]);
    settings
        .secret_env
        .insert("EVERYTHING_TOKEN".into(), "MCP_TOKEN".into());
    let (_hub, base) = hub(vec![AgentEntry::mcp("everything", settings)]).await;
    let c = client(&base, "everything").await;

    let card = c.card();
    let skills: Vec<&str> = card.skills.iter().map(|s| s.id.as_str()).collect();
    for tool in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        assert!(skills.contains(&tool), "{tool} in {skills:?}");
    }
    let echo = card.skills.iter().find(|s| s.id == "echo").expect("echo");
    assert!(echo.tags.contains(&"mcp".to_owned()), "{echo:?}");
    let ext = card
        .capabilities
        .as_ref()
        .expect("capabilities")
        .extensions
        .iter()
        .find(|e| e.uri == TOOLS_EXTENSION)
        .expect("the tools extension");
    let params = serde_json::to_value(&ext.params).expect("params");
    assert!(
        params["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "echo" && t["inputSchema"]["properties"]["message"].is_object()),
        "{params}"
    );

    let t = send(&c, call("echo", json!({"message": "hi"}))).await;
    assert_eq!(t.artifacts[0].text(), "Echo: hi", "{t:?}");
    assert_eq!(t.artifacts[0].name, "echo");

    let t = send(&c, call("get-tiny-image", json!({}))).await;
    let image = parts(&t)
        .iter()
        .find(|p| p.media_type == "image/png")
        .expect("an image part");
    assert!(matches!(&image.content, Some(Content::Raw(b)) if b.starts_with(b"\x89PNG")));

    let t = send(
        &c,
        call("get-structured-content", json!({"location": "Chicago"})),
    )
    .await;
    assert!(data_of(&t).is_object(), "{t:?}");

    let t = send(
        &c,
        call(
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
        ),
    )
    .await;
    assert!(
        parts(&t).iter().any(|p| {
            matches!(p.content, Some(Content::Raw(_)))
                && p.metadata.as_ref().is_some_and(|m| {
                    m.0.values()
                        .any(|v| v.as_str().is_some_and(|u| u.contains("://")))
                })
        }),
        "an embedded resource as a file part: {t:?}"
    );

    // The server gets the secret it was given and none of the hub's
    // environment.
    let t = send(&c, call("get-env", json!({}))).await;
    let env = t.artifacts[0].text();
    assert!(env.contains("EVERYTHING_TOKEN"), "{env}");
    assert!(
        !env.contains("CARGO_MANIFEST_DIR"),
        "the hub's environment leaked: {env}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_over_streamable_http_reports_progress_as_working_statuses() {
    let Some(server) = everything() else { return };
    let port = free_port();
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(&server)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let _server = spawn_http(cmd, port).await;
    let settings = McpSettings::http(format!("http://127.0.0.1:{port}/mcp"));
    let (_hub, base) = hub(vec![AgentEntry::mcp("everything", settings)]).await;
    let c = client(&base, "everything").await;

    let t = send(&c, call("get-sum", json!({"a": 2, "b": 3}))).await;
    assert!(t.artifacts[0].text().contains('5'), "{t:?}");

    let (statuses, artifacts, last) = stream(
        &c,
        call(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
        ),
    )
    .await;
    assert_eq!(last, v1::TaskState::Completed, "{statuses:?}");
    for step in 1..=3 {
        let want = format!("progress {step} of 3");
        assert!(statuses.contains(&want), "{want} in {statuses:?}");
    }
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_called_by_data_or_text_and_their_results_errors_and_refusals_map_to_a2a() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let all = ours_stdio(&python, &log);
    let mut shout = ours_stdio(&python, &dir.path().join("shout.log"));
    shout.tools = Some(vec!["shout".into()]);
    let (hub, base) = hub(vec![
        AgentEntry::mcp("py", all),
        AgentEntry::mcp("shout", shout),
    ])
    .await;
    let py = client(&base, "py").await;

    // A text message calls the only tool, when it takes one string.
    let s = client(&base, "shout").await;
    assert_eq!(s.card().skills.len(), 1);
    let t = send(&s, request(vec![v1::Part::text("hello there")])).await;
    assert_eq!(t.artifacts[0].text(), "HELLO THERE", "{t:?}");

    // Structured content is a data part; the JSON text repeating it is not kept.
    let t = send(&py, call("add", json!({"a": 2, "b": 3}))).await;
    assert_eq!(data_of(&t)["sum"].as_f64(), Some(5.0), "{t:?}");
    assert_eq!(parts(&t).len(), 1, "{t:?}");

    let t = send(&py, call("image", json!({}))).await;
    assert!(
        parts(&t).iter().any(|p| p.media_type == "image/png"),
        "{t:?}"
    );
    assert!(t.artifacts[0].text().contains("a red pixel"), "{t:?}");

    // An error result fails the task with the tool's message.
    let t = send(&py, call("fail", json!({"reason": "no such city"}))).await;
    assert_eq!(state(&t), v1::TaskState::Failed, "{t:?}");
    assert!(status_text(&t).contains("no such city"), "{t:?}");

    // Refused before any task: arguments off the schema, an unknown tool,
    // text to an agent of many tools.
    for (req, says) in [
        (
            call("add", json!({"a": "two", "b": 3})),
            "/parts/0/data/arguments/a",
        ),
        (call("nope", json!({})), "no tool \"nope\""),
        (
            request(vec![v1::Part::text("hi")]),
            "one tool taking one string",
        ),
    ] {
        match try_send(&py, req).await {
            Err(ClientError::A2a(e)) => {
                assert_eq!(e.code, ErrorCode::InvalidParams, "{e:?}");
                let all = format!("{} {:?}", e.message, e.violations);
                assert!(all.contains(says), "{says} in {all}");
            }
            other => panic!("refused with InvalidParams, not {other:?}"),
        }
    }

    // A tool learned at run time is on the card after list_changed.
    let t = send(&py, call("learn", json!({"name": "greet"}))).await;
    assert_eq!(t.artifacts[0].text(), "learned greet");
    let until = tokio::time::Instant::now() + STEP;
    loop {
        let card = hub.agent("py").expect("py").handler.card().clone();
        if card.skills.iter().any(|s| s.id == "greet") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "greet on the card: {card:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = send(&py, call("greet", json!({"text": "x"}))).await;
    assert_eq!(t.artifacts[0].text(), "greet: x", "{t:?}");
    // The same server ran it all.
    assert_eq!(started(&log_lines(&log)).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_streams_as_working_statuses_and_a_cancel_reaches_the_server() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let (_hub, base) = hub(vec![AgentEntry::mcp("py", ours_stdio(&python, &log))]).await;
    let c = client(&base, "py").await;

    let (statuses, artifacts, last) =
        stream(&c, call("slow", json!({"steps": 3, "delay_ms": 20}))).await;
    assert_eq!(last, v1::TaskState::Completed, "{statuses:?}");
    let steps: Vec<&String> = statuses.iter().filter(|s| s.starts_with("step ")).collect();
    assert_eq!(steps, ["step 1", "step 2", "step 3"], "{statuses:?}");
    assert_eq!(artifacts, ["done after 3 steps"]);

    // Cancel mid-call: the task is CANCELED and the server hears of it.
    let mut events = c
        .send_streaming(call("slow", json!({"steps": 200, "delay_ms": 50})))
        .await
        .expect("stream");
    let mut task_id = String::new();
    while let Some(ev) = tokio::time::timeout(STEP, events.next())
        .await
        .expect("in time")
    {
        match ev.expect("event").payload {
            Some(Payload::Task(t)) => task_id = t.id,
            Some(Payload::StatusUpdate(s)) => {
                task_id = s.task_id.clone();
                if s.status
                    .and_then(|s| s.message)
                    .is_some_and(|m| m.text() == "step 2")
                {
                    break;
                }
            }
            _ => {}
        }
    }
    let canceled = c.cancel_task(&task_id).await.expect("cancel");
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    wait_log(&log, "the server logs the cancellation", |l| {
        l.iter().any(|l| l == "cancelled")
    })
    .await;
    // The server still serves.
    let t = send(&c, call("shout", json!({"text": "still"}))).await;
    assert_eq!(t.artifacts[0].text(), "STILL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_fails_the_task_and_is_started_again() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let (_hub, base) = hub(vec![AgentEntry::mcp("py", ours_stdio(&python, &log))]).await;
    let c = client(&base, "py").await;

    let t = send(&c, call("crash", json!({}))).await;
    assert_eq!(state(&t), v1::TaskState::Failed, "{t:?}");
    let why = status_text(&t);
    assert!(
        why.contains("MCP server") && why.contains("during the call"),
        "{why}"
    );

    let t = send(&c, call("shout", json!({"text": "again"}))).await;
    assert_eq!(t.artifacts[0].text(), "AGAIN", "{t:?}");
    let pids = started(&log_lines(&log));
    assert_eq!(pids.len(), 2, "one start, one restart: {pids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_is_stopped_and_started_again_on_the_next_call() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let mut settings = ours_stdio(&python, &log);
    settings.idle_secs = 1;
    let (_hub, base) = hub(vec![AgentEntry::mcp("py", settings)]).await;
    let c = client(&base, "py").await;
    let t = send(&c, call("shout", json!({"text": "a"}))).await;
    assert_eq!(t.artifacts[0].text(), "A");
    let first = started(&log_lines(&log))[0];
    let until = tokio::time::Instant::now() + STEP;
    while Path::new(&format!("/proc/{first}")).exists() {
        assert!(
            tokio::time::Instant::now() < until,
            "the idle server {first} stops"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let t = send(&c, call("shout", json!({"text": "b"}))).await;
    assert_eq!(t.artifacts[0].text(), "B");
    assert_eq!(started(&log_lines(&log)).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_python_server_over_streamable_http_with_a_bearer_token() {
    let Some(python) = python() else { return };
    let port = free_port();
    let mut cmd = tokio::process::Command::new(&python);
    cmd.arg(interop_dir().join("python/mcp_server.py"))
        .arg("http")
        .arg(port.to_string());
    let _server = spawn_http(cmd, port).await;
    let mut settings = McpSettings::http(format!("http://127.0.0.1:{port}/mcp"));
    settings.bearer_env = Some("MCP_TOKEN".into());
    let (_hub, base) = hub(vec![AgentEntry::mcp("py", settings)]).await;
    let c = client(&base, "py").await;
    let t = send(&c, call("shout", json!({"text": "over http"}))).await;
    assert_eq!(t.artifacts[0].text(), "OVER HTTP");
    let (statuses, _, last) = stream(&c, call("slow", json!({"steps": 2, "delay_ms": 20}))).await;
    assert_eq!(last, v1::TaskState::Completed);
    assert!(statuses.contains(&"step 2".to_owned()), "{statuses:?}");
    // The failure reason never carries the token.
    let t = send(&c, call("fail", json!({"reason": TOKEN}))).await;
    assert!(!status_text(&t).contains(TOKEN), "{t:?}");
}

#[tokio::test]
async fn a_server_that_cannot_start_or_a_missing_secret_is_refused_with_the_reason() {
    let (hub, _base) = hub(Vec::new()).await;
    let missing = McpSettings::stdio("/nonexistent/mcp-server", &[]);
    match hub.register(AgentEntry::mcp("gone", missing)).await {
        Err(RegistryError::Mcp(why)) => {
            assert!(why.contains("could not be started"), "{why}");
        }
        other => panic!("refused, not {other:?}"),
    }
    let mut secret = McpSettings::stdio("node", &[]);
    secret
        .secret_env
        .insert("X".into(), "NOT_SET_ANYWHERE".into());
    assert!(matches!(
        hub.register(AgentEntry::mcp("secret", secret)).await,
        Err(RegistryError::Mcp(why)) if why.contains("NOT_SET_ANYWHERE")
    ));
    let far = McpSettings::http("http://mcp.example/mcp");
    assert!(matches!(
        hub.register(AgentEntry::mcp("far", far)).await,
        Err(RegistryError::Invalid(e)) if e.field == "mcp.url"
    ));
    assert!(hub.entries().is_empty());
}

/// An official A2A client through the hub to an MCP agent wrapping our
/// Python server (`tests/interop/{python,js}/hub_mcp_flows.*`).
async fn sdk_client_flows(program: &Path, script: &Path) {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let (_hub, base) = hub(vec![AgentEntry::mcp(
        "py",
        ours_stdio(&python, &dir.path().join("mcp.log")),
    )])
    .await;
    live::run_flows(program, script, &[&format!("{base}/api/v1/agents/py")], 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_calls_an_mcp_agent_through_the_hub() {
    let python = interop_dir().join(".venv/bin/python");
    if installed(&python, "Python a2a-sdk") {
        sdk_client_flows(&python, &interop_dir().join("python/hub_mcp_flows.py")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_js_client_calls_an_mcp_agent_through_the_hub() {
    let modules = interop_dir().join("node_modules/@a2a-js/sdk");
    if installed(&modules, "JS @a2a-js/sdk") {
        sdk_client_flows(
            Path::new("node"),
            &interop_dir().join("js/hub_mcp_flows.mjs"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_registration_serves_its_card_without_starting_the_server_until_a_call() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let store = live::memory();
    {
        let first = Hub::builder("http://127.0.0.1:9", store.clone())
            .build()
            .await;
        first
            .register(AgentEntry::mcp("py", ours_stdio(&python, &log)))
            .await
            .expect("registers");
        let kept = first.entry("py").expect("entry");
        assert!(
            kept.mcp_tools.as_ref().is_some_and(|t| t.len() > 3),
            "{kept:?}"
        );
    }
    // The first hub is gone, and its server with it.
    let first = started(&log_lines(&log))[0];
    let until = tokio::time::Instant::now() + STEP;
    while Path::new(&format!("/proc/{first}")).exists() {
        assert!(
            tokio::time::Instant::now() < until,
            "the server {first} stops with its hub"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (l, addr) = live::bind().await;
    let base = format!("http://{addr}");
    let second = Hub::builder(base.clone(), store).build().await;
    let router = second.router();
    tokio::spawn(async move { axum::serve(l, router).await });
    let c = client(&base, "py").await;
    assert!(c.card().skills.iter().any(|s| s.id == "shout"));
    assert_eq!(
        started(&log_lines(&log)).len(),
        1,
        "not started for the card"
    );
    let t = send(&c, call("shout", json!({"text": "now"}))).await;
    assert_eq!(t.artifacts[0].text(), "NOW");
    assert_eq!(started(&log_lines(&log)).len(), 2, "started by the call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_finishes_on_the_old_server_when_the_agent_is_changed() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("mcp.log");
    let (hub, base) = hub(vec![AgentEntry::mcp("py", ours_stdio(&python, &log))]).await;
    let c = client(&base, "py").await;
    let slow = tokio::spawn({
        let c = c.clone();
        async move { send(&c, call("slow", json!({"steps": 10, "delay_ms": 100}))).await }
    });
    wait_log(&log, "the first server starts", |l| started(l).len() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A change of settings: a new server for the calls to come.
    let mut changed = ours_stdio(&python, &log);
    changed.call_timeout_secs = 60;
    let mut entry = hub.entry("py").expect("entry");
    entry.mcp = Some(changed);
    tokio::time::timeout(STEP, hub.update(entry))
        .await
        .expect("in time")
        .expect("updated");
    let t = tokio::time::timeout(STEP, slow)
        .await
        .expect("in time")
        .expect("task");
    assert_eq!(state(&t), v1::TaskState::Completed, "{t:?}");
    assert_eq!(t.artifacts[0].text(), "done after 10 steps");
    let pids = started(&log_lines(&log));
    assert_eq!(pids.len(), 2, "{pids:?}");
    // The old server stops once its call ended; the new one serves.
    let until = tokio::time::Instant::now() + STEP;
    while Path::new(&format!("/proc/{}", pids[0])).exists() {
        assert!(tokio::time::Instant::now() < until, "the old server stops");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = send(&c, call("shout", json!({"text": "new"}))).await;
    assert_eq!(t.artifacts[0].text(), "NEW");
    assert_eq!(started(&log_lines(&log)).len(), 2);
}
