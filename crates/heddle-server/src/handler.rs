//! The transport-neutral request handler: every binding decodes its wire
//! format into a [`Call`] and hands it here; every business rule lives here.

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::{Stream, future::BoxFuture};
use heddle_core::{A2aError, ErrorCode, ProtocolVersion, VersionSet, call::Call, v1};
use heddle_store::{Scope, StoreError, TaskStore};

mod cancel;
mod drain;
mod gate;
mod push_configs;
mod queue;
mod read;
mod replica;
mod send;
mod stream;
mod stream_slots;

pub use drain::{RESUBSCRIBE_KEY, StreamDrain};
pub use gate::{Pass, SendAtGate, SendGate};
pub use queue::{Concurrency, Priority, PriorityFn};
pub use stream_slots::StreamSlots;

use crate::limit::{AgentRate, CallerLimits};

use crate::{
    agent::{AgentExecutor, Caller},
    live::{LiveTasks, Update},
    observe::{CallEvent, Observer},
    push::PushNotifier,
};

/// Limits that protect the server from oversized or abusive requests.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest request body, in bytes, on every binding and both HTTP
    /// versions: the JSON-RPC and REST routes refuse a larger one with 413,
    /// gRPC with `RESOURCE_EXHAUSTED`. The only body size limit there is.
    pub max_body_bytes: usize,
    /// Most parts in one message.
    pub max_parts: usize,
    /// Most streams (SSE or gRPC) open at once across the server: every
    /// handler built with the same [`StreamSlots`] shares them (the hub's
    /// agents do); a handler built without gets slots of its own.
    pub max_streams: usize,
    /// Most streams one caller may hold open at once, so that one caller
    /// cannot take every slot.
    pub max_streams_per_caller: usize,
    /// Most requests in one JSON-RPC batch; a longer batch is refused whole
    /// (InvalidRequest).
    pub max_batch: usize,
    /// How long a canceled agent may keep running before it is aborted.
    pub cancel_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 << 20,
            max_parts: 256,
            max_streams: 10_000,
            max_streams_per_caller: 10_000,
            max_batch: 100,
            cancel_grace: Duration::from_secs(5),
        }
    }
}

/// Per-request facts established before the handler: who and how.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The caller.
    pub caller: Caller,
    /// The protocol version the caller speaks.
    pub version: ProtocolVersion,
    /// Activated extensions.
    pub extensions: Vec<String>,
    /// A legacy `tasks/send` task id, if the client named one.
    pub legacy_task_id: Option<String>,
    /// The client's address, when the binding knows it: the limits of a
    /// caller with no id (anonymous) are kept per address, so that one
    /// client cannot take every anonymous caller's share.
    pub peer: Option<std::net::IpAddr>,
    /// The binding the call came by (each binding fills it in), for an
    /// [`Observer`]; `None` for a call made in-process.
    pub binding: Option<crate::Binding>,
    /// The generation of the last event a reconnecting client saw (the SSE
    /// `Last-Event-ID` header, gRPC's `last-event-id` metadata):
    /// SubscribeToTask then sends only the events after it.
    pub resume_after: Option<u64>,
}

impl CallContext {
    /// An anonymous v1.0 call with no extensions.
    pub fn anonymous() -> Self {
        Self {
            caller: Caller::anonymous(),
            version: ProtocolVersion::V1_0,
            extensions: Vec::new(),
            legacy_task_id: None,
            peer: None,
            binding: None,
            resume_after: None,
        }
    }

    /// The key this call's caller limits are kept under: the caller's id,
    /// or the client's address for a caller without one.
    pub(crate) fn limit_key(&self) -> crate::limit::CallerKey {
        crate::limit::CallerKey::of(Some(&self.caller), self.peer)
    }
}

/// A check every message sent to the agent must pass before a task is made
/// for it or the executor sees it (see [`HandlerBuilder::message_check`]).
/// The error it returns is the caller's answer, in the caller's binding.
pub type MessageCheck = Arc<dyn Fn(&v1::Message) -> Result<(), A2aError> + Send + Sync>;

/// A stream of events, in order; it ends when the task does (or waits).
pub type EventStream = Pin<Box<dyn Stream<Item = Update> + Send>>;

