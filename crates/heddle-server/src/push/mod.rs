//! Push notifications: deliver every task update to the webhooks callers
//! registered, durably, in order, and never to an address the SSRF policy
//! refuses.
//!
//! * A [`PushNotifier`] is shared by every agent of a server. Handlers hand it
//!   each event of a task that has configs; it records one delivery per
//!   config in its push store's outbox and wakes its worker. When the push
//!   store is the task store (the usual set-up), a status change and its
//!   deliveries are one store write (`TaskStore::save_with_deliveries`;
//!   SQLite: one transaction), so a crash keeps both or neither; artifact
//!   and creation events are recorded right after they are applied. Either
//!   way a delivery is durable before it is attempted.
//! * The worker ([`PushNotifier::start`]) POSTs pending deliveries oldest
//!   first, one at a time per task and config (so a receiver sees a task's
//!   events in order), retries failures with exponential backoff and jitter up
//!   to [`PushOptions::max_attempts`], then dead-letters them. It picks up
//!   whatever a previous process left pending.
//! * Body: for a config created in v1.0 the event as a `StreamResponse`
//!   (`application/a2a+json`); for one created in v0.3 the whole `Task`
//!   (`application/json`).
//! * Headers: `Authorization: {scheme} {credentials}` from the config's
//!   authentication; `X-A2A-Notification-Token` with the config's token;
//!   [`DELIVERY_ID_HEADER`] with an id unique to the delivery (the same on
//!   every retry, so receivers can drop duplicates); `A2A-Version`; and,
//!   with a [`PushSigner`], an ES256 JWT in [`JWT_HEADER`] whose keys are
//!   served as a JWKS; with spans on, `traceparent` and `tracestate` of the
//!   attempt's `a2a.push` span, a child of the event's span in the caller's
//!   trace (the context is recorded with the delivery, so a retry after a
//!   restart still joins it; see [`crate::trace`]).

mod policy;
mod signer;

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use heddle_core::{ProtocolVersion, compat::v03, v1};
use heddle_store::{Delivery, DeliveryOutcome, NewDelivery, PushConfigRecord, PushStore, Scope};
use tokio::sync::Notify;
use tracing::Instrument as _;

use crate::observe::{Observer, PushEvent, PushOutcome};

pub use policy::{BadCidr, Cidr, PushPolicy, Refused};
pub use signer::{JWT_HEADER, PushSigner, SignerError};

/// The header that carries each delivery's id.
pub const DELIVERY_ID_HEADER: &str = "X-A2A-Delivery-Id";
/// The header that carries the config's token.
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// The longest the worker sleeps without looking at the outbox.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// How push notifications are delivered.
#[derive(Clone, Debug)]
pub struct PushOptions {
    /// Where deliveries may go.
    pub policy: PushPolicy,
    /// Attempts before a delivery is dead-lettered.
    pub max_attempts: u32,
    /// The wait after the first failure; doubled after each further one.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Time allowed for the whole request and response.
    pub request_timeout: Duration,
    /// Fixed name → address answers, consulted before DNS (like a hosts
    /// file; the policy still judges the address).
    pub hosts: Vec<(String, std::net::IpAddr)>,
    /// Signs each delivery with a JWT ([`JWT_HEADER`]) when set.
    pub signer: Option<Arc<PushSigner>>,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            policy: PushPolicy::default(),
            max_attempts: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(15),
            hosts: Vec::new(),
            signer: None,
        }
    }
}

/// Why the notifier could not start.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The HTTP client could not be built.
    #[error("cannot build the push HTTP client: {0}")]
    Client(String),
    /// The store failed.
    #[error("push store: {0}")]
    Store(#[from] heddle_store::StoreError),
    /// Push was asked of a server whose task store keeps no push configs
    /// (see [`heddle_store::TaskStore::push_store`]).
    #[error("the task store keeps no push notification configs; push needs a store that does")]
    NoStore,
}

