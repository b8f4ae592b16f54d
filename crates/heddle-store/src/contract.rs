//! The store contract: the behaviour every [`TaskStore`] and [`PushStore`]
//! must share, whoever wrote it. The memory and SQLite stores run it in this
//! crate's tests; a third-party store runs it in its own.
//!
//! Each function takes an empty store, works it through the rules (round
//! trips, scope isolation, paging, start-up recovery; push configs and the
//! outbox) and panics, naming the rule, at the first violation. Enable the
//! `contract` feature in your dev-dependencies and call them from a test:
//!
//! ```toml
//! [dev-dependencies]
//! heddle-store = { version = "0.1", default-features = false, features = ["contract"] }
//! ```
//!
//! ```
//! # #[cfg(feature = "contract")]
//! # mod example {
//! use heddle_store::{MemoryStore, contract};
//!
//! // Stands in for your store; each part wants a fresh, empty one.
//! fn my_store() -> MemoryStore {
//!     MemoryStore::default()
//! }
//!
//! #[tokio::test]
//! async fn my_store_keeps_the_contract() {
//!     contract::task_store(&my_store()).await;
//!     // Only if it keeps push configs and the outbox too:
//!     contract::push_store(&my_store()).await;
//!     contract::shared_outbox(&my_store()).await;
//!     // Only if it keeps a hub's registry:
//!     contract::registry_store(&my_store()).await;
//!     // Only if it keeps all three (retention deletes from each):
//!     contract::retention(&my_store()).await;
//! }
//! # }
//! ```

use std::collections::HashSet;

mod ledger;
pub use ledger::{
    all_entries, assert_balanced, ledger_concurrency, ledger_concurrency_across, ledger_store,
};

use heddle_core::{
    v1,
    wkt::{Struct, Timestamp},
};

use crate::{
    Delivery, DeliveryOutcome, ListPage, ListQuery, MemoryStore, NewDelivery, PushConfigRecord,
    PushStore, Scope, StoreError, TaskStore, sort_key,
};

/// The value of a store call that must succeed, or a panic saying which.
#[track_caller]
fn must<T>(result: Result<T, StoreError>, doing: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("store contract: {doing} failed: {e}"),
    }
}

