//! Several replicas of one server, sharing a store: what they tell each
//! other, and who runs which task.
//!
//! The store stays the truth. Beside it:
//!
//! * An [`EventBus`] carries every applied task event, numbered by the
//!   task's generation, from the replica that runs the task to the others:
//!   a subscriber on any replica gets the task's snapshot from the store and
//!   then every event after the snapshot's generation, and a client that
//!   reconnects with `Last-Event-ID` gets exactly the events after it. The
//!   bus also carries cancel requests to the replica running a task.
//! * A [`LeaseStore`] says which replica runs which task. Each replica
//!   renews its leases together; one that stops (killed, cut off) lets them
//!   expire, and another replica ends those tasks FAILED, with the reason,
//!   so no task stays WORKING forever and every subscriber sees the end.
//!
//!   A replica that was paused (or cut off) past its leases' time learns at
//!   its next renewal which it lost, and refuses those runs' events from
//!   then on and stops the runs ([`held`]).
//! * The bus also tells the replica running a task of a push config made
//!   for it on another one, so that replica need not read the task's
//!   configs at every event.
//!
//! `heddle-nats` implements the bus on NATS JetStream; the PostgreSQL store
//! keeps generations and leases.

mod held;

use std::{
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use async_trait::async_trait;
use foldhash::HashMap;
use futures::stream::BoxStream;
use heddle_core::{A2aError, v1};
use heddle_store::{LeaseStore, LeasedRun, Scope};
use tokio_util::sync::CancellationToken;

use crate::{handler::RequestHandler, live::Event};
pub(crate) use held::Fence;
use held::HeldLeases;

/// A bus failure (the bus is down, or said something unreadable).
#[derive(Debug, thiserror::Error)]
#[error("event bus: {0}")]
pub struct BusError(pub String);

/// Events of one task, in generation order.
pub type EventFeed = BoxStream<'static, Result<Event, BusError>>;

/// What crosses between replicas.
#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    /// Publishes the task's event. Called in generation order, under the
    /// task's lock; it may return once the event is on its way (a failure
    /// to keep it afterwards is the bus's to log).
    async fn publish(&self, scope: &Scope, task_id: &str, event: &Event) -> Result<(), BusError>;

    /// The generation of the task's last event on the bus (0: none).
    async fn last_generation(&self, scope: &Scope, task_id: &str) -> Result<u64, BusError>;

    /// Every event of the task after generation `after` that the bus still
    /// holds, in order, then each new one as it comes; the feed never ends
    /// by itself.
    async fn follow(&self, scope: &Scope, task_id: &str, after: u64)
    -> Result<EventFeed, BusError>;

    /// Serves the control requests addressed to `replica` with `control`
    /// until `stop` is canceled.
    async fn serve_control(
        &self,
        replica: &str,
        control: Arc<dyn Control>,
        stop: CancellationToken,
    ) -> Result<(), BusError>;

    /// Asks `replica` to cancel the task. `None` when the replica is gone
    /// or no longer runs the task; an error when it did not answer in time.
    async fn request_cancel(
        &self,
        replica: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<Result<v1::Task, A2aError>>, BusError>;

    /// Tells `replica` that the task has a new push config, and waits for
    /// it to take note. `false` when the replica is gone.
    async fn tell_push_config(
        &self,
        replica: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<bool, BusError>;
}

/// What a replica does when another asks.
#[async_trait]
pub trait Control: Send + Sync + 'static {
    /// Cancels the task if this replica runs it; `None` if it does not.
    async fn cancel(&self, scope: Scope, task_id: String) -> Option<Result<v1::Task, A2aError>>;

    /// Another replica made a push config for the task: its events here
    /// are delivered to it from now on.
    fn push_config_made(&self, scope: &Scope, task_id: &str);
}

/// How leases behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimes {
    /// How long a lease lasts unless renewed: a dead replica's tasks end
    /// within about this long plus one [`reap_every`](Self::reap_every).
    pub ttl: Duration,
    /// How often each replica looks for expired leases.
    pub reap_every: Duration,
}

