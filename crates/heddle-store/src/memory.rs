//! The in-process store: fast, lost on restart, and bounded so a long-running
//! server does not grow without limit as finished tasks pile up.

use std::collections::VecDeque;

// Keys are server-made task ids and agent ids; foldhash (randomly seeded)
// costs a fraction of SipHash on every save and load.
use foldhash::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;

use crate::page::{PageToken, status_ms};
use crate::{ListPage, ListQuery, PushStore, Scope, StoreError, TaskStore};

/// Bounds on what a [`MemoryStore`] keeps. Live (non-terminal) tasks are
/// never evicted: dropping one would lose work in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Most terminal tasks kept; the oldest-finished go first.
    pub max_terminal_tasks: usize,
    /// How long a terminal task is kept after it was last saved.
    pub max_terminal_age: Duration,
    /// Most bytes of tasks kept, live and terminal, counting each task as
    /// its protobuf encoding (history and artifacts included) plus its id
    /// and owner. Past it the oldest-finished terminal tasks go first; a
    /// save that grows a live task past it with no terminal task left to
    /// evict fails with [`StoreError::Full`].
    pub max_bytes: usize,
}

/// [`MemoryLimits::max_bytes`] by default: 256 MiB.
pub const DEFAULT_MEMORY_MAX_BYTES: usize = 256 << 20;

impl Default for MemoryLimits {
    fn default() -> Self {
        Self {
            max_terminal_tasks: 10_000,
            max_terminal_age: Duration::from_secs(3600),
            max_bytes: DEFAULT_MEMORY_MAX_BYTES,
        }
    }
}

/// A bounded in-memory [`TaskStore`].
///
/// Terminal tasks enter a FIFO eviction queue when saved; each save checks
/// the queue front and evicts while there are too many terminal tasks, too
/// many bytes of tasks, or the oldest is too old. Re-saving a queued task adds a fresh queue entry and
/// makes the old one stale (its generation no longer matches), so nothing is
/// counted twice; stale entries are skipped at the front and compacted away
/// once they outnumber the live ones, which keeps every save amortized O(1)
/// and memory flat.
#[derive(Debug, Default)]
pub struct MemoryStore {
    limits: MemoryLimits,
    inner: Mutex<Inner>,
    pub(crate) push: crate::push::MemoryPush,
    pub(crate) registry: crate::registry::MemoryRegistry,
    pub(crate) ledger: crate::ledger::MemoryLedger,
}

#[derive(Debug, Default)]
struct Inner {
    /// agent → task id → entry. Nested so a lookup needs no key allocation
    /// and a list only walks one agent's tasks.
    agents: HashMap<String, HashMap<String, Entry>>,
    /// Terminal tasks in the order they were (last) saved terminal.
    queue: VecDeque<Queued>,
    /// Entries whose `terminal_gen` is set, i.e. tasks counted against the limit.
    terminal: usize,
    /// The `bytes` of every entry.
    bytes: usize,
    /// The `bytes` of the terminal entries: what eviction can free.
    terminal_bytes: usize,
    /// Source of queue generations.
    next_gen: u64,
    /// Tasks evicted since the last drain, whose push configs go with them.
    evicted: Vec<(String, String)>,
}

#[derive(Debug)]
struct Entry {
    owner: String,
    task: v1::Task,
    /// What the task counts against [`MemoryLimits::max_bytes`].
    bytes: usize,
    /// The generation of this task's live queue entry, if it is terminal.
    terminal_gen: Option<u64>,
    /// The task's own generation as last saved (`TaskStore::save_at`).
    saved_at: u64,
}

/// The bytes a task counts against [`MemoryLimits::max_bytes`]: its
/// encoding, a fair proxy for its heap size, plus the key and owner.
fn entry_bytes(owner: &str, task: &v1::Task) -> usize {
    task.encoded_len()
        .saturating_add(task.id.len())
        .saturating_add(owner.len())
}

#[derive(Debug)]
struct Queued {
    agent: String,
    id: String,
    generation: u64,
    at: Instant,
}

/// Queue slack tolerated before compaction, so tiny stores don't compact on
/// every save.
const QUEUE_SLACK: usize = 64;

