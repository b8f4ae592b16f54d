//! What a store implements: [`TaskStore`] for tasks and [`PushStore`] for
//! push configs and the delivery outbox.
//!
//! They are separate traits so a store may keep tasks only: a server given
//! no push store answers the push config operations with
//! PushNotificationNotSupported. A store that keeps both (memory, SQLite)
//! says so through [`TaskStore::push_store`], and can then record a status
//! change and its deliveries in one step.
//!
//! Every call takes a [`Scope`] (the agent a task belongs to and the caller
//! that owns it), so a store cannot be asked for another caller's task by
//! accident: a task outside the scope is simply not found.
//! `heddle_store::contract` holds the behaviour every store must share.

use std::sync::Arc;

use async_trait::async_trait;
use heddle_core::{v1, wkt::Struct};

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
    /// task it may evict (heddle-store's `MemoryLimits::max_bytes`).
    #[error("task store is full: {0}")]
    Full(String),
    /// The stored task is at a later generation than the save: another
    /// writer (a replica that took the task over) got there first.
    #[error("task {0} was changed by another writer")]
    Conflict(String),
}

/// Task persistence. Implementations must be safe to share across threads.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// The task with `task_id` in `scope`, if any.
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError>;

    /// Inserts or replaces the task (keyed by scope.agent and task.id). The
    /// owner recorded at first save never changes.
    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError>;

    /// Saves the task as it stands after its `generation`-th event (the
    /// server counts every applied event, one by one). A store that keeps
    /// generations refuses to go back: a save older than the stored one is
    /// [`StoreError::Conflict`], which is how two replicas that both think
    /// they own a task find out. The default ignores the generation.
    async fn save_at(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
    ) -> Result<(), StoreError> {
        let _ = generation;
        self.save(scope, task).await
    }

    /// The task with `task_id` in `scope` and the generation it was saved at
    /// (0 from a store that does not keep generations).
    async fn load_at(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        Ok(self.load(scope, task_id).await?.map(|t| (t, 0)))
    }

    /// A page of the scope's tasks, newest status timestamp first (ties by id).
    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError>;

    /// At start-up: every task left SUBMITTED or WORKING by a previous process
    /// becomes FAILED with an agent status message saying `reason`. Returns
    /// how many were failed.
    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError>;

    /// Retention: deletes at most `limit` tasks that ended (COMPLETED,
    /// FAILED, CANCELED, REJECTED) with a status timestamp before
    /// `before_ms`, with what the store keeps for them beside the task
    /// (push configs, the hub's task links). A task whose push deliveries
    /// are not all out yet stays until they are. Returns how many went; the
    /// caller repeats while that is `limit`.
    ///
    /// The default deletes nothing: a store that keeps no history to grow.
    async fn purge_finished(&self, before_ms: i64, limit: usize) -> Result<u64, StoreError> {
        let _ = (before_ms, limit);
        Ok(0)
    }

    /// Saves `task` and records `deliveries` of the event that changed it in
    /// `outbox`. The default saves, then records. A store that is itself the
    /// outbox (the same object) should do both in one step, so a crash keeps
    /// both or neither (SQLite: one transaction).
    async fn save_with_deliveries(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
        deliveries: Vec<NewDelivery>,
        outbox: &dyn PushStore,
    ) -> Result<(), StoreError> {
        self.save_at(scope, task, generation).await?;
        outbox.enqueue_deliveries(deliveries).await
    }

    /// This store's push storage, when it keeps push configs and the outbox
    /// beside its tasks (memory and SQLite do: `Some(self)`). A server built
    /// on one store takes its push store from here; `None` (the default)
    /// means push notifications need a store of their own.
    fn push_store(self: Arc<Self>) -> Option<Arc<dyn PushStore>> {
        None
    }

    /// This store's agent registry, when it keeps one beside its tasks
    /// (memory and SQLite do). A hub takes its registry from here; `None`
    /// (the default) means registrations live only as long as the process.
    fn registry_store(self: Arc<Self>) -> Option<Arc<dyn RegistryStore>> {
        None
    }

    /// This store's ledger of wallets and earnings, when it keeps one beside
    /// its tasks (memory, SQLite and PostgreSQL do), so that a task and the
    /// money reserved for it live and move together. A priced hub needs one.
    fn ledger_store(self: Arc<Self>) -> Option<Arc<dyn crate::LedgerStore>> {
        None
    }

    /// This store's task leases, when it can be shared by several server
    /// processes (PostgreSQL can). Replicas sharing such a store lease the
    /// tasks they run, so that the others can tell a task whose runner died
    /// from one still running elsewhere.
    fn lease_store(self: Arc<Self>) -> Option<Arc<dyn LeaseStore>> {
        None
    }
}

