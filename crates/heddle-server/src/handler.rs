//! The transport-neutral request handler: every binding decodes its wire
//! format into a [`Call`] and hands it here; every business rule lives here.

use std::{
    panic::AssertUnwindSafe,
    pin::Pin,
    sync::{Arc, atomic::Ordering},
    task::Poll,
    time::Duration,
};

use futures::{FutureExt as _, Stream, future::BoxFuture};
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion, VersionSet,
    call::Call,
    v1::{self, stream_response::Payload},
    wkt::Timestamp,
};
use heddle_store::{ListQuery, PageToken, Scope, StoreError, TaskStore};
use tokio::sync::broadcast::error::RecvError;

mod push_configs;
mod stream_slots;

use stream_slots::StreamSlot;
pub use stream_slots::StreamSlots;

use crate::limit::{CallerLimits, RunningSlot};

use crate::{
    agent::{AgentExecutor, Caller, RequestContext},
    events::{TaskEvents, current_state},
    live::{Attached, LiveTask, LiveTasks, Update},
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
        }
    }

    /// The key this call's caller limits are kept under: the caller's id,
    /// or the client's address for a caller without one.
    pub(crate) fn limit_key(&self) -> crate::limit::CallerKey {
        crate::limit::CallerKey::of(Some(&self.caller), self.peer)
    }
}

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

struct Inner {
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
}

impl HandlerBuilder {
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

    /// The handler.
    pub fn build(self) -> RequestHandler {
        let streams = self.streams.unwrap_or_else(|| {
            StreamSlots::new(self.limits.max_streams, self.limits.max_streams_per_caller)
        });
        let mut live = LiveTasks::default();
        live.push = self.push.clone();
        RequestHandler {
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
            }),
        }
    }
}

/// Handles every A2A operation for one agent.
#[derive(Clone)]
pub struct RequestHandler {
    inner: Arc<Inner>,
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

fn is_final(update: &v1::StreamResponse) -> bool {
    match &update.payload {
        Some(Payload::Message(_)) => true,
        Some(Payload::StatusUpdate(u)) => {
            let s = u
                .status
                .as_ref()
                .map_or(v1::TaskState::Unspecified, |s| s.state());
            s.is_terminal() || s.is_interrupted()
        }
        Some(Payload::Task(t)) => {
            let s = t
                .status
                .as_ref()
                .map_or(v1::TaskState::Unspecified, |s| s.state());
            s.is_terminal()
        }
        _ => false,
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
    /// moves. The checks run now and each call gets one boxed future.
    pub fn handle(&self, cx: CallContext, call: Call) -> BoxFuture<'_, Result<Reply, A2aError>> {
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

    /// What is refused before any method runs: a required extension the
    /// caller lacks, an operation the card does not declare, invalid params.
    fn admit(&self, cx: &CallContext, call: &Call) -> Result<(), A2aError> {
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

    fn extended_card(&self, cx: &CallContext) -> Result<v1::AgentCard, A2aError> {
        let declared = self
            .inner
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false);
        if !declared {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                "this agent declares no extended card",
            ));
        }
        match &self.inner.extended_card {
            Some(c) if cx.caller.authenticated => Ok(c.clone()),
            Some(_) => Err(A2aError::new(
                ErrorCode::ExtendedAgentCardNotConfigured,
                "the extended card needs an authenticated caller",
            )),
            None => Err(A2aError::from(ErrorCode::ExtendedAgentCardNotConfigured)),
        }
    }

