//! # heddle-store
//!
//! Where tasks live between requests and across restarts.
//!
//! [`TaskStore`] is the one trait every store implements. Every call takes a
//! [`Scope`] (the agent a task belongs to and the caller that owns it), so a
//! store cannot be asked for another caller's task by accident: a task outside
//! the scope is simply not found.
//!
//! * [`MemoryStore`]: in-process, bounded (terminal tasks are evicted by age,
//!   count and bytes; live ones never are, and a live task that would grow the
//!   store past its byte limit is refused).
//! * [`SqliteStore`]: the embedded default. WAL mode, one writer thread that
//!   groups concurrent saves into one transaction, a small pool of readers.
//!   Tasks are stored as protobuf bytes beside indexed columns for ListTasks.

mod memory;
mod page;
mod push;
mod sqlite;
mod sqlite_push;

pub use memory::{DEFAULT_MEMORY_MAX_BYTES, MemoryLimits, MemoryStore};
pub use page::{PageToken, sort_key};
pub use push::{Delivery, DeliveryOutcome, NewDelivery, PushConfigRecord, PushStore};
pub use sqlite::{SqliteOptions, SqliteStore};

use async_trait::async_trait;
use heddle_core::v1;

/// Whose tasks a call may touch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The hosted agent (the v1.0 `tenant` on a multi-agent server).
    pub agent: String,
    /// The authenticated caller that created the task (`""` on an open server).
    pub owner: String,
}

impl Scope {
    /// A scope for `agent` and `owner`.
    pub fn new(agent: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            owner: owner.into(),
        }
    }
}

/// ListTasks filters and paging, already validated by the caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only tasks of this context.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<v1::TaskState>,
    /// Only tasks whose status timestamp is at or after this (ms since epoch).
    pub status_after_ms: Option<i64>,
    /// Page size, 1..=100.
    pub page_size: u32,
    /// Opaque token from a previous page.
    pub page_token: Option<String>,
}

/// One page of ListTasks, newest status first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListPage {
    /// The tasks, full (the caller trims history and artifacts).
    pub tasks: Vec<v1::Task>,
    /// Token for the next page; `""` on the last page.
    pub next_page_token: String,
    /// Number of tasks matching the filters, over all pages.
    pub total_size: u32,
}

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The page token was not issued by this store.
    #[error("invalid page token")]
    InvalidPageToken,
    /// A stored row could not be decoded.
    #[error("stored task {0} is corrupt: {1}")]
    Corrupt(String, String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(String),
    /// The store is shutting down.
    #[error("store is closed")]
    Closed,
    /// A bounded store has no room for the save, even after evicting every
    /// task it may evict (see [`MemoryLimits::max_bytes`]).
    #[error("task store is full: {0}")]
    Full(String),
}

/// Task persistence. Implementations must be safe to share across threads.
#[async_trait]
pub trait TaskStore: PushStore + Send + Sync + 'static {
    /// The task with `task_id` in `scope`, if any.
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError>;

    /// Inserts or replaces the task (keyed by scope.agent and task.id). The
    /// owner recorded at first save never changes.
    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError>;

    /// A page of the scope's tasks, newest status timestamp first (ties by id).
    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError>;

    /// At start-up: every task left SUBMITTED or WORKING by a previous process
    /// becomes FAILED with an agent status message saying `reason`. Returns
    /// how many were failed.
    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError>;

    /// Saves `task` and records `deliveries` of the event that changed it in
    /// one step, so a crash keeps both or neither (SQLite: one transaction).
    /// The default saves, then records.
    async fn save_with_deliveries(
        &self,
        scope: &Scope,
        task: &v1::Task,
        deliveries: Vec<NewDelivery>,
    ) -> Result<(), StoreError> {
        self.save(scope, task).await?;
        self.enqueue_deliveries(deliveries).await
    }
}

/// The behaviour every store must share, run against each store by its own
/// module's tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
pub(crate) mod tests {
    use super::*;
    use heddle_core::wkt::{Struct, Timestamp};
    use std::collections::HashSet;

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

