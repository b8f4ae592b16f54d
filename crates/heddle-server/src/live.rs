//! Live tasks: the in-memory, authoritative state of every task that has an
//! executor running or a subscriber attached, and the fan-out of its events.
//!
//! Each [`LiveTask`] is the single writer of its task: executors publish
//! through [`crate::TaskEvents`], which applies an event under the task's
//! lock, persists it when the state changed, and only then broadcasts it.
//! Subscribers attach under the same lock, so they get a snapshot and every
//! event after it, with no gap and no duplicate.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
};

// Task ids are made by the server; foldhash is randomly seeded and cheap.
use foldhash::HashMap;

use heddle_core::{A2aError, v1};
use heddle_store::{Scope, StoreError, TaskStore};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::{cluster::Cluster, observe::Observer, push::PushNotifier};

/// One event of a task, as subscribers and other replicas get it.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The task's generation after this event: its count of applied events,
    /// one more per event (0 for what is not a task event: a direct message
    /// reply, or a snapshot of a store that keeps no generations). Streams
    /// send it as the SSE `id`, which a client resumes from.
    pub generation: u64,
    /// The event.
    pub response: v1::StreamResponse,
}

impl Event {
    /// `payload` at `generation`.
    pub fn new(generation: u64, payload: v1::stream_response::Payload) -> Self {
        Self {
            generation,
            response: v1::StreamResponse {
                payload: Some(payload),
            },
        }
    }
}

/// One event as broadcast to subscribers (shared, encoded per subscriber).
pub type Update = Arc<Event>;

/// Events buffered per task for slow subscribers before they lag and resync
/// (a lagging subscriber gets a fresh snapshot, which carries every artifact
/// so far, so nothing is lost but the step-by-step form). Allocated whole for
/// every streamed task, so small: subscribers drain it as fast as their
/// sockets take bytes, and a reader this far behind is better served by one
/// snapshot than by the backlog.
const FANOUT_CAPACITY: usize = 16;

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
    /// That message, for a caller blocked on the answer (boxed: rare, and
    /// every live task would otherwise carry its 184 bytes).
    pub reply: Option<Box<v1::Message>>,
    /// Counts the times the task settled (terminal, interrupted, or replied),
    /// so a blocked caller waits for a settling after its own message.
    pub settled_gen: u64,
    /// Artifact changes not yet persisted (they ride with the next save).
    pub dirty: bool,
    /// The running execution's abort handle, to stop an agent that ignores cancel.
    pub abort: Option<tokio::task::AbortHandle>,
    /// The execution waits for a place ([`crate::Concurrency`]); the
    /// executor has not seen it, so a cancel ends the task itself.
    pub queued: bool,
    /// The task's count of applied events (see [`Event::generation`]).
    pub generation: u64,
    /// Another replica runs the task and this one mirrors its events
    /// ([`crate::cluster`]) for its own subscribers.
    pub mirrored: bool,
    /// Another replica took the task over (this one's lease ran out): the
    /// run here is stopped, and nothing more of it is accepted.
    pub lost: bool,
}