/// A bare task in `state` with its status stamped `ms`.
pub(crate) fn task(id: &str, context: &str, state: v1::TaskState, ms: i64) -> v1::Task {
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

/// Metadata for the round-trip task.
fn meta(v: serde_json::Value) -> Option<Struct> {
    Some(Struct::try_from(v).expect("a JSON object literal is a Struct"))
}

/// A task using every field, so a round trip loses nothing unnoticed.
fn full_task() -> v1::Task {
    let mut t = task(
        "full",
        "ctx-full",
        v1::TaskState::InputRequired,
        1_700_000_000_123,
    );
    if let Some(s) = t.status.as_mut() {
        s.message = Some(v1::Message::new(
            "m-status",
            v1::Role::Agent,
            vec![v1::Part::text("need input")],
        ));
    }
    t.history = vec![
        v1::Message::new("m-1", v1::Role::User, vec![v1::Part::text("hi")]),
        v1::Message::new(
            "m-2",
            v1::Role::Agent,
            vec![
                v1::Part::raw(vec![0, 1, 2, 255], "application/octet-stream", "x.bin"),
                v1::Part::data(serde_json::json!({"k": [1, 2.5, null, "s"]})),
            ],
        ),
    ];
    t.artifacts = vec![v1::Artifact {
        artifact_id: "a-1".into(),
        name: "report".into(),
        description: "the report".into(),
        parts: vec![v1::Part::url(
            "https://example.com/r.pdf",
            "application/pdf",
        )],
        metadata: meta(serde_json::json!({"pages": 3})),
        extensions: vec!["urn:ext".into()],
    }];
    t.metadata = meta(serde_json::json!({"nested": {"a": true}, "n": 1}));
    t
}

/// Every id `query` lists in `scope`, walked two to a page, checking the
/// page invariants on the way.
async fn all_pages(store: &dyn TaskStore, scope: &Scope, query: ListQuery) -> Vec<String> {
    let mut ids = Vec::new();
    let mut query = ListQuery {
        page_size: 2,
        ..query
    };
    let mut total = None;
    for _ in 0..100 {
        let page = must(store.list(scope, &query).await, "list");
        assert!(
            page.tasks.len() <= 2,
            "store contract: a page holds at most page_size tasks"
        );
        assert_eq!(
            *total.get_or_insert(page.total_size),
            page.total_size,
            "store contract: total_size is the same on every page"
        );
        ids.extend(page.tasks.iter().map(|t| t.id.clone()));
        if page.next_page_token.is_empty() {
            assert_eq!(
                ids.len(),
                page.total_size as usize,
                "store contract: total_size counts every task of every page"
            );
            return ids;
        }
        assert_eq!(
            page.tasks.len(),
            2,
            "store contract: only the last page is short"
        );
        query.page_token = Some(page.next_page_token);
    }
    panic!("store contract: paging never reached a page without a next token");
}

/// Ids of `tasks` in ListTasks order.
fn expected(tasks: &[v1::Task], keep: impl Fn(&v1::Task) -> bool) -> Vec<String> {
    let mut keys: Vec<_> = tasks.iter().filter(|t| keep(t)).map(sort_key).collect();
    keys.sort_by(|a, b| b.cmp(a));
    keys.into_iter().map(|(_, id)| id).collect()
}

/// What every [`TaskStore`] must do, from empty: round trips of every field,
/// scope isolation (another owner or agent sees nothing and overwrites
/// nothing), ListTasks filters, order and paging, rejection of foreign page
/// tokens, start-up recovery (`fail_interrupted`), and
/// `save_with_deliveries` into an outbox that is another store.
///
/// # Panics
/// At the first violation, with a message naming the rule.
pub async fn task_store(store: &dyn TaskStore) {
    use v1::TaskState::*;
    let alice = Scope::new("agent", "alice");

    // Round trip of a task using every field.
    assert_eq!(
        must(store.load(&alice, "full").await, "load"),
        None,
        "store contract: an empty store finds nothing"
    );
    let full = full_task();
    must(store.save(&alice, &full).await, "save");
    assert_eq!(
        must(store.load(&alice, "full").await, "load").as_ref(),
        Some(&full),
        "store contract: a saved task loads back unchanged"
    );
    let mut updated = full.clone();
    updated
        .history
        .push(v1::Message::new("m-3", v1::Role::User, vec![]));
    must(store.save(&alice, &updated).await, "save");
    assert_eq!(
        must(store.load(&alice, "full").await, "load"),
        Some(updated.clone()),
        "store contract: saving a task again replaces it"
    );

    // Scope isolation: other owners and agents see nothing and cannot
    // overwrite.
    let bob = Scope::new("agent", "bob");
    let elsewhere = Scope::new("other-agent", "alice");
    for other in [&bob, &elsewhere] {
        assert_eq!(
            must(store.load(other, "full").await, "load"),
            None,
            "store contract: {other:?} must not see alice's task"
        );
        let q = ListQuery {
            page_size: 10,
            ..Default::default()
        };
        let page = must(store.list(other, &q).await, "list");
        assert!(
            page.tasks.is_empty() && page.total_size == 0 && page.next_page_token.is_empty(),
            "store contract: {other:?} must list none of alice's tasks"
        );
    }
    let hijack = task("full", "evil", Completed, 1);
    must(store.save(&bob, &hijack).await, "save");
    assert_eq!(
        must(store.load(&bob, "full").await, "load"),
        None,
        "store contract: a save over another owner's task is ignored"
    );
    assert_eq!(
        must(store.load(&alice, "full").await, "load"),
        Some(updated.clone()),
        "store contract: another owner cannot overwrite a task"
    );
    // The same id under another agent is a different task.
    must(store.save(&elsewhere, &hijack).await, "save");
    assert_eq!(
        must(store.load(&elsewhere, "full").await, "load"),
        Some(hijack),
        "store contract: the same id under another agent is its own task"
    );
    assert_eq!(
        must(store.load(&alice, "full").await, "load"),
        Some(updated.clone()),
        "store contract: a task of another agent leaves this one alone"
    );

    // Listing: a fresh agent so the set is known. Timestamps tie on
    // purpose (ties order by id, descending).
    let lister = Scope::new("lister", "carol");
    let tasks = vec![
        task("a", "c1", Working, 100),
        task("b", "c1", Completed, 300),
        task("c", "c2", Submitted, 300),
        task("d", "c2", Working, 200),
        task("e", "c1", Working, 300),
        task("f", "c1", Failed, 50),
        v1::Task {
            id: "g".into(),
            context_id: "c2".into(),
            ..Default::default()
        },
    ];
    for t in &tasks {
        must(store.save(&lister, t).await, "save");
    }
    // Noise in other scopes must not show up.
    let noise = [
        (Scope::new("lister", "dave"), task("z", "c1", Working, 999)),
        (Scope::new("other", "carol"), task("y", "c1", Working, 999)),
    ];
    for (scope, t) in &noise {
        must(store.save(scope, t).await, "save");
    }

    let all = all_pages(store, &lister, ListQuery::default()).await;
    assert_eq!(
        all,
        ["e", "c", "b", "d", "a", "f", "g"],
        "store contract: ListTasks orders by status time, newest first, ties by id descending"
    );
    assert_eq!(all, expected(&tasks, |_| true));
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        all.len(),
        "store contract: paging repeats no task"
    );

    let in_c1 = ListQuery {
        context_id: Some("c1".into()),
        ..Default::default()
    };
    assert_eq!(
        all_pages(store, &lister, in_c1).await,
        expected(&tasks, |t| t.context_id == "c1"),
        "store contract: the context filter"
    );
    let working = ListQuery {
        state: Some(Working),
        ..Default::default()
    };
    assert_eq!(
        all_pages(store, &lister, working).await,
        ["e", "d", "a"],
        "store contract: the state filter"
    );
    let recent = ListQuery {
        status_after_ms: Some(200),
        ..Default::default()
    };
    assert_eq!(
        all_pages(store, &lister, recent).await,
        ["e", "c", "b", "d"],
        "store contract: the status time filter (inclusive)"
    );
    let combined = ListQuery {
        context_id: Some("c1".into()),
        state: Some(Working),
        status_after_ms: Some(100),
        ..Default::default()
    };
    assert_eq!(
        all_pages(store, &lister, combined).await,
        ["e", "a"],
        "store contract: filters combine"
    );
    let none = ListQuery {
        context_id: Some("nope".into()),
        page_size: 2,
        ..Default::default()
    };
    assert_eq!(
        must(store.list(&lister, &none).await, "list"),
        ListPage::default(),
        "store contract: a filter matching nothing gives an empty last page"
    );

    // A page that ends exactly at the last task has no next token.
    let exact = ListQuery {
        page_size: 7,
        ..Default::default()
    };
    let page = must(store.list(&lister, &exact).await, "list");
    assert_eq!(
        (page.tasks.len(), page.next_page_token.as_str()),
        (7, ""),
        "store contract: a page ending at the last task has no next token"
    );
    // An empty token is the first page.
    let empty = ListQuery {
        page_size: 3,
        page_token: Some(String::new()),
        ..Default::default()
    };
    let ids: Vec<_> = must(store.list(&lister, &empty).await, "list")
        .tasks
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(
        ids,
        ["e", "c", "b"],
        "store contract: an empty page token means the first page"
    );

    for bad in ["garbage", "djE6eDp5", "%%%"] {
        let q = ListQuery {
            page_size: 2,
            page_token: Some(bad.into()),
            ..Default::default()
        };
        assert!(
            matches!(
                store.list(&lister, &q).await,
                Err(StoreError::InvalidPageToken)
            ),
            "store contract: page token {bad:?} was not issued by the store: InvalidPageToken"
        );
    }

    // fail_interrupted: exactly the SUBMITTED/WORKING tasks, everywhere.
    // Running so far: a, c, d, e (lister), z (dave), y (other agent).
    let before = Timestamp::now().as_millis();
    assert_eq!(
        must(
            store.fail_interrupted("server restarted").await,
            "fail_interrupted"
        ),
        6,
        "store contract: fail_interrupted fails every SUBMITTED and WORKING task, of every scope"
    );
    for t in &tasks {
        let got = must(store.load(&lister, &t.id).await, "load");
        let Some(got) = got else {
            panic!("store contract: fail_interrupted must keep task {}", t.id);
        };
        let was = t.status.as_ref().map_or(0, |s| s.state);
        if was == Submitted as i32 || was == Working as i32 {
            check_interrupted(t, &got, before);
        } else {
            assert_eq!(
                &got, t,
                "store contract: fail_interrupted must not touch task {} (not running)",
                t.id
            );
        }
    }
    assert_eq!(
        must(store.load(&alice, "full").await, "load"),
        Some(updated),
        "store contract: fail_interrupted must not touch an INPUT_REQUIRED task"
    );
    let working = ListQuery {
        state: Some(Working),
        page_size: 10,
        ..Default::default()
    };
    assert_eq!(
        must(store.list(&lister, &working).await, "list").total_size,
        0,
        "store contract: no task is listed WORKING after fail_interrupted"
    );
    assert_eq!(
        must(store.fail_interrupted("again").await, "fail_interrupted"),
        0,
        "store contract: a second fail_interrupted finds nothing left running"
    );

    // A status change and its deliveries, into an outbox that is not this
    // store: both land, in their own stores.
    let outbox = MemoryStore::default();
    let t = task("with-push", "ctx", Working, 7);
    let sent = delivery(&alice, "with-push", 9);
    must(
        store
            .save_with_deliveries(&alice, &t, 0, vec![sent.clone()], &outbox)
            .await,
        "save_with_deliveries",
    );
    assert_eq!(
        must(store.load(&alice, "with-push").await, "load"),
        Some(t),
        "store contract: save_with_deliveries saves the task"
    );
    let pending = must(outbox.pending_deliveries(10).await, "pending_deliveries");
    assert_eq!(
        pending.iter().map(|d| &d.item).collect::<Vec<_>>(),
        [&sent],
        "store contract: save_with_deliveries records the deliveries in the outbox it is given"
    );
}

