//! PostgresStore against a real PostgreSQL: the public store contract, and
//! what only a shared database adds (several pools, several replicas).
//!
//! Needs `HEDDLE_TEST_POSTGRES_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432/test`); without it each test says it
//! skipped and passes, unless `HEDDLE_REQUIRE_SERVICES=1`. Each test works
//! in a schema of its own, dropped at its end.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)] // a test should fail loudly

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heddle_core::{v1, wkt::Timestamp};
use heddle_store::{
    Account, DeliveryOutcome, LedgerStore, ListQuery, NewDelivery, NewReservation, PostgresOptions,
    PostgresStore, PushConfigRecord, PushStore, Reserved, Scope, TaskStore, contract,
};
use sqlx::AssertSqlSafe;

/// The test database's URL, or `None` (after saying so) to skip.
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

/// A schema of its own for one test, dropped when the test ends (even by a
/// panic).
struct Schema {
    url: String,
    name: String,
}

impl Schema {
    fn new(url: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "heddle_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        Self {
            url: url.to_owned(),
            name,
        }
    }

    fn options(&self) -> PostgresOptions {
        PostgresOptions {
            max_connections: 4,
            schema: Some(self.name.clone()),
            ..Default::default()
        }
    }

    async fn store(&self) -> PostgresStore {
        PostgresStore::connect(&self.url, self.options())
            .await
            .unwrap()
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // Its own thread and runtime: Drop cannot await, and the test's
        // runtime may be the current thread.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
                sqlx::raw_sql(AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
                )))
                .execute(&mut conn)
                .await
                .unwrap();
            });
        })
        .join();
        if dropped.is_err() && !std::thread::panicking() {
            panic!("could not drop schema {}", self.name);
        }
    }
}

/// A fresh store in a fresh schema, or a skip.
macro_rules! store_or_skip {
    ($test:literal) => {{
        let Some(url) = database($test) else { return };
        let schema = Schema::new(&url);
        let store = schema.store().await;
        (schema, store)
    }};
}

#[tokio::test]
async fn contract_task_store() {
    let (_schema, store) = store_or_skip!("contract_task_store");
    contract::task_store(&store).await;
}

#[tokio::test]
async fn contract_generations() {
    let (_schema, store) = store_or_skip!("contract_generations");
    contract::generations(&store).await;
}

#[tokio::test]
async fn contract_push_store() {
    let (_schema, store) = store_or_skip!("contract_push_store");
    contract::push_store(&store).await;
}

#[tokio::test]
async fn contract_shared_outbox() {
    let (_schema, store) = store_or_skip!("contract_shared_outbox");
    contract::shared_outbox(&store).await;
}

#[tokio::test]
async fn contract_retention() {
    let (_schema, store) = store_or_skip!("contract_retention");
    contract::retention(&store).await;
}

#[tokio::test]
async fn contract_registry_store() {
    let (_schema, store) = store_or_skip!("contract_registry_store");
    contract::registry_store(&store).await;
}

#[tokio::test]
async fn contract_ledger_store() {
    let (_schema, store) = store_or_skip!("contract_ledger_store");
    contract::ledger_store(&store).await;
}

/// The figure: 1,000 spends from 50 tasks at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_ledger_concurrency() {
    let (_schema, store) = store_or_skip!("contract_ledger_concurrency");
    contract::ledger_concurrency(Arc::new(store), 50, 1_000).await;
}

/// Two replicas (two pools) spend from one wallet at once, half the
/// spenders on each: the wallet never overdraws and the ledger balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_spend_one_wallet() {
    let (schema, a) = store_or_skip!("two_stores_spend_one_wallet");
    let b = schema.store().await;
    let stores: [Arc<dyn LedgerStore>; 2] = [Arc::new(a), Arc::new(b)];
    contract::ledger_concurrency_across(&stores, 50, 1_000).await;
}

