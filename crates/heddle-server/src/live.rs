//! Live tasks: the in-memory, authoritative state of every task that has an
//! executor running or a subscriber attached, and the fan-out of its events.
//!
//! Each [`LiveTask`] is the single writer of its task: executors publish
//! through [`crate::TaskEvents`], which applies an event under the task's
//! lock, persists it when the state changed, and only then broadcasts it.
//! Subscribers attach under the same lock, so they get a snapshot and every
//! event after it, with no gap and no duplicate.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use heddle_core::{A2aError, v1};
use heddle_store::{Scope, TaskStore};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// One event as broadcast to subscribers (shared, encoded per subscriber).
pub type Update = Arc<v1::StreamResponse>;

/// Events buffered per task for slow subscribers before they lag and resync.
const FANOUT_CAPACITY: usize = 256;

/// The mutable part of a live task, behind its async lock.
#[derive(Debug)]
pub(crate) struct LiveState {
    /// The task as it stands (authoritative while live).
    pub task: v1::Task,
    /// Whether the task exists for callers (announced, findable). A task whose
    /// agent answers with a direct message never gets created.
    pub created: bool,
    /// Persist the task when it is created (streaming sends acknowledge it).
    pub persist_on_create: bool,
    /// The agent answered with a direct message; nothing may follow.
    pub replied: bool,
    /// Artifact changes not yet persisted (they ride with the next save).
    pub dirty: bool,
    /// The running execution's abort handle, to stop an agent that ignores cancel.
    pub abort: Option<tokio::task::AbortHandle>,
}

/// A task with its lock, fan-out channel and cancellation signal.
pub(crate) struct LiveTask {
    pub scope: Scope,
    pub id: String,
    pub state: tokio::sync::Mutex<LiveState>,
    pub tx: broadcast::Sender<Update>,
    pub cancel: CancellationToken,
    /// Mirrors "an executor is running", readable without the async lock.
    pub running: AtomicBool,
    pub store: Arc<dyn TaskStore>,
}

impl std::fmt::Debug for LiveTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTask")
            .field("scope", &self.scope)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl LiveTask {
    fn new(scope: Scope, task: v1::Task, created: bool, store: Arc<dyn TaskStore>) -> Self {
        let (tx, _) = broadcast::channel(FANOUT_CAPACITY);
        Self {
            scope,
            id: task.id.clone(),
            state: tokio::sync::Mutex::new(LiveState {
                task,
                created,
                persist_on_create: false,
                replied: false,
                dirty: false,
                abort: None,
            }),
            tx,
            cancel: CancellationToken::new(),
            running: AtomicBool::new(false),
            store,
        }
    }

    /// Broadcasts to current subscribers (none is fine).
    pub fn publish(&self, update: v1::stream_response::Payload) {
        let _ = self.tx.send(Arc::new(v1::StreamResponse {
            payload: Some(update),
        }));
    }
}

/// The registry of live tasks of one agent.
#[derive(Debug, Default)]
pub(crate) struct LiveTasks {
    map: Mutex<HashMap<String, Arc<LiveTask>>>,
}

/// A subscription taken under the registry lock: the task and a receiver
/// that sees every event published after this point.
pub(crate) struct Attached {
    pub live: Arc<LiveTask>,
    pub rx: broadcast::Receiver<Update>,
}

impl LiveTasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveTask>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new (provisional) task and attaches to it.
    pub fn insert_new(&self, scope: Scope, task: v1::Task, store: Arc<dyn TaskStore>) -> Attached {
        let live = Arc::new(LiveTask::new(scope, task, false, store));
        let rx = live.tx.subscribe();
        self.lock().insert(live.id.clone(), live.clone());
        Attached { live, rx }
    }

    /// Attaches to a task in `scope`: the live one, or one loaded from the
    /// store and made live. Another caller's task is TaskNotFound.
    pub async fn attach(
        &self,
        scope: &Scope,
        id: &str,
        store: &Arc<dyn TaskStore>,
    ) -> Result<Attached, A2aError> {
        if let Some(a) = self.attach_existing(scope, id) {
            return a;
        }
        let task = store
            .load(scope, id)
            .await
            .map_err(|e| A2aError::internal(format!("store: {e}")))?
            .ok_or_else(|| A2aError::task_not_found(id))?;
        let mut map = self.lock();
        // Someone may have made it live meanwhile: use theirs.
        let live = map
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(LiveTask::new(scope.clone(), task, true, store.clone())))
            .clone();
        if live.scope != *scope {
            return Err(A2aError::task_not_found(id));
        }
        let rx = live.tx.subscribe();
        Ok(Attached { live, rx })
    }

    fn attach_existing(&self, scope: &Scope, id: &str) -> Option<Result<Attached, A2aError>> {
        let map = self.lock();
        let live = map.get(id)?;
        if live.scope != *scope {
            return Some(Err(A2aError::task_not_found(id)));
        }
        let rx = live.tx.subscribe();
        Some(Ok(Attached {
            live: live.clone(),
            rx,
        }))
    }

    /// The live task with `id` in `scope`, without attaching.
    pub fn get(&self, scope: &Scope, id: &str) -> Option<Arc<LiveTask>> {
        self.lock().get(id).filter(|l| l.scope == *scope).cloned()
    }

    /// Drops the task from the registry when nothing needs it live any more:
    /// no executor running and no subscriber attached. Its state is in the store.
    pub fn release(&self, id: &str) {
        let mut map = self.lock();
        if let Some(live) = map.get(id)
            && !live.running.load(Ordering::Acquire)
            && live.tx.receiver_count() == 0
        {
            map.remove(id);
        }
    }

    /// Number of live tasks (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}
