//! Two push workers (two replicas) on one PostgreSQL outbox, delivering to
//! one receiver: every delivery arrives once, and each task's in order.
//! Needs `HEDDLE_TEST_POSTGRES_URL`; without it the test says it skipped and
//! passes, unless `HEDDLE_REQUIRE_SERVICES=1`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::{Router, http::HeaderMap, routing::post};
use heddle_core::v1;
use heddle_server::{PushNotifier, PushOptions, PushPolicy, push::DELIVERY_ID_HEADER};
use heddle_store::{
    NewDelivery, PostgresOptions, PostgresStore, PushConfigRecord, PushStore, Scope,
};
use sqlx::{AssertSqlSafe, Connection as _};

fn database(test: &str) -> Option<String> {
    match std::env::var("HEDDLE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("HEDDLE_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{test}: HEDDLE_REQUIRE_SERVICES=1 but HEDDLE_TEST_POSTGRES_URL is not set"
            );
            println!("skipped: {test} needs PostgreSQL (set HEDDLE_TEST_POSTGRES_URL)");
            None
        }
    }
}

/// Drops the test's schema when the test ends, even by a panic.
struct DropSchema(String, String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let (url, name) = (self.0.clone(), self.1.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                    let sql = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
                    let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                }
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_deliver_each_push_once_in_order() {
    let Some(url) = database("two_replicas_deliver_each_push_once_in_order") else {
        return;
    };
    let schema = format!("heddle_server_test_{}", std::process::id());
    let _cleanup = DropSchema(url.clone(), schema.clone());
    let opts = || PostgresOptions {
        max_connections: 4,
        schema: Some(schema.clone()),
        ..Default::default()
    };
    let a = Arc::new(PostgresStore::connect(&url, opts()).await.expect("store a"));
    let b = Arc::new(PostgresStore::connect(&url, opts()).await.expect("store b"));

    // The receiver records each delivery id in arrival order.
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&got);
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap| {
            let seen = Arc::clone(&seen);
            async move {
                let id = headers
                    .get(DELIVERY_ID_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().expect("lock").push(id);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hook = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let scope = Scope::new("agent", "alice");
    let mut items = Vec::new();
    for n in 0..6 {
        for t in 0..10 {
            items.push(NewDelivery {
                id: format!("t{t}-{n}"),
                scope: scope.clone(),
                task_id: format!("t{t}"),
                target: PushConfigRecord {
                    config: v1::TaskPushNotificationConfig {
                        task_id: format!("t{t}"),
                        id: "c1".into(),
                        url: hook.clone(),
                        ..Default::default()
                    },
                    version: "1.0".into(),
                },
                content_type: "application/a2a+json".into(),
                body: b"{}".to_vec(),
                traceparent: String::new(),
                tracestate: String::new(),
            });
        }
    }
    let total = items.len();
    a.enqueue_deliveries(items).await.expect("enqueue");

    let push = || PushOptions {
        policy: PushPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("cidr")],
            allow_http: true,
        },
        ..Default::default()
    };
    let na = PushNotifier::new(a.clone(), push()).expect("notifier a");
    let nb = PushNotifier::new(b.clone(), push()).expect("notifier b");
    let (wa, wb) = (
        na.start().await.expect("start a"),
        nb.start().await.expect("start b"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.lock().expect("lock").len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Time for a duplicate to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    wa.abort();
    wb.abort();

    let got = got.lock().expect("lock").clone();
    assert_eq!(got.len(), total, "each delivery once: {got:?}");
    let mut per_task: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for id in &got {
        let (task, n) = id.split_once('-').expect("id");
        per_task
            .entry(task.to_owned())
            .or_default()
            .push(n.parse().expect("n"));
    }
    for (task, ns) in per_task {
        assert_eq!(ns, [0, 1, 2, 3, 4, 5], "{task} out of order or repeated");
    }
    assert!(a.pending_deliveries(100).await.expect("outbox").is_empty());
}
