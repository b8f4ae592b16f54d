//! `heddle serve` as a process: startup, and crash safety under load.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

mod common;
#[path = "serve/postgres.rs"]
mod postgres;
#[path = "serve/remote.rs"]
mod remote;
#[path = "serve/replicas.rs"]
mod replicas;

use common::Server;

fn serve(store: &str) -> Server {
    common::serve(store, &[])
}

fn serve_with(store: &str, extra: &[&str]) -> Server {
    common::serve(store, extra)
}

async fn rpc(
    client: &reqwest::Client,
    url: &str,
    agent: &str,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = client
        .post(format!("{url}/api/v1/agents/{agent}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    v.get("result").cloned().ok_or_else(|| v.to_string())
}

fn message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_under_load_loses_no_acknowledged_task() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("crash.db").display());
    let server = serve(&store);
    let client = reqwest::Client::new();

    // Long-running tasks, acknowledged while WORKING.
    let mut running = Vec::new();
    for i in 0..5 {
        let r = rpc(
            &client,
            &server.url,
            "conformance",
            "SendMessage",
            json!({
            "message": message(&format!("test-resubscribe-message-id-{i}"), "wait"),
            "configuration": {"returnImmediately": true}}),
        )
        .await
        .expect("acknowledged");
        running.push(r["task"]["id"].as_str().expect("id").to_owned());
    }

    // Load: 16 clients sending echo requests until the server dies.
    let deadline = Instant::now() + Duration::from_millis(1500);
    let workers: Vec<_> = (0..16)
        .map(|w| {
            let (client, url) = (client.clone(), server.url.clone());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut n = 0;
                loop {
                    n += 1;
                    let text = format!("worker {w} request {n}");
                    match rpc(
                        &client,
                        &url,
                        "echo",
                        "SendMessage",
                        json!({"message": message(&format!("{w}-{n}"), &text)}),
                    )
                    .await
                    {
                        Ok(r) => acked.push((
                            r["task"]["id"].as_str().unwrap_or_default().to_owned(),
                            text,
                        )),
                        Err(_) => break,
                    }
                    if Instant::now() > deadline + Duration::from_secs(10) {
                        break;
                    }
                }
                acked
            })
        })
        .collect();
    tokio::time::sleep(deadline - Instant::now()).await;
    let mut server = server;
    // SIGKILL: no chance to flush anything.
    server.child.kill().expect("kill -9");
    server.child.wait().expect("reaped");
    let mut acked = Vec::new();
    for w in workers {
        acked.extend(w.await.expect("worker"));
    }
    assert!(
        acked.len() > 100,
        "the load ran: {} acknowledged",
        acked.len()
    );

    let server = serve(&store);
    for (id, text) in &acked {
        let t = rpc(&client, &server.url, "echo", "GetTask", json!({"id": id}))
            .await
            .unwrap_or_else(|e| panic!("task {id} lost: {e}"));
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        assert_eq!(
            t["artifacts"][0]["parts"][0]["text"],
            text.as_str(),
            "artifact intact"
        );
    }
    for id in &running {
        let t = rpc(
            &client,
            &server.url,
            "conformance",
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("running task kept");
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{t}");
        let why = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains("restarted"), "{why}");
    }
    eprintln!(
        "crash test: {} acknowledged tasks and {} running ones checked after kill -9",
        acked.len(),
        running.len()
    );
}

