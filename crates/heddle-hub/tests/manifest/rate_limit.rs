//! A manifest's `rate_limit` holds, on real listeners: `max_rps` for the
//! agent as a whole on JSON-RPC, REST and gRPC (429 or
//! `RESOURCE_EXHAUSTED`, with `Retry-After`), and `max_concurrent` with
//! the waiting executions started high before normal before low, as the
//! callers asked in their metadata.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::join_all;
use heddle_client::reqwest;
use heddle_core::v1;
use heddle_hub::{
    AgentProfile, Hub, HubBuilder, agents::Echo, market::options::MARKET_EXT, registry::AgentEntry,
};
use heddle_proto::v1::a2a_service_client::A2aServiceClient;
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use super::{fixture, live};

/// The full manifest with `rate_limit` set to `limit`, as the manifest of
/// a builtin entry `id` running the executor `builtin`; free, so that only
/// the limits are at work.
fn limited(id: &str, builtin: &str, limit: Value) -> AgentEntry {
    let mut doc = fixture("full.json");
    doc["rate_limit"] = limit;
    doc["pricing"]["rate"] = json!(0);
    let mut entry = AgentEntry::builtin(id, builtin);
    entry.manifest = Some(doc);
    entry
}

/// The most calls GCRA may let through in a burst of requests spread over
/// `window` at 10 a second with a burst of 10: the burst, one more for
/// each 100 ms the requests took to arrive, and one for a token that
/// comes due while they do. Measured from before the first request is
/// sent to after the last answer, so it only ever errs on the wide side:
/// on a loaded two-core machine a burst of 100 can take a few hundred ms.
fn most_through(window: Duration) -> usize {
    let extra = usize::try_from(window.as_millis() / 100).unwrap_or(usize::MAX);
    11_usize.saturating_add(extra)
}

/// Of `answers` (HTTP status, `Retry-After`), how many passed the rate;
/// every other one must be 429 with a `Retry-After` of one second (the
/// wait for the next token is at most 100 ms, rounded up).
fn passed(answers: &[(u16, Option<String>)], passed_status: u16, what: &str) -> usize {
    let mut through = 0;
    for (status, retry_after) in answers {
        if *status == passed_status {
            through += 1;
            continue;
        }
        assert_eq!(*status, 429, "{what}: neither through nor refused");
        let secs: u64 = retry_after
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{what}: a 429 without a Retry-After in seconds"));
        assert_eq!(secs, 1, "{what}: Retry-After");
    }
    through
}

/// Sends `n` GetTask calls of an unknown task at once over JSON-RPC; the
/// answers and how long they took.
async fn jsonrpc_burst(
    http: &reqwest::Client,
    base: &str,
    n: usize,
) -> (Vec<(u16, Option<String>)>, Duration) {
    let url = format!("{base}/api/v1/agents/rated/a2a");
    let requests: Vec<_> = (0..n)
        .map(|i| {
            http.post(&url).header("A2A-Version", "1.0").json(&json!({
                "jsonrpc": "2.0", "id": i, "method": "GetTask", "params": {"id": "no-such-task"}
            }))
        })
        .collect();
    let start = Instant::now();
    let answers = join_all(requests.into_iter().map(live::call)).await;
    let window = start.elapsed();
    let answers = answers
        .into_iter()
        .map(|a| {
            // Through: TaskNotFound (JSON-RPC -32001, HTTP 200); refused:
            // ResourceExhausted (-32029) as HTTP 429.
            let code = a.json["error"]["code"].as_i64();
            if a.status == 429 {
                assert_eq!(code, Some(-32029), "{}", a.text);
            } else {
                assert_eq!((a.status.as_u16(), code), (200, Some(-32001)), "{}", a.text);
            }
            (a.status.as_u16(), retry_after(&a))
        })
        .collect();
    (answers, window)
}

fn retry_after(a: &live::Answer) -> Option<String> {
    a.headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Waits until the burst is whole again (10 tokens at 10 a second).
async fn refill() {
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

#[tokio::test]
async fn max_rps_holds_the_agent_on_every_binding_with_a_retry_after() {
    let s = live::serve(|public, grpc| {
        Hub::builder(public, live::memory())
            .grpc_url(grpc)
            .builtin(
                "echo",
                AgentProfile::new("echo", "Echo", "echo", &["t"]),
                Arc::new(Echo),
            )
            .entry(limited("rated", "echo", json!({"max_rps": 10})))
            .entry(AgentEntry::builtin("free", "echo"))
    })
    .await;
    let http = reqwest::Client::new();

    // JSON-RPC: a burst of 100 lets the burst of 10 through (plus what
    // comes due while the burst arrives).
    let (answers, window) = jsonrpc_burst(&http, &s.base, 100).await;
    let through = passed(&answers, 200, "JSON-RPC");
    eprintln!("JSON-RPC: {through} of 100 through in {window:?}");
    assert!(
        (10..=most_through(window)).contains(&through),
        "{through} of 100 through in {window:?}"
    );
    // The card is not counted, and other agents are not held.
    assert_eq!(live::card(&http, &s.base, "rated").await.status, 200);
    let other = live::jsonrpc(&http, &s.base, "free", "GetTask", json!({"id": "x"})).await;
    assert_eq!(other.status, 200, "another agent: {}", other.text);

    // A second later, about ten pass again.
    refill().await;
    let (answers, window) = jsonrpc_burst(&http, &s.base, 30).await;
    let through = passed(&answers, 200, "JSON-RPC again");
    assert!(
        (10..=most_through(window)).contains(&through),
        "{through} of 30 through in {window:?}"
    );

    // REST: the same rate (the same agent: its count is shared).
    refill().await;
    let url = format!("{}/api/v1/agents/rated/rest/tasks/no-such-task", s.base);
    let start = Instant::now();
    let answers =
        join_all((0..30).map(|_| live::call(http.get(&url).header("A2A-Version", "1.0")))).await;
    let window = start.elapsed();
    let answers: Vec<_> = answers
        .iter()
        .map(|a| (a.status.as_u16(), retry_after(a)))
        .collect();
    let through = passed(&answers, 404, "REST");
    assert!(
        (10..=most_through(window)).contains(&through),
        "{through} of 30 through in {window:?}"
    );

    // gRPC, the tenant being the agent: past the rate is RESOURCE_EXHAUSTED.
    refill().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.grpc))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let calls = (0..20).map(|_| {
        let mut client = A2aServiceClient::new(channel.clone());
        async move {
            let mut req = tonic::Request::new(v1::GetTaskRequest {
                tenant: "rated".into(),
                id: "no-such-task".into(),
                history_length: None,
            });
            req.metadata_mut()
                .insert("a2a-version", "1.0".parse().expect("ascii"));
            client.get_task(req).await
        }
    });
    let start = Instant::now();
    let answers = join_all(calls).await;
    let window = start.elapsed();
    let mut through = 0;
    for answer in answers {
        let status = answer.expect_err("no such task, or past the rate");
        match status.code() {
            tonic::Code::NotFound => through += 1,
            tonic::Code::ResourceExhausted => {}
            other => panic!("gRPC answered {other:?}: {status:?}"),
        }
    }
    assert!(
        (10..=most_through(window)).contains(&through),
        "{through} of 20 through in {window:?}"
    );
}