/// What a call produced.
pub enum Reply {
    /// A task (GetTask, CancelTask, a SendMessage that made one).
    Task(v1::Task),
    /// A direct message reply to SendMessage.
    Message(v1::Message),
    /// A page of tasks.
    Tasks(v1::ListTasksResponse),
    /// A card.
    Card(Box<v1::AgentCard>),
    /// Events (SendStreamingMessage, SubscribeToTask).
    Stream(EventStream),
    /// A push config (Create, Get).
    PushConfig(v1::TaskPushNotificationConfig),
    /// A page of push configs (List).
    PushConfigs(v1::ListTaskPushNotificationConfigsResponse),
    /// Nothing (Delete).
    Empty,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Task(t) => f.debug_tuple("Task").field(t).finish(),
            Reply::Message(m) => f.debug_tuple("Message").field(m).finish(),
            Reply::Tasks(t) => f.debug_tuple("Tasks").field(t).finish(),
            Reply::Card(c) => f.debug_tuple("Card").field(c).finish(),
            Reply::Stream(_) => f.write_str("Stream"),
            Reply::PushConfig(c) => f.debug_tuple("PushConfig").field(&c.id).finish(),
            Reply::PushConfigs(c) => f
                .debug_tuple("PushConfigs")
                .field(&c.configs.len())
                .finish(),
            Reply::Empty => f.write_str("Empty"),
        }
    }
}

pub(crate) struct Inner {
    agent_id: String,
    executor: Arc<dyn AgentExecutor>,
    store: Arc<dyn TaskStore>,
    live: LiveTasks,
    card: v1::AgentCard,
    extended_card: Option<v1::AgentCard>,
    limits: Limits,
    streams: StreamSlots,
    caller_limits: CallerLimits,
    push: Option<PushNotifier>,
    versions: VersionSet,
    message_check: Option<MessageCheck>,
    rate: Option<AgentRate>,
    concurrency: Option<Concurrency>,
    gate: Option<gate::SharedGate>,
    /// This agent as delegation chains name it: its card's first interface
    /// (`heddle_api::delegation::agent_name`).
    agent_url: Arc<str>,
    /// Every interface of its card, so named: a chain naming any is a loop.
    agent_urls: Box<[String]>,
    max_hops: u32,
    observer: Option<Arc<dyn Observer>>,
    cluster: Option<Arc<crate::cluster::Cluster>>,
    drain: StreamDrain,
}

/// A [`RequestHandler`] being put together (see [`RequestHandler::builder`]).
#[must_use = "call build() for the handler"]
pub struct HandlerBuilder {
    agent_id: String,
    card: v1::AgentCard,
    executor: Arc<dyn AgentExecutor>,
    store: Arc<dyn TaskStore>,
    limits: Limits,
    extended_card: Option<v1::AgentCard>,
    push: Option<PushNotifier>,
    streams: Option<StreamSlots>,
    caller_limits: Option<CallerLimits>,
    versions: VersionSet,
    message_check: Option<MessageCheck>,
    rate: Option<AgentRate>,
    concurrency: Option<Concurrency>,
    gate: Option<gate::SharedGate>,
    max_hops: u32,
    observer: Option<Arc<dyn Observer>>,
    cluster: Option<Arc<crate::cluster::Cluster>>,
    drain: StreamDrain,
}

impl HandlerBuilder {
    /// The most agents a delegation chain through this agent may hold, it
    /// included (default [`heddle_api::delegation::DEFAULT_MAX_HOPS`]): a
    /// request whose own limit is larger is held to this one.
    pub fn max_hops(mut self, hops: u32) -> Self {
        self.max_hops = hops.clamp(1, heddle_api::delegation::MAX_HOPS_CAP);
        self
    }

    /// Holds callers to `limits` (request rate on the routes
    /// [`crate::AgentRoutes`] makes, running tasks here), shared with the
    /// other agents given the same (default: none).
    pub fn caller_limits(mut self, limits: CallerLimits) -> Self {
        self.caller_limits = Some(limits);
        self
    }

    /// Limits in force (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves `card` to authenticated callers from GetExtendedAgentCard.
    pub fn extended_card(mut self, card: v1::AgentCard) -> Self {
        self.extended_card = Some(card);
        self
    }

    /// Delivers push notifications through `push` (shared by the server's
    /// agents). Push configs are served only when the card also declares
    /// `capabilities.pushNotifications`.
    pub fn push(mut self, push: PushNotifier) -> Self {
        self.push = Some(push);
        self
    }

    /// Counts this agent's streams in `slots`, shared with the other agents
    /// given the same (default: slots of its own, from the limits).
    pub fn stream_slots(mut self, slots: StreamSlots) -> Self {
        self.streams = Some(slots);
        self
    }

