//! [`RegistryStore`] for [`crate::MemoryStore`]: the hub's agent
//! registrations and task links, kept in memory beside the tasks (gone with
//! the process, like the tasks).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::{AgentRecord, MemoryStore, RegistryStore, StoreError};

/// Most task links a [`MemoryStore`] keeps; the oldest go first, as the
/// tasks they belong to are evicted too.
const MAX_MEMORY_LINKS: usize = 100_000;

#[derive(Debug, Default)]
pub(crate) struct MemoryRegistry {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    agents: BTreeMap<String, AgentRecord>,
    /// (agent, task) → (insertion number, link).
    links: BTreeMap<(String, String), (u64, String)>,
    /// insertion number → key, to drop the oldest link first.
    order: BTreeMap<u64, (String, String)>,
    next: u64,
}

impl MemoryRegistry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the links of tasks the store deleted.
    pub(crate) fn forget_links(&self, tasks: &[(String, String)]) {
        if tasks.is_empty() {
            return;
        }
        let mut inner = self.lock();
        for key in tasks {
            if let Some((n, _)) = inner.links.remove(key) {
                inner.order.remove(&n);
            }
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[async_trait]
impl RegistryStore for MemoryStore {
    async fn put_agent(&self, id: &str, document: &str) -> Result<(), StoreError> {
        let record = AgentRecord {
            id: id.to_owned(),
            document: document.to_owned(),
            updated_ms: now_ms(),
        };
        self.registry.lock().agents.insert(id.to_owned(), record);
        Ok(())
    }

    async fn agent(&self, id: &str) -> Result<Option<AgentRecord>, StoreError> {
        Ok(self.registry.lock().agents.get(id).cloned())
    }

    async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        Ok(self.registry.lock().agents.values().cloned().collect())
    }

    async fn delete_agent(&self, id: &str) -> Result<bool, StoreError> {
        let mut inner = self.registry.lock();
        let existed = inner.agents.remove(id).is_some();
        let gone: Vec<(String, String)> = inner
            .links
            .range((id.to_owned(), String::new())..)
            .take_while(|((agent, _), _)| agent == id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if let Some((n, _)) = inner.links.remove(&key) {
                inner.order.remove(&n);
            }
        }
        Ok(existed)
    }

    async fn put_link(&self, agent: &str, task_id: &str, link: &str) -> Result<(), StoreError> {
        let mut inner = self.registry.lock();
        let key = (agent.to_owned(), task_id.to_owned());
        let n = inner.next;
        inner.next = n.saturating_add(1);
        if let Some((old, _)) = inner.links.insert(key.clone(), (n, link.to_owned())) {
            inner.order.remove(&old);
        }
        inner.order.insert(n, key);
        while inner.links.len() > MAX_MEMORY_LINKS {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.links.remove(&oldest);
        }
        Ok(())
    }

    async fn link(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .registry
            .lock()
            .links
            .get(&(agent.to_owned(), task_id.to_owned()))
            .map(|(_, l)| l.clone()))
    }
}
