//! Three `heddle serve` replicas on one PostgreSQL store and one NATS
//! JetStream bus: a stream opened on one replica follows a task another
//! runs, a cancel sent to a third reaches the runner, a replica killed with
//! SIGKILL has its task ended FAILED within the lease time, and a client
//! resuming with `Last-Event-ID` on yet another replica gets exactly the
//! events it missed. A replica stopped with SIGTERM ends its streams with
//! an event telling clients to subscribe again, and hands its tasks over.
//! Every stream is checked by generation: one more per event, none skipped,
//! none twice. Push configs made on one replica are
//! delivered for events another replica applies, the dead replica's
//! task's end included.
//!
//! Needs `HEDDLE_TEST_POSTGRES_URL` and `HEDDLE_TEST_NATS_URL`; without
//! them the test says it skipped and passes, unless
//! `HEDDLE_REQUIRE_SERVICES=1`.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::common::{Server, serve_logging};
use super::postgres::{DropSchema, database};
use super::{message, rpc, webhook_listen};

/// A push config for `task_id` made on the replica at `url`.
async fn push_to(url: &str, task_id: &str, port: u16) {
    let client = reqwest::Client::new();
    rpc(
        &client,
        url,
        "writer-stream",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task_id, "url": format!("http://127.0.0.1:{port}/hook"), "token": "tok"}),
    )
    .await
    .expect("push config");
}

/// The final state pushed for `task_id`, waiting up to `within`.
fn pushed_end(
    events: &std::sync::mpsc::Receiver<Value>,
    task_id: &str,
    within: Duration,
) -> String {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(v) = events.recv_timeout(Duration::from_millis(200))
            && v["taskId"] == json!(task_id)
            && let Some(state) = v
                .pointer("/event/statusUpdate/status/state")
                .and_then(Value::as_str)
            && state != "TASK_STATE_WORKING"
        {
            return state.to_owned();
        }
    }
    String::new()
}

/// The replica tests one at a time: each runs three servers, and their
/// time limits assume the machine is not running six.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn nats(test: &str) -> Option<String> {
    super::common::service_url(test, "HEDDLE_TEST_NATS_URL", "NATS JetStream")
}

/// One SSE event: its id (the generation; 0 for a drained stream's last
/// event, which has none) and its JSON-RPC result.
#[derive(Clone, Debug)]
struct Seen {
    generation: u64,
    result: Value,
}

impl Seen {
    fn state(&self) -> Option<&str> {
        self.result
            .pointer("/statusUpdate/status/state")
            .or_else(|| self.result.pointer("/task/status/state"))
            .and_then(Value::as_str)
    }
}

/// SubscribeToTask on `url` (JSON-RPC), optionally resuming after
/// `last_event_id`; every event goes to the channel as it arrives.
async fn subscribe(url: &str, task_id: &str, last_event_id: Option<u64>) -> mpsc::Receiver<Seen> {
    let client = reqwest::Client::new();
    let mut req = client
        .post(format!("{url}/api/v1/agents/writer-stream/a2a"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
            "params": {"id": task_id}}),
        );
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.expect("subscribe");
    assert_eq!(resp.status(), 200);
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut generation = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        generation = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str::<Value>(v).ok();
                    }
                }
                if let Some(data) = data {
                    let result = data["result"].clone();
                    assert!(!result.is_null(), "an error event: {data}");
                    // Only a drained stream's last event has no generation.
                    let drained = result["statusUpdate"]["metadata"][RESUBSCRIBE_KEY].is_object();
                    assert!(
                        generation.is_some() || drained,
                        "every task event names its generation: {data}"
                    );
                    let seen = Seen {
                        generation: generation.unwrap_or(0),
                        result,
                    };
                    if tx.send(seen).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Events up to and including the first artifact chunk (within 10 s).
async fn until_first_chunk(rx: &mut mpsc::Receiver<Seen>) -> Vec<Seen> {
    let mut seen = Vec::new();
    while let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
        let chunk = s.result.get("artifactUpdate").is_some();
        seen.push(s);
        if chunk {
            return seen;
        }
    }
    panic!("no chunk: {seen:?}");
}