    /// Serves only these protocol versions (default: both): a call in
    /// another is VersionNotSupported, whatever its binding. The card should
    /// list interfaces of these versions only.
    pub fn versions(mut self, versions: VersionSet) -> Self {
        self.versions = versions;
        self
    }

    /// Runs `check` on every message of SendMessage and
    /// SendStreamingMessage (any version, any binding), after the built-in
    /// checks and before a task is created or continued: a refused message
    /// leaves no task behind and never reaches the executor. A hub installs
    /// an agent's input-schema check this way.
    pub fn message_check(mut self, check: MessageCheck) -> Self {
        self.message_check = Some(check);
        self
    }

    /// Holds this agent to `rate` requests a second from all its callers
    /// together, on every binding (the extended card excepted): a call past
    /// it is ResourceExhausted (HTTP 429 with `Retry-After`, gRPC
    /// `RESOURCE_EXHAUSTED`) before anything else is checked. The
    /// per-caller limits apply as well. Default: no rate.
    pub fn agent_rate(mut self, rate: AgentRate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Runs at most `concurrency.max_running()` executions of this agent at
    /// once (a new task, or a reply to one waiting for input); the next
    /// ones wait, their tasks SUBMITTED and visible, and start by
    /// [`Priority`]; a send that finds the queue full is refused with
    /// ResourceExhausted before any task is made. A queued task canceled
    /// ends CANCELED without the executor running. Default: no limit (and
    /// no cost on the send path).
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = Some(concurrency);
        self
    }