/// A task `fail_interrupted` found running: FAILED now, with an agent
/// message saying why, and nothing else changed.
fn check_interrupted(was: &v1::Task, got: &v1::Task, before: i64) {
    let id = &was.id;
    let Some(status) = &got.status else {
        panic!("store contract: interrupted task {id} has no status");
    };
    assert_eq!(
        status.state,
        v1::TaskState::Failed as i32,
        "store contract: interrupted task {id} becomes FAILED"
    );
    assert!(
        status.timestamp.as_ref().map_or(0, Timestamp::as_millis) >= before,
        "store contract: interrupted task {id} is stamped with the time it was failed"
    );
    let Some(msg) = &status.message else {
        panic!("store contract: interrupted task {id} has no status message");
    };
    assert_eq!(
        (msg.role, msg.text().as_str()),
        (v1::Role::Agent as i32, "server restarted"),
        "store contract: interrupted task {id}: an agent message with the reason"
    );
    assert!(
        !msg.message_id.is_empty(),
        "store contract: interrupted task {id}: the message has an id"
    );
    assert_eq!(
        (&got.history, &got.artifacts),
        (&was.history, &was.artifacts),
        "store contract: interrupted task {id} keeps its history and artifacts"
    );
}

/// A push config for task `task` with id `id`.
pub(crate) fn record(task: &str, id: &str, url: &str) -> PushConfigRecord {
    PushConfigRecord {
        config: v1::TaskPushNotificationConfig {
            task_id: task.into(),
            id: id.into(),
            url: url.into(),
            token: "tok".into(),
            ..Default::default()
        },
        version: "1.0".into(),
    }
}

