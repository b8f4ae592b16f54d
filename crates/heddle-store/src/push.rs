//! Push notification storage: the configs callers register on their tasks
//! and the outbox of deliveries waiting to be POSTed to them.
//!
//! Configs are scoped like tasks ([`Scope`]): another caller's config is not
//! found. The outbox is server-wide: the delivery worker reads it without a
//! caller. A delivery is recorded before it is attempted, carries its own
//! copy of the target (URL, token, credentials) and of the body, and moves
//! through three states: pending (with the time of its next attempt),
//! delivered (removed) or dead (kept for inspection).

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use heddle_core::v1;

use crate::{Scope, StoreError};

/// A push config as stored: the v1.0 config and the protocol version it was
/// created in (`"1.0"` or `"0.3"`), which decides the body of its deliveries.
#[derive(Clone, Debug, PartialEq)]
pub struct PushConfigRecord {
    /// The config (its `task_id` and `id` are the key).
    pub config: v1::TaskPushNotificationConfig,
    /// The protocol version of the call that created it.
    pub version: String,
}

/// A delivery to record in the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    /// The delivery id receivers deduplicate on.
    pub id: String,
    /// The task's scope.
    pub scope: Scope,
    /// The task.
    pub task_id: String,
    /// The target config, as it stood when the event happened.
    pub target: PushConfigRecord,
    /// The `Content-Type` of the body.
    pub content_type: String,
    /// The encoded body.
    pub body: Vec<u8>,
}

/// A delivery in the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Order of recording, increasing; deliveries of one task and config go
    /// out in this order.
    pub seq: i64,
    /// What was recorded.
    pub item: NewDelivery,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (Unix milliseconds).
    pub next_attempt_ms: i64,
    /// Why the last attempt failed.
    pub last_error: String,
}

impl Delivery {
    /// The ordering group: deliveries of one task to one config.
    pub fn group(&self) -> (String, String, String) {
        (
            self.item.scope.agent.clone(),
            self.item.task_id.clone(),
            self.item.target.config.id.clone(),
        )
    }
}

/// What became of an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The receiver answered 2xx: the delivery leaves the outbox.
    Delivered,
    /// Try again at `next_attempt_ms`.
    Retry {
        /// Attempts made, this one included.
        attempts: u32,
        /// When to try again (Unix milliseconds).
        next_attempt_ms: i64,
        /// Why this attempt failed.
        error: String,
    },
    /// Give up: the delivery is dead-lettered.
    Dead {
        /// Attempts made, this one included.
        attempts: u32,
        /// Why the last attempt failed.
        error: String,
    },
}

/// Push configs and the delivery outbox. Every [`crate::TaskStore`] is one.
#[async_trait]
pub trait PushStore: Send + Sync + 'static {
    /// Creates or replaces the config `(task_id, id)` in `scope`.
    async fn put_push_config(
        &self,
        scope: &Scope,
        record: &PushConfigRecord,
    ) -> Result<(), StoreError>;

    /// One config, if it exists in `scope`.
    async fn get_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError>;

    /// A task's configs, oldest first.
    async fn list_push_configs(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError>;

    /// Deletes a config; whether it existed.
    async fn delete_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError>;

    /// Every task that has at least one config, with its scope.
    async fn push_tasks(&self) -> Result<Vec<(Scope, String)>, StoreError>;

    /// Records deliveries in the outbox, due at once, in the given order.
    async fn enqueue_deliveries(&self, items: Vec<NewDelivery>) -> Result<(), StoreError>;

    /// Pending deliveries, oldest first (at most `limit`).
    async fn pending_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError>;

    /// Records an attempt's outcome.
    async fn finish_delivery(&self, seq: i64, outcome: DeliveryOutcome) -> Result<(), StoreError>;

    /// Dead-lettered deliveries, oldest first (at most `limit`).
    async fn dead_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError>;
}

/// The in-memory half of [`crate::MemoryStore`]'s push storage.
#[derive(Debug, Default)]
pub(crate) struct MemoryPush {
    inner: Mutex<MemoryPushInner>,
}

#[derive(Debug, Default)]
struct MemoryPushInner {
    /// (agent, task) → (owner, configs in creation order).
    configs: HashMap<(String, String), (String, Vec<PushConfigRecord>)>,
    pending: BTreeMap<i64, Delivery>,
    dead: BTreeMap<i64, Delivery>,
    next_seq: i64,
}

/// Dead letters a [`crate::MemoryStore`] keeps; the oldest go first.
const MAX_MEMORY_DEAD: usize = 10_000;

impl MemoryPush {
    fn lock(&self) -> MutexGuard<'_, MemoryPushInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the configs of tasks the store evicted, so memory stays bounded.
    pub(crate) fn forget(&self, tasks: &[(String, String)]) {
        if tasks.is_empty() {
            return;
        }
        let mut inner = self.lock();
        for key in tasks {
            inner.configs.remove(key);
        }
    }
}