impl Default for LeaseTimes {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(15),
            reap_every: Duration::from_secs(5),
        }
    }
}

/// This replica's place among the others: its id, the bus, and its leases.
/// Every handler built with it ([`crate::HandlerBuilder::cluster`]) shares
/// its events and is reachable for cancels; [`Cluster::start`] runs the
/// loops that serve control requests, renew leases and end dead replicas'
/// tasks.
pub struct Cluster {
    replica: String,
    bus: Arc<dyn EventBus>,
    leases: Option<(Arc<dyn LeaseStore>, LeaseTimes)>,
    /// The leases of the runs here, and the fence their events pass.
    held: HeldLeases,
    handlers: Mutex<HashMap<String, Weak<crate::handler::Inner>>>,
    /// Ends the control subscription and the lease renewal.
    stop: CancellationToken,
    /// Ends the reaping of other replicas' expired leases (a child of
    /// `stop`): a replica that is stopping takes on no new tasks.
    reaping: CancellationToken,
    /// The renewal loop, awaited before the leases are handed over, so no
    /// renewal in flight extends them after.
    renewer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The reaping loop, awaited before the handover: a round under way
    /// has deleted the leases it claimed, so it must finish ending (or
    /// resuming) those tasks, or they would stay WORKING with no lease.
    reaper: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("replica", &self.replica)
            .field("leases", &self.leases.as_ref().map(|(_, t)| t))
            .finish_non_exhaustive()
    }
}

/// The reason a dead replica's task ends with.
pub const LOST_REPLICA: &str =
    "the server replica running this task stopped; send the request again";