/// Two replicas buy subscriptions from one wallet at once, each to another
/// agent: only the wallet's row is shared, so only the conditional debit
/// keeps it from overdrawing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_subscribe_from_one_wallet() {
    let (schema, a) = store_or_skip!("two_stores_subscribe_from_one_wallet");
    let b = schema.store().await;
    let stores: [Arc<dyn LedgerStore>; 2] = [Arc::new(a), Arc::new(b)];
    stores[0].top_up("alice", "USD", 100, "").await.unwrap();
    let mut handles = Vec::new();
    for n in 0..40 {
        let store = Arc::clone(&stores[n % 2]);
        handles.push(tokio::spawn(async move {
            let agent = format!("agent-{n}");
            store.subscribe("alice", &agent, "USD", 7, 1_000).await
        }));
    }
    let mut held = 0;
    for h in handles {
        match h.await.unwrap().unwrap() {
            Reserved::Held => held += 1,
            Reserved::Insufficient { available } => assert!((0..7).contains(&available)),
        }
    }
    assert_eq!(
        held,
        100 / 7,
        "every subscription the wallet could pay, no more"
    );
    let mut accounts = vec![Account::Wallet("alice".into()), Account::Funding];
    accounts.extend((0..40).map(|n| Account::Earnings(format!("agent-{n}"))));
    contract::assert_balanced(stores[1].as_ref(), &accounts).await;
}

/// Two replicas settle the same reservations at once, with different
/// charges: each is settled once, and both hear the same settlement.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_settle_each_reservation_once() {
    let (schema, a) = store_or_skip!("two_stores_settle_each_reservation_once");
    let b = schema.store().await;
    a.top_up("alice", "USD", 1_000, "").await.unwrap();
    for n in 0..20 {
        let r = NewReservation {
            id: format!("r{n}"),
            owner: "alice".into(),
            agent: "agent".into(),
            task: format!("t{n}"),
            currency: "USD".into(),
            amount: 10,
        };
        assert_eq!(a.reserve(&r).await.unwrap(), Reserved::Held);
    }
    let mut charged = 0;
    for n in 0..20 {
        let id = format!("r{n}");
        let (x, y) = tokio::join!(a.settle(&id, 3), b.settle(&id, 7));
        let (x, y) = (x.unwrap().unwrap(), y.unwrap().unwrap());
        assert_eq!(x, y, "{id} settled twice");
        charged += x.charged;
    }
    let earned = Account::Earnings("agent".into());
    assert_eq!(b.balance(&earned, "USD").await.unwrap(), charged);
    let wallet = Account::Wallet("alice".into());
    assert_eq!(a.balance(&wallet, "USD").await.unwrap(), 1_000 - charged);
    let held = Account::Held("alice".into());
    contract::assert_balanced(&a, &[wallet, held, earned, Account::Funding]).await;
}

fn task(id: &str, context: &str, state: v1::TaskState, ms: i64) -> v1::Task {
    v1::Task {
        id: id.into(),
        context_id: context.into(),
        status: Some(v1::TaskStatus {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp::from_millis(ms)),
        }),
        ..Default::default()
    }
}

fn delivery(task: &str, config: &str, n: u32) -> NewDelivery {
    NewDelivery {
        id: format!("d-{task}-{config}-{n}"),
        scope: Scope::new("agent", "alice"),
        task_id: task.into(),
        target: PushConfigRecord {
            config: v1::TaskPushNotificationConfig {
                task_id: task.into(),
                id: config.into(),
                url: "https://example.com/hook".into(),
                ..Default::default()
            },
            version: "1.0".into(),
        },
        content_type: "application/a2a+json".into(),
        body: n.to_be_bytes().to_vec(),
        traceparent: String::new(),
        tracestate: String::new(),
    }
}