impl MemoryStore {
    /// An empty store with these limits.
    pub fn new(limits: MemoryLimits) -> Self {
        Self {
            limits,
            inner: Mutex::default(),
            push: Default::default(),
            registry: Default::default(),
            ledger: Default::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation leaves `Inner` consistent before anything can
        // panic, so a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// (stored tasks, queue entries), to check the bounds in tests.
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        let inner = self.lock();
        let tasks = inner.agents.values().map(HashMap::len).sum();
        (tasks, inner.queue.len())
    }

    /// (accounted bytes, the same summed afresh over every entry).
    #[cfg(test)]
    fn bytes(&self) -> (usize, usize) {
        let inner = self.lock();
        let fresh = inner
            .agents
            .values()
            .flat_map(HashMap::values)
            .map(|e| entry_bytes(&e.owner, &e.task))
            .sum();
        (inner.bytes, fresh)
    }
}

fn is_terminal(task: &v1::Task) -> bool {
    state_of(task).is_some_and(v1::TaskState::is_terminal)
}

fn state_of(task: &v1::Task) -> Option<v1::TaskState> {
    task.status
        .as_ref()
        .and_then(|s| v1::TaskState::try_from(s.state).ok())
}

impl MemoryStore {
    /// Those of `tasks` (agent, id) that ended before `before_ms`.
    pub(crate) fn ended_before(
        &self,
        tasks: Vec<(String, String)>,
        before_ms: i64,
    ) -> Vec<(String, String)> {
        let inner = self.lock();
        tasks
            .into_iter()
            .filter(|(agent, id)| {
                inner
                    .agents
                    .get(agent)
                    .and_then(|m| m.get(id))
                    .is_some_and(|e| is_terminal(&e.task) && status_ms(&e.task) < before_ms)
            })
            .collect()
    }
}

impl Inner {
    /// Moves an entry's bytes from `old` to `new` (each: bytes, whether terminal).
    fn account(&mut self, old: (usize, bool), new: (usize, bool)) {
        self.bytes = self.bytes.saturating_sub(old.0).saturating_add(new.0);
        if old.1 {
            self.terminal_bytes = self.terminal_bytes.saturating_sub(old.0);
        }
        if new.1 {
            self.terminal_bytes = self.terminal_bytes.saturating_add(new.0);
        }
    }

    /// Records whether the entry at (agent, id) is now terminal, queueing it
    /// if so. A re-queued task gets a new generation, staling its old entry.
    fn track(&mut self, agent: &str, id: &str, terminal: bool, now: Instant) {
        let generation = self.next_gen;
        let Some(entry) = self.agents.get_mut(agent).and_then(|m| m.get_mut(id)) else {
            return;
        };
        let was_terminal = entry.terminal_gen.is_some();
        if terminal {
            entry.terminal_gen = Some(generation);
            self.next_gen += 1;
            self.queue.push_back(Queued {
                agent: agent.to_owned(),
                id: id.to_owned(),
                generation,
                at: now,
            });
            if !was_terminal {
                self.terminal += 1;
            }
        } else {
            entry.terminal_gen = None;
            if was_terminal {
                self.terminal -= 1;
            }
        }
    }

    fn is_current(&self, q: &Queued) -> bool {
        self.agents
            .get(&q.agent)
            .and_then(|m| m.get(&q.id))
            .is_some_and(|e| e.terminal_gen == Some(q.generation))
    }

    /// Evicts from the queue front while over the limits, then compacts the
    /// queue if stale entries dominate it.
    fn evict(&mut self, limits: &MemoryLimits, now: Instant) {
        while let Some(front) = self.queue.front() {
            if !self.is_current(front) {
                self.queue.pop_front();
                continue;
            }
            let too_many = self.terminal > limits.max_terminal_tasks;
            let too_big = self.bytes > limits.max_bytes;
            let too_old = now.saturating_duration_since(front.at) > limits.max_terminal_age;
            if !(too_many || too_big || too_old) {
                break;
            }
            if let Some(q) = self.queue.pop_front() {
                self.remove(q.agent, q.id);
                self.terminal -= 1;
            }
        }
        // Each compaction removes at least half the queue, so its cost is
        // paid for by the saves that created the stale entries.
        if self.queue.len() > 2 * self.terminal + QUEUE_SLACK {
            let mut queue = std::mem::take(&mut self.queue);
            queue.retain(|q| self.is_current(q));
            self.queue = queue;
        }
    }