/// A task whose runner stopped renewing its lease.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpiredLease {
    /// The task's scope (its agent and the caller that owns it).
    pub scope: Scope,
    /// The task.
    pub task_id: String,
    /// The replica that held the lease.
    pub replica: String,
    /// What the run was asked with, when its replica recorded it.
    pub run: Option<LeasedRun>,
}

/// What a run was asked with beside its message, kept with the run's lease
/// so that a replica resuming the run (its own replica died) gives the
/// agent the same request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeasedRun {
    /// The request's send configuration.
    pub configuration: Option<v1::SendMessageConfiguration>,
    /// The request's metadata.
    pub metadata: Option<Struct>,
    /// The extension URIs the client activated.
    pub extensions: Vec<String>,
    /// The protocol version the caller spoke (`"1.0"`, `"0.3"`).
    pub protocol_version: String,
}

/// A lease a replica still holds, as its renewal names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeldLease {
    /// The task's agent.
    pub agent: String,
    /// The task.
    pub task_id: String,
}

/// Who runs which task, in a store several replicas share.
///
/// A replica takes a lease when it starts running a task, renews all its
/// leases together while it lives, and releases each when the run ends. A
/// lease not renewed in time expires; exactly one other replica claims it
/// ([`claim_expired`](Self::claim_expired) removes what it returns) and ends
/// the task.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes the lease on `task_id` in `scope` for `replica`, for `ttl_ms`
    /// from now by the store's clock (every replica reads the same one),
    /// recording `run` with it (`None` keeps what the lease already
    /// records). Whether it was taken: `false` when another replica holds a
    /// lease on the task that has not expired.
    async fn acquire_lease(
        &self,
        scope: &Scope,
        task_id: &str,
        replica: &str,
        ttl_ms: i64,
        run: Option<&LeasedRun>,
    ) -> Result<bool, StoreError>;

    /// Extends every lease `replica` still holds to `ttl_ms` from now, and
    /// names them. A task the replica leased that is not named was claimed
    /// by another replica (this one stopped renewing in time, e.g. paused
    /// or cut off): its run here must stop. With 0 they run out now: a
    /// stopping replica hands its tasks to the others' next
    /// [`claim_expired`](Self::claim_expired).
    async fn renew_leases(&self, replica: &str, ttl_ms: i64) -> Result<Vec<HeldLease>, StoreError>;

    /// The replica holding the lease on `task_id` of `agent`, if any
    /// (expired or not).
    async fn lease_holder(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError>;

    /// Drops `replica`'s lease on the task, if it still holds it.
    async fn release_lease(
        &self,
        agent: &str,
        task_id: &str,
        replica: &str,
    ) -> Result<(), StoreError>;

    /// Removes and returns at most `limit` leases of `agents` that have
    /// expired, held by replicas other than `claimant` (its own it renews).
    /// Two replicas claiming at once never get the same lease.
    async fn claim_expired(
        &self,
        agents: &[String],
        claimant: &str,
        limit: usize,
    ) -> Result<Vec<ExpiredLease>, StoreError>;
}

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
    /// The W3C `traceparent` of the span the event happened in, so the
    /// delivery joins the caller's trace however late it goes out (empty:
    /// none).
    pub traceparent: String,
    /// The W3C `tracestate` that goes with it (empty: none).
    pub tracestate: String,
}

/// One task's deliveries in the outbox ([`PushStore::task_deliveries`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskDeliveries {
    /// Still to go out (tried or not), oldest first.
    pub pending: Vec<Delivery>,
    /// Given up, oldest first.
    pub dead: Vec<Delivery>,
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