    /// Asks `gate` before each send makes or continues a task, and tells
    /// the pass it gives how the run went (see [`SendGate`]): the
    /// hook a server that charges or books tasks needs.
    pub fn gate(mut self, gate: Arc<dyn SendGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Tells `observer` of every call (method, binding, version, outcome,
    /// time taken), every stream opened and closed, and every task created
    /// or changed: the hook metrics need (see [`crate::observe`]). Without
    /// one (the default) none of it is measured.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Makes the handler one replica of several sharing its store: its
    /// task events go to the others over the cluster's bus, subscribers get
    /// the events of tasks other replicas run, cancels reach the replica
    /// running the task, and (with leases) a dead replica's tasks end
    /// (see [`crate::cluster`]).
    pub fn cluster(mut self, cluster: Arc<crate::cluster::Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Ends this handler's open streams when `drain` starts, each with a
    /// last event telling its client to subscribe again (see
    /// [`StreamDrain`]). Give every handler of a server the same one.
    pub fn stream_drain(mut self, drain: StreamDrain) -> Self {
        self.drain = drain;
        self
    }

    /// The handler.
    pub fn build(self) -> RequestHandler {
        let streams = self.streams.unwrap_or_else(|| {
            StreamSlots::new(self.limits.max_streams, self.limits.max_streams_per_caller)
        });
        let mut live = LiveTasks::default();
        live.push = self.push.clone();
        // How delegation chains name this agent (and every name that is a loop).
        let agent_urls: Box<[String]> = self
            .card
            .supported_interfaces
            .iter()
            .map(heddle_api::delegation::agent_name)
            .collect();
        let agent_url: Arc<str> = agent_urls.first().map_or("", String::as_str).into();
        live.observer = self.observer.clone();
        live.cluster = self.cluster.clone();
        let handler = RequestHandler {
            inner: Arc::new(Inner {
                agent_id: self.agent_id,
                executor: self.executor,
                store: self.store,
                live,
                card: self.card,
                extended_card: self.extended_card,
                limits: self.limits,
                streams,
                caller_limits: self.caller_limits.unwrap_or_else(CallerLimits::unlimited),
                push: self.push,
                versions: self.versions,
                message_check: self.message_check,
                rate: self.rate,
                concurrency: self.concurrency,
                gate: self.gate,
                agent_url,
                agent_urls,
                max_hops: self.max_hops,
                observer: self.observer,
                cluster: self.cluster,
                drain: self.drain,
            }),
        };
        if let Some(cluster) = &handler.inner.cluster {
            cluster.register(&handler);
        }
        handler
    }
}

/// Handles every A2A operation for one agent.
#[derive(Clone)]
pub struct RequestHandler {
    inner: Arc<Inner>,
}

impl RequestHandler {
    pub(crate) fn downgrade(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(crate) fn upgrade(weak: &std::sync::Weak<Inner>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }
}

impl std::fmt::Debug for RequestHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHandler")
            .field("agent", &self.inner.agent_id)
            .finish_non_exhaustive()
    }
}

pub(crate) fn store_err(e: StoreError) -> A2aError {
    match e {
        StoreError::InvalidPageToken => {
            A2aError::invalid_field("pageToken", "not a token this server issued")
        }
        StoreError::Full(_) => A2aError::exhausted(
            "the server holds as many running tasks as it can; retry later",
            Duration::from_secs(5),
        ),
        // Internal: the bindings log the detail and show a correlation id.
        other => A2aError::internal(format!("task store: {other}")),
    }
}

/// Keeps the last `n` history messages (`None`: all; `0`: none) (v1 §3.2.4).
pub fn truncate_history(task: &mut v1::Task, n: Option<i32>) {
    if let Some(n) = n {
        let keep = usize::try_from(n.max(0)).unwrap_or(0);
        let len = task.history.len();
        if len > keep {
            task.history.drain(..len - keep);
        }
    }
}

impl RequestHandler {
    /// A handler for the agent `agent_id` with its card, executor and store,
    /// and nothing else ([`RequestHandler::builder`] adds the rest).
    pub fn new(
        agent_id: impl Into<String>,
        card: v1::AgentCard,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        limits: Limits,
    ) -> Self {
        Self::builder(agent_id, card, executor, store)
            .limits(limits)
            .build()
    }

    /// Starts a handler with the options `new` leaves out. The options are
    /// set on the builder, before any handler exists, so none can be lost
    /// on a clone.
    pub fn builder(
        agent_id: impl Into<String>,
        card: v1::AgentCard,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
    ) -> HandlerBuilder {
        HandlerBuilder {
            agent_id: agent_id.into(),
            card,
            executor,
            store,
            limits: Limits::default(),
            extended_card: None,
            push: None,
            streams: None,
            caller_limits: None,
            versions: VersionSet::ALL,
            message_check: None,
            rate: None,
            concurrency: None,
            gate: None,
            max_hops: heddle_api::delegation::DEFAULT_MAX_HOPS,
            observer: None,
            cluster: None,
            drain: StreamDrain::default(),
        }
    }

    /// The agent's public card.
    pub fn card(&self) -> &v1::AgentCard {
        &self.inner.card
    }

    /// The agent id (the store scope and v1.0 tenant).
    pub fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The protocol versions served.
    pub fn versions(&self) -> VersionSet {
        self.inner.versions
    }

    /// The per-caller limits this handler's callers are held to.
    pub fn caller_limits(&self) -> &CallerLimits {
        &self.inner.caller_limits
    }

    /// The agent's own request rate, if it has one
    /// ([`HandlerBuilder::agent_rate`]).
    pub fn agent_rate(&self) -> Option<&AgentRate> {
        self.inner.rate.as_ref()
    }

    /// How many of its executions run at once, if limited
    /// ([`HandlerBuilder::concurrency`]).
    pub fn concurrency(&self) -> Option<&Concurrency> {
        self.inner.concurrency.as_ref()
    }

    /// Number of tasks held live (running or subscribed).
    pub fn live_tasks(&self) -> usize {
        self.inner.live.len()
    }

    fn scope(&self, caller: &Caller) -> Scope {
        Scope::new(self.inner.agent_id.clone(), caller.id.clone())
    }

    fn streaming(&self) -> bool {
        self.inner
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.streaming)
            .unwrap_or(false)
    }

    fn push_supported(&self) -> bool {
        self.inner
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.push_notifications)
            .unwrap_or(false)
    }