/// Why one attempt failed.
#[derive(Debug, PartialEq, Eq)]
enum AttemptError {
    /// Retrying cannot help (refused address, redirect, 4xx).
    Permanent(String),
    /// It may work later (connection refused, timeout, 5xx).
    Transient(String),
}

/// Delivers push notifications for every agent of a server. Cheap to clone.
#[derive(Clone)]
pub struct PushNotifier {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PushNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushNotifier")
            .field("policy", &self.inner.opts.policy)
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: Arc<dyn PushStore>,
    opts: PushOptions,
    client: reqwest::Client,
    /// Tasks with at least one config: (agent, owner, task id).
    armed: Mutex<HashSet<(String, String, String)>>,
    /// `armed.len()`, readable without the lock: most events belong to tasks
    /// with no configs, and a server with none pays one atomic load per event.
    armed_len: AtomicUsize,
    wake: Notify,
    /// Told of each attempt and the outbox's depth ([`PushNotifier::observe`]).
    observer: std::sync::OnceLock<Arc<dyn Observer>>,
}

fn key(scope: &Scope, task_id: &str) -> (String, String, String) {
    (scope.agent.clone(), scope.owner.clone(), task_id.to_owned())
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl PushNotifier {
    /// A notifier keeping configs and deliveries in `store`: usually the
    /// task store the handlers use, in its push role
    /// ([`heddle_store::TaskStore::push_store`]), so that a status change
    /// and its deliveries are saved together.
    pub fn new(store: Arc<dyn PushStore>, opts: PushOptions) -> Result<Self, PushError> {
        let resolver = policy::PolicyResolver {
            policy: Arc::new(opts.policy.clone()),
            hosts: Arc::new(opts.hosts.clone()),
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(resolver))
            .connect_timeout(opts.connect_timeout)
            .timeout(opts.request_timeout)
            .no_proxy()
            .user_agent(concat!("heddle/", env!("CARGO_PKG_VERSION"), " (push)"))
            .build()
            .map_err(|e| PushError::Client(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                opts,
                client,
                armed: Mutex::default(),
                armed_len: AtomicUsize::new(0),
                wake: Notify::new(),
                observer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Tells `observer` how each delivery attempt ends and how many
    /// deliveries wait after each pass of the worker (see
    /// [`crate::observe`]). One observer per notifier: a second call
    /// changes nothing and returns `false`.
    pub fn observe(&self, observer: Arc<dyn Observer>) -> bool {
        self.inner.observer.set(observer).is_ok()
    }

    /// Deliveries that gave up (dead letters), oldest first, at most `limit`.
    pub async fn dead_letters(
        &self,
        limit: usize,
    ) -> Result<Vec<heddle_store::Delivery>, heddle_store::StoreError> {
        self.inner.store.dead_deliveries(limit).await
    }

    /// One task's deliveries, still pending (with the attempts made so
    /// far) and given up, oldest first, at most `limit` of each; a read
    /// that claims nothing ([`heddle_store::PushStore::task_deliveries`]).
    pub async fn task_deliveries(
        &self,
        agent: &str,
        task_id: &str,
        limit: usize,
    ) -> Result<heddle_store::TaskDeliveries, heddle_store::StoreError> {
        self.inner
            .store
            .task_deliveries(agent, task_id, limit)
            .await
    }

    /// Puts the dead letters `seqs` back in the outbox, due at once, and
    /// wakes the worker; how many were dead.
    pub async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, heddle_store::StoreError> {
        let replayed = self.inner.store.replay_dead(seqs).await?;
        self.inner.wake.notify_one();
        Ok(replayed)
    }

    /// The SSRF policy in force.
    pub fn policy(&self) -> &PushPolicy {
        &self.inner.opts.policy
    }

    /// Where configs and the outbox are kept: the handlers' push config
    /// operations go here too.
    pub(crate) fn store(&self) -> &dyn PushStore {
        self.inner.store.as_ref()
    }

    /// Loads the tasks that have configs and starts the delivery worker,
    /// which first delivers whatever a previous process left pending.
    pub async fn start(&self) -> Result<tokio::task::JoinHandle<()>, PushError> {
        let tasks = self.inner.store.push_tasks().await?;
        {
            let mut armed = self.armed();
            for (scope, task) in tasks {
                armed.insert(key(&scope, &task));
            }
            self.inner.armed_len.store(armed.len(), Ordering::Release);
        }
        let this = self.clone();
        Ok(tokio::spawn(async move { this.run().await }))
    }

    fn armed(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String, String)>> {
        self.inner.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a task as having configs, so its events are delivered.
    pub(crate) fn arm(&self, scope: &Scope, task_id: &str) {
        let mut armed = self.armed();
        armed.insert(key(scope, task_id));
        self.inner.armed_len.store(armed.len(), Ordering::Release);
    }

    /// Forgets that a task has configs (a replica of a cluster that let go
    /// of its lease reads them again when it next runs it).
    pub(crate) fn disarm(&self, scope: &Scope, task_id: &str) {
        let mut armed = self.armed();
        armed.remove(&key(scope, task_id));
        self.inner.armed_len.store(armed.len(), Ordering::Release);
    }

    /// Whether the task may have configs.
    pub(crate) fn is_armed(&self, scope: &Scope, task_id: &str) -> bool {
        self.inner.armed_len.load(Ordering::Acquire) > 0
            && self.armed().contains(&key(scope, task_id))
    }

    /// One delivery of `event` per config of the task, not yet recorded.
    /// `task` is the task as it stands after the event. `None` when the
    /// configs could not be read (logged).
    pub(crate) async fn deliveries(
        &self,
        scope: &Scope,
        task: &v1::Task,
        event: &v1::StreamResponse,
    ) -> Option<Vec<NewDelivery>> {
        let configs = match self.inner.store.list_push_configs(scope, &task.id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(task = %task.id, error = %e, "push: cannot read the task's configs");
                return None;
            }
        };
        if configs.is_empty() {
            return Some(Vec::new());
        }
        // Found here (a replica reading the configs another one made): the
        // task's next events are delivered too.
        self.arm(scope, &task.id);
        let mut items = Vec::with_capacity(configs.len());
        let (traceparent, tracestate) = crate::trace::current_context();
        for target in configs {
            let (content_type, body) = if target.version == ProtocolVersion::V0_3.as_str() {
                (
                    "application/json",
                    serde_json::to_vec(&v03::Task::from_v1(task)),
                )
            } else {
                ("application/a2a+json", serde_json::to_vec(event))
            };
            match body {
                Ok(body) => items.push(NewDelivery {
                    id: crate::new_id(),
                    scope: scope.clone(),
                    task_id: task.id.clone(),
                    target,
                    content_type: content_type.to_owned(),
                    body,
                    traceparent: traceparent.clone(),
                    tracestate: tracestate.clone(),
                }),
                Err(e) => {
                    tracing::error!(task = %task.id, error = %e, "push: cannot encode the event");
                }
            }
        }
        Some(items)
    }

    /// After deliveries were recorded: wakes the worker, and stops watching a
    /// task that reached a terminal state (it has no further events).
    pub(crate) fn recorded(&self, scope: &Scope, task: &v1::Task) {
        if task
            .status
            .as_ref()
            .is_some_and(|s| s.state().is_terminal())
        {
            let mut armed = self.armed();
            armed.remove(&key(scope, &task.id));
            self.inner.armed_len.store(armed.len(), Ordering::Release);
        }
        self.inner.wake.notify_one();
    }

    /// Records `items` (an event's [`deliveries`](Self::deliveries)), then
    /// wakes the worker (for events that change no status: artifacts,
    /// creation).
    pub(crate) async fn enqueue(&self, scope: &Scope, task: &v1::Task, items: Vec<NewDelivery>) {
        if items.is_empty() {
            return;
        }
        if let Err(e) = self.inner.store.enqueue_deliveries(items).await {
            tracing::error!(task = %task.id, error = %e, "push: cannot record deliveries");
            return;
        }
        self.recorded(scope, task);
    }

    /// The worker: delivers due deliveries, sleeps until the next is due or
    /// new ones arrive. Runs until the runtime stops.
    async fn run(&self) {
        loop {
            let notified = self.inner.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.run_once().await {
                Ok((0, next)) => {
                    // Also poll: deliveries recorded by another process
                    // sharing the store wake nobody.
                    let wait = next
                        .map_or(IDLE_POLL, |at| {
                            Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0))
                        })
                        .min(IDLE_POLL);
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, "push: cannot read the outbox");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One pass: attempts every due delivery that is first in line for its
    /// task and config (the store gives only those, so one task's backlog
    /// does not crowd out the others). Returns how many were attempted and
    /// when the next waiting one is due.
    async fn run_once(&self) -> Result<(usize, Option<i64>), heddle_store::StoreError> {
        let pending = self.inner.store.delivery_heads(1024).await?;
        let now = now_ms();
        let mut due = Vec::new();
        let mut next: Option<i64> = None;
        for d in pending {
            if d.next_attempt_ms <= now {
                due.push(d);
            } else {
                next = Some(next.map_or(d.next_attempt_ms, |n| n.min(d.next_attempt_ms)));
            }
        }
        let n = due.len();
        futures::future::join_all(due.into_iter().map(|d| self.attempt(d))).await;
        if let Some(observer) = self.inner.observer.get() {
            match self.inner.store.pending_count().await {
                Ok(waiting) => observer.push_outbox(usize::try_from(waiting).unwrap_or(usize::MAX)),
                Err(e) => tracing::warn!(error = %e, "push: cannot count the outbox"),
            }
        }
        Ok((n, next))
    }

    /// One attempt of `d`, its outcome recorded.
    async fn attempt(&self, d: Delivery) {
        let attempts = d.attempts.saturating_add(1);
        let (span, traceparent, tracestate) = crate::trace::push_span(
            &d.item.scope.agent,
            &d.item.task_id,
            &d.item.traceparent,
            &d.item.tracestate,
        );
        let sent = self
            .send(&d, &traceparent, &tracestate)
            .instrument(span)
            .await;
        let outcome = match sent {
            Ok(()) => DeliveryOutcome::Delivered,
            Err(AttemptError::Permanent(error)) => {
                tracing::warn!(task = %d.item.task_id, delivery = %d.item.id, %error, "push: dead-lettered");
                DeliveryOutcome::Dead { attempts, error }
            }
            Err(AttemptError::Transient(error)) if attempts >= self.inner.opts.max_attempts => {
                tracing::warn!(task = %d.item.task_id, delivery = %d.item.id, %error, attempts, "push: giving up, dead-lettered");
                DeliveryOutcome::Dead { attempts, error }
            }
            Err(AttemptError::Transient(error)) => {
                tracing::debug!(task = %d.item.task_id, delivery = %d.item.id, %error, attempts, "push: will retry");
                DeliveryOutcome::Retry {
                    attempts,
                    next_attempt_ms: now_ms() + self.backoff(attempts),
                    error,
                }
            }
        };
        let observed = match &outcome {
            DeliveryOutcome::Delivered => PushOutcome::Delivered,
            DeliveryOutcome::Retry { .. } => PushOutcome::Retrying,
            DeliveryOutcome::Dead { .. } => PushOutcome::DeadLettered,
        };
        if let Err(e) = self.inner.store.finish_delivery(d.seq, outcome).await {
            tracing::error!(delivery = %d.item.id, error = %e, "push: cannot record the outcome");
        }
        if let Some(observer) = self.inner.observer.get() {
            observer.push_attempt(&PushEvent {
                agent_id: &d.item.scope.agent,
                outcome: observed,
            });
        }
    }

    /// Exponential backoff with "equal jitter": half fixed, half random.
    fn backoff(&self, attempts: u32) -> i64 {
        let opts = &self.inner.opts;
        let exp = opts
            .initial_backoff
            .saturating_mul(
                1u32.checked_shl(attempts.saturating_sub(1))
                    .unwrap_or(u32::MAX),
            )
            .min(opts.max_backoff);
        let ms = i64::try_from(exp.as_millis()).unwrap_or(i64::MAX).max(1);
        let random = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as i64;
        ms / 2 + (ms - ms / 2) * random / 1_000_000
    }

    async fn send(
        &self,
        d: &Delivery,
        traceparent: &str,
        tracestate: &str,
    ) -> Result<(), AttemptError> {
        let config = &d.item.target.config;
        let url = self
            .policy()
            .check_url(&config.url)
            .map_err(|r| AttemptError::Permanent(r.0))?;
        let mut req = self
            .inner
            .client
            .post(url)
            .header(http::header::CONTENT_TYPE, &d.item.content_type)
            .header(DELIVERY_ID_HEADER, &d.item.id)
            .header("A2A-Version", &d.item.target.version)
            .body(d.item.body.clone());
        if !config.token.is_empty() {
            req = req.header(TOKEN_HEADER, &config.token);
        }
        // A value no header may hold is left out, not the delivery.
        let valid = |v: &str| !v.is_empty() && http::HeaderValue::from_str(v).is_ok();
        if valid(traceparent) {
            req = req.header("traceparent", traceparent);
            if valid(tracestate) {
                req = req.header("tracestate", tracestate);
            }
        }
        if let Some(jwt) = self
            .inner
            .opts
            .signer
            .as_ref()
            .and_then(|s| s.sign(&d.item.id, &d.item.task_id, &d.item.body))
        {
            req = req.header(JWT_HEADER, jwt);
        }
        if let Some(auth) = &config.authentication
            && !auth.scheme.is_empty()
        {
            let value = if auth.credentials.is_empty() {
                auth.scheme.clone()
            } else {
                format!("{} {}", auth.scheme, auth.credentials)
            };
            req = req.header(http::header::AUTHORIZATION, value);
        }
        let resp = req.send().await.map_err(classify)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        if status.is_redirection() {
            return Err(AttemptError::Permanent(format!(
                "the receiver answered {status}; redirects are not followed"
            )));
        }
        let transient = status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429);
        let msg = format!("the receiver answered {status}");
        Err(if transient {
            AttemptError::Transient(msg)
        } else {
            AttemptError::Permanent(msg)
        })
    }
}

/// A refusal by the policy resolver is permanent; other transport errors are
/// not. The text never names the URL: its query may hold the receiver's
/// secret, and the text is kept in the outbox, logged and shown to admins.
fn classify(e: reqwest::Error) -> AttemptError {
    let e = e.without_url();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Refused>() {
            return AttemptError::Permanent(r.0.clone());
        }
        source = s.source();
    }
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    AttemptError::Transient(msg)
}

/// The config as stored for this call, with its version.
pub(crate) fn record(
    config: v1::TaskPushNotificationConfig,
    version: ProtocolVersion,
) -> PushConfigRecord {
    PushConfigRecord {
        config,
        version: version.as_str().to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let n = PushNotifier::new(
            Arc::new(heddle_store::MemoryStore::default()),
            PushOptions {
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_millis(1000),
                ..PushOptions::default()
            },
        )
        .unwrap();
        for _ in 0..50 {
            let b1 = n.backoff(1);
            assert!((50..=100).contains(&b1), "{b1}");
            let b3 = n.backoff(3);
            assert!((200..=400).contains(&b3), "{b3}");
            let b10 = n.backoff(10);
            assert!((500..=1000).contains(&b10), "{b10}");
            let b99 = n.backoff(99);
            assert!((500..=1000).contains(&b99), "{b99}");
        }
    }
}