    /// Drops an evicted task; its queue entry's names go on to `evicted`.
    fn remove(&mut self, agent: String, id: String) {
        let mut gone = None;
        if let Some(tasks) = self.agents.get_mut(&agent) {
            gone = tasks.remove(&id);
            if tasks.is_empty() {
                self.agents.remove(&agent);
            }
        }
        if let Some(e) = gone {
            self.account((e.bytes, e.terminal_gen.is_some()), (0, false));
        }
        self.evicted.push((agent, id));
    }
}

/// The FAILED status `fail_interrupted` gives a task.
pub(crate) fn interrupted_status(task: &v1::Task, reason: &str) -> v1::TaskStatus {
    let mut message = v1::Message::new(
        format!("{}-interrupted", task.id),
        v1::Role::Agent,
        vec![v1::Part::text(reason)],
    );
    message.task_id.clone_from(&task.id);
    message.context_id.clone_from(&task.context_id);
    v1::TaskStatus::now(v1::TaskState::Failed, Some(message))
}

/// SUBMITTED or WORKING: states only a running process can move on from.
pub(crate) fn was_running(state: i32) -> bool {
    state == v1::TaskState::Submitted as i32 || state == v1::TaskState::Working as i32
}

/// Keeps the tasks matching `query` (ignoring paging), sorts them newest
/// first and cuts the page after `token` (the SQLite store does the same in SQL).
fn page_of<'a>(
    tasks: impl Iterator<Item = &'a v1::Task>,
    query: &ListQuery,
    token: Option<&PageToken>,
) -> ListPage {
    let state = query.state.map(|s| s as i32);
    let mut matching: Vec<((i64, &str), &v1::Task)> = tasks
        .filter(|t| query.context_id.as_ref().is_none_or(|c| *c == t.context_id))
        .filter(|t| state.is_none_or(|s| t.status.as_ref().map_or(0, |st| st.state) == s))
        .map(|t| ((status_ms(t), t.id.as_str()), t))
        .filter(|(key, _)| query.status_after_ms.is_none_or(|after| key.0 >= after))
        .collect();
    let total_size = u32::try_from(matching.len()).unwrap_or(u32::MAX);
    if let Some(token) = token {
        let after = (token.ts_ms, token.id.as_str());
        matching.retain(|(key, _)| *key < after);
    }
    matching.sort_unstable_by(|a, b| b.0.cmp(&a.0));
    let size = page_size(query);
    let more = matching.len() > size;
    matching.truncate(size);
    let next_page_token = match matching.last() {
        Some((_, last)) if more => PageToken::after(last).encode(),
        _ => String::new(),
    };
    ListPage {
        tasks: matching.into_iter().map(|(_, t)| t.clone()).collect(),
        next_page_token,
        total_size,
    }
}

/// The page size to use: the caller validates 1..=100, but a zero must still
/// make progress.
pub(crate) fn page_size(query: &ListQuery) -> usize {
    query.page_size.max(1) as usize
}