    /// The one dispatcher every binding calls.
    ///
    /// Not an `async fn`: that would be a future as big as its biggest arm's
    /// (kilobytes, and the call kept twice in it) that every layer above
    /// moves. The checks run now and each call gets one boxed future (two
    /// with an [`Observer`], which is told how the call went).
    pub fn handle(&self, cx: CallContext, call: Call) -> BoxFuture<'_, Result<Reply, A2aError>> {
        self.describe_span(&cx, &call);
        let Some(observer) = &self.inner.observer else {
            return self.dispatch(cx, call);
        };
        let start = std::time::Instant::now();
        let (method, binding, version) = (call.method(), cx.binding, cx.version);
        let answer = self.dispatch(cx, call);
        Box::pin(async move {
            let answer = answer.await;
            observer.call(&CallEvent {
                agent_id: &self.inner.agent_id,
                method,
                binding,
                version,
                outcome: answer.as_ref().map(|_| ()).map_err(|e| e.code),
                elapsed: start.elapsed(),
            });
            answer
        })
    }

    fn dispatch(&self, cx: CallContext, call: Call) -> BoxFuture<'_, Result<Reply, A2aError>> {
        if let Err(e) = self.admit(&cx, &call) {
            return Box::pin(std::future::ready(Err(e)));
        }
        match call {
            Call::SendMessage(r) => Box::pin(self.send(cx, r, false)),
            Call::SendStreamingMessage(r) => Box::pin(self.send(cx, r, true)),
            Call::GetTask(r) => Box::pin(async move {
                self.get_task(&cx, &r.id, r.history_length)
                    .await
                    .map(Reply::Task)
            }),
            Call::ListTasks(r) => {
                Box::pin(async move { self.list_tasks(&cx, r).await.map(Reply::Tasks) })
            }
            Call::CancelTask(r) => {
                Box::pin(async move { self.cancel_task(&cx, &r.id).await.map(Reply::Task) })
            }
            Call::SubscribeToTask(r) => {
                Box::pin(async move { self.subscribe(&cx, &r.id).await.map(Reply::Stream) })
            }
            Call::CreatePushConfig(r) => {
                Box::pin(async move { self.create_push_config(&cx, r).await })
            }
            Call::GetPushConfig(r) => Box::pin(async move { self.get_push_config(&cx, r).await }),
            Call::ListPushConfigs(r) => {
                Box::pin(async move { self.list_push_configs(&cx, r).await })
            }
            Call::DeletePushConfig(r) => {
                Box::pin(async move { self.delete_push_config(&cx, r).await })
            }
            Call::GetExtendedAgentCard(_) => Box::pin(std::future::ready(
                self.extended_card(&cx).map(|c| Reply::Card(Box::new(c))),
            )),
        }
    }

    /// The A2A attributes of the request's trace span ([`crate::trace`]),
    /// when it is on.
    fn describe_span(&self, cx: &CallContext, call: &Call) {
        if !crate::trace::enabled() {
            return;
        }
        let span = tracing::Span::current();
        if let Some(name) = call.method().jsonrpc_name(ProtocolVersion::V1_0) {
            span.record("a2a.method", name);
        }
        span.record("a2a.version", cx.version.as_str());
        if let Some(binding) = cx.binding {
            span.record("a2a.binding", binding.as_str());
        }
        span.record("gen_ai.agent.id", self.agent_id());
        if cx.caller.authenticated {
            span.record("a2a.caller", cx.caller.id.as_str());
        }
    }

    /// What is refused before any method runs: a call past the agent's
    /// rate (first, so refused calls cost the agent nothing more), a
    /// required extension the caller lacks, an operation the card does not
    /// declare, invalid params.
    fn admit(&self, cx: &CallContext, call: &Call) -> Result<(), A2aError> {
        // The extended card is a card fetch, which the rate leaves alone.
        if let Some(rate) = &self.inner.rate
            && !matches!(call, Call::GetExtendedAgentCard(_))
        {
            rate.check()?;
        }
        if !self.inner.versions.contains(cx.version) {
            return Err(self.inner.versions.refusal(cx.version));
        }
        self.check_required_extensions(cx)?;
        // Capabilities first: an unsupported operation is that, whatever its params.
        if matches!(
            call,
            Call::CreatePushConfig(_)
                | Call::GetPushConfig(_)
                | Call::ListPushConfigs(_)
                | Call::DeletePushConfig(_)
        ) {
            self.push_notifier()?;
        }
        if matches!(
            call,
            Call::SendStreamingMessage(_) | Call::SubscribeToTask(_)
        ) && !self.streaming()
        {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                "this agent does not stream",
            ));
        }
        call.validate()
    }

    fn check_required_extensions(&self, cx: &CallContext) -> Result<(), A2aError> {
        let Some(caps) = &self.inner.card.capabilities else {
            return Ok(());
        };
        for ext in caps.extensions.iter().filter(|e| e.required) {
            if !cx.extensions.iter().any(|u| u == &ext.uri) {
                return Err(A2aError::new(
                    ErrorCode::ExtensionSupportRequired,
                    format!("this agent requires the extension {}", ext.uri),
                )
                .with_meta("extension", ext.uri.clone()));
            }
        }
        Ok(())
    }

    /// At start-up: fail tasks a previous process left running. A replica
    /// whose cluster leases tasks leaves that to the lease reaper (the
    /// store's running tasks may be other replicas').
    pub async fn recover(&self) -> Result<u64, A2aError> {
        if self
            .inner
            .cluster
            .as_ref()
            .is_some_and(|c| c.leases_tasks())
        {
            return Ok(0);
        }
        self.inner
            .store
            .fail_interrupted(
                "the server restarted while this task was running; send the request again",
            )
            .await
            .map_err(store_err)
    }
}