/// Events until the stream closes, or `within` runs out.
async fn drain(rx: &mut mpsc::Receiver<Seen>, within: Duration) -> Vec<Seen> {
    let mut out = Vec::new();
    let end = Instant::now() + within;
    while let Ok(Some(seen)) = tokio::time::timeout_at(end.into(), rx.recv()).await {
        out.push(seen);
    }
    out
}

/// Each event one generation after the one before.
fn assert_gap_free(events: &[Seen]) {
    for pair in events.windows(2) {
        assert_eq!(
            pair[1].generation,
            pair[0].generation + 1,
            "a gap or a duplicate: {:?}",
            events.iter().map(|e| e.generation).collect::<Vec<_>>()
        );
    }
}

/// Three replicas on a schema of their own, the test's alone while it
/// runs. The servers stop before the schema goes.
struct Three {
    a: Server,
    b: Server,
    c: Server,
    _logs: tempfile::TempDir,
    _schema: DropSchema,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

/// [`Three`] replicas with `extra` arguments, in schema `{prefix}_{pid}`;
/// `None` (the test skips) without PostgreSQL or NATS.
async fn three(test: &str, prefix: &str, extra: &[&str]) -> Option<Three> {
    let (Some(url), Some(nats)) = (database(test), nats(test)) else {
        return None;
    };
    let one = ONE_AT_A_TIME.lock().await;
    let name = format!("{prefix}_{}", std::process::id());
    let schema = DropSchema {
        url: url.clone(),
        name: name.clone(),
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{sep}schema={name}");
    let logs = tempfile::tempdir().expect("tmp");
    // One at a time: the first migrates the schema.
    let a = replica(&store, &nats, &logs.path().join("a.log"), extra);
    let b = replica(&store, &nats, &logs.path().join("b.log"), extra);
    let c = replica(&store, &nats, &logs.path().join("c.log"), extra);
    assert!(a.banner.contains("postgres"), "{}", a.banner);
    Some(Three {
        a,
        b,
        c,
        _logs: logs,
        _schema: schema,
        _one: one,
    })
}

fn replica(store: &str, nats: &str, log: &std::path::Path, extra: &[&str]) -> Server {
    let log = std::fs::File::create(log).expect("log file");
    let mut args = vec![
        "--events",
        nats,
        "--lease-secs",
        "2",
        "--writer-stream-pause-ms",
        "1500",
        "--push-allow",
        "127.0.0.1/32",
        "--push-allow-http",
        "--push-initial-backoff-ms",
        "100",
        // A killed replica may hold the claim on a task's deliveries; the
        // others send them (the task's end among them) after this long.
        "--push-claim-secs",
        "2",
    ];
    args.extend_from_slice(extra);
    serve_logging(store, &args, &[("RUST_LOG", "warn")], Stdio::from(log))
}

/// A writer-stream task started on `url` and left running.
async fn start_task(url: &str, id: &str) -> String {
    send_task(url, json!({"message": message(id, "write")})).await
}

/// A writer-stream task started on `url` with `params` (SendMessage's,
/// without its configuration) and left running.
async fn send_task(url: &str, mut params: Value) -> String {
    params["configuration"]["returnImmediately"] = true.into();
    let sent = rpc(
        &reqwest::Client::new(),
        url,
        "writer-stream",
        "SendMessage",
        params,
    )
    .await
    .expect("send");
    sent["task"]["id"].as_str().expect("task id").to_owned()
}

/// GetTask on `url`.
async fn get_task(url: &str, task_id: &str) -> Value {
    rpc(
        &reqwest::Client::new(),
        url,
        "writer-stream",
        "GetTask",
        json!({"id": task_id}),
    )
    .await
    .expect("get")
}

/// How many chunks the stored report holds.
fn report_parts(task: &Value) -> usize {
    task["artifacts"][0]["parts"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_streams_cancels_and_a_dead_replicas_tasks() {
    let test = "three_replicas_share_streams_cancels_and_a_dead_replicas_tasks";
    let Some(mut three) = three(test, "heddle_replicas_test", &[]).await else {
        return;
    };
    let Three { a, b, c, .. } = &mut three;
    let client = reqwest::Client::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let (mut hooks, pushed) = webhook_listen(port);

    // Sent on A, watched on B, its push config made on B, canceled on C.
    let first = start_task(&a.url, "replicas-1").await;
    let mut on_b = subscribe(&b.url, &first, None).await;
    push_to(&b.url, &first, port).await;
    let canceled = rpc(
        &client,
        &c.url,
        "writer-stream",
        "CancelTask",
        json!({"id": first}),
    )
    .await
    .expect("cancel on C");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let seen = drain(&mut on_b, Duration::from_secs(10)).await;
    assert!(
        seen.first().is_some_and(|s| s.result.get("task").is_some()),
        "the snapshot first: {seen:?}"
    );
    assert_eq!(
        seen.last().and_then(Seen::state),
        Some("TASK_STATE_CANCELED"),
        "B saw the cancel C relayed to A: {seen:?}"
    );
    assert_gap_free(&seen);
    assert_eq!(
        pushed_end(&pushed, &first, Duration::from_secs(20)),
        "TASK_STATE_CANCELED",
        "A delivered the cancel to the config made on B"
    );

    // Sent on A, watched on B, its push config made on C; A dies mid-stream.
    let second = start_task(&a.url, "replicas-2").await;
    let mut on_b = subscribe(&b.url, &second, None).await;
    push_to(&c.url, &second, port).await;
    let before_kill = until_first_chunk(&mut on_b).await;
    let chunk_generation = before_kill.last().map_or(0, |s| s.generation);
    a.child.kill().expect("kill -9 A");
    let killed = Instant::now();
    let after_kill = drain(&mut on_b, Duration::from_secs(15)).await;
    let ended_in = killed.elapsed();
    let all: Vec<Seen> = before_kill.into_iter().chain(after_kill).collect();
    let last = all.last().expect("events");
    assert_eq!(last.state(), Some("TASK_STATE_FAILED"), "{all:?}");
    let reason = last.result["statusUpdate"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("replica"), "the end says why: {reason:?}");
    // Lease of 2 s, reaped every 0.67 s, plus catching up.
    assert!(
        ended_in < Duration::from_secs(8),
        "ended {ended_in:?} after the kill"
    );
    assert_gap_free(&all);

    // A client that saw up to the first chunk resumes on C.
    let mut on_c = subscribe(&c.url, &second, Some(chunk_generation)).await;
    let resumed = drain(&mut on_c, Duration::from_secs(10)).await;
    let missed: Vec<u64> = all
        .iter()
        .map(|s| s.generation)
        .filter(|g| *g > chunk_generation)
        .collect();
    assert_eq!(
        resumed.iter().map(|s| s.generation).collect::<Vec<_>>(),
        missed,
        "exactly the missing events"
    );
    assert_eq!(
        resumed.last().and_then(Seen::state),
        Some("TASK_STATE_FAILED")
    );

    // The store agrees, on any replica.
    let got = get_task(&b.url, &second).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        pushed_end(&pushed, &second, Duration::from_secs(20)),
        "TASK_STATE_FAILED",
        "the replica that ended the dead one's task delivered its end"
    );
    let _ = hooks.kill();
    let _ = hooks.wait();
    stopping_replica_hands_its_streams_and_tasks_over(b, c).await;
}

/// Push deliveries of tasks run on A, sent by three replicas' workers from
/// one outbox; A is killed mid-way while its worker holds the claims on
/// every task's deliveries (the receiver is down until then). Once the
/// claims run out the others send them: every task's events reach the
/// receiver in order, its end (written by the replica that took the task
/// over) included; a delivery sent twice has one id, which the receiver
/// drops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_deliveries_survive_a_replica_killed_mid_way() {
    let test = "push_deliveries_survive_a_replica_killed_mid_way";
    let claim = ["--push-max-backoff-ms", "500", "--push-max-attempts", "100"];
    let Some(mut three) = three(test, "heddle_replicas_push", &claim).await else {
        return;
    };
    let a = &mut three.a;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    // The receiver is down until A is dead: A's worker holds the claims on
    // every task's deliveries, retrying, when it dies.
    for i in 0..3 {
        let sent = rpc(
            &client,
            &a.url,
            "writer-stream",
            "SendMessage",
            json!({"message": message(&format!("push-{i}"), "write"),
                   "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
                       "url": format!("http://127.0.0.1:{port}/hook"), "token": "tok"}}}),
        )
        .await
        .expect("send");
        tasks.push(sent["task"]["id"].as_str().expect("task id").to_owned());
    }
    // Each task's first chunk is out (1.5 s in), its second not yet.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    a.child.kill().expect("kill -9 A");
    let (mut hooks, pushed) = webhook_listen(port);

    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ended = |seen: &std::collections::BTreeMap<String, Vec<String>>| {
        tasks.iter().all(|t| {
            seen.get(t)
                .is_some_and(|e| e.last().map(String::as_str) == Some("TASK_STATE_FAILED"))
        })
    };
    while !ended(&seen) && Instant::now() < deadline {
        if let Ok(v) = pushed.recv_timeout(Duration::from_millis(200)) {
            let task = v["taskId"].as_str().unwrap_or_default().to_owned();
            let e = &v["event"];
            let label = if let Some(t) = e.get("task") {
                format!("task:{}", t["status"]["state"].as_str().unwrap_or(""))
            } else if let Some(s) = e.pointer("/statusUpdate/status/state") {
                s.as_str().unwrap_or_default().to_owned()
            } else {
                "artifact".to_owned()
            };
            seen.entry(task).or_default().push(label);
        }
    }
    let _ = hooks.kill();
    let _ = hooks.wait();
    for t in &tasks {
        let events = seen.get(t).cloned().unwrap_or_default();
        assert_eq!(
            events,
            [
                "task:TASK_STATE_SUBMITTED",
                "TASK_STATE_WORKING",
                "artifact",
                "TASK_STATE_FAILED"
            ],
            "task {t}: every event once, in order, the end from the replica that took over"
        );
    }
}