/// Delivery number `n` of task `task`, to its config `c1`.
fn delivery(scope: &Scope, task: &str, n: u8) -> NewDelivery {
    NewDelivery {
        id: format!("d-{task}-{n}"),
        scope: scope.clone(),
        task_id: task.into(),
        target: record(task, "c1", "https://example.com/hook"),
        content_type: "application/a2a+json".into(),
        body: vec![n],
        // Kept as given: the outbox comparisons below check these too.
        traceparent: format!("00-{:032x}-{:016x}-01", u128::from(n) + 1, u64::from(n) + 1),
        tracestate: format!("heddle=d{n}"),
    }
}

/// The URL of a config, if there is one.
fn url(found: Option<PushConfigRecord>) -> Option<String> {
    found.map(|r| r.config.url)
}

/// What every [`PushStore`] must do, from empty: several configs per task
/// in creation order, replaced by id, scoped to their owner, deleted
/// idempotently; the outbox in recording order through retry, delivery and
/// dead-lettering, read whole or by each task's and config's first.
///
/// # Panics
/// At the first violation, with a message naming the rule.
pub async fn push_store(store: &dyn PushStore) {
    let alice = Scope::new("agent", "alice");
    let bob = Scope::new("agent", "bob");

    // Several configs per task, kept in creation order; replace by id.
    for (id, url) in [
        ("c1", "https://a.example/1"),
        ("c2", "https://a.example/2"),
        ("c1", "https://a.example/1b"),
    ] {
        let put = store.put_push_config(&alice, &record("t1", id, url)).await;
        must(put, "put_push_config");
    }
    let list = must(
        store.list_push_configs(&alice, "t1").await,
        "list_push_configs",
    );
    let urls: Vec<_> = list.iter().map(|r| r.config.url.as_str()).collect();
    assert_eq!(
        urls,
        ["https://a.example/1b", "https://a.example/2"],
        "store contract: a task's configs list in creation order, a replaced one in its place"
    );
    assert_eq!(
        url(must(
            store.get_push_config(&alice, "t1", "c2").await,
            "get_push_config"
        )),
        Some("https://a.example/2".to_owned()),
        "store contract: get_push_config finds a config by task and id"
    );

    // Scoped: bob sees, replaces and deletes nothing of alice's.
    assert!(
        must(
            store.list_push_configs(&bob, "t1").await,
            "list_push_configs"
        )
        .is_empty(),
        "store contract: another owner lists none of a task's configs"
    );
    assert_eq!(
        must(
            store.get_push_config(&bob, "t1", "c1").await,
            "get_push_config"
        ),
        None,
        "store contract: another owner cannot get a config"
    );
    let put = store
        .put_push_config(&bob, &record("t1", "c1", "https://evil.example/"))
        .await;
    must(put, "put_push_config");
    assert!(
        !must(
            store.delete_push_config(&bob, "t1", "c1").await,
            "delete_push_config"
        ),
        "store contract: another owner cannot delete a config"
    );
    assert_eq!(
        url(must(
            store.get_push_config(&alice, "t1", "c1").await,
            "get_push_config"
        )),
        Some("https://a.example/1b".to_owned()),
        "store contract: another owner cannot replace a config"
    );
    let tasks = must(store.push_tasks().await, "push_tasks");
    assert!(
        tasks.contains(&(alice.clone(), "t1".to_owned())),
        "store contract: push_tasks lists every task with a config: {tasks:?}"
    );
    assert!(
        !tasks.iter().any(|(s, _)| *s == bob),
        "store contract: a refused put gives its caller no task: {tasks:?}"
    );

    // Delete is idempotent.
    assert!(
        must(
            store.delete_push_config(&alice, "t1", "c2").await,
            "delete_push_config"
        ),
        "store contract: deleting a config says it existed"
    );
    assert!(
        !must(
            store.delete_push_config(&alice, "t1", "c2").await,
            "delete_push_config"
        ),
        "store contract: deleting it again says it did not"
    );
    assert_eq!(
        must(
            store.list_push_configs(&alice, "t1").await,
            "list_push_configs"
        )
        .len(),
        1,
        "store contract: a deleted config is gone, the others stay"
    );

    // The outbox: order of recording, retry, delivered, dead.
    let first = vec![delivery(&alice, "t1", 1), delivery(&alice, "t1", 2)];
    must(store.enqueue_deliveries(first).await, "enqueue_deliveries");
    let second = vec![delivery(&alice, "t2", 3)];
    must(store.enqueue_deliveries(second).await, "enqueue_deliveries");
    let pending = must(store.pending_deliveries(10).await, "pending_deliveries");
    let bodies: Vec<_> = pending.iter().map(|d| d.item.body.first()).collect();
    assert_eq!(
        bodies,
        [Some(&1), Some(&2), Some(&3)],
        "store contract: pending deliveries come oldest first"
    );
    assert!(
        pending.windows(2).all(|w| w[0].seq < w[1].seq),
        "store contract: seq increases in recording order"
    );
    assert_eq!(
        (&pending[0].item, pending[0].attempts),
        (&delivery(&alice, "t1", 1), 0),
        "store contract: a delivery comes back as recorded, not yet attempted"
    );

    let retry = DeliveryOutcome::Retry {
        attempts: 1,
        next_attempt_ms: 1234,
        error: "connection refused".into(),
    };
    must(
        store.finish_delivery(pending[0].seq, retry).await,
        "finish_delivery",
    );
    must(
        store
            .finish_delivery(pending[1].seq, DeliveryOutcome::Delivered)
            .await,
        "finish_delivery",
    );
    let dead = DeliveryOutcome::Dead {
        attempts: 5,
        error: "HTTP 500".into(),
    };
    must(
        store.finish_delivery(pending[2].seq, dead).await,
        "finish_delivery",
    );
    let pending = must(store.pending_deliveries(10).await, "pending_deliveries");
    let left: Vec<_> = pending
        .iter()
        .map(|d| (d.attempts, d.next_attempt_ms, d.last_error.as_str()))
        .collect();
    assert_eq!(
        left,
        [(1, 1234, "connection refused")],
        "store contract: a retried delivery stays pending with its attempt recorded; \
         a delivered or dead one leaves"
    );
    let dead = must(store.dead_deliveries(10).await, "dead_deliveries");
    let dead: Vec<_> = dead
        .iter()
        .map(|d| (d.attempts, d.item.body.first(), d.last_error.as_str()))
        .collect();
    assert_eq!(
        dead,
        [(5, Some(&3), "HTTP 500")],
        "store contract: a dead delivery is kept with its attempts and last error"
    );

    // Replayed, it is due again at once, attempts counted afresh; a seq that
    // is not dead (pending, or unknown) is skipped.
    let dead_seq = must(store.dead_deliveries(10).await, "dead_deliveries")[0].seq;
    let pending_seq = must(store.pending_deliveries(10).await, "pending_deliveries")[0].seq;
    assert_eq!(
        must(
            store.replay_dead(&[dead_seq, pending_seq, i64::MAX]).await,
            "replay_dead"
        ),
        1,
        "store contract: replay_dead puts back only what is dead"
    );
    assert!(
        must(store.dead_deliveries(10).await, "dead_deliveries").is_empty(),
        "store contract: a replayed delivery is no longer dead"
    );
    let mut pending = must(store.pending_deliveries(10).await, "pending_deliveries");
    pending.sort_by_key(|d| d.seq);
    let replayed: Vec<_> = pending
        .iter()
        .filter(|d| d.seq == dead_seq)
        .map(|d| (d.attempts, d.next_attempt_ms, d.item.body.first()))
        .collect();
    assert_eq!(
        replayed,
        [(0, 0, Some(&3))],
        "store contract: a replayed delivery is pending, due now, with no attempts"
    );

    // Each task's and config's first only: a backlog takes one place.
    let backlog: Vec<_> = (10..15).map(|n| delivery(&alice, "t4", n)).collect();
    must(
        store.enqueue_deliveries(backlog).await,
        "enqueue_deliveries",
    );
    let mut other_config = delivery(&alice, "t4", 30);
    other_config.target = record("t4", "c2", "https://example.com/other");
    let after = vec![delivery(&alice, "t5", 20), other_config];
    must(store.enqueue_deliveries(after).await, "enqueue_deliveries");
    let heads = must(store.delivery_heads(10).await, "delivery_heads");
    let bodies: Vec<_> = heads.iter().filter_map(|d| d.item.body.first()).collect();
    assert_eq!(
        bodies,
        [&3, &10, &20, &30, &1],
        "store contract: delivery_heads gives the first pending delivery of each task and \
         config, the soonest due first (the retried one, due at 1234, last)"
    );
    let two = must(store.delivery_heads(2).await, "delivery_heads");
    assert_eq!(
        two.iter()
            .filter_map(|d| d.item.body.first())
            .collect::<Vec<_>>(),
        [&3, &10],
        "store contract: delivery_heads' limit counts heads"
    );
    assert_eq!(
        must(store.pending_count().await, "pending_count"),
        9,
        "store contract: pending_count counts every pending delivery"
    );

    // One task's deliveries, pending and dead, for people to read.
    let bodies = |list: &[Delivery]| -> Vec<u8> {
        list.iter()
            .filter_map(|d| d.item.body.first().copied())
            .collect()
    };
    let t4 = must(
        store.task_deliveries("agent", "t4", 10).await,
        "task_deliveries",
    );
    assert_eq!(
        (bodies(&t4.pending), bodies(&t4.dead)),
        (vec![10, 11, 12, 13, 14, 30], vec![]),
        "store contract: task_deliveries gives one task's pending deliveries, every config's, oldest first"
    );
    let two = must(
        store.task_deliveries("agent", "t4", 2).await,
        "task_deliveries",
    );
    assert_eq!(
        bodies(&two.pending),
        [10, 11],
        "store contract: task_deliveries' limit"
    );
    must(
        store
            .enqueue_deliveries(vec![delivery(&alice, "t6", 40)])
            .await,
        "enqueue_deliveries",
    );
    let t6 = must(
        store.task_deliveries("agent", "t6", 10).await,
        "task_deliveries",
    );
    let seq = t6.pending.first().map(|d| d.seq).unwrap_or_else(|| {
        panic!("store contract: task_deliveries lists a new delivery as pending")
    });
    must(
        store
            .finish_delivery(
                seq,
                DeliveryOutcome::Dead {
                    attempts: 2,
                    error: "HTTP 410".into(),
                },
            )
            .await,
        "finish_delivery",
    );
    let t6 = must(
        store.task_deliveries("agent", "t6", 10).await,
        "task_deliveries",
    );
    assert_eq!(
        (
            t6.pending.len(),
            t6.dead
                .iter()
                .map(|d| (d.attempts, d.last_error.as_str()))
                .collect::<Vec<_>>()
        ),
        (0, vec![(2, "HTTP 410")]),
        "store contract: task_deliveries lists a dead delivery with its attempts and last error"
    );
    let other = must(
        store.task_deliveries("other-agent", "t6", 10).await,
        "task_deliveries",
    );
    assert_eq!(
        other,
        crate::TaskDeliveries::default(),
        "store contract: task_deliveries is one agent's task only"
    );
}