    fn full_task() -> v1::Task {
        let meta = |v: serde_json::Value| Struct::try_from(v).unwrap();
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
            metadata: Some(meta(serde_json::json!({"pages": 3}))),
            extensions: vec!["urn:ext".into()],
        }];
        t.metadata = Some(meta(serde_json::json!({"nested": {"a": true}, "n": 1})));
        t
    }

    async fn all_pages(store: &dyn TaskStore, scope: &Scope, query: ListQuery) -> Vec<String> {
        let mut ids = Vec::new();
        let mut query = ListQuery {
            page_size: 2,
            ..query
        };
        let mut total = None;
        for _ in 0..100 {
            let page = store.list(scope, &query).await.unwrap();
            assert!(page.tasks.len() <= 2);
            assert_eq!(*total.get_or_insert(page.total_size), page.total_size);
            ids.extend(page.tasks.iter().map(|t| t.id.clone()));
            if page.next_page_token.is_empty() {
                assert_eq!(ids.len(), page.total_size as usize, "total_size");
                return ids;
            }
            assert_eq!(page.tasks.len(), 2, "short page before the end");
            query.page_token = Some(page.next_page_token);
        }
        panic!("paging never ended");
    }

    /// Ids of `tasks` in ListTasks order.
    fn expected(tasks: &[v1::Task], keep: impl Fn(&v1::Task) -> bool) -> Vec<String> {
        let mut keys: Vec<_> = tasks.iter().filter(|t| keep(t)).map(sort_key).collect();
        keys.sort_by(|a, b| b.cmp(a));
        keys.into_iter().map(|(_, id)| id).collect()
    }

    /// The shared contract: both stores must pass it from empty.
    pub(crate) async fn contract(store: &dyn TaskStore) {
        use v1::TaskState::*;
        let alice = Scope::new("agent", "alice");

        // Round trip of a task using every field.
        assert_eq!(store.load(&alice, "full").await.unwrap(), None);
        let full = full_task();
        store.save(&alice, &full).await.unwrap();
        assert_eq!(
            store.load(&alice, "full").await.unwrap().as_ref(),
            Some(&full)
        );
        let mut updated = full.clone();
        updated
            .history
            .push(v1::Message::new("m-3", v1::Role::User, vec![]));
        store.save(&alice, &updated).await.unwrap();
        assert_eq!(
            store.load(&alice, "full").await.unwrap(),
            Some(updated.clone())
        );

        // Scope isolation: other owners and agents see nothing and cannot
        // overwrite.
        let bob = Scope::new("agent", "bob");
        let elsewhere = Scope::new("other-agent", "alice");
        for other in [&bob, &elsewhere] {
            assert_eq!(store.load(other, "full").await.unwrap(), None);
            let q = ListQuery {
                page_size: 10,
                ..Default::default()
            };
            let page = store.list(other, &q).await.unwrap();
            assert!(
                page.tasks.is_empty() && page.total_size == 0 && page.next_page_token.is_empty()
            );
        }
        let hijack = task("full", "evil", Completed, 1);
        store.save(&bob, &hijack).await.unwrap();
        assert_eq!(store.load(&bob, "full").await.unwrap(), None);
        assert_eq!(
            store.load(&alice, "full").await.unwrap(),
            Some(updated.clone())
        );
        // The same id under another agent is a different task.
        store.save(&elsewhere, &hijack).await.unwrap();
        assert_eq!(store.load(&elsewhere, "full").await.unwrap(), Some(hijack));
        assert_eq!(
            store.load(&alice, "full").await.unwrap(),
            Some(updated.clone())
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
            store.save(&lister, t).await.unwrap();
        }
        // Noise in other scopes must not show up.
        store
            .save(
                &Scope::new("lister", "dave"),
                &task("z", "c1", Working, 999),
            )
            .await
            .unwrap();
        store
            .save(
                &Scope::new("other", "carol"),
                &task("y", "c1", Working, 999),
            )
            .await
            .unwrap();

        let all = all_pages(store, &lister, ListQuery::default()).await;
        assert_eq!(all, ["e", "c", "b", "d", "a", "f", "g"]);
        assert_eq!(all, expected(&tasks, |_| true));
        assert_eq!(
            all.iter().collect::<HashSet<_>>().len(),
            all.len(),
            "duplicates"
        );

        let in_c1 = ListQuery {
            context_id: Some("c1".into()),
            ..Default::default()
        };
        assert_eq!(
            all_pages(store, &lister, in_c1).await,
            expected(&tasks, |t| t.context_id == "c1")
        );
        let working = ListQuery {
            state: Some(Working),
            ..Default::default()
        };
        assert_eq!(all_pages(store, &lister, working).await, ["e", "d", "a"]);
        let recent = ListQuery {
            status_after_ms: Some(200),
            ..Default::default()
        };
        assert_eq!(
            all_pages(store, &lister, recent).await,
            ["e", "c", "b", "d"]
        );
        let combined = ListQuery {
            context_id: Some("c1".into()),
            state: Some(Working),
            status_after_ms: Some(100),
            ..Default::default()
        };
        assert_eq!(all_pages(store, &lister, combined).await, ["e", "a"]);
        let none = ListQuery {
            context_id: Some("nope".into()),
            page_size: 2,
            ..Default::default()
        };
        assert_eq!(
            store.list(&lister, &none).await.unwrap(),
            ListPage::default()
        );

        // A page that ends exactly at the last task has no next token.
        let exact = ListQuery {
            page_size: 7,
            ..Default::default()
        };
        let page = store.list(&lister, &exact).await.unwrap();
        assert_eq!((page.tasks.len(), page.next_page_token.as_str()), (7, ""));
        // An empty token is the first page.
        let empty = ListQuery {
            page_size: 3,
            page_token: Some(String::new()),
            ..Default::default()
        };
        let ids: Vec<_> = store
            .list(&lister, &empty)
            .await
            .unwrap()
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["e", "c", "b"]);

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
                "{bad}"
            );
        }

        // fail_interrupted: exactly the SUBMITTED/WORKING tasks, everywhere.
        // Running so far: a, c, d, e (lister), z (dave), y (other agent).
        let before = Timestamp::now().as_millis();
        assert_eq!(store.fail_interrupted("server restarted").await.unwrap(), 6);
        for t in &tasks {
            let got = store.load(&lister, &t.id).await.unwrap().unwrap();
            let was = t.status.as_ref().map_or(0, |s| s.state);
            if was == Submitted as i32 || was == Working as i32 {
                let status = got.status.unwrap();
                assert_eq!(status.state, Failed as i32, "{}", t.id);
                assert!(status.timestamp.unwrap().as_millis() >= before);
                let msg = status.message.unwrap();
                assert_eq!(msg.role, v1::Role::Agent as i32);
                assert_eq!(msg.text(), "server restarted");
                assert!(!msg.message_id.is_empty());
                assert_eq!(
                    (got.history, got.artifacts),
                    (t.history.clone(), t.artifacts.clone())
                );
            } else {
                assert_eq!(&got, t, "{} changed", t.id);
            }
        }
        assert_eq!(store.load(&alice, "full").await.unwrap(), Some(updated));
        let working = ListQuery {
            state: Some(Working),
            page_size: 10,
            ..Default::default()
        };
        assert_eq!(store.list(&lister, &working).await.unwrap().total_size, 0);
        assert_eq!(store.fail_interrupted("again").await.unwrap(), 0);
    }
}