/// A task with its lock, fan-out channel and cancellation signal.
pub(crate) struct LiveTask {
    pub scope: Scope,
    pub id: String,
    pub state: tokio::sync::Mutex<LiveState>,
    /// Created on the first subscriber: most tasks (blocking sends) never
    /// have one, and a channel costs an allocation of its whole buffer.
    tx: std::sync::OnceLock<broadcast::Sender<Update>>,
    pub cancel: CancellationToken,
    /// Mirrors "an executor is running", readable without the async lock.
    pub running: AtomicBool,
    /// Wakes callers blocked until the task settles (terminal, interrupted,
    /// or answered with a message); they re-check the state under the lock.
    pub settled: tokio::sync::Notify,
    pub store: Arc<dyn TaskStore>,
    /// Push delivery, when the server has it.
    pub push: Option<PushNotifier>,
    /// Told of the task's creation and state changes, when the handler has one.
    pub observer: Option<Arc<dyn Observer>>,
    /// The replicas this one shares events with, when there are others.
    pub cluster: Option<Arc<Cluster>>,
    /// In a cluster: whether this replica knows the task's push configs
    /// (see [`armed_push`](Self::armed_push)). A task made here knows them
    /// (it has none but what this replica is told of); one loaded from the
    /// store, or whose lease here was let go, reads them at its next event.
    pub push_known: AtomicBool,
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
    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.tx
            .get_or_init(|| broadcast::channel(FANOUT_CAPACITY).0)
            .subscribe()
    }

    /// How many subscribers are attached.
    pub fn receivers(&self) -> usize {
        self.tx.get().map_or(0, broadcast::Sender::receiver_count)
    }

    fn new(
        scope: Scope,
        (task, generation): (v1::Task, u64),
        created: bool,
        store: Arc<dyn TaskStore>,
        tasks: &LiveTasks,
    ) -> Self {
        Self {
            scope,
            id: task.id.clone(),
            state: tokio::sync::Mutex::new(LiveState {
                task,
                created,
                persist_on_create: false,
                replied: false,
                reply: None,
                settled_gen: 0,
                dirty: false,
                abort: None,
                queued: false,
                generation,
                mirrored: false,
                lost: false,
            }),
            tx: std::sync::OnceLock::new(),
            cancel: CancellationToken::new(),
            running: AtomicBool::new(false),
            settled: tokio::sync::Notify::new(),
            store,
            push: tasks.push.clone(),
            observer: tasks.observer.clone(),
            cluster: tasks.cluster.clone(),
            push_known: AtomicBool::new(!created),
        }
    }

    /// Gives the task's `generation`-th event to its subscribers, to the
    /// other replicas and, when the task has push configs, to the push
    /// outbox (`task` is the task after the event). Called under the task's
    /// lock, so every listener gets events in order. The event is only
    /// built when someone takes it: an unwatched task of a single server
    /// costs no copies.
    pub async fn emit(
        &self,
        task: &v1::Task,
        generation: u64,
        update: impl FnOnce() -> v1::stream_response::Payload,
    ) {
        let push = self.armed_push();
        if push.is_none() && self.cluster.is_none() {
            self.publish(generation, update);
            return;
        }
        let event = Arc::new(Event::new(generation, update()));
        self.broadcast(&event);
        if let Some(push) = push {
            let items = self.deliveries(push, task, &event.response).await;
            push.enqueue(&self.scope, task, items).await;
        }
        self.share(&event).await;
    }

    /// Persists `task` after a status change, its `generation`-th event,
    /// with the deliveries of the event in the same store write when it has
    /// push configs (and the push store is the task store), then gives the
    /// event to subscribers and other replicas. Nothing is given if the
    /// store refuses.
    pub async fn save_and_emit(
        &self,
        task: &v1::Task,
        generation: u64,
        update: impl FnOnce() -> v1::stream_response::Payload,
    ) -> Result<(), StoreError> {
        let Some(push) = self.armed_push() else {
            self.store.save_at(&self.scope, task, generation).await?;
            if self.cluster.is_none() {
                self.publish(generation, update);
            } else {
                let event = Arc::new(Event::new(generation, update()));
                self.broadcast(&event);
                self.share(&event).await;
            }
            return Ok(());
        };
        let event = Arc::new(Event::new(generation, update()));
        let items = self.deliveries(push, task, &event.response).await;
        self.store
            .save_with_deliveries(&self.scope, task, generation, items, push.store())
            .await?;
        self.broadcast(&event);
        push.recorded(&self.scope, task);
        self.share(&event).await;
        Ok(())
    }

    /// The notifier, when the task may have push configs.
    ///
    /// A single server makes every config itself. A replica of a cluster
    /// reads the task's configs from the store (shared by all) at the first
    /// event it applies after taking the task's lease (or without one:
    /// ending a dead replica's task, canceling one nobody runs); a config
    /// made on another replica while this one holds the lease is told to
    /// it over the bus before the call that made it answers
    /// (`Cluster::tell_push_config`). One of the two always happens: this
    /// replica commits its lease before it reads, the other commits the
    /// config before it looks for the lease's holder. Replicas that lease
    /// nothing (a store that cannot be shared) cannot be told: they read
    /// the configs at every event.
    fn armed_push(&self) -> Option<&PushNotifier> {
        let push = self.push.as_ref()?;
        let unknown = match &self.cluster {
            None => false,
            Some(cluster) if !cluster.leases_tasks() => true,
            Some(_) => !self.push_known.swap(true, Ordering::AcqRel),
        };
        (unknown || push.is_armed(&self.scope, &self.id)).then_some(push)
    }

    /// This replica let go of the task's lease (its run ended or was
    /// stopped): configs made elsewhere from now on are not told to it, so
    /// its next event here reads them again, and until then it keeps no
    /// note of the task's configs (a replica of many would otherwise keep
    /// one for every task it ever ran).
    pub(crate) fn lease_let_go(&self) {
        self.push_known.store(false, Ordering::Release);
        if let (Some(push), Some(cluster)) = (&self.push, &self.cluster)
            && cluster.leases_tasks()
        {
            push.disarm(&self.scope, &self.id);
        }
    }

    /// The event's deliveries; a failed read of the configs is tried again
    /// at the next event.
    async fn deliveries(
        &self,
        push: &PushNotifier,
        task: &v1::Task,
        event: &v1::StreamResponse,
    ) -> Vec<heddle_store::NewDelivery> {
        push.deliveries(&self.scope, task, event)
            .await
            .unwrap_or_else(|| {
                self.push_known.store(false, Ordering::Release);
                Vec::new()
            })
    }

    /// To this server's subscribers. A status update with no generation is
    /// not a task event but this replica's last word on a task it lost
    /// (`RequestHandler::lose`): it ends every stream that gets it.
    pub(crate) fn broadcast(&self, event: &Update) {
        if let Some(tx) = self.tx.get()
            && tx.receiver_count() > 0
        {
            let _ = tx.send(event.clone());
        }
    }

    /// To the other replicas, when there are any.
    pub(crate) async fn share(&self, event: &Event) {
        if let Some(cluster) = &self.cluster {
            cluster.publish(&self.scope, &self.id, event).await;
        }
    }

    /// Broadcasts to this server's subscribers only. The event is only
    /// built when someone listens: a blocking send of an unwatched task
    /// costs no copies.
    pub fn publish(&self, generation: u64, update: impl FnOnce() -> v1::stream_response::Payload) {
        if let Some(tx) = self.tx.get()
            && tx.receiver_count() > 0
        {
            let _ = tx.send(Arc::new(Event::new(generation, update())));
        }
    }
}