/// What a store that keeps both tasks and the outbox must do, from empty:
/// given itself as the outbox, `save_with_deliveries` saves the task and
/// records its deliveries (in one step, if the store can).
///
/// # Panics
/// At the first violation, with a message naming the rule.
pub async fn shared_outbox<S: TaskStore + PushStore>(store: &S) {
    let alice = Scope::new("agent", "alice");
    let t = task("t3", "ctx", v1::TaskState::Working, 7);
    let first = delivery(&alice, "t3", 8);
    must(
        store.enqueue_deliveries(vec![first]).await,
        "enqueue_deliveries",
    );
    let sent = delivery(&alice, "t3", 9);
    must(
        store
            .save_with_deliveries(&alice, &t, 0, vec![sent.clone()], store)
            .await,
        "save_with_deliveries",
    );
    assert_eq!(
        must(store.load(&alice, "t3").await, "load"),
        Some(t),
        "store contract: save_with_deliveries saves the task"
    );
    let pending = must(store.pending_deliveries(10).await, "pending_deliveries");
    assert_eq!(
        pending
            .iter()
            .map(|d| d.item.body.first())
            .collect::<Vec<_>>(),
        [Some(&8), Some(&9)],
        "store contract: save_with_deliveries records the deliveries after those before them"
    );
}