/// Runs `heddle ARGS…` to completion: (exit code, stdout, stderr).
fn heddle(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(args)
        .output()
        .expect("heddle runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_first_session_from_the_command_line() {
    let server = serve("memory");
    let echo = format!("{}/api/v1/agents/echo", server.url);
    let (code, out, _) = heddle(&["card", "get", &echo]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Echo") && out.contains("HTTP+JSON") && out.contains("JSONRPC"),
        "{out}"
    );

    let (code, out, _) = heddle(&["send", &echo, "hello there"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("COMPLETED") && out.contains("hello there"),
        "{out}"
    );

    let stream = format!("{}/api/v1/agents/writer-stream", server.url);
    let (code, out, _) = heddle(&["send", &stream, "go", "--stream"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "Report, part one: the findings. Part two: what they mean. Part three: what to do next."
        ),
        "{out}"
    );
    assert!(
        out.contains("→ WORKING") && out.contains("→ COMPLETED"),
        "{out}"
    );

    // JSON output: one object for a send, JSON Lines for a stream.
    let (code, out, _) = heddle(&["send", &echo, "hi", "-o", "json", "--binding", "rest"]);
    assert_eq!(code, 0);
    let task: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let (_, out, _) = heddle(&[
        "send",
        &stream,
        "go",
        "--stream",
        "-o",
        "json",
        "--a2a-version",
        "0.3",
    ]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(lines[0].get("task").is_some() && lines.len() == 6, "{out}");

    // REST in v0.3 (`/v1/` paths, ProtoJSON of the a2a.v1 proto).
    let (code, out, _) = heddle(&[
        "send",
        &echo,
        "old rest",
        "-o",
        "json",
        "--binding",
        "rest",
        "--a2a-version",
        "0.3",
    ]);
    assert_eq!(code, 0, "{out}");
    let task: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "old rest");
    let (code, out, _) = heddle(&[
        "send",
        &stream,
        "go",
        "--stream",
        "--binding",
        "rest",
        "--a2a-version",
        "0.3",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Part three: what to do next."), "{out}");

    // Multi-turn with --task-id, and a file part.
    let writer = format!("{}/api/v1/agents/writer", server.url);
    let (code, out, _) = heddle(&[
        "send",
        &writer,
        "Summarize",
        "--file",
        "Cargo.toml",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let t: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = t["id"].as_str().expect("id");
    let (code, out, _) = heddle(&["send", &writer, "the board", "--task-id", id]);
    assert_eq!(code, 0);
    assert!(
        out.contains("COMPLETED") && out.contains("the board"),
        "{out}"
    );

    // Exit codes: 1 for a rejected task, 2 for errors.
    let conformance = format!("{}/api/v1/agents/conformance", server.url);
    let (code, out, _) = heddle(&[
        "send",
        &conformance,
        "x",
        "--message-id",
        "tck-reject-task-1",
    ]);
    assert_eq!(code, 1, "{out}");
    let (code, _, err) = heddle(&["task", "get", &echo, "no-such-task"]);
    assert_eq!(code, 2);
    assert!(err.contains("TASK_NOT_FOUND"), "{err}");
    let (code, out, _) = heddle(&["task", "list", &echo, "--page-size", "1"]);
    assert_eq!(code, 0);
    assert!(out.contains("next page: --page-token"), "{out}");
    let (code, _, _) = heddle(&["send"]);
    assert_eq!(code, 2, "usage error");
}

#[test]
fn a_server_killed_mid_stream_is_a_clear_error() {
    let mut server = serve("memory");
    let url = format!("{}/api/v1/agents/conformance", server.url);
    let child = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args([
            "send",
            &url,
            "wait",
            "--stream",
            "--message-id",
            "test-resubscribe-message-id-kill",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("heddle send");
    std::thread::sleep(Duration::from_millis(800));
    server.child.kill().expect("kill -9");
    let out = child.wait_with_output().expect("send ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("stream"), "a clear message: {err}");
}

/// `--card-versions 1.0` with the conformance agent's switches: a strict
/// v1.0 root card declaring the required extension and no streaming, v0.3
/// calls refused, and a bad version list refused at start.
#[tokio::test]
async fn serve_flags_choose_the_card_versions_and_the_conformance_switches() {
    let server = serve_with(
        "memory",
        &[
            "--default-agent",
            "conformance",
            "--card-versions",
            "1.0",
            "--conformance-required-extension",
            "--conformance-no-streaming",
        ],
    );
    let client = reqwest::Client::new();
    let card: Value = client
        .get(format!("{}/.well-known/agent-card.json/", server.url))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("card json");
    assert!(card.get("protocolVersion").is_none(), "{card}");
    assert_eq!(card["capabilities"]["streaming"], false);
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        "urn:a2a:tck:required-extension"
    );
    let v03: Value = client
        .post(format!("{}/api/v1/agents/echo/a2a", server.url))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}))
        .send()
        .await
        .expect("v0.3 call")
        .json()
        .await
        .expect("json");
    assert_eq!(v03["error"]["code"], -32009, "{v03}");
    let out = common::heddle(&["serve", "--card-versions", "2.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown A2A version"));
}

/// A push signing key rotated: the new key signs, the old one's public
/// half is still in the JWKS; `--push-previous-key` alone is refused.
#[tokio::test]
async fn a_rotated_push_signing_key_is_published_beside_the_new_one() {
    let key = |path: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(path)
            .display()
            .to_string()
    };
    let (old, new) = (
        key("../heddle-auth/tests/keys/ec.pem"),
        key("../heddle-signing/testdata/ec.pem"),
    );
    let server = serve_with(
        "memory",
        &["--push-signing-key", &new, "--push-previous-key", &old],
    );
    let jwks: Value = reqwest::get(format!("{}/.well-known/jwks.json", server.url))
        .await
        .expect("jwks")
        .json()
        .await
        .expect("json");
    let push_keys = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter(|k| k["crv"] == "P-256")
        .count();
    assert_eq!(push_keys, 2, "the new key and the old: {jwks}");
    assert!(
        !jwks.to_string().contains("\"d\""),
        "no private member: {jwks}"
    );
    let out = common::heddle(&["serve", "--push-previous-key", &old]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--push-signing-key"));
}

#[tokio::test]
async fn serve_rejects_an_unknown_store() {
    let out = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(["serve", "--store", "redis:x"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown store"));
}

#[test]
fn the_command_line_speaks_grpc() {
    let server = serve("memory");
    let echo = format!("{}/api/v1/agents/echo", server.url);
    let (code, out, err) = heddle(&["send", &echo, "hello", "--binding", "grpc", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let t: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "hello", "{t}");
    let id = t["id"].as_str().expect("id");

    // Streams: the writer's three chunks, in v1.0 and v0.3.
    let stream = format!("{}/api/v1/agents/writer-stream", server.url);
    let report =
        "Report, part one: the findings. Part two: what they mean. Part three: what to do next.";
    for version in ["1.0", "0.3"] {
        let (code, out, err) = heddle(&[
            "send",
            &stream,
            "go",
            "--stream",
            "--binding",
            "grpc",
            "--a2a-version",
            version,
        ]);
        assert_eq!(code, 0, "{version}: {err}");
        assert!(out.contains(report), "{version}: {out}");
        assert!(
            out.contains("→ WORKING") && out.contains("→ COMPLETED"),
            "{version}: {out}"
        );
    }

    // v0.3 unary send (tenant in the `a2a-tenant` metadata).
    let (code, out, err) = heddle(&[
        "send",
        &echo,
        "old friend",
        "--binding",
        "grpc",
        "--a2a-version",
        "0.3",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let t: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "old friend", "{t}");

    // Multi-turn with --task-id, and a file part (raw bytes over protobuf).
    let writer = format!("{}/api/v1/agents/writer", server.url);
    let (code, out, err) = heddle(&[
        "send",
        &writer,
        "Summarize",
        "--file",
        "Cargo.toml",
        "--binding",
        "grpc",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let w: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(w["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{w}");
    let wid = w["id"].as_str().expect("id");
    let (code, out, err) = heddle(&[
        "send",
        &writer,
        "the board",
        "--task-id",
        wid,
        "--binding",
        "grpc",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("COMPLETED") && out.contains("the board"),
        "{out}"
    );

    // Tasks: get, list, and an A2A error from the status details.
    let (code, out, err) = heddle(&["task", "get", &echo, id, "--binding", "grpc", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let g: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(g["id"], id, "{g}");
    let (code, out, err) = heddle(&["task", "list", &echo, "--binding", "grpc"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(id), "{out}");
    let (code, _, err) = heddle(&["task", "get", &echo, "no-such-task", "--binding", "grpc"]);
    assert_eq!(code, 2);
    assert!(err.contains("TASK_NOT_FOUND"), "{err}");
    let (code, _, err) = heddle(&["task", "cancel", &echo, id, "--binding", "grpc"]);
    assert_eq!(code, 2);
    assert!(err.contains("TASK_NOT_CANCELABLE"), "{err}");
    // v0.3 has no ListTasks, whatever the binding.
    let (code, _, err) = heddle(&[
        "task",
        "list",
        &echo,
        "--binding",
        "grpc",
        "--a2a-version",
        "0.3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no ListTasks"), "{err}");
}

/// A stream dropped mid-artifact resumes with SubscribeToTask: the snapshot
/// replaces what the accumulator had, so no chunk is counted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_resumes_without_duplicated_chunks() {
    use futures::StreamExt;
    use heddle_client::{A2aClient, ClientOptions, TaskAccumulator};
    use heddle_core::v1::{self, stream_response::Payload};

    let server = serve("memory");
    let url = format!("{}/api/v1/agents/writer-stream", server.url);
    let client = A2aClient::discover(&url, ClientOptions::default())
        .await
        .expect("client");
    let req = v1::SendMessageRequest {
        message: Some(A2aClient::user_message(vec![v1::Part::text("go")])),
        ..Default::default()
    };
    let mut acc = TaskAccumulator::default();
    let mut events = client.send_streaming(req).await.expect("stream");
    // Read up to the first artifact chunk, then drop the stream.
    while let Some(ev) = events.next().await {
        let ev = ev.expect("event");
        acc.apply(&ev);
        if matches!(ev.payload, Some(Payload::ArtifactUpdate(_))) {
            break;
        }
    }
    drop(events);
    let id = acc.task.as_ref().map(|t| t.id.clone()).expect("task id");
    let mut events = client.subscribe(&id).await.expect("resubscribe");
    let first = events.next().await.expect("snapshot").expect("event");
    assert!(
        matches!(first.payload, Some(Payload::Task(_))),
        "snapshot first"
    );
    acc.apply(&first);
    while let Some(ev) = events.next().await {
        acc.apply(&ev.expect("event"));
    }
    assert_eq!(acc.state(), Some(v1::TaskState::Completed));
    let task = acc.task.expect("task");
    let text: String = task.artifacts[0]
        .parts
        .iter()
        .filter_map(|p| p.as_text())
        .collect();
    assert_eq!(
        text,
        "Report, part one: the findings. Part two: what they mean. Part three: what to do next."
    );
}

/// `heddle webhook listen` on `port`: its stdout lines (one per delivery,
/// duplicates already dropped) arrive on the channel.
fn webhook_listen(port: u16) -> (Child, std::sync::mpsc::Receiver<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args([
            "webhook",
            "listen",
            "--port",
            &port.to_string(),
            "--token",
            "tok",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("heddle webhook listen starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    (child, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_backlog_survives_kill_9_and_is_delivered_after_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("push.db").display());
    let push = [
        "--push-allow",
        "127.0.0.1/32",
        "--push-allow-http",
        "--push-initial-backoff-ms",
        "100",
        "--push-max-backoff-ms",
        "500",
    ];
    // The receiver's port, closed for now: every attempt fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let server = serve_with(&store, &push);
    let client = reqwest::Client::new();
    let first = rpc(
        &client,
        &server.url,
        "writer",
        "SendMessage",
        json!({"message": message("k1", "Summarize"),
               "configuration": {"taskPushNotificationConfig": {
                   "url": format!("http://127.0.0.1:{port}/hook"), "token": "tok"}}}),
    )
    .await
    .expect("first send");
    let task_id = first["task"]["id"].as_str().expect("id").to_owned();
    let mut answer = message("k2", "the board");
    answer["taskId"] = json!(task_id);
    rpc(
        &client,
        &server.url,
        "writer",
        "SendMessage",
        json!({"message": answer}),
    )
    .await
    .expect("answer");
    let mut server = server;
    server.child.kill().expect("kill -9");
    let _ = server.child.wait();

    // The receiver comes up, then the server restarts on the same store.
    let (mut listener, events) = webhook_listen(port);
    std::thread::sleep(Duration::from_millis(300));
    let _restarted = serve_with(&store, &push);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 6 && Instant::now() < deadline {
        if let Ok(v) = events.recv_timeout(Duration::from_millis(200)) {
            got.push(v);
        }
    }
    let _ = listener.kill();
    let _ = listener.wait();
    let labels: Vec<String> = got
        .iter()
        .map(|v| {
            let e = &v["event"];
            assert_eq!(v["taskId"], json!(task_id), "{v}");
            if let Some(t) = e.get("task") {
                format!("task:{}", t["status"]["state"].as_str().unwrap_or(""))
            } else if let Some(u) = e.get("statusUpdate") {
                format!("status:{}", u["status"]["state"].as_str().unwrap_or(""))
            } else {
                "artifact".to_owned()
            }
        })
        .collect();
    assert_eq!(
        labels,
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_WORKING",
            "artifact",
            "status:TASK_STATE_COMPLETED",
        ]
    );
}

/// The delegation demo from the command line: research asks the writer's
/// question, the answer finishes it, and `heddle task tree` shows the two
/// tasks its calls made, read from the root down.
#[test]
fn the_research_demo_and_its_task_tree() {
    let server = serve("memory");
    let research = format!("{}/api/v1/agents/research", server.url);
    let (code, out, err) = heddle(&["send", &research, "tides", "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let asked: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(
        asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{out}"
    );
    let id = asked["id"].as_str().expect("task id");
    let (code, out, err) = heddle(&["send", &research, "the harbour board", "--task-id", id]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("COMPLETED") && out.contains("--- artifact summary"),
        "{out}"
    );

    let (code, out, err) = heddle(&["task", "tree", &research, id, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let tree: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(tree["state"], "COMPLETED");
    let children = tree["children"].as_array().expect("children");
    let agents: Vec<&str> = children
        .iter()
        .filter_map(|c| c["agent"].as_str())
        .collect();
    assert_eq!(children.len(), 2, "{out}");
    assert!(agents[0].contains("/agents/writer"), "{out}");
    assert!(agents[1].contains("/agents/summarizer"), "{out}");
    assert!(children.iter().all(|c| c["state"] == "COMPLETED"), "{out}");

    let (code, out, _) = heddle(&["task", "tree", &research, id]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().nth(1).is_some_and(|l| l.starts_with("  ")),
        "{out}"
    );
}

/// A stand-in OTLP/HTTP collector: every body POSTed to it, as it came.
fn otlp_collector() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().expect("clone"));
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(n) = l.strip_prefix("content-length:") {
                            length = n.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = tx.send(body);
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (url, rx)
}

/// `--otlp-endpoint`: a request that arrives with a W3C `traceparent` is
/// exported to the collector in the caller's trace (its 16-byte trace id
/// is in the OTLP body), with its A2A attributes.
#[tokio::test]
async fn spans_are_exported_over_otlp_in_the_callers_trace() {
    let (collector, bodies) = otlp_collector();
    let server = common::serve_logging(
        "memory",
        &["--otlp-endpoint", &collector],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
        Stdio::null(),
    );
    let trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736";
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": message("m-otlp", "traced")}});
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/api/v1/agents/echo/a2a", server.url))
        .header("A2A-Version", "1.0")
        .header("traceparent", format!("00-{trace_hex}-00f067aa0ba902b7-01"))
        .json(&body)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
    let trace_id: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&trace_hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(body) = bodies.recv_timeout(Duration::from_millis(200)) {
            seen.extend(body);
        }
        let has = |needle: &[u8]| seen.windows(needle.len()).any(|w| w == needle);
        if has(&trace_id) && has(b"a2a.execute") && has(b"SendMessage") {
            return;
        }
    }
    panic!(
        "the collector never got the caller's trace ({} bytes seen)",
        seen.len()
    );
}

/// `--otlp-endpoint` exports the hub's metrics too: after a call, the
/// collector receives the request count and the task transitions, with the
/// agent and method as attributes.
#[tokio::test]
async fn metrics_are_exported_over_otlp() {
    let (collector, bodies) = otlp_collector();
    let server = common::serve_logging(
        "memory",
        &["--otlp-endpoint", &collector],
        &[("OTEL_METRIC_EXPORT_INTERVAL", "200")],
        Stdio::null(),
    );
    let result = rpc(
        &reqwest::Client::new(),
        &server.url,
        "echo",
        "SendMessage",
        json!({"message": message("m-metrics", "counted")}),
    )
    .await
    .expect("send");
    assert_eq!(result["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(body) = bodies.recv_timeout(Duration::from_millis(200)) {
            seen.extend(body);
        }
        let has = |needle: &[u8]| seen.windows(needle.len()).any(|w| w == needle);
        if has(b"a2a.server.requests")
            && has(b"a2a.task.transitions")
            && has(b"SendMessage")
            && has(b"echo")
        {
            return;
        }
    }
    panic!(
        "the collector never got the request metrics ({} bytes seen)",
        seen.len()
    );
}

/// `heddle push dead-letters` lists what an unreachable receiver never
/// got (its receiver shown without the query's secret), and replays it
/// once the receiver is up: every delivery arrives, and none stays dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_and_replayed_from_the_command_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("dead.db").display());
    let token_file = dir.path().join("admin-token");
    let token = token_file.to_str().expect("UTF-8");
    let server = serve_with(
        &store,
        &[
            "--push-allow",
            "127.0.0.1/32",
            "--push-allow-http",
            "--push-max-attempts",
            "2",
            "--push-initial-backoff-ms",
            "50",
            "--push-max-backoff-ms",
            "100",
            "--admin-token-file",
            token,
        ],
    );
    // The receiver's port, closed for now: every attempt fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let client = reqwest::Client::new();
    rpc(
        &client,
        &server.url,
        "echo",
        "SendMessage",
        json!({"message": message("d1", "hello"),
               "configuration": {"taskPushNotificationConfig": {
                   "url": format!("http://127.0.0.1:{port}/hook?sig=s3cret"), "token": "tok"}}}),
    )
    .await
    .expect("send");
    let list = || {
        let (code, out, err) = heddle(&[
            "push",
            "dead-letters",
            "list",
            "--json",
            "--hub",
            &server.url,
            "--admin-token-file",
            token,
        ]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(!out.contains("s3cret"), "a secret is shown: {out}");
        let v: Value = serde_json::from_str(out.trim()).expect("JSON");
        v["deadLetters"].as_array().cloned().unwrap_or_default()
    };
    // Until every event's delivery is dead: the count stops growing for
    // longer than a delivery takes to die (two attempts, 100 ms apart at
    // most; one task's deliveries go one after the other).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut dead = list();
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let again = list();
        if (again.len() == dead.len() && !dead.is_empty()) || Instant::now() > deadline {
            break;
        }
        dead = again;
    }
    assert!(dead.len() >= 2, "every event's delivery dead: {dead:?}");
    assert_eq!(
        dead[0]["receiver"],
        json!(format!("http://127.0.0.1:{port}/hook"))
    );
    assert_eq!(dead[0]["attempts"], 2);

    let (mut listener, events) = webhook_listen(port);
    let up = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < up {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Replayed until none is dead (a delivery still on its way when the
    // list was read dies later, and is replayed in the next round).
    let mut ids: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let now_dead = list();
        if now_dead.is_empty() {
            break;
        }
        ids.extend(
            now_dead
                .iter()
                .filter_map(|d| d["deliveryId"].as_str().map(str::to_owned)),
        );
        let (code, out, err) = heddle(&[
            "push",
            "dead-letters",
            "replay",
            "--all",
            "--hub",
            &server.url,
            "--admin-token-file",
            token,
        ]);
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(out.trim(), format!("replayed {}", now_dead.len()));
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut got = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while got.len() < ids.len() && Instant::now() < deadline {
        if let Ok(v) = events.recv_timeout(Duration::from_millis(200))
            && let Some(id) = v["deliveryId"].as_str()
        {
            got.insert(id.to_owned());
        }
    }
    let _ = listener.kill();
    let _ = listener.wait();
    assert!(ids.len() >= dead.len(), "{ids:?}");
    assert_eq!(got.len(), ids.len(), "every replayed delivery arrived");
    let left = list();
    assert!(left.is_empty(), "nothing stays dead: {left:?}");
}
