//! `/metrics` checked against the calls made: each wire (binding and
//! version) sends, reads a task that is not there, and streams; the scrape
//! must count exactly those, by method, binding and version, see every
//! stream closed again, and count the tasks by state. Then `/healthz` and
//! `/readyz`, with a store that fails.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
};

use heddle_store::{ListPage, ListQuery, Scope, StoreError, TaskStore};

use super::*;

/// One sample of the exposition: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// A small parser of the text format: `name{k="v",…} value` lines.
fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let value: f64 = value.parse().expect("a number");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split("\",")
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once("=\"").expect("k=\"v\"");
                (k.to_owned(), v.trim_end_matches('"').to_owned())
            })
            .collect();
        out.push((name.to_owned(), labels, value));
    }
    out
}

/// The sum of the samples of `name` whose labels include `with`.
fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

async fn scrape(app: &App) -> Vec<Sample> {
    let (status, body) = http(&app.router, Method::GET, "/metrics", None, None).await;
    assert_eq!(status, 200);
    let text = String::from_utf8(body).expect("utf-8");
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with EOF");
    parse(&text)
}

/// The labels each wire's calls carry.
fn labels_of(wire: Wire) -> (&'static str, &'static str) {
    match wire {
        Wire::JsonRpcV1 => ("jsonrpc", "1.0"),
        Wire::JsonRpcV03 => ("jsonrpc", "0.3"),
        Wire::RestV1 => ("rest", "1.0"),
        Wire::RestV03 => ("rest", "0.3"),
        Wire::GrpcV1 => ("grpc", "1.0"),
        Wire::GrpcV03 => ("grpc", "0.3"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_calls_made_on_every_binding_and_version() {
    let app = app().await;
    for (n, wire) in WIRES.into_iter().enumerate() {
        let sent = wire
            .send(
                &app,
                "echo",
                wire.message(&format!("m{n}"), "hi", None),
                false,
            )
            .await
            .expect("sent");
        assert_eq!(
            sent.status.expect("status").state(),
            v1::TaskState::Completed
        );
        let missing = wire.get(&app, "echo", "no-such-task", None).await;
        assert_eq!(
            missing.expect_err("not there"),
            Failure("TASK_NOT_FOUND".into())
        );
        let events = wire
            .stream(
                &app,
                "writer-stream",
                wire.message(&format!("s{n}"), "go", None),
            )
            .await;
        assert!(!events.is_empty(), "{wire:?}");
    }
    // A task left waiting for input, then answered.
    let waiting = Wire::JsonRpcV1
        .send(
            &app,
            "writer",
            Wire::JsonRpcV1.message("w1", "a brief", None),
            false,
        )
        .await
        .expect("sent");
    assert_eq!(
        waiting.status.as_ref().expect("status").state(),
        v1::TaskState::InputRequired
    );
    let m = scrape(&app).await;
    let active = |state: &str| {
        sum(
            &m,
            "heddle_tasks_active",
            &[("agent", "writer"), ("state", state)],
        )
    };
    assert_eq!(active("TASK_STATE_INPUT_REQUIRED"), 1.0);

    for wire in WIRES {
        let (binding, version) = labels_of(wire);
        let on = |agent: &'static str, method: &'static str| {
            [
                ("agent", agent),
                ("method", method),
                ("binding", binding),
                ("version", version),
            ]
        };
        let count = |labels: &[(&str, &str)], outcome: &'static str| {
            let mut with = labels.to_vec();
            with.push(("outcome", outcome));
            sum(&m, "heddle_requests_total", &with)
        };
        let send = on("echo", "SendMessage");
        assert_eq!(count(&send, "OK"), 1.0, "{wire:?}");
        let get = on("echo", "GetTask");
        assert_eq!(count(&get, "TASK_NOT_FOUND"), 1.0, "{wire:?}");
        let stream = on("writer-stream", "SendStreamingMessage");
        assert_eq!(count(&stream, "OK"), 1.0, "{wire:?}");
        for labels in [send, get, stream] {
            assert_eq!(
                sum(&m, "heddle_request_duration_seconds_count", &labels),
                1.0,
                "{wire:?} {labels:?}"
            );
        }
    }
    // Nothing else was counted: 3 calls a wire, and the writer's send.
    assert_eq!(sum(&m, "heddle_requests_total", &[]), 19.0);
    let echo = |state| {
        sum(
            &m,
            "heddle_task_transitions_total",
            &[("agent", "echo"), ("state", state)],
        )
    };
    assert_eq!(echo("TASK_STATE_SUBMITTED"), 6.0);
    assert_eq!(echo("TASK_STATE_COMPLETED"), 6.0);
    assert_eq!(sum(&m, "heddle_tasks_active", &[("agent", "echo")]), 0.0);

    // The answer completes the writer's task: out of INPUT_REQUIRED.
    let done = Wire::JsonRpcV1
        .send(
            &app,
            "writer",
            Wire::JsonRpcV1.message("w2", "the board", Some(&waiting.id)),
            false,
        )
        .await
        .expect("answered");
    assert_eq!(
        done.status.expect("status").state(),
        v1::TaskState::Completed
    );

    // A stream closes once its client has read it to the end.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let m = loop {
        let m = scrape(&app).await;
        if sum(&m, "heddle_streams_open", &[]) == 0.0 || std::time::Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(sum(&m, "heddle_streams_open", &[]), 0.0);
    assert_eq!(sum(&m, "heddle_tasks_active", &[]), 0.0);
    let writer = |state| {
        sum(
            &m,
            "heddle_task_transitions_total",
            &[("agent", "writer"), ("state", state)],
        )
    };
    assert_eq!(writer("TASK_STATE_INPUT_REQUIRED"), 1.0);
    assert_eq!(writer("TASK_STATE_COMPLETED"), 1.0);
    assert_eq!(
        sum(
            &m,
            "heddle_task_transitions_total",
            &[
                ("agent", "writer-stream"),
                ("state", "TASK_STATE_COMPLETED")
            ]
        ),
        6.0
    );
}

/// A memory store whose reads fail while `down` is set.
#[derive(Default)]
struct Flaky {
    inner: MemoryStore,
    down: AtomicBool,
}

impl Flaky {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::Acquire) {
            Err(StoreError::Database("the disk is on fire".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait::async_trait]
impl TaskStore for Flaky {
    async fn load(&self, scope: &Scope, id: &str) -> Result<Option<v1::Task>, StoreError> {
        self.check()?;
        self.inner.load(scope, id).await
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        self.check()?;
        self.inner.save(scope, task).await
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        self.check()?;
        self.inner.list(scope, query).await
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        self.inner.fail_interrupted(reason).await
    }
}

#[tokio::test]
async fn readyz_answers_503_naming_the_store_while_the_store_fails() {
    let store = Arc::new(Flaky::default());
    let hub = Hub::builder("http://test.local", store.clone())
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    let router = hub.router();
    let get = |path: &'static str| {
        let router = router.clone();
        async move {
            let (status, body) = http(&router, Method::GET, path, None, None).await;
            (
                status,
                serde_json::from_slice::<Value>(&body).expect("json"),
            )
        }
    };
    let (status, body) = get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["checks"]["store"]["ok"], true);
    assert_eq!(body["checks"]["registry"]["agents"], 1);
    assert!(body["checks"]["event_bus"]["detail"].is_string(), "{body}");

    store.down.store(true, Ordering::Release);
    let (status, body) = get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable");
    assert_eq!(body["checks"]["store"]["ok"], false);
    assert!(
        !body.to_string().contains("on fire"),
        "the store's error stays in the log: {body}"
    );
    // Alive all the same.
    let (status, body) = get("/healthz").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("alive")));

    store.down.store(false, Ordering::Release);
    assert_eq!(get("/readyz").await.0, 200);
}