/// The registry of live tasks of one agent.
#[derive(Debug, Default)]
pub(crate) struct LiveTasks {
    map: Mutex<HashMap<String, Arc<LiveTask>>>,
    /// Given to every task made live.
    pub push: Option<PushNotifier>,
    /// Given to every task made live.
    pub observer: Option<Arc<dyn Observer>>,
    /// Given to every task made live.
    pub cluster: Option<Arc<Cluster>>,
}

/// A subscription taken under the registry lock: the task and a receiver
/// that sees every event published after this point.
pub(crate) struct Attached {
    pub live: Arc<LiveTask>,
    /// Present when the caller asked to subscribe.
    pub rx: Option<broadcast::Receiver<Update>>,
}

/// An [`Attached`] task held by one request: dropped, it lets go of its
/// receiver and then gives the task back to the registry, which drops it
/// unless an executor or another subscriber still needs it live. Every
/// return of a request, early or not, so releases what it attached.
pub(crate) struct Lease<'a> {
    tasks: &'a LiveTasks,
    pub live: Arc<LiveTask>,
    rx: Option<broadcast::Receiver<Update>>,
}

impl Lease<'_> {
    /// The receiver, for a stream that takes over the subscription.
    pub fn take_rx(&mut self) -> Option<broadcast::Receiver<Update>> {
        self.rx.take()
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        // First the receiver: `release` keeps a task that has one.
        self.rx = None;
        self.tasks.release(&self.live.id);
    }
}

impl LiveTasks {
    /// The tasks whose agent runs here now.
    pub(crate) fn running(&self) -> Vec<Arc<LiveTask>> {
        self.lock()
            .values()
            .filter(|t| t.running.load(std::sync::atomic::Ordering::Acquire))
            .cloned()
            .collect()
    }

    /// `attached`, released when the lease is dropped.
    pub fn lease(&self, attached: Attached) -> Lease<'_> {
        Lease {
            tasks: self,
            live: attached.live,
            rx: attached.rx,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveTask>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new (provisional) task, subscribing to it if asked.
    pub fn insert_new(
        &self,
        scope: Scope,
        task: v1::Task,
        store: Arc<dyn TaskStore>,
        subscribe: bool,
    ) -> Attached {
        let live = Arc::new(LiveTask::new(scope, (task, 0), false, store, self));
        let rx = subscribe.then(|| live.subscribe());
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
        subscribe: bool,
    ) -> Result<Attached, A2aError> {
        if let Some(a) = self.attach_existing(scope, id, subscribe) {
            return a;
        }
        let task = store
            .load_at(scope, id)
            .await
            .map_err(crate::handler::store_err)?
            .ok_or_else(|| A2aError::task_not_found(id))?;
        let mut map = self.lock();
        // Someone may have made it live meanwhile: use theirs.
        let live = map
            .entry(id.to_owned())
            .or_insert_with(|| {
                Arc::new(LiveTask::new(
                    scope.clone(),
                    task,
                    true,
                    store.clone(),
                    self,
                ))
            })
            .clone();
        if live.scope != *scope {
            return Err(A2aError::task_not_found(id));
        }
        let rx = subscribe.then(|| live.subscribe());
        Ok(Attached { live, rx })
    }

    fn attach_existing(
        &self,
        scope: &Scope,
        id: &str,
        subscribe: bool,
    ) -> Option<Result<Attached, A2aError>> {
        let map = self.lock();
        let live = map.get(id)?;
        if live.scope != *scope {
            return Some(Err(A2aError::task_not_found(id)));
        }
        let rx = subscribe.then(|| live.subscribe());
        Some(Ok(Attached {
            live: live.clone(),
            rx,
        }))
    }

    /// The live task with `id` in `scope`, without attaching.
    pub fn get(&self, scope: &Scope, id: &str) -> Option<Arc<LiveTask>> {
        self.lock().get(id).filter(|l| l.scope == *scope).cloned()
    }

    /// Drops `live` from the registry whatever holds it: a task this
    /// replica lost to another is loaded afresh by whoever attaches next.
    pub fn evict(&self, live: &Arc<LiveTask>) {
        let mut map = self.lock();
        if map.get(&live.id).is_some_and(|l| Arc::ptr_eq(l, live)) {
            map.remove(&live.id);
        }
    }

    /// Drops the task from the registry when nothing needs it live any more:
    /// no executor running and no subscriber attached. Its state is in the store.
    pub fn release(&self, id: &str) {
        let mut map = self.lock();
        if let Some(live) = map.get(id)
            && !live.running.load(Ordering::Acquire)
            && live.receivers() == 0
        {
            map.remove(id);
        }
    }

    /// Number of live tasks (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}