/// Says when each execution starts (its message's text), then holds it
/// until the test gives it a permit.
struct Held {
    started: mpsc::UnboundedSender<String>,
    release: Arc<Semaphore>,
}

#[async_trait::async_trait]
impl AgentExecutor for Held {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let _ = self.started.send(ctx.text());
        events.working(None).await?;
        let permit = self
            .release
            .acquire()
            .await
            .map_err(|e| AgentError(e.to_string()))?;
        permit.forget();
        events.complete(Some("done")).await?;
        Ok(())
    }
}

async fn next_start(started: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(live::STEP, started.recv())
        .await
        .expect("an execution starts")
        .expect("the agent lives")
}

/// SendMessage to the queued agent without waiting for the end, with
/// `request` metadata and `message` metadata.
async fn submit(
    http: &reqwest::Client,
    base: &str,
    text: &str,
    request: Option<Value>,
    message: Option<Value>,
) -> live::Answer {
    let mut msg = live::user_message(text);
    if let Some(m) = message {
        msg["metadata"] = m;
    }
    let mut params = json!({"message": msg, "configuration": {"returnImmediately": true}});
    if let Some(r) = request {
        params["metadata"] = r;
    }
    live::jsonrpc(http, base, "queued", "SendMessage", params).await
}

fn asks(priority: &str) -> Value {
    json!({ MARKET_EXT: { "priority": priority } })
}

fn queued_hub(public: String, grpc: String, agent: Held) -> HubBuilder {
    Hub::builder(public, live::memory())
        .grpc_url(grpc)
        .builtin(
            "held",
            AgentProfile::new("held", "Held", "held", &["t"]),
            Arc::new(agent),
        )
        .entry(limited(
            "queued",
            "held",
            json!({"max_rps": 1000, "max_concurrent": 2}),
        ))
}

#[tokio::test]
async fn max_concurrent_queues_the_rest_high_before_normal_before_low() {
    let (tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let agent = Held {
        started: tx,
        release: release.clone(),
    };
    let s = live::serve(|public, grpc| queued_hub(public, grpc, agent)).await;
    let http = reqwest::Client::new();

    for text in ["hold 1", "hold 2"] {
        let a = submit(&http, &s.base, text, None, None).await;
        assert!(a.json["result"]["task"].is_object(), "{}", a.text);
        assert_eq!(next_start(&mut started).await, text);
    }
    // Both places taken: these wait, SUBMITTED, each at the priority it
    // asked for in the message's metadata, the request's, or neither.
    let sent = [
        ("low", None, Some(asks("low"))),
        ("normal", None, None),
        ("high", Some(asks("high")), Some(asks("low"))),
        ("normal too", None, Some(asks("normal"))),
    ];
    let mut ids = Vec::new();
    for (text, request, message) in sent {
        let a = submit(&http, &s.base, text, request, message).await;
        assert_eq!(
            live::sent_state(&a),
            "TASK_STATE_SUBMITTED",
            "{text}: {}",
            a.text
        );
        let id = a.json["result"]["task"]["id"].as_str().expect("an id");
        ids.push(id.to_owned());
    }
    // A waiting task is there for callers to read.
    let read = live::jsonrpc(&http, &s.base, "queued", "GetTask", json!({"id": ids[0]})).await;
    assert_eq!(
        read.json["result"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );

    // A priority that is not one of the three is refused, naming the
    // field, and makes no task.
    let bad = submit(&http, &s.base, "typo", None, Some(asks("urgent"))).await;
    assert_eq!(bad.json["error"]["code"], -32602, "{}", bad.text);
    let field = format!("message.metadata[\"{MARKET_EXT}\"].priority");
    assert!(
        bad.text.contains(&field.replace('"', "\\\"")),
        "{}",
        bad.text
    );

    let mut order = Vec::new();
    for _ in 0..4 {
        release.add_permits(1);
        order.push(next_start(&mut started).await);
    }
    assert_eq!(order, ["high", "normal", "normal too", "low"]);
    release.add_permits(4);
    let listed = live::jsonrpc(&http, &s.base, "queued", "ListTasks", json!({})).await;
    let tasks = listed.json["result"]["tasks"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(tasks, 6, "the refused send made no task: {}", listed.text);
}