impl Cluster {
    /// A replica with a random id, sharing events over `bus`.
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        let stop = CancellationToken::new();
        Self {
            replica: crate::new_id(),
            bus,
            leases: None,
            held: HeldLeases::default(),
            handlers: Mutex::new(HashMap::default()),
            reaping: stop.child_token(),
            stop,
            renewer: Mutex::new(None),
            reaper: Mutex::new(None),
        }
    }

    /// Leases the tasks this replica runs in `store` (shared by every
    /// replica), and ends other replicas' tasks whose leases expire.
    pub fn with_leases(mut self, store: Arc<dyn LeaseStore>, times: LeaseTimes) -> Self {
        self.leases = Some((store, times));
        self
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The bus.
    pub fn bus(&self) -> &Arc<dyn EventBus> {
        &self.bus
    }

    /// Whether tasks are leased (and so a replica's start must not fail
    /// the tasks other replicas are running).
    pub fn leases_tasks(&self) -> bool {
        self.leases.is_some()
    }

    pub(crate) fn register(&self, handler: &RequestHandler) {
        self.lock()
            .insert(handler.agent_id().to_owned(), handler.downgrade());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<crate::handler::Inner>>> {
        self.handlers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn handler(&self, agent: &str) -> Option<RequestHandler> {
        let weak = self.lock().get(agent).cloned()?;
        RequestHandler::upgrade(&weak)
    }

    pub(crate) async fn publish(&self, scope: &Scope, task_id: &str, event: &Event) {
        if let Err(e) = self.bus.publish(scope, task_id, event).await {
            tracing::warn!(task = %task_id, generation = event.generation, error = %e,
                "could not share a task event with the other replicas");
        }
    }

    /// Takes the lease on a task this replica starts running: `false` when
    /// another replica's lease on it is still live (it runs the task). A
    /// store that cannot be reached does not stop the run.
    /// `run` is recorded with the lease (`None` keeps what it records), for
    /// a replica that resumes the run should this one die.
    pub(crate) async fn acquire(
        &self,
        scope: &Scope,
        task_id: &str,
        run: Option<&LeasedRun>,
    ) -> bool {
        let Some((store, times)) = &self.leases else {
            return true;
        };
        let asked = tokio::time::Instant::now();
        match store
            .acquire_lease(scope, task_id, &self.replica, millis(times.ttl), run)
            .await
        {
            Ok(true) => {
                self.held.hold(scope, task_id, asked, times.ttl);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e, "could not lease a task");
                true
            }
        }
    }

    /// Lets go of a task this replica stopped running.
    pub(crate) async fn release(&self, scope: &Scope, task_id: &str) {
        self.held.forget(&scope.agent, task_id);
        if let Some((store, _)) = &self.leases
            && let Err(e) = store
                .release_lease(&scope.agent, task_id, &self.replica)
                .await
        {
            tracing::warn!(task = %task_id, error = %e, "could not release a task lease");
        }
    }

    /// Returns once an event of a run here may go out: at once while the
    /// run's lease was renewed recently; after a pause past the lease's
    /// time, once a renewal said whether it is still held. [`Fence::Lost`]
    /// when another replica took the task over: the event must be refused
    /// (the run is being stopped, [`RequestHandler::lose`]).
    pub(crate) async fn fence(&self, scope: &Scope, task_id: &str) -> Fence {
        if self.leases.is_none() {
            return Fence::Open;
        }
        match self.held.now(&scope.agent, task_id) {
            Some(fence) => fence,
            None => self.held.fence(&scope.agent, task_id).await,
        }
    }

    /// After a push config for the task was stored here: tells the replica
    /// running the task, if another one does, so that its next events are
    /// delivered to the config too (see `LiveTask::armed_push`). One gone
    /// needs no telling: whoever ends or resumes the task reads the configs.
    /// One that could not be told is an error for the caller, who may set
    /// the config again (the config is stored; the running replica would
    /// not deliver to it until its next lease).
    pub(crate) async fn tell_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<(), A2aError> {
        let Some(holder) = self.other_holder(scope, task_id).await else {
            return Ok(());
        };
        match self.bus.tell_push_config(&holder, scope, task_id).await {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e,
                    "could not tell the replica running a task of its new push config");
                Err(A2aError::internal(
                    "the push config is stored, but the server replica running the task did not \
                     take note of it; set it again",
                ))
            }
        }
    }

    /// The replica other than this one that holds the task's lease.
    pub(crate) async fn other_holder(&self, scope: &Scope, task_id: &str) -> Option<String> {
        let (store, _) = self.leases.as_ref()?;
        match store.lease_holder(&scope.agent, task_id).await {
            Ok(holder) => holder.filter(|r| *r != self.replica),
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e, "could not read a task lease");
                None
            }
        }
    }

    /// Starts serving control requests and, with leases, renewing this
    /// replica's and reaping expired ones. They run until [`stop`](Self::stop).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let control: Arc<dyn Control> = me.clone();
            if let Err(e) = me
                .bus
                .serve_control(&me.replica, control, me.stop.clone())
                .await
            {
                tracing::error!(error = %e, "the control subscription ended; cancels and push config notices from other replicas will not arrive");
            }
        });
        if let Some((store, times)) = self.leases.clone() {
            let me = self.clone();
            let renewer = tokio::spawn(async move { me.renew_loop(store, times).await });
            *self.renewer.lock().unwrap_or_else(|e| e.into_inner()) = Some(renewer);
            let me = self.clone();
            let reaper = tokio::spawn(async move { me.reap_loop(times).await });
            *self.reaper.lock().unwrap_or_else(|e| e.into_inner()) = Some(reaper);
        }
    }

    /// Stops the loops [`start`](Self::start) began.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Starts no new round of claiming other replicas' expired leases,
    /// while this replica's own stay renewed: the first step of stopping,
    /// so a replica on its way out takes on no more dead replicas' tasks
    /// ([`shutdown`](Self::shutdown) lets a round under way finish).
    pub fn stop_reaping(&self) {
        self.reaping.cancel();
    }

    /// Stops the loops and hands this replica's tasks over: a reaping
    /// round under way finishes first, the runs still going here are
    /// aborted (a run in the middle of a poll stops at its next await),
    /// then their leases run out at once, so the other replicas end (or
    /// resume) them at their next reaping round instead of a lease time
    /// later. For a replica that is stopping, once its streams,
    /// connections and grace time are done.
    pub async fn shutdown(&self) {
        self.stop();
        for slot in [&self.reaper, &self.renewer] {
            let running = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(running) = running {
                let _ = running.await;
            }
        }
        let handlers: Vec<RequestHandler> = self
            .lock()
            .values()
            .filter_map(RequestHandler::upgrade)
            .collect();
        for handler in handlers {
            handler.abort_runs().await;
        }
        if let Some((store, _)) = &self.leases {
            self.held.give_up_all();
            match store.renew_leases(&self.replica, 0).await {
                Ok(handed) if !handed.is_empty() => {
                    tracing::info!(tasks = handed.len(), "handed this replica's tasks over");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not hand this replica's tasks over"),
            }
        }
    }

    async fn renew_loop(&self, store: Arc<dyn LeaseStore>, times: LeaseTimes) {
        let mut tick = tokio::time::interval((times.ttl / 3).max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                _ = tick.tick() => {}
                () = self.held.asked_to_renew() => {}
            }
            self.renew(store.as_ref(), times.ttl).await;
        }
    }

    /// One renewal of every lease this replica holds. The leases it no
    /// longer names are marked lost before the events waiting at the
    /// [`fence`](Self::fence) are let go (they are refused), then their
    /// runs are stopped.
    async fn renew(&self, store: &dyn LeaseStore, ttl: Duration) {
        let asked = tokio::time::Instant::now();
        let lost = match store.renew_leases(&self.replica, millis(ttl)).await {
            Ok(kept) => self.held.renewed(asked, ttl, kept),
            Err(e) => {
                tracing::warn!(error = %e, "could not renew this replica's task leases");
                Vec::new()
            }
        };
        self.held.signal();
        for (scope, task_id) in lost {
            tracing::warn!(task = %task_id,
                "another replica took over a task this one runs (its lease ran out while this \
                 replica was paused or cut off); stopping its run here");
            if let Some(handler) = self.handler(&scope.agent) {
                handler.lose(&scope, &task_id).await;
            }
            self.held.forget(&scope.agent, &task_id);
        }
    }

    async fn reap_loop(&self, times: LeaseTimes) {
        let mut tick = tokio::time::interval(times.reap_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.reaping.cancelled() => return,
                _ = tick.tick() => {}
            }
            self.reap().await;
        }
    }

    /// Ends the tasks of every expired lease this replica claims.
    pub async fn reap(&self) {
        let Some((store, _)) = &self.leases else {
            return;
        };
        // Only the agents hosted here: another replica's agent's tasks are
        // left for a replica that hosts it.
        let agents: Vec<String> = self.lock().keys().cloned().collect();
        let expired = match store.claim_expired(&agents, &self.replica, 100).await {
            Ok(expired) => expired,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for expired task leases");
                return;
            }
        };
        for lease in expired {
            let Some(handler) = self.handler(&lease.scope.agent) else {
                tracing::warn!(agent = %lease.scope.agent, task = %lease.task_id,
                    "a task of an agent this replica does not host lost its replica");
                continue;
            };
            tracing::warn!(task = %lease.task_id, replica = %lease.replica,
                "ending a task whose replica stopped renewing its lease");
            let task_id = lease.task_id.clone();
            if let Err(e) = handler.take_over(lease, LOST_REPLICA).await {
                tracing::warn!(task = %task_id, error = %e, "could not end a lost task");
            }
        }
    }
}

#[async_trait]
impl Control for Cluster {
    async fn cancel(&self, scope: Scope, task_id: String) -> Option<Result<v1::Task, A2aError>> {
        self.handler(&scope.agent)?
            .cancel_here(&scope, &task_id)
            .await
    }

    fn push_config_made(&self, scope: &Scope, task_id: &str) {
        if let Some(handler) = self.handler(&scope.agent) {
            handler.push_config_made(scope, task_id);
        }
    }
}

/// A lease's time to live in milliseconds (the store adds its own clock).
fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}