/// Push configs and the delivery outbox.
///
/// Configs are scoped like tasks ([`Scope`]): another caller's config is not
/// found. The outbox is server-wide: the delivery worker reads it without a
/// caller. A delivery is recorded before it is attempted, carries its own
/// copy of the target (URL, token, credentials) and of the body, and moves
/// through three states: pending (with the time of its next attempt),
/// delivered (removed) or dead (kept for inspection).
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

    /// Retention: deletes the configs of at most `limit` tasks that ended
    /// before `before_ms` (as [`TaskStore::purge_finished`] reads it; the
    /// task stays), unless deliveries to them are still pending: an ended
    /// task sends nothing more, so its configs only take room. Returns how
    /// many tasks lost their configs; the caller repeats while that is
    /// `limit`. The default deletes nothing.
    async fn purge_finished_configs(
        &self,
        before_ms: i64,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let _ = (before_ms, limit);
        Ok(0)
    }

    /// Records deliveries in the outbox, due at once, in the given order.
    async fn enqueue_deliveries(&self, items: Vec<NewDelivery>) -> Result<(), StoreError>;

    /// Pending deliveries, oldest first (at most `limit`).
    async fn pending_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError>;

    /// The first pending delivery of each task and config ([`Delivery::group`]),
    /// the soonest due first (by `next_attempt_ms`, then `seq`), at most
    /// `limit`: the ones a worker may attempt (the rest of a group waits
    /// behind its first, in order). A task with a long backlog takes one
    /// place, and heads waiting out a backoff come after every due one, so
    /// neither holds back another task's deliveries.
    ///
    /// The default reads every pending delivery
    /// ([`pending_deliveries`](Self::pending_deliveries)) and keeps each
    /// group's first: right, but as slow as the outbox is long; the stores
    /// of this crate ask their database for the heads.
    async fn delivery_heads(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let mut seen = std::collections::HashSet::new();
        let pending = self.pending_deliveries(usize::MAX).await?;
        let mut heads: Vec<Delivery> = pending
            .into_iter()
            .filter(|d| seen.insert(d.group()))
            .collect();
        heads.sort_by_key(|d| (d.next_attempt_ms, d.seq));
        heads.truncate(limit);
        Ok(heads)
    }

    /// How many deliveries are pending, for the outbox gauge. The default
    /// counts [`pending_deliveries`](Self::pending_deliveries)`(1024)`, so
    /// it stops at 1024.
    async fn pending_count(&self) -> Result<u64, StoreError> {
        Ok(self.pending_deliveries(1024).await?.len() as u64)
    }

    /// Records an attempt's outcome.
    async fn finish_delivery(&self, seq: i64, outcome: DeliveryOutcome) -> Result<(), StoreError>;

    /// Dead-lettered deliveries, oldest first (at most `limit`).
    async fn dead_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError>;

    /// The task `task_id` of agent `agent`: its deliveries still pending and
    /// those that gave up, oldest first, at most `limit` of each. A read for
    /// people (the admin API): it claims and changes nothing, whoever holds
    /// the deliveries.
    ///
    /// The default filters [`pending_deliveries`](Self::pending_deliveries)
    /// and [`dead_deliveries`](Self::dead_deliveries) read whole: right only
    /// where reading pending deliveries claims nothing, and as slow as the
    /// outbox is long; the stores of this crate ask their database.
    async fn task_deliveries(
        &self,
        agent: &str,
        task_id: &str,
        limit: usize,
    ) -> Result<TaskDeliveries, StoreError> {
        let of_task = |list: Vec<Delivery>| -> Vec<Delivery> {
            list.into_iter()
                .filter(|d| d.item.scope.agent == agent && d.item.task_id == task_id)
                .take(limit)
                .collect()
        };
        Ok(TaskDeliveries {
            pending: of_task(self.pending_deliveries(usize::MAX).await?),
            dead: of_task(self.dead_deliveries(usize::MAX).await?),
        })
    }

    /// Puts the dead-lettered deliveries `seqs` back in the outbox, due at
    /// once with their attempts counted afresh (an operator fixed the
    /// receiver); how many were dead. A `seq` that is not dead is skipped.
    async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, StoreError>;
}

/// A registered agent as a store keeps it: the hub's own JSON document,
/// opaque to the store, so a store needs no hub types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRecord {
    /// The agent id (URL-safe, unique in the registry).
    pub id: String,
    /// The registration, as the hub wrote it.
    pub document: String,
    /// When it was last written, in milliseconds since the Unix epoch.
    pub updated_ms: i64,
}

/// The hub's registry of agents, and the links between a hosted task and the
/// task it stands for elsewhere (a proxied agent's upstream ids). Kept beside
/// the tasks, so registrations survive a restart and move with the store.
#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// Inserts or replaces the agent `id`.
    async fn put_agent(&self, id: &str, document: &str) -> Result<(), StoreError>;

    /// The agent `id`, if registered.
    async fn agent(&self, id: &str) -> Result<Option<AgentRecord>, StoreError>;

    /// Every registered agent, by id.
    async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError>;

    /// Removes the agent `id` and its task links; whether it was there.
    async fn delete_agent(&self, id: &str) -> Result<bool, StoreError>;

    /// Records what the hosted task `task_id` of `agent` links to (replacing
    /// any earlier link).
    async fn put_link(&self, agent: &str, task_id: &str, link: &str) -> Result<(), StoreError>;

    /// The link of the hosted task `task_id` of `agent`, if any.
    async fn link(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError>;
}