#[async_trait]
impl PushStore for crate::MemoryStore {
    async fn put_push_config(
        &self,
        scope: &Scope,
        record: &PushConfigRecord,
    ) -> Result<(), StoreError> {
        let mut inner = self.push.lock();
        let key = (scope.agent.clone(), record.config.task_id.clone());
        let (owner, list) = inner
            .configs
            .entry(key)
            .or_insert_with(|| (scope.owner.clone(), Vec::new()));
        if *owner != scope.owner {
            return Ok(());
        }
        match list.iter_mut().find(|r| r.config.id == record.config.id) {
            Some(r) => *r = record.clone(),
            None => list.push(record.clone()),
        }
        Ok(())
    }

    async fn get_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError> {
        let list = self.list_push_configs(scope, task_id).await?;
        Ok(list.into_iter().find(|r| r.config.id == id))
    }

    async fn list_push_configs(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        let inner = self.push.lock();
        Ok(inner
            .configs
            .get(&(scope.agent.clone(), task_id.to_owned()))
            .filter(|(owner, _)| *owner == scope.owner)
            .map(|(_, list)| list.clone())
            .unwrap_or_default())
    }

    async fn delete_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut inner = self.push.lock();
        let key = (scope.agent.clone(), task_id.to_owned());
        let Some((owner, list)) = inner.configs.get_mut(&key) else {
            return Ok(false);
        };
        if *owner != scope.owner {
            return Ok(false);
        }
        let before = list.len();
        list.retain(|r| r.config.id != id);
        let removed = list.len() != before;
        if list.is_empty() {
            inner.configs.remove(&key);
        }
        Ok(removed)
    }

    async fn push_tasks(&self) -> Result<Vec<(Scope, String)>, StoreError> {
        let inner = self.push.lock();
        Ok(inner
            .configs
            .iter()
            .map(|((agent, task), (owner, _))| (Scope::new(agent, owner), task.clone()))
            .collect())
    }

    async fn enqueue_deliveries(&self, items: Vec<NewDelivery>) -> Result<(), StoreError> {
        let mut inner = self.push.lock();
        for item in items {
            inner.next_seq += 1;
            let seq = inner.next_seq;
            inner.pending.insert(
                seq,
                Delivery {
                    seq,
                    item,
                    attempts: 0,
                    next_attempt_ms: 0,
                    last_error: String::new(),
                },
            );
        }
        Ok(())
    }

    async fn pending_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let inner = self.push.lock();
        Ok(inner.pending.values().take(limit).cloned().collect())
    }

    async fn finish_delivery(&self, seq: i64, outcome: DeliveryOutcome) -> Result<(), StoreError> {
        let mut inner = self.push.lock();
        match outcome {
            DeliveryOutcome::Delivered => {
                inner.pending.remove(&seq);
            }
            DeliveryOutcome::Retry {
                attempts,
                next_attempt_ms,
                error,
            } => {
                if let Some(d) = inner.pending.get_mut(&seq) {
                    d.attempts = attempts;
                    d.next_attempt_ms = next_attempt_ms;
                    d.last_error = error;
                }
            }
            DeliveryOutcome::Dead { attempts, error } => {
                if let Some(mut d) = inner.pending.remove(&seq) {
                    d.attempts = attempts;
                    d.last_error = error;
                    inner.dead.insert(seq, d);
                    while inner.dead.len() > MAX_MEMORY_DEAD {
                        inner.dead.pop_first();
                    }
                }
            }
        }
        Ok(())
    }

    async fn dead_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let inner = self.push.lock();
        Ok(inner.dead.values().take(limit).cloned().collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
pub(crate) mod tests {
    use super::*;

    fn record(task: &str, id: &str, url: &str) -> PushConfigRecord {
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

    fn delivery(scope: &Scope, task: &str, n: u8) -> NewDelivery {
        NewDelivery {
            id: format!("d-{task}-{n}"),
            scope: scope.clone(),
            task_id: task.into(),
            target: record(task, "c1", "https://example.com/hook"),
            content_type: "application/a2a+json".into(),
            body: vec![n],
        }
    }

    /// What every store must do with push configs and the outbox.
    pub(crate) async fn push_contract(store: &dyn crate::TaskStore) {
        let alice = Scope::new("agent", "alice");
        let bob = Scope::new("agent", "bob");

        // Several configs per task, kept in creation order; replace by id.
        store
            .put_push_config(&alice, &record("t1", "c1", "https://a.example/1"))
            .await
            .unwrap();
        store
            .put_push_config(&alice, &record("t1", "c2", "https://a.example/2"))
            .await
            .unwrap();
        store
            .put_push_config(&alice, &record("t1", "c1", "https://a.example/1b"))
            .await
            .unwrap();
        let list = store.list_push_configs(&alice, "t1").await.unwrap();
        let urls: Vec<_> = list.iter().map(|r| r.config.url.as_str()).collect();
        assert_eq!(urls, ["https://a.example/1b", "https://a.example/2"]);
        assert_eq!(
            store
                .get_push_config(&alice, "t1", "c2")
                .await
                .unwrap()
                .map(|r| r.config.url),
            Some("https://a.example/2".to_owned())
        );

        // Scoped: bob sees, replaces and deletes nothing of alice's.
        assert!(
            store
                .list_push_configs(&bob, "t1")
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.get_push_config(&bob, "t1", "c1").await.unwrap(), None);
        store
            .put_push_config(&bob, &record("t1", "c1", "https://evil.example/"))
            .await
            .unwrap();
        assert!(!store.delete_push_config(&bob, "t1", "c1").await.unwrap());
        assert_eq!(
            store
                .get_push_config(&alice, "t1", "c1")
                .await
                .unwrap()
                .map(|r| r.config.url),
            Some("https://a.example/1b".to_owned())
        );
        let tasks = store.push_tasks().await.unwrap();
        assert!(
            tasks.contains(&(alice.clone(), "t1".to_owned())),
            "{tasks:?}"
        );
        assert!(!tasks.iter().any(|(s, _)| *s == bob));

        // Delete is idempotent.
        assert!(store.delete_push_config(&alice, "t1", "c2").await.unwrap());
        assert!(!store.delete_push_config(&alice, "t1", "c2").await.unwrap());
        assert_eq!(
            store.list_push_configs(&alice, "t1").await.unwrap().len(),
            1
        );

        // The outbox: order of recording, retry, delivered, dead.
        store
            .enqueue_deliveries(vec![delivery(&alice, "t1", 1), delivery(&alice, "t1", 2)])
            .await
            .unwrap();
        store
            .enqueue_deliveries(vec![delivery(&alice, "t2", 3)])
            .await
            .unwrap();
        let pending = store.pending_deliveries(10).await.unwrap();
        let bodies: Vec<_> = pending.iter().map(|d| d.item.body[0]).collect();
        assert_eq!(bodies, [1, 2, 3]);
        assert!(pending.windows(2).all(|w| w[0].seq < w[1].seq));
        assert_eq!(pending[0].item, delivery(&alice, "t1", 1));
        assert_eq!(pending[0].attempts, 0);

        store
            .finish_delivery(
                pending[0].seq,
                DeliveryOutcome::Retry {
                    attempts: 1,
                    next_attempt_ms: 1234,
                    error: "connection refused".into(),
                },
            )
            .await
            .unwrap();
        store
            .finish_delivery(pending[1].seq, DeliveryOutcome::Delivered)
            .await
            .unwrap();
        store
            .finish_delivery(
                pending[2].seq,
                DeliveryOutcome::Dead {
                    attempts: 5,
                    error: "HTTP 500".into(),
                },
            )
            .await
            .unwrap();
        let pending = store.pending_deliveries(10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(
            (
                pending[0].attempts,
                pending[0].next_attempt_ms,
                pending[0].last_error.as_str()
            ),
            (1, 1234, "connection refused")
        );
        let dead = store.dead_deliveries(10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].attempts, dead[0].item.body[0]), (5, 3));
        assert_eq!(dead[0].last_error, "HTTP 500");

        // A status change and its deliveries in one step.
        let t = crate::tests::task("t3", "ctx", v1::TaskState::Working, 7);
        store
            .save_with_deliveries(&alice, &t, vec![delivery(&alice, "t3", 9)])
            .await
            .unwrap();
        assert_eq!(store.load(&alice, "t3").await.unwrap(), Some(t));
        let pending = store.pending_deliveries(10).await.unwrap();
        assert_eq!(pending.last().map(|d| d.item.body[0]), Some(9));
    }

    #[tokio::test]
    async fn memory_push_contract() {
        push_contract(&crate::MemoryStore::default()).await;
    }

    #[tokio::test]
    async fn memory_store_drops_the_configs_of_evicted_tasks() {
        use crate::TaskStore as _;
        let store = crate::MemoryStore::new(crate::MemoryLimits {
            max_terminal_tasks: 1,
            ..Default::default()
        });
        let scope = Scope::new("agent", "alice");
        let done = |id: &str| crate::tests::task(id, "ctx", v1::TaskState::Completed, 1);
        store.save(&scope, &done("t1")).await.unwrap();
        store
            .put_push_config(&scope, &record("t1", "c1", "https://a.example/"))
            .await
            .unwrap();
        assert_eq!(
            store.list_push_configs(&scope, "t1").await.unwrap().len(),
            1
        );
        // A second finished task pushes the first out, and its config with it.
        store.save(&scope, &done("t2")).await.unwrap();
        assert_eq!(store.load(&scope, "t1").await.unwrap(), None);
        assert!(
            store
                .list_push_configs(&scope, "t1")
                .await
                .unwrap()
                .is_empty()
        );
    }
}