/// Retention, on a store that keeps tasks, push storage and task links,
/// from empty: `purge_finished_configs` drops the configs of tasks that
/// ended before the cut-off, `purge_finished` the tasks themselves with
/// their configs and links; neither touches a task still running, one that
/// ended later, or one whose deliveries are still pending; both stop at
/// their limit.
///
/// # Panics
/// At the first violation, with a message naming the rule.
pub async fn retention<S: TaskStore + PushStore + crate::RegistryStore>(store: &S) {
    let alice = Scope::new("agent", "alice");
    let cases = [
        ("old-done", v1::TaskState::Completed, 1_000),
        ("old-rejected", v1::TaskState::Rejected, 2_000),
        ("old-busy", v1::TaskState::Failed, 1_000),
        ("old-live", v1::TaskState::Working, 1_000),
        ("new-done", v1::TaskState::Canceled, 9_000),
    ];
    for (id, state, ms) in cases {
        must(
            store.save(&alice, &task(id, "ctx", state, ms)).await,
            "save",
        );
        let config = record(id, "c1", "https://example.com/hook");
        must(
            store.put_push_config(&alice, &config).await,
            "put_push_config",
        );
        must(store.put_link("agent", id, "upstream").await, "put_link");
    }
    let pending = vec![delivery(&alice, "old-busy", 1)];
    must(
        store.enqueue_deliveries(pending).await,
        "enqueue_deliveries",
    );
    let alice = &alice;
    let configs = |id: &'static str| async move {
        must(
            store.list_push_configs(alice, id).await,
            "list_push_configs",
        )
        .len()
    };

    assert_eq!(
        must(
            store.purge_finished_configs(5_000, 10).await,
            "purge_finished_configs"
        ),
        2,
        "store contract: the configs of the two tasks that ended before the cut-off, \
         with no delivery pending, go"
    );
    let left = [
        configs("old-done").await,
        configs("old-rejected").await,
        configs("old-busy").await,
        configs("old-live").await,
        configs("new-done").await,
    ];
    assert_eq!(
        left,
        [0, 0, 1, 1, 1],
        "store contract: purge_finished_configs leaves a running task's, a later one's and \
         one with deliveries pending"
    );
    assert!(
        must(store.load(alice, "old-done").await, "load").is_some(),
        "store contract: purge_finished_configs keeps the task"
    );

    assert_eq!(
        must(store.purge_finished(5_000, 1).await, "purge_finished"),
        1,
        "store contract: purge_finished stops at its limit"
    );
    assert_eq!(
        must(store.purge_finished(5_000, 10).await, "purge_finished"),
        1,
        "store contract: purge_finished takes the other ended task on the next pass"
    );
    for (id, kept) in [
        ("old-done", false),
        ("old-rejected", false),
        ("old-busy", true),
        ("old-live", true),
        ("new-done", true),
    ] {
        assert_eq!(
            must(store.load(alice, id).await, "load").is_some(),
            kept,
            "store contract: after purge_finished, {id} is {}",
            if kept { "kept" } else { "gone" }
        );
        assert_eq!(
            must(store.link("agent", id).await, "link").is_some(),
            kept,
            "store contract: a purged task's link goes with it ({id})"
        );
    }

    // Once its deliveries are out, the busy one goes too, configs and all.
    let seq = must(store.pending_deliveries(10).await, "pending_deliveries")[0].seq;
    must(
        store.finish_delivery(seq, DeliveryOutcome::Delivered).await,
        "finish_delivery",
    );
    assert_eq!(
        must(store.purge_finished(5_000, 10).await, "purge_finished"),
        1
    );
    assert!(must(store.load(alice, "old-busy").await, "load").is_none());
    assert_eq!(
        configs("old-busy").await,
        0,
        "store contract: a purged task's configs go with it"
    );
    assert_eq!(
        must(store.purge_finished(5_000, 10).await, "purge_finished"),
        0
    );
}