#[tokio::test]
async fn a_task_saved_through_one_pool_is_read_through_another() {
    let (schema, a) = store_or_skip!("a_task_saved_through_one_pool_is_read_through_another");
    let b = schema.store().await;
    let alice = Scope::new("agent", "alice");
    let t = task("t1", "ctx", v1::TaskState::Working, 5);
    a.save(&alice, &t).await.unwrap();
    assert_eq!(b.load(&alice, "t1").await.unwrap(), Some(t));
    // The owner recorded first holds across pools too.
    let bob = Scope::new("agent", "bob");
    b.save(&bob, &task("t1", "evil", v1::TaskState::Completed, 9))
        .await
        .unwrap();
    assert_eq!(b.load(&bob, "t1").await.unwrap(), None);
    let listed = a
        .list(
            &alice,
            &ListQuery {
                context_id: Some("ctx".into()),
                page_size: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(listed.total_size, 1);
    assert_eq!(listed.tasks[0].context_id, "ctx");
}

#[tokio::test]
async fn reconnecting_runs_the_migrations_idempotently() {
    let (schema, first) = store_or_skip!("reconnecting_runs_the_migrations_idempotently");
    let alice = Scope::new("agent", "alice");
    let t = task("kept", "ctx", v1::TaskState::Completed, 1);
    first.save(&alice, &t).await.unwrap();
    drop(first);
    // Several replicas starting together, on an already migrated schema.
    let (a, b, c) = tokio::join!(schema.store(), schema.store(), schema.store());
    for store in [&a, &b, &c] {
        assert_eq!(store.load(&alice, "kept").await.unwrap(), Some(t.clone()));
    }
    PostgresStore::migrate_only(&schema.url, schema.options())
        .await
        .unwrap();
    // The URL's `schema` parameter names the same schema.
    let by_url = format!("{}?schema={}", schema.url, schema.name);
    let d = PostgresStore::connect(&by_url, PostgresOptions::default())
        .await
        .unwrap();
    assert_eq!(d.load(&alice, "kept").await.unwrap(), Some(t));
}

/// A fresh schema that several replicas migrate at once ends up migrated
/// once, and every one of them works.
#[tokio::test]
async fn replicas_starting_together_on_a_fresh_schema_migrate_once() {
    let Some(url) = database("replicas_starting_together_on_a_fresh_schema_migrate_once") else {
        return;
    };
    let schema = Schema::new(&url);
    let (a, b) = tokio::join!(
        PostgresStore::connect(&url, schema.options()),
        PostgresStore::connect(&url, schema.options())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let alice = Scope::new("agent", "alice");
    a.save(&alice, &task("t", "c", v1::TaskState::Working, 1))
        .await
        .unwrap();
    assert!(b.load(&alice, "t").await.unwrap().is_some());
}

/// Two stores (two replicas) read the outbox at once: no delivery goes to
/// both, and no group (task and config) is split between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_never_claim_the_same_delivery() {
    let (schema, a) = store_or_skip!("two_stores_never_claim_the_same_delivery");
    let b = schema.store().await;
    let mut items = Vec::new();
    for n in 0..3 {
        for t in 0..20 {
            items.push(delivery(&format!("t{t}"), "c1", n));
        }
    }
    a.enqueue_deliveries(items).await.unwrap();
    for _ in 0..5 {
        let (da, db) = tokio::join!(a.pending_deliveries(25), b.pending_deliveries(25));
        let (da, db) = (da.unwrap(), db.unwrap());
        let seqs_a: HashSet<i64> = da.iter().map(|d| d.seq).collect();
        let seqs_b: HashSet<i64> = db.iter().map(|d| d.seq).collect();
        assert!(seqs_a.is_disjoint(&seqs_b), "a delivery claimed twice");
        let groups_a: HashSet<_> = da.iter().map(|d| d.group()).collect();
        let groups_b: HashSet<_> = db.iter().map(|d| d.group()).collect();
        assert!(groups_a.is_disjoint(&groups_b), "a group split");
        // A store's own claims come back to it.
        let again: HashSet<i64> = a
            .pending_deliveries(1000)
            .await
            .unwrap()
            .iter()
            .map(|d| d.seq)
            .collect();
        assert!(seqs_a.is_subset(&again));
        assert!(again.is_disjoint(&seqs_b));
    }
}

/// Two push workers on two stores drain one outbox: every delivery is sent
/// exactly once, and each group's in recording order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_deliver_each_once_in_order() {
    let (schema, a) = store_or_skip!("two_workers_deliver_each_once_in_order");
    let b = schema.store().await;
    let mut items = Vec::new();
    for n in 0..5 {
        for t in 0..8 {
            for c in ["c1", "c2"] {
                items.push(delivery(&format!("t{t}"), c, n));
            }
        }
    }
    let total = items.len();
    a.enqueue_deliveries(items).await.unwrap();
    let sent: Arc<Mutex<Vec<(String, String, u32)>>> = Arc::default();
    let worker = |store: PostgresStore, sent: Arc<Mutex<Vec<(String, String, u32)>>>| async move {
        for _ in 0..1000 {
            if sent.lock().unwrap().len() >= total {
                return;
            }
            // As the push worker does: the first of each group it was given.
            let pending = store.pending_deliveries(6).await.unwrap();
            let mut seen = HashSet::new();
            for d in pending {
                if !seen.insert(d.group()) {
                    continue;
                }
                let n = u32::from_be_bytes(d.item.body.clone().try_into().unwrap());
                sent.lock().unwrap().push((
                    d.item.task_id.clone(),
                    d.item.target.config.id.clone(),
                    n,
                ));
                store
                    .finish_delivery(d.seq, DeliveryOutcome::Delivered)
                    .await
                    .unwrap();
            }
            tokio::task::yield_now().await;
        }
    };
    let (ra, rb) = tokio::join!(
        tokio::spawn(worker(a, Arc::clone(&sent))),
        tokio::spawn(worker(b, Arc::clone(&sent)))
    );
    ra.unwrap();
    rb.unwrap();
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), total, "every delivery sent exactly once");
    let mut per_group: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (t, c, n) in sent.iter() {
        per_group
            .entry((t.clone(), c.clone()))
            .or_default()
            .push(*n);
    }
    for (group, ns) in per_group {
        assert_eq!(ns, [0, 1, 2, 3, 4], "{group:?} out of order or repeated");
    }
}