impl MemoryStore {
    /// `read` of the task's entry, if it is in `scope`.
    fn with_entry<T>(
        &self,
        scope: &Scope,
        task_id: &str,
        read: impl FnOnce(&Entry) -> T,
    ) -> Option<T> {
        let inner = self.lock();
        inner
            .agents
            .get(&scope.agent)
            .and_then(|m| m.get(task_id))
            .filter(|e| e.owner == scope.owner)
            .map(read)
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError> {
        Ok(self.with_entry(scope, task_id, |e| e.task.clone()))
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        self.save_at(scope, task, 0).await
    }

    async fn load_at(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        Ok(self.with_entry(scope, task_id, |e| (e.task.clone(), e.saved_at)))
    }

    /// A plain `save` (generation 0) keeps the generation it finds.
    async fn save_at(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let bytes = entry_bytes(&scope.owner, task);
        let terminal = is_terminal(task);
        let mut inner = self.lock();
        let old = match inner.agents.get(&scope.agent).and_then(|m| m.get(&task.id)) {
            // Another caller's task: never clobber it (same as SqliteStore).
            Some(e) if e.owner != scope.owner => return Ok(()),
            Some(e) => (e.bytes, e.terminal_gen.is_some()),
            None => (0, false),
        };
        // A live task is never evicted, so the room it grows into can only
        // come from terminal tasks; with none left to evict, refuse.
        if !terminal && bytes > old.0 {
            let evictable = inner
                .terminal_bytes
                .saturating_sub(if old.1 { old.0 } else { 0 });
            let after = inner.bytes.saturating_sub(old.0).saturating_add(bytes);
            if after.saturating_sub(evictable) > self.limits.max_bytes {
                return Err(StoreError::Full(format!(
                    "live task {} ({bytes} bytes) does not fit beside the other live tasks \
                     in the {}-byte limit",
                    task.id, self.limits.max_bytes
                )));
            }
        }
        let tasks = inner.agents.entry(scope.agent.clone()).or_default();
        match tasks.get_mut(&task.id) {
            Some(e) => {
                e.task.clone_from(task);
                e.bytes = bytes;
                e.saved_at = e.saved_at.max(generation);
            }
            None => {
                tasks.insert(
                    task.id.clone(),
                    Entry {
                        owner: scope.owner.clone(),
                        task: task.clone(),
                        bytes,
                        terminal_gen: None,
                        saved_at: generation,
                    },
                );
            }
        }
        inner.account(old, (bytes, terminal));
        inner.track(&scope.agent, &task.id, terminal, now);
        inner.evict(&self.limits, now);
        let evicted = std::mem::take(&mut inner.evicted);
        drop(inner);
        self.push.forget(&evicted);
        Ok(())
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        let token = query
            .page_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(PageToken::decode)
            .transpose()?;
        let inner = self.lock();
        let Some(tasks) = inner.agents.get(&scope.agent) else {
            return Ok(ListPage::default());
        };
        let mine = tasks
            .values()
            .filter(|e| e.owner == scope.owner)
            .map(|e| &e.task);
        Ok(page_of(mine, query, token.as_ref()))
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        let now = Instant::now();
        let mut inner = self.lock();
        let mut failed = Vec::new();
        let mut resized = Vec::new();
        for (agent, tasks) in &mut inner.agents {
            for (id, entry) in tasks.iter_mut() {
                if entry
                    .task
                    .status
                    .as_ref()
                    .is_some_and(|s| was_running(s.state))
                {
                    entry.task.status = Some(interrupted_status(&entry.task, reason));
                    let bytes = entry_bytes(&entry.owner, &entry.task);
                    resized.push(((entry.bytes, entry.terminal_gen.is_some()), bytes));
                    entry.bytes = bytes;
                    failed.push((agent.clone(), id.clone()));
                }
            }
        }
        for (old, bytes) in resized {
            inner.account(old, (bytes, true));
        }
        // FAILED is terminal: these tasks now age out like any other.
        for (agent, id) in &failed {
            inner.track(agent, id, true, now);
        }
        inner.evict(&self.limits, now);
        let evicted = std::mem::take(&mut inner.evicted);
        drop(inner);
        self.push.forget(&evicted);
        Ok(failed.len() as u64)
    }

    async fn purge_finished(&self, before_ms: i64, limit: usize) -> Result<u64, StoreError> {
        let busy = self.push.pending_tasks();
        let mut inner = self.lock();
        let old: Vec<(String, String)> = inner
            .agents
            .iter()
            .flat_map(|(agent, tasks)| tasks.iter().map(move |(id, e)| (agent, id, e)))
            .filter(|(_, _, e)| is_terminal(&e.task) && status_ms(&e.task) < before_ms)
            .map(|(agent, id, _)| (agent.clone(), id.clone()))
            .filter(|key| !busy.contains(key))
            .take(limit)
            .collect();
        for (agent, id) in &old {
            let counted = inner
                .agents
                .get(agent)
                .and_then(|m| m.get(id))
                .is_some_and(|e| e.terminal_gen.is_some());
            inner.remove(agent.clone(), id.clone());
            if counted {
                inner.terminal = inner.terminal.saturating_sub(1);
            }
        }
        let evicted = std::mem::take(&mut inner.evicted);
        drop(inner);
        self.push.forget(&evicted);
        self.registry.forget_links(&evicted);
        Ok(old.len() as u64)
    }

    /// The configs and outbox kept beside the tasks (see `crate::push`).
    fn push_store(self: Arc<Self>) -> Option<Arc<dyn PushStore>> {
        Some(self)
    }

    fn registry_store(self: Arc<Self>) -> Option<Arc<dyn crate::RegistryStore>> {
        Some(self)
    }

    fn ledger_store(self: Arc<Self>) -> Option<Arc<dyn crate::LedgerStore>> {
        Some(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use crate::contract::task;

    fn scope() -> Scope {
        Scope::new("agent", "alice")
    }

    #[tokio::test]
    async fn evicts_oldest_terminal_tasks_by_count() {
        let store = MemoryStore::new(MemoryLimits {
            max_terminal_tasks: 3,
            ..Default::default()
        });
        let s = scope();
        store
            .save(&s, &task("live-0", "c", v1::TaskState::Working, 1))
            .await
            .unwrap();
        for i in 0..5 {
            let t = task(&format!("done-{i}"), "c", v1::TaskState::Completed, 10 + i);
            store.save(&s, &t).await.unwrap();
        }
        store
            .save(&s, &task("live-1", "c", v1::TaskState::InputRequired, 2))
            .await
            .unwrap();
        for i in 0..2 {
            assert!(
                store
                    .load(&s, &format!("done-{i}"))
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        for i in 2..5 {
            assert!(
                store
                    .load(&s, &format!("done-{i}"))
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        for id in ["live-0", "live-1"] {
            assert!(store.load(&s, id).await.unwrap().is_some());
        }

        // Re-saving a queued task refreshes it and is not counted twice.
        store
            .save(&s, &task("done-2", "c", v1::TaskState::Completed, 99))
            .await
            .unwrap();
        store
            .save(&s, &task("done-5", "c", v1::TaskState::Completed, 100))
            .await
            .unwrap();
        assert!(store.load(&s, "done-3").await.unwrap().is_none());
        for id in ["done-2", "done-4", "done-5", "live-0", "live-1"] {
            assert!(store.load(&s, id).await.unwrap().is_some(), "{id} evicted");
        }
        assert_eq!(store.sizes().0, 5);
    }

    #[tokio::test]
    async fn evicts_terminal_tasks_by_age_never_live_ones() {
        let store = MemoryStore::new(MemoryLimits {
            max_terminal_tasks: 100,
            max_terminal_age: Duration::from_millis(20),
            ..Default::default()
        });
        let s = scope();
        store
            .save(&s, &task("old", "c", v1::TaskState::Failed, 1))
            .await
            .unwrap();
        store
            .save(&s, &task("live", "c", v1::TaskState::Working, 1))
            .await
            .unwrap();
        std::thread::sleep(Duration::from_millis(40));
        store
            .save(&s, &task("new", "c", v1::TaskState::Canceled, 2))
            .await
            .unwrap();
        assert!(store.load(&s, "old").await.unwrap().is_none());
        assert!(store.load(&s, "live").await.unwrap().is_some());
        assert!(store.load(&s, "new").await.unwrap().is_some());

        // A task that finishes later enters the queue then, not at creation.
        store
            .save(&s, &task("late", "c", v1::TaskState::Working, 3))
            .await
            .unwrap();
        std::thread::sleep(Duration::from_millis(40));
        store
            .save(&s, &task("late", "c", v1::TaskState::Completed, 4))
            .await
            .unwrap();
        assert!(store.load(&s, "late").await.unwrap().is_some());
        assert!(store.load(&s, "new").await.unwrap().is_none());
        assert!(store.load(&s, "live").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn memory_stays_bounded() {
        let store = MemoryStore::new(MemoryLimits {
            max_terminal_tasks: 1_000,
            ..Default::default()
        });
        let s = scope();
        for i in 0..100_000 {
            let t = task(&format!("t-{i}"), "c", v1::TaskState::Completed, i);
            store.save(&s, &t).await.unwrap();
        }
        let (tasks, queue) = store.sizes();
        assert_eq!(tasks, 1_000);
        assert!(queue <= 2 * 1_000 + QUEUE_SLACK, "queue grew to {queue}");

        // Re-saving the same few terminal tasks behind a long-lived one leaves
        // stale entries mid-queue; compaction must keep them bounded.
        let store = MemoryStore::default();
        store
            .save(&s, &task("first", "c", v1::TaskState::Completed, 0))
            .await
            .unwrap();
        for i in 0..100_000 {
            let t = task(&format!("r-{}", i % 3), "c", v1::TaskState::Completed, i);
            store.save(&s, &t).await.unwrap();
        }
        let (tasks, queue) = store.sizes();
        assert_eq!(tasks, 4);
        assert!(queue <= 2 * 4 + QUEUE_SLACK, "queue grew to {queue}");
    }

    /// A task in `state` carrying `size` bytes of message text.
    fn big(id: &str, state: v1::TaskState, size: usize) -> v1::Task {
        let mut t = task(id, "c", state, 1);
        t.history = vec![v1::Message::new(
            format!("{id}-m"),
            v1::Role::User,
            vec![v1::Part::text("x".repeat(size))],
        )];
        t
    }

    #[tokio::test]
    async fn terminal_tasks_are_evicted_by_bytes() {
        const LIMIT: usize = 1 << 20;
        let store = MemoryStore::new(MemoryLimits {
            max_bytes: LIMIT,
            ..Default::default()
        });
        let s = scope();
        // 60 finished tasks of 100 KiB: ~6 MiB sent, under the count limit.
        for i in 0..60 {
            let t = big(&format!("t-{i}"), v1::TaskState::Completed, 100 << 10);
            store.save(&s, &t).await.unwrap();
            let (accounted, fresh) = store.bytes();
            assert_eq!(accounted, fresh);
            assert!(accounted <= LIMIT, "{accounted} bytes kept after t-{i}");
        }
        // The oldest went first; the newest are kept.
        assert!(store.load(&s, "t-0").await.unwrap().is_none());
        assert!(store.load(&s, "t-59").await.unwrap().is_some());
        assert!(store.sizes().0 >= 8, "kept {} tasks", store.sizes().0);
    }

    #[tokio::test]
    async fn live_tasks_past_the_byte_limit_are_refused_not_evicted() {
        const LIMIT: usize = 1 << 20;
        let store = MemoryStore::new(MemoryLimits {
            max_bytes: LIMIT,
            ..Default::default()
        });
        let s = scope();
        for i in 0..3 {
            let t = big(&format!("live-{i}"), v1::TaskState::Working, 300 << 10);
            store.save(&s, &t).await.unwrap();
        }
        let fourth = big("live-3", v1::TaskState::Working, 300 << 10);
        assert!(matches!(
            store.save(&s, &fourth).await,
            Err(StoreError::Full(_))
        ));
        // Growing a live task past the limit is refused the same way, and
        // leaves the stored task as it was.
        let grown = big("live-0", v1::TaskState::InputRequired, 700 << 10);
        assert!(matches!(
            store.save(&s, &grown).await,
            Err(StoreError::Full(_))
        ));
        let kept = store.load(&s, "live-0").await.unwrap().unwrap();
        assert_eq!(kept.status.unwrap().state, v1::TaskState::Working as i32);
        for i in 0..3 {
            assert!(
                store
                    .load(&s, &format!("live-{i}"))
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        assert!(store.load(&s, "live-3").await.unwrap().is_none());

        // Once one finishes, its bytes can be evicted to make room.
        let done = big("live-1", v1::TaskState::Completed, 300 << 10);
        store.save(&s, &done).await.unwrap();
        store.save(&s, &fourth).await.unwrap();
        assert!(store.load(&s, "live-1").await.unwrap().is_none());
        assert!(store.load(&s, "live-3").await.unwrap().is_some());
        let (accounted, fresh) = store.bytes();
        assert_eq!(accounted, fresh);
        assert!(accounted <= LIMIT);

        // fail_interrupted grows each task by its status message; the
        // accounting follows.
        store.fail_interrupted("restart").await.unwrap();
        let (accounted, fresh) = store.bytes();
        assert_eq!(accounted, fresh);
        assert!(accounted <= LIMIT);
    }

    #[tokio::test]
    async fn failed_tasks_become_evictable() {
        let store = MemoryStore::new(MemoryLimits {
            max_terminal_tasks: 1,
            ..Default::default()
        });
        let s = scope();
        store
            .save(&s, &task("a", "c", v1::TaskState::Working, 1))
            .await
            .unwrap();
        store
            .save(&s, &task("b", "c", v1::TaskState::Submitted, 2))
            .await
            .unwrap();
        assert_eq!(store.fail_interrupted("restart").await.unwrap(), 2);
        assert_eq!(store.sizes().0, 1);
    }
}