    async fn send(
        &self,
        cx: CallContext,
        req: v1::SendMessageRequest,
        stream: bool,
    ) -> Result<Reply, A2aError> {
        let Some(mut message) = req.message else {
            return Err(A2aError::invalid_field("message", "is required"));
        };
        if message.parts.len() > self.inner.limits.max_parts {
            return Err(A2aError::invalid_field(
                "message.parts",
                format!(
                    "{} parts; this server accepts at most {}",
                    message.parts.len(),
                    self.inner.limits.max_parts
                ),
            ));
        }
        if message.role() != v1::Role::User {
            return Err(A2aError::invalid_field("message.role", "must be ROLE_USER"));
        }
        let config = req.configuration.clone().unwrap_or_default();
        let permit = if stream {
            Some(self.stream_permit(&cx)?)
        } else {
            None
        };
        let running = self.inner.caller_limits.take_running(cx.limit_key())?;
        let scope = self.scope(&cx.caller);
        if message.task_id.is_empty()
            && let Some(legacy) = &cx.legacy_task_id
            && self.inner.live.get(&scope, legacy).is_some()
        {
            message.task_id.clone_from(legacy);
        }

        // A push config is checked before anything changes, and stored before
        // the agent runs, so its first event is delivered too.
        let push = config.task_push_notification_config.clone();
        if let Some(p) = &push {
            self.check_send_push_config(p)?;
        }
        let new_task = message.task_id.is_empty();
        let (mut lease, prior) = if new_task {
            let (attached, prior) = self.start_task(&scope, &mut message, stream);
            (self.inner.live.lease(attached), prior)
        } else {
            let attached = self
                .inner
                .live
                .attach(&scope, &message.task_id, &self.inner.store, stream)
                .await?;
            let lease = self.inner.live.lease(attached);
            if let Some(p) = push.clone() {
                self.register_send_push_config(&cx, &lease.live.id, p)
                    .await?;
            }
            let prior = self.continue_task(&lease.live, &mut message).await?;
            (lease, Some(prior))
        };
        if new_task && let Some(p) = push {
            self.register_send_push_config(&cx, &lease.live.id, p)
                .await?;
        }
        // Only streams subscribe to the fan-out; with no receiver, no event is built.
        let live = lease.live.clone();
        let rx = lease.take_rx();
        let start_gen = {
            let mut st = live.state.lock().await;
            if stream {
                st.persist_on_create = true;
            }
            if config.return_immediately && !stream && !st.created {
                self.inner
                    .store
                    .save(&live.scope, &st.task)
                    .await
                    .map_err(store_err)?;
                st.created = true;
            }
            st.settled_gen
        };
        let context_id = message.context_id.clone();
        // Boxed here, not in `spawn_execution`: a by-value argument would be
        // kept twice in that future's state and copied with it.
        let ctx = Box::new(RequestContext {
            task_id: live.id.clone(),
            context_id: context_id.clone(),
            message,
            task: prior.map(Box::new),
            caller: cx.caller.clone(),
            extensions: cx.extensions.clone(),
            configuration: req.configuration.map(Box::new),
            metadata: req.metadata,
            protocol_version: cx.version,
            cancel: live.cancel.clone(),
        });
        self.spawn_execution(live.clone(), ctx, running).await;

        if let Some(rx) = rx {
            // The first event is the task (created) or the agent's direct message.
            return Ok(Reply::Stream(self.event_stream(live, rx, None, permit)));
        }
        if config.return_immediately {
            let task = live.state.lock().await.task.clone();
            return Ok(Reply::Task(with_history(task, config.history_length)));
        }
        // `wait_for_answer` releases the task itself, then may move it out.
        drop(lease);
        self.wait_for_answer(live, start_gen, config.history_length)
            .await
    }

    /// A new task, provisional until the agent's first event.
    fn start_task(
        &self,
        scope: &Scope,
        message: &mut v1::Message,
        subscribe: bool,
    ) -> (Attached, Option<v1::Task>) {
        let task_id = crate::new_id();
        if message.context_id.is_empty() {
            message.context_id = crate::new_id();
        }
        message.task_id.clone_from(&task_id);
        let task = v1::Task {
            id: task_id,
            context_id: message.context_id.clone(),
            status: Some(v1::TaskStatus {
                state: v1::TaskState::Submitted as i32,
                message: None,
                timestamp: Some(Timestamp::now()),
            }),
            artifacts: Vec::new(),
            history: vec![message.clone()],
            metadata: None,
        };
        (
            self.inner
                .live
                .insert_new(scope.clone(), task, self.inner.store.clone(), subscribe),
            None,
        )
    }