/// The metadata key of a drained stream's last event.
const RESUBSCRIBE_KEY: &str = "https://heddle.dev/extensions/resubscribe/v1";

/// B stops with SIGTERM while a client follows a task B runs: the stream
/// ends at once with a last event that has no generation of its own and
/// names the last one sent; the client subscribes again on C from there
/// and misses nothing; B finishes the task in its grace time (the other
/// chunks, COMPLETED, reaching C over the bus) and exits cleanly.
async fn stopping_replica_hands_its_streams_and_tasks_over(b: &mut Server, c: &Server) {
    let third = start_task(&b.url, "replicas-3").await;
    let mut on_b = subscribe(&b.url, &third, None).await;
    let before = until_first_chunk(&mut on_b).await;
    let term = std::process::Command::new("kill")
        .args(["-TERM", &b.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let stopping = Instant::now();
    let mut rest = drain(&mut on_b, Duration::from_secs(10)).await;
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "the stream ended as B stopped, not {:?} later",
        stopping.elapsed()
    );
    let last = rest.pop().expect("a last event");
    let why = &last.result["statusUpdate"]["metadata"][RESUBSCRIBE_KEY];
    assert!(
        why.is_object(),
        "the last event says to subscribe again: {last:?}"
    );
    assert_eq!(last.generation, 0, "it changes nothing, so has no id");
    assert_eq!(last.state(), Some("TASK_STATE_WORKING"), "{last:?}");
    let events: Vec<Seen> = before.into_iter().chain(rest).collect();
    assert_gap_free(&events);
    let last_id: u64 = why["lastEventId"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("lastEventId");
    assert_eq!(
        Some(last_id),
        events.last().map(|s| s.generation),
        "it names the last event sent"
    );
    // The client picks the stream up on C at once, while B finishes.
    let mut on_c = subscribe(&c.url, &third, Some(last_id)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let exited = loop {
        if let Some(status) = b.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "B did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exited.success(), "B stopped cleanly: {exited}");

    let resumed = drain(&mut on_c, Duration::from_secs(10)).await;
    assert_eq!(
        resumed.first().map(|s| s.generation),
        Some(last_id + 1),
        "resumed right after the last event seen: {resumed:?}"
    );
    assert_gap_free(&resumed);
    let end = resumed.last().expect("events on C");
    assert_eq!(end.state(), Some("TASK_STATE_COMPLETED"), "{resumed:?}");
    let chunks = events
        .iter()
        .chain(&resumed)
        .filter(|s| s.result.get("artifactUpdate").is_some())
        .count();
    assert_eq!(chunks, 3, "every chunk once, on B then on C");
}

/// An agent that declares its runs resumable: A is killed with SIGKILL
/// after the first chunk, and the replica that takes the task over runs
/// the agent again from the task as it stands, with the request's
/// metadata (the report's name). B's subscriber sees the other two chunks
/// and COMPLETED, one generation after another; the stored report has each
/// chunk once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_agents_task_is_resumed_by_another_replica() {
    let test = "a_resumable_agents_task_is_resumed_by_another_replica";
    let resumable = ["--writer-stream-resumable"];
    let Some(mut three) = three(test, "heddle_replicas_resume", &resumable).await else {
        return;
    };
    let Three { a, b, .. } = &mut three;
    let params = json!({"message": message("resume-1", "write"), "metadata": {"reportName": "q3"}});
    let task = send_task(&a.url, params).await;
    let mut on_b = subscribe(&b.url, &task, None).await;
    let mut seen = until_first_chunk(&mut on_b).await;
    a.child.kill().expect("kill -9 A");
    seen.extend(drain(&mut on_b, Duration::from_secs(20)).await);
    assert_gap_free(&seen);
    assert_eq!(
        seen.last().and_then(Seen::state),
        Some("TASK_STATE_COMPLETED"),
        "resumed to its end: {seen:?}"
    );
    let chunks = seen
        .iter()
        .filter(|s| s.result.get("artifactUpdate").is_some())
        .count();
    assert_eq!(chunks, 3, "each chunk once: {seen:?}");
    let names: Vec<&str> = seen
        .iter()
        .filter_map(|s| s.result.pointer("/artifactUpdate/artifact/name"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        names, ["q3"; 3],
        "the resumed run had the request's metadata"
    );
    let got = get_task(&b.url, &task).await;
    assert_eq!(report_parts(&got), 3, "{got}");
    let Three { b, c, .. } = &mut three;
    a_replica_paused_past_its_lease_stops_the_run_it_lost(b, c).await;
}

/// Sends `signal` (`STOP`, `CONT`) to a replica's process.
fn signal(server: &Server, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal}");
}

/// B is paused (SIGSTOP) after the first chunk, past its lease time: C
/// takes the task over and resumes it to its end. Woken (SIGCONT), B
/// learns at its next renewal that the lease is gone and stops its run
/// before the run's next event: B's own stream of the task ends with the
/// resubscribe event, not with chunks of a run that is no longer its, and
/// the stored report has each chunk once.
async fn a_replica_paused_past_its_lease_stops_the_run_it_lost(b: &mut Server, c: &Server) {
    let task = start_task(&b.url, "paused-1").await;
    let mut on_b = subscribe(&b.url, &task, None).await;
    let mut on_c = subscribe(&c.url, &task, None).await;
    until_first_chunk(&mut on_b).await;
    signal(b, "STOP");
    let on_c = drain(&mut on_c, Duration::from_secs(20)).await;
    assert_gap_free(&on_c);
    assert_eq!(
        on_c.last().and_then(Seen::state),
        Some("TASK_STATE_COMPLETED"),
        "C resumed it to its end: {on_c:?}"
    );
    signal(b, "CONT");
    let woken = drain(&mut on_b, Duration::from_secs(10)).await;
    assert!(
        woken
            .iter()
            .all(|s| s.result.get("artifactUpdate").is_none()),
        "the run B lost went on there: {woken:?}"
    );
    let last = woken.last().expect("B's stream ended with an event");
    let why = &last.result["statusUpdate"]["metadata"][RESUBSCRIBE_KEY];
    assert!(
        why["reason"]
            .as_str()
            .is_some_and(|r| r.contains("took this task over")),
        "{woken:?}"
    );
    // What B's run would have written next is not in the store either.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = get_task(&c.url, &task).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(report_parts(&got), 3, "{got}");
}
