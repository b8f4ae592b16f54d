//! [`PushStore`] for [`crate::MemoryStore`]: the configs callers register on
//! their tasks and the outbox of deliveries waiting to be POSTed to them,
//! kept in memory beside the tasks.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::{
    Delivery, DeliveryOutcome, NewDelivery, PushConfigRecord, PushStore, Scope, StoreError,
};

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

    /// The (agent, task) of every pending delivery.
    pub(crate) fn pending_tasks(&self) -> std::collections::HashSet<(String, String)> {
        self.lock()
            .pending
            .values()
            .map(|d| (d.item.scope.agent.clone(), d.item.task_id.clone()))
            .collect()
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

    async fn delivery_heads(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let inner = self.push.lock();
        let mut seen = std::collections::HashSet::new();
        let mut heads: Vec<&Delivery> = inner
            .pending
            .values()
            .filter(|d| seen.insert(d.group()))
            .collect();
        heads.sort_by_key(|d| (d.next_attempt_ms, d.seq));
        Ok(heads.into_iter().take(limit).cloned().collect())
    }

    async fn purge_finished_configs(
        &self,
        before_ms: i64,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let busy = self.push.pending_tasks();
        let with_configs: Vec<(String, String)> = self
            .push
            .lock()
            .configs
            .keys()
            .filter(|key| !busy.contains(*key))
            .cloned()
            .collect();
        let mut ended = self.ended_before(with_configs, before_ms);
        ended.truncate(limit);
        self.push.forget(&ended);
        Ok(ended.len() as u64)
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        Ok(self.push.lock().pending.len() as u64)
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

    async fn task_deliveries(
        &self,
        agent: &str,
        task_id: &str,
        limit: usize,
    ) -> Result<crate::TaskDeliveries, StoreError> {
        let inner = self.push.lock();
        let of_task = |list: &std::collections::BTreeMap<i64, Delivery>| -> Vec<Delivery> {
            list.values()
                .filter(|d| d.item.scope.agent == agent && d.item.task_id == task_id)
                .take(limit)
                .cloned()
                .collect()
        };
        Ok(crate::TaskDeliveries {
            pending: of_task(&inner.pending),
            dead: of_task(&inner.dead),
        })
    }

    async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, StoreError> {
        let mut inner = self.push.lock();
        let mut replayed = 0;
        for seq in seqs {
            if let Some(mut d) = inner.dead.remove(seq) {
                d.attempts = 0;
                d.next_attempt_ms = 0;
                inner.pending.insert(*seq, d);
                replayed += 1;
            }
        }
        Ok(replayed)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use crate::contract::record;
    use heddle_core::v1;

    #[tokio::test]
    async fn memory_store_drops_the_configs_of_evicted_tasks() {
        use crate::TaskStore as _;
        let store = crate::MemoryStore::new(crate::MemoryLimits {
            max_terminal_tasks: 1,
            ..Default::default()
        });
        let scope = Scope::new("agent", "alice");
        let done = |id: &str| crate::contract::task(id, "ctx", v1::TaskState::Completed, 1);
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