    /// A message for an existing task: it must be waiting for the caller.
    async fn continue_task(
        &self,
        live: &Arc<LiveTask>,
        message: &mut v1::Message,
    ) -> Result<v1::Task, A2aError> {
        let mut st = live.state.lock().await;
        if !st.created {
            return Err(A2aError::task_not_found(&live.id));
        }
        let state = current_state(&st);
        if state.is_terminal() {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "task {} is {}; start a new task in the same context",
                    live.id,
                    state.as_str_name()
                ),
            )
            .with_meta("taskId", live.id.clone()));
        }
        if !message.context_id.is_empty() && message.context_id != st.task.context_id {
            return Err(A2aError::invalid_field(
                "message.contextId",
                "does not match the task's context",
            ));
        }
        if live.running.load(Ordering::Acquire) {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "task {} is {} and busy; wait for it to ask for input",
                    live.id,
                    state.as_str_name()
                ),
            ));
        }
        message.context_id.clone_from(&st.task.context_id);
        let prior = st.task.clone();
        let mut next = st.task.clone();
        next.history.push(message.clone());
        self.inner
            .store
            .save(&live.scope, &next)
            .await
            .map_err(store_err)?;
        st.task = next;
        live.running.store(true, Ordering::Release);
        Ok(prior)
    }

    /// Runs the agent: first right here, in the caller's task, until it has
    /// to wait for something; only then on a task of its own (so it goes on
    /// if the caller goes away). Most agents answer a simple call without
    /// waiting at all (the echo agent, a cached answer), and those cost no
    /// spawn and no cross-task wake-up. A panicking agent fails its task
    /// instead of leaving it WORKING and its caller waiting.
    async fn spawn_execution(
        &self,
        live: Arc<LiveTask>,
        ctx: Box<RequestContext>,
        running: RunningSlot,
    ) {
        live.running.store(true, Ordering::Release);
        let events = TaskEvents::new(live.clone(), ctx.context_id.clone());
        let executor = self.inner.executor.clone();
        let handler = self.clone();
        let run_live = live.clone();
        // The agent's future keeps the context. An async block keeps what it
        // captures in its state while it waits, so it captures the box, freed
        // as soon as the agent's future is made: 0.9 KB less per running agent.
        let mut run = Box::pin(async move {
            let execution = executor.execute(unbox(ctx), events.clone());
            let result = AssertUnwindSafe(execution).catch_unwind().await;
            let error = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.0),
                Err(panic) => {
                    // The panic's own text may hold internals: the log only.
                    tracing::error!(panic = panic_text(panic.as_ref()), "agent panicked");
                    Some("the agent failed unexpectedly".to_owned())
                }
            };
            // Boxed so its state is not part of the task for the agent's life.
            Box::pin(handler.finish_execution(&run_live, &events, error)).await;
            drop(running);
        });
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        if first.is_ready() {
            return;
        }
        // The spawned task polls it again at once, so every waker it left
        // registered is replaced by the task's own.
        let handle = tokio::spawn(run);
        live.state.lock().await.abort = Some(handle.abort_handle());
    }

    /// After `execute` returns: a task left active is failed (an agent bug or
    /// an agent error), unflushed artifacts are saved, and the task leaves the
    /// live registry if nobody watches it.
    async fn finish_execution(
        &self,
        live: &Arc<LiveTask>,
        events: &TaskEvents,
        error: Option<String>,
    ) {
        {
            let mut st = live.state.lock().await;
            st.abort = None;
            if !st.replied {
                let state = if st.created {
                    current_state(&st)
                } else {
                    v1::TaskState::Unspecified
                };
                if !(state.is_terminal() || state.is_interrupted()) {
                    let reason = error.unwrap_or_else(|| {
                        "the agent stopped without finishing the task".to_owned()
                    });
                    let msg = events.agent_message(vec![v1::Part::text(reason)]);
                    if let Err(e) = live
                        .apply_status(
                            &mut st,
                            events.context_id(),
                            v1::TaskState::Failed,
                            Some(msg),
                        )
                        .await
                    {
                        tracing::error!(task = %live.id, error = %e, "could not fail an abandoned task");
                    }
                } else if st.dirty && self.inner.store.save(&live.scope, &st.task).await.is_ok() {
                    st.dirty = false;
                }
            }
            live.running.store(false, Ordering::Release);
        }
        self.inner.live.release(&live.id);
    }

    /// A blocking send: waits until the task is terminal or interrupted, or
    /// the agent answered with a message. Uses the task's `settled` signal, not
    /// the event fan-out, so an unwatched task publishes nothing.
    async fn wait_for_answer(
        &self,
        live: Arc<LiveTask>,
        start_gen: u64,
        history: Option<i32>,
    ) -> Result<Reply, A2aError> {
        // `None`: the task finished, so it no longer changes; it is read
        // after the release below, moved out when this is its last holder.
        let reply = loop {
            let notified = live.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = live.state.lock().await;
                if st.settled_gen > start_gen {
                    if let Some(m) = &st.reply {
                        break Some(Reply::Message(v1::Message::clone(m)));
                    }
                    if current_state(&st).is_terminal() {
                        break None;
                    }
                    break Some(Reply::Task(with_history(st.task.clone(), history)));
                }
            }
            notified.await;
        };
        self.inner.live.release(&live.id);
        if let Some(reply) = reply {
            return Ok(reply);
        }
        // Usually the agent is done and the registry let go: the task is
        // moved into the answer instead of copied (its store copy is saved).
        // (Returning from the match keeps the unwrapped task, over a kilobyte,
        // out of this future's state across the await below.)
        let shared = match Arc::try_unwrap(live) {
            Ok(owned) => {
                return Ok(Reply::Task(with_history(
                    owned.state.into_inner().task,
                    history,
                )));
            }
            Err(shared) => shared,
        };
        let task = shared.state.lock().await.task.clone();
        Ok(Reply::Task(with_history(task, history)))
    }

    fn stream_permit(&self, cx: &CallContext) -> Result<StreamSlot, A2aError> {
        self.inner.streams.take(cx.limit_key())
    }

    /// Relays the task's events until it ends or waits; `first` (a snapshot)
    /// goes out before them. Dropping the stream detaches; it never cancels.
    fn event_stream(
        &self,
        live: Arc<LiveTask>,
        rx: tokio::sync::broadcast::Receiver<Update>,
        first: Option<v1::Task>,
        permit: Option<StreamSlot>,
    ) -> EventStream {
        struct Guard {
            handler: RequestHandler,
            id: String,
            _permit: Option<StreamSlot>,
        }
        impl Drop for Guard {
            fn drop(&mut self) {
                self.handler.inner.live.release(&self.id);
            }
        }
        let guard = Guard {
            handler: self.clone(),
            id: live.id.clone(),
            _permit: permit,
        };
        let first = first.map(|t| {
            Arc::new(v1::StreamResponse {
                payload: Some(Payload::Task(t)),
            })
        });
        let s = futures::stream::unfold(
            (Some(rx), first, false, live, guard),
            |(rx, first, done, live, guard)| async move {
                if done {
                    return None;
                }
                let mut rx = rx?;
                if let Some(snapshot) = first {
                    return Some((snapshot, (Some(rx), None, false, live, guard)));
                }
                match rx.recv().await {
                    Ok(update) => {
                        let end = is_final(&update);
                        let rx = if end { None } else { Some(rx) };
                        Some((update, (rx, None, end, live, guard)))
                    }
                    Err(RecvError::Lagged(_)) => {
                        // Too slow: resynchronise with a fresh snapshot.
                        let task = live.state.lock().await.task.clone();
                        let snap = Arc::new(v1::StreamResponse {
                            payload: Some(Payload::Task(task)),
                        });
                        let end = is_final(&snap);
                        Some((
                            snap,
                            (if end { None } else { Some(rx) }, None, end, live, guard),
                        ))
                    }
                    Err(RecvError::Closed) => None,
                }
            },
        );
        Box::pin(s)
    }

    /// GetTask, scoped to the caller; the live state when there is one.
    pub async fn get_task(
        &self,
        cx: &CallContext,
        id: &str,
        history: Option<i32>,
    ) -> Result<v1::Task, A2aError> {
        let scope = self.scope(&cx.caller);
        if let Some(live) = self.inner.live.get(&scope, id) {
            let st = live.state.lock().await;
            if st.created {
                return Ok(with_history(st.task.clone(), history));
            }
        }
        let task = self
            .inner
            .store
            .load(&scope, id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2aError::task_not_found(id))?;
        Ok(with_history(task, history))
    }

    async fn list_tasks(
        &self,
        cx: &CallContext,
        r: v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, A2aError> {
        let page_size = r.page_size.unwrap_or(50).clamp(1, 100) as u32;
        if let Some(t) = r
            .page_token
            .as_str()
            .chars()
            .next()
            .map(|_| r.page_token.as_str())
        {
            PageToken::decode(t).map_err(store_err)?;
        }
        let state = match r.status() {
            v1::TaskState::Unspecified => None,
            s => Some(s),
        };
        let query = ListQuery {
            context_id: (!r.context_id.is_empty()).then(|| r.context_id.clone()),
            state,
            status_after_ms: r.status_timestamp_after.map(|t| t.as_millis()),
            page_size,
            page_token: (!r.page_token.is_empty()).then(|| r.page_token.clone()),
        };
        let page = self
            .inner
            .store
            .list(&self.scope(&cx.caller), &query)
            .await
            .map_err(store_err)?;
        let include_artifacts = r.include_artifacts.unwrap_or(false);
        let tasks = page
            .tasks
            .into_iter()
            .map(|mut t| {
                if !include_artifacts {
                    t.artifacts.clear();
                }
                with_history(t, r.history_length)
            })
            .collect();
        Ok(v1::ListTasksResponse {
            tasks,
            next_page_token: page.next_page_token,
            page_size: page_size as i32,
            total_size: page.total_size as i32,
        })
    }

    /// CancelTask: stops the executor and ends the task CANCELED.
    async fn cancel_task(&self, cx: &CallContext, id: &str) -> Result<v1::Task, A2aError> {
        let scope = self.scope(&cx.caller);
        let attached = self
            .inner
            .live
            .attach(&scope, id, &self.inner.store, false)
            .await?;
        let lease = self.inner.live.lease(attached);
        self.cancel_live(&lease.live, &cx.caller).await
    }

    async fn cancel_live(
        &self,
        live: &Arc<LiveTask>,
        caller: &Caller,
    ) -> Result<v1::Task, A2aError> {
        let (running, snapshot) = {
            let st = live.state.lock().await;
            if !st.created {
                return Err(A2aError::task_not_found(&live.id));
            }
            let state = current_state(&st);
            // Already CANCELED included (v1 §3.1.5 names it): a second cancel
            // changes nothing, as §3.3.1 asks, and says so the same way.
            if state.is_terminal() {
                return Err(A2aError::new(
                    ErrorCode::TaskNotCancelable,
                    format!("task {} is already {}", live.id, state.as_str_name()),
                )
                .with_meta("taskId", live.id.clone()));
            }
            (live.running.load(Ordering::Acquire), st.task.clone())
        };
        let events = TaskEvents::new(live.clone(), snapshot.context_id.clone());
        if running {
            live.cancel.cancel();
            let ctx = RequestContext {
                task_id: live.id.clone(),
                context_id: snapshot.context_id.clone(),
                message: snapshot.history.last().cloned().unwrap_or_default(),
                task: Some(Box::new(snapshot.clone())),
                caller: caller.clone(),
                extensions: Vec::new(),
                configuration: None,
                metadata: None,
                protocol_version: ProtocolVersion::V1_0,
                cancel: live.cancel.clone(),
            };
            let grace = self.inner.limits.cancel_grace;
            if let Err(e) =
                tokio::time::timeout(grace, self.inner.executor.cancel(ctx, events.clone()))
                    .await
                    .unwrap_or(Ok(()))
            {
                tracing::warn!(task = %live.id, error = %e, "agent cancel failed; canceling anyway");
            }
        }
        let mut st = live.state.lock().await;
        let state = current_state(&st);
        if !state.is_terminal() {
            let msg =
                events.agent_message(vec![v1::Part::text("canceled at the caller's request")]);
            live.apply_status(
                &mut st,
                events.context_id(),
                v1::TaskState::Canceled,
                Some(msg),
            )
            .await
            .map_err(|e| A2aError::internal(e.to_string()))?;
        }
        if let Some(abort) = st.abort.take() {
            // The agent had its grace period in `cancel`; stop it for good.
            abort.abort();
            live.running.store(false, Ordering::Release);
        }
        if current_state(&st) == v1::TaskState::Canceled {
            Ok(st.task.clone())
        } else {
            let s = current_state(&st);
            Err(A2aError::new(
                ErrorCode::TaskNotCancelable,
                format!(
                    "task {} ended {} before it could be canceled",
                    live.id,
                    s.as_str_name()
                ),
            ))
        }
    }

    /// SubscribeToTask: the current task first, then its events.
    async fn subscribe(&self, cx: &CallContext, id: &str) -> Result<EventStream, A2aError> {
        let permit = self.stream_permit(cx)?;
        let scope = self.scope(&cx.caller);
        let attached = self
            .inner
            .live
            .attach(&scope, id, &self.inner.store, true)
            .await?;
        let mut lease = self.inner.live.lease(attached);
        let live = lease.live.clone();
        let snapshot = {
            let st = live.state.lock().await;
            (st.created).then(|| st.task.clone())
        };
        let Some(snapshot) = snapshot else {
            return Err(A2aError::task_not_found(id));
        };
        let state = snapshot
            .status
            .as_ref()
            .map_or(v1::TaskState::Unspecified, |s| s.state());
        if state.is_terminal() {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "task {id} is {}; there is nothing to subscribe to",
                    state.as_str_name()
                ),
            ));
        }
        let Some(rx) = lease.take_rx() else {
            return Err(A2aError::internal("subscription was not created"));
        };
        Ok(self.event_stream(live, rx, Some(snapshot), Some(permit)))
    }

    /// At start-up: fail tasks a previous process left running.
    pub async fn recover(&self) -> Result<u64, A2aError> {
        self.inner
            .store
            .fail_interrupted(
                "the server restarted while this task was running; send the request again",
            )
            .await
            .map_err(store_err)
    }
}

fn with_history(mut task: v1::Task, n: Option<i32>) -> v1::Task {
    truncate_history(&mut task, n);
    task
}

/// The value out of its box, freeing the box (which is the point, hence the allow).
#[allow(clippy::boxed_local)]
fn unbox<T>(b: Box<T>) -> T {
    *b
}

/// The message a panic carried, when it is text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