/// A replica that stops renewing its claims (it died) hands its groups over
/// once the lease runs out.
#[tokio::test]
async fn a_lapsed_claim_is_taken_over() {
    let Some(url) = database("a_lapsed_claim_is_taken_over") else {
        return;
    };
    let schema = Schema::new(&url);
    let short = PostgresOptions {
        claim_lease: Duration::from_millis(300),
        ..schema.options()
    };
    let dead = PostgresStore::connect(&url, short).await.unwrap();
    let live = schema.store().await;
    dead.enqueue_deliveries(vec![delivery("t1", "c1", 1), delivery("t1", "c1", 2)])
        .await
        .unwrap();
    assert_eq!(dead.pending_deliveries(1).await.unwrap().len(), 1);
    assert!(
        live.pending_deliveries(10).await.unwrap().is_empty(),
        "the group is held, its later delivery too"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let taken = live.pending_deliveries(10).await.unwrap();
    assert_eq!(taken.len(), 2, "the whole group, first delivery first");
    assert!(taken[0].seq < taken[1].seq);
    assert!(dead.pending_deliveries(10).await.unwrap().is_empty());
}

/// ListTasks and GetTask are index scans, whatever the table holds.
#[tokio::test]
async fn get_and_list_use_an_index() {
    let (schema, store) = store_or_skip!("get_and_list_use_an_index");
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&schema.url).await.unwrap();
    let set_path = format!("SET search_path TO \"{}\"", schema.name);
    sqlx::raw_sql(AssertSqlSafe(set_path))
        .execute(&mut conn)
        .await
        .unwrap();
    // 20 000 tasks over 100 owners and 50 contexts, then fresh statistics.
    sqlx::raw_sql(
        "INSERT INTO tasks (agent, id, owner, context_id, state, status_ms, body)
         SELECT 'agent', 't' || i, 'o' || (i % 100), 'c' || (i % 50), 3, i, '\\x'::bytea
         FROM generate_series(1, 20000) AS i;
         ANALYZE tasks;",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    for sql in [
        "SELECT body, generation, owner FROM tasks WHERE agent = 'agent' AND id = 't5'",
        "SELECT body, id, status_ms FROM tasks WHERE agent = 'agent' AND owner = 'o5'
         AND context_id = 'c5' ORDER BY status_ms DESC, id DESC LIMIT 11",
        "SELECT body, id, status_ms FROM tasks WHERE agent = 'agent' AND owner = 'o5'
         AND context_id = 'c5' AND (status_ms, id) < (10000, 't10000')
         ORDER BY status_ms DESC, id DESC LIMIT 11",
        "SELECT body, id, status_ms FROM tasks WHERE agent = 'agent' AND owner = 'o5'
         AND state = 3 ORDER BY status_ms DESC, id DESC LIMIT 11",
        "SELECT COUNT(*) FROM tasks WHERE agent = 'agent' AND owner = 'o5' AND context_id = 'c5'",
    ] {
        let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!("EXPLAIN {sql}")))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{sql}\n{plan}");
        assert!(!plan.contains("Sort"), "{sql}\n{plan}");
    }
    // The store's own list agrees with what was inserted.
    let page = store
        .list(
            &Scope::new("agent", "o5"),
            &ListQuery {
                context_id: Some("c5".into()),
                page_size: 3,
                ..Default::default()
            },
        )
        .await;
    // The bodies above are empty protobuf: valid, default tasks.
    let page = page.unwrap();
    assert_eq!(page.total_size, 200);
    assert_eq!(page.tasks.len(), 3);
}