/// The registry: agents round-trip, replace, list by id and delete with
/// their task links; links round-trip and replace.
pub async fn registry_store(store: &dyn crate::RegistryStore) {
    assert!(
        must(store.agents().await, "agents").is_empty(),
        "store contract: a fresh registry is empty"
    );
    must(store.put_agent("b", r#"{"v":1}"#).await, "put_agent");
    must(store.put_agent("a", r#"{"v":2}"#).await, "put_agent");
    must(
        store.put_agent("b", r#"{"v":3}"#).await,
        "put_agent (replace)",
    );
    let b = must(store.agent("b").await, "agent");
    assert_eq!(
        b.map(|r| r.document).as_deref(),
        Some(r#"{"v":3}"#),
        "store contract: put_agent replaces the document"
    );
    let ids: Vec<String> = must(store.agents().await, "agents")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        ids,
        ["a", "b"],
        "store contract: agents lists each once, by id"
    );
    assert!(
        must(store.agent("zz").await, "agent").is_none(),
        "store contract: an unknown agent is None"
    );

    must(store.put_link("b", "t1", "up-1").await, "put_link");
    must(
        store.put_link("b", "t1", "up-2").await,
        "put_link (replace)",
    );
    must(store.put_link("a", "t1", "other").await, "put_link");
    assert_eq!(
        must(store.link("b", "t1").await, "link").as_deref(),
        Some("up-2"),
        "store contract: put_link replaces the link"
    );
    assert!(
        must(store.link("b", "t2").await, "link").is_none(),
        "store contract: an unknown link is None"
    );
    assert!(
        must(store.delete_agent("b").await, "delete_agent"),
        "store contract: delete_agent says the agent was there"
    );
    assert!(
        !must(store.delete_agent("b").await, "delete_agent"),
        "store contract: deleting twice says it was gone"
    );
    assert!(
        must(store.link("b", "t1").await, "link").is_none(),
        "store contract: delete_agent drops the agent's links"
    );
    assert_eq!(
        must(store.link("a", "t1").await, "link").as_deref(),
        Some("other"),
        "store contract: delete_agent keeps other agents' links"
    );
}

/// Generations ([`TaskStore::save_at`], [`TaskStore::load_at`]), for a store
/// that keeps them (memory, SQLite and PostgreSQL do): a task comes back
/// with the generation it was saved at, a plain `save` keeps it, and a
/// later one replaces it. Another caller's scope sees nothing.
pub async fn generations(store: &dyn TaskStore) {
    let alice = Scope::new("agent", "alice");
    let mut task = full_task();
    task.id = "generations".into();
    must(store.save_at(&alice, &task, 3).await, "save_at");
    let loaded = must(store.load_at(&alice, &task.id).await, "load_at");
    assert_eq!(
        loaded.as_ref().map(|(t, g)| (t.id.as_str(), *g)),
        Some(("generations", 3)),
        "store contract: load_at gives the generation save_at wrote"
    );
    must(store.save(&alice, &task).await, "save");
    assert_eq!(
        must(store.load_at(&alice, &task.id).await, "load_at").map(|(_, g)| g),
        Some(3),
        "store contract: a plain save keeps the stored generation"
    );
    must(store.save_at(&alice, &task, 5).await, "save_at");
    assert_eq!(
        must(store.load_at(&alice, &task.id).await, "load_at").map(|(_, g)| g),
        Some(5),
        "store contract: a later generation replaces the stored one"
    );
    assert!(
        must(
            store.load_at(&Scope::new("agent", "bob"), &task.id).await,
            "load_at"
        )
        .is_none(),
        "store contract: load_at is scoped to the caller"
    );
}

/// The memory and SQLite stores, each part of the contract on a fresh store.
#[cfg(test)]
mod runs {
    /// A module of contract tests for the store `$make` gives (with
    /// whatever must outlive it, such as its temporary directory).
    macro_rules! contract_runs {
        ($name:ident, $make:expr) => {
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                #[tokio::test]
                async fn task_store() {
                    let (_keep, store) = $make;
                    crate::contract::task_store(&store).await;
                }

                #[tokio::test]
                async fn push_store() {
                    let (_keep, store) = $make;
                    crate::contract::push_store(&store).await;
                }

                #[tokio::test]
                async fn registry_store() {
                    let (_keep, store) = $make;
                    crate::contract::registry_store(&store).await;
                }

                #[tokio::test]
                async fn shared_outbox() {
                    let (_keep, store) = $make;
                    crate::contract::shared_outbox(&store).await;
                }

                #[tokio::test]
                async fn retention() {
                    let (_keep, store) = $make;
                    crate::contract::retention(&store).await;
                }

                #[tokio::test]
                async fn generations() {
                    let (_keep, store) = $make;
                    crate::contract::generations(&store).await;
                }
            }
        };
    }

    /// The ledger's contract for the store `$make` gives.
    macro_rules! ledger_runs {
        ($name:ident, $make:expr) => {
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                #[tokio::test]
                async fn ledger_store() {
                    let (_keep, store) = $make;
                    crate::contract::ledger_store(&store).await;
                }

                /// The issue's figure: 1,000 spends from 50 tasks at once.
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn ledger_concurrency() {
                    let (_keep, store) = $make;
                    crate::contract::ledger_concurrency(std::sync::Arc::new(store), 50, 1_000)
                        .await;
                }
            }
        };
    }

    contract_runs!(memory, ((), crate::MemoryStore::default()));
    ledger_runs!(memory_ledger, ((), crate::MemoryStore::default()));

    #[cfg(feature = "sqlite")]
    #[allow(clippy::unwrap_used)] // a test should fail loudly
    fn sqlite() -> (tempfile::TempDir, crate::SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open_path(dir.path().join("tasks.db")).unwrap();
        (dir, store)
    }

    #[cfg(feature = "sqlite")]
    contract_runs!(sqlite, sqlite());
    #[cfg(feature = "sqlite")]
    ledger_runs!(sqlite_ledger, sqlite());

    /// A push store that keeps the trait's defaults (`delivery_heads`,
    /// `pending_count`) over the memory store's own methods: a third-party
    /// store that writes only the required methods passes the contract.
    struct Defaults(crate::MemoryStore);

    #[async_trait::async_trait]
    impl crate::PushStore for Defaults {
        async fn put_push_config(
            &self,
            scope: &crate::Scope,
            record: &crate::PushConfigRecord,
        ) -> Result<(), crate::StoreError> {
            self.0.put_push_config(scope, record).await
        }
        async fn get_push_config(
            &self,
            scope: &crate::Scope,
            task_id: &str,
            id: &str,
        ) -> Result<Option<crate::PushConfigRecord>, crate::StoreError> {
            self.0.get_push_config(scope, task_id, id).await
        }
        async fn list_push_configs(
            &self,
            scope: &crate::Scope,
            task_id: &str,
        ) -> Result<Vec<crate::PushConfigRecord>, crate::StoreError> {
            self.0.list_push_configs(scope, task_id).await
        }
        async fn delete_push_config(
            &self,
            scope: &crate::Scope,
            task_id: &str,
            id: &str,
        ) -> Result<bool, crate::StoreError> {
            self.0.delete_push_config(scope, task_id, id).await
        }
        async fn push_tasks(&self) -> Result<Vec<(crate::Scope, String)>, crate::StoreError> {
            self.0.push_tasks().await
        }
        async fn enqueue_deliveries(
            &self,
            items: Vec<crate::NewDelivery>,
        ) -> Result<(), crate::StoreError> {
            self.0.enqueue_deliveries(items).await
        }
        async fn pending_deliveries(
            &self,
            limit: usize,
        ) -> Result<Vec<crate::Delivery>, crate::StoreError> {
            self.0.pending_deliveries(limit).await
        }
        async fn finish_delivery(
            &self,
            seq: i64,
            outcome: crate::DeliveryOutcome,
        ) -> Result<(), crate::StoreError> {
            self.0.finish_delivery(seq, outcome).await
        }
        async fn dead_deliveries(
            &self,
            limit: usize,
        ) -> Result<Vec<crate::Delivery>, crate::StoreError> {
            self.0.dead_deliveries(limit).await
        }
        async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, crate::StoreError> {
            self.0.replay_dead(seqs).await
        }
    }

    #[tokio::test]
    async fn the_push_stores_defaults_keep_the_contract() {
        crate::contract::push_store(&Defaults(crate::MemoryStore::default())).await;
    }
}