fn working(id: &str) -> v1::Task {
    v1::Task {
        id: id.into(),
        context_id: "c".into(),
        status: Some(v1::TaskStatus {
            state: v1::TaskState::Working as i32,
            message: None,
            timestamp: Some(Timestamp::now()),
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_save_never_goes_back_a_generation() {
    let (_schema, store) = store_or_skip!("a_save_never_goes_back_a_generation");
    let scope = Scope::new("agent", "alice");
    let mut task = working("g1");
    store.save_at(&scope, &task, 3).await.unwrap();
    let (_, generation) = store.load_at(&scope, "g1").await.unwrap().unwrap();
    assert_eq!(generation, 3);
    // Another writer that read generation 2 and saves its 3rd is behind.
    task.context_id = "stale".into();
    assert!(matches!(
        store.save_at(&scope, &task, 2).await,
        Err(heddle_store::StoreError::Conflict(_))
    ));
    let (kept, _) = store.load_at(&scope, "g1").await.unwrap().unwrap();
    assert_eq!(kept.context_id, "c");
    // The same generation again (an artifact flush) and a later one are fine.
    task.context_id = "c".into();
    store.save_at(&scope, &task, 3).await.unwrap();
    store.save_at(&scope, &task, 5).await.unwrap();
    assert_eq!(store.load_at(&scope, "g1").await.unwrap().unwrap().1, 5);
    // A plain save keeps the generation it finds.
    store.save(&scope, &task).await.unwrap();
    assert_eq!(store.load_at(&scope, "g1").await.unwrap().unwrap().1, 5);
    // An ended task stays ended: a later generation from a replica that
    // lost the task does not move it.
    let mut failed = task.clone();
    failed.status.as_mut().unwrap().state = v1::TaskState::Failed as i32;
    store.save_at(&scope, &failed, 6).await.unwrap();
    store.save_at(&scope, &failed, 6).await.unwrap();
    let mut late = task.clone();
    late.status.as_mut().unwrap().state = v1::TaskState::Completed as i32;
    assert!(matches!(
        store.save_at(&scope, &late, 7).await,
        Err(heddle_store::StoreError::Conflict(_))
    ));
    let (kept, _) = store.load_at(&scope, "g1").await.unwrap().unwrap();
    assert_eq!(kept.status.unwrap().state(), v1::TaskState::Failed);
    // Another caller's scope sees nothing.
    assert!(
        store
            .load_at(&Scope::new("agent", "bob"), "g1")
            .await
            .unwrap()
            .is_none()
    );
}

/// Takes a lease (see `LeaseStore::acquire_lease`); whether it was taken.
async fn leased(
    store: &PostgresStore,
    scope: &Scope,
    task: &str,
    replica: &str,
    ttl_ms: i64,
    run: Option<&heddle_store::LeasedRun>,
) -> bool {
    use heddle_store::LeaseStore;
    store
        .acquire_lease(scope, task, replica, ttl_ms, run)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_expired_lease_is_claimed_once_and_a_live_one_not_at_all() {
    use heddle_store::LeaseStore;
    let (_schema, store) =
        store_or_skip!("an_expired_lease_is_claimed_once_and_a_live_one_not_at_all");
    let other = _schema.store().await;
    let scope = Scope::new("a", "alice");
    let agents = ["a".to_owned()];
    // Leases already expired (a negative time to live).
    for (task, replica) in [("t1", "r1"), ("t2", "r1"), ("t3", "r2")] {
        assert!(leased(&store, &scope, task, replica, -1_000, None).await);
    }
    assert_eq!(
        store.lease_holder("a", "t3").await.unwrap().as_deref(),
        Some("r2")
    );
    // r2 is alive: its lease moves on, and its renewal names it; r1's two
    // stay expired.
    assert_eq!(
        store.renew_leases("r2", 60_000).await.unwrap(),
        [heddle_store::HeldLease {
            agent: "a".into(),
            task_id: "t3".into()
        }]
    );
    // A live lease is not taken by another replica; its holder renews it.
    assert!(!leased(&store, &scope, "t3", "r1", 60_000, None).await);
    assert!(leased(&store, &scope, "t3", "r2", 60_000, None).await);
    // Only the agents asked for are claimed.
    let none = store
        .claim_expired(&["other".to_owned()], "r9", 10)
        .await
        .unwrap();
    assert!(none.is_empty());
    // Two replicas claim at once: together they get r1's two, once each.
    let (x, y) = tokio::join!(
        store.claim_expired(&agents, "r9", 10),
        other.claim_expired(&agents, "r8", 10)
    );
    let mut claimed: Vec<_> = x.unwrap().into_iter().chain(y.unwrap()).collect();
    claimed.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let ids: Vec<_> = claimed
        .iter()
        .map(|l| (l.task_id.as_str(), l.replica.as_str()))
        .collect();
    assert_eq!(ids, [("t1", "r1"), ("t2", "r1")]);
    assert!(claimed.iter().all(|l| l.scope == scope));
    assert!(
        store
            .claim_expired(&agents, "r9", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // An expired lease is taken over by another replica; the first one's
    // next renewal does not name it (its run there must stop).
    assert!(leased(&store, &scope, "t4", "r1", -1_000, None).await);
    assert!(leased(&store, &scope, "t4", "r2", 60_000, None).await);
    assert!(store.renew_leases("r1", 60_000).await.unwrap().is_empty());
    // A released lease is gone; another replica's release is a no-op.
    store.release_lease("a", "t3", "r1").await.unwrap();
    assert!(store.lease_holder("a", "t3").await.unwrap().is_some());
    store.release_lease("a", "t3", "r2").await.unwrap();
    assert_eq!(store.lease_holder("a", "t3").await.unwrap(), None);
    // A replica that stops hands its tasks over: its leases, renewed with
    // no time left, are claimed at the others' next round.
    assert!(leased(&store, &scope, "t5", "r3", 60_000, None).await);
    assert!(
        store
            .claim_expired(&agents, "r9", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.renew_leases("r3", 0).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let handed: Vec<_> = store
        .claim_expired(&agents, "r9", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.task_id)
        .collect();
    assert_eq!(handed, ["t5"]);
    // A replica does not claim its own expired lease (its renewal extends
    // it); another one does.
    assert!(leased(&store, &scope, "t6", "r9", -1_000, None).await);
    assert!(
        store
            .claim_expired(&agents, "r9", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let claimed = store.claim_expired(&agents, "r1", 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].task_id, "t6");
}

/// What a run was asked with rides on its lease, and comes back to the
/// replica that claims it; a later lease call with none keeps it.
#[tokio::test]
async fn a_leased_runs_request_comes_back_with_its_expired_lease() {
    use heddle_store::{LeaseStore, LeasedRun};
    let (_schema, store) =
        store_or_skip!("a_leased_runs_request_comes_back_with_its_expired_lease");
    let scope = Scope::new("a", "alice");
    let mut metadata = heddle_core::wkt::Struct::default();
    metadata.0.insert("reportName".into(), "q3".into());
    let run = LeasedRun {
        configuration: Some(heddle_core::v1::SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into()],
            history_length: Some(2),
            ..Default::default()
        }),
        metadata: Some(metadata),
        extensions: vec!["https://example.com/ext/v1".into()],
        protocol_version: "0.3".into(),
    };
    assert!(leased(&store, &scope, "t1", "r1", 60_000, None).await);
    assert!(leased(&store, &scope, "t1", "r1", -1_000, Some(&run)).await);
    // Leased again without a record (a continued task's first lease).
    assert!(leased(&store, &scope, "t1", "r1", -1_000, None).await);
    let claimed = store
        .claim_expired(&["a".to_owned()], "r9", 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].run.as_ref(), Some(&run));
    // A lease with no record comes back with none.
    assert!(leased(&store, &scope, "t2", "r1", -1_000, None).await);
    let claimed = store
        .claim_expired(&["a".to_owned()], "r9", 10)
        .await
        .unwrap();
    assert_eq!(claimed[0].run, None);
    // A record that cannot be read loses only itself: the lease comes back.
    for task in ["t3", "t4"] {
        assert!(leased(&store, &scope, task, "r1", -1_000, Some(&run)).await);
    }
    sqlx::query("UPDATE task_leases SET run_request = '\\xff'::bytea WHERE task_id = 't3'")
        .execute(store.pool())
        .await
        .unwrap();
    let mut claimed = store
        .claim_expired(&["a".to_owned()], "r9", 10)
        .await
        .unwrap();
    claimed.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0].run, None);
    assert_eq!(claimed[1].run.as_ref(), Some(&run));
}
