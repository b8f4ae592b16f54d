//! SendMessage and SendStreamingMessage: a new task or a follow-up to
//! one, the executor run under its lease, and the answer waited for.

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, atomic::Ordering},
    task::Poll,
};

use futures::FutureExt as _;
use heddle_core::{A2aError, ErrorCode, v1, wkt::Timestamp};
use heddle_store::Scope;
use tracing::Instrument as _;

use super::{
    CallContext, Reply, RequestHandler,
    gate::{Pass, SendAtGate},
    queue::{Admission, Place, Slot},
    read::with_history,
    store_err,
};
use crate::cluster::Fence;
use crate::limit::RunningSlot;
use crate::{
    agent::RequestContext,
    events::{TaskEvents, current_state},
    live::{Attached, LiveTask},
};

/// Longest a reply to an agent's question waits for the run that asked it
/// to end (`continue_task`); an agent still running past it is busy.
const RUN_END_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `run` until the delegation chain's deadline `at`; past it, the
/// task's cancel token fires (so the calls the agent made for it are
/// canceled too), then the agent is dropped and the task fails with the
/// reason.
async fn run_until<F>(
    at: Timestamp,
    run: F,
    live: &LiveTask,
) -> Result<Result<(), crate::agent::AgentError>, Box<dyn std::any::Any + Send>>
where
    F: std::future::Future<
            Output = Result<Result<(), crate::agent::AgentError>, Box<dyn std::any::Any + Send>>,
        >,
{
    let left = at.as_millis().saturating_sub(Timestamp::now().as_millis());
    let left = std::time::Duration::from_millis(u64::try_from(left).unwrap_or(0));
    let mut run = std::pin::pin!(run);
    tokio::select! {
        result = &mut run => result,
        () = tokio::time::sleep(left) => {
            // The cancel fires while the agent (and the calls it made for
            // the task) still exist, so those calls see it; the agent is
            // dropped after.
            live.cancel.cancel();
            Ok(Err(crate::agent::AgentError::new(format!(
                "the delegation chain's deadline ({at}) passed and the task was stopped"
            ))))
        }
    }
}

impl RequestHandler {
    /// The delegation context a message arrives with (in its metadata, or
    /// the request's), held to this agent's hop limit and checked: no
    /// loop, within the limit, before the deadline. Most messages carry
    /// none, which costs two lookups.
    pub(super) fn admit_delegation(
        &self,
        message: &v1::Message,
        request: Option<&heddle_core::wkt::Struct>,
    ) -> Result<Option<Box<heddle_api::Delegation>>, A2aError> {
        use heddle_api::Delegation;
        let found = match Delegation::from_metadata(message.metadata.as_ref())? {
            Some(d) => Some(d),
            None => Delegation::from_metadata(request)?,
        };
        let Some(mut d) = found else {
            return Ok(None);
        };
        d.max_hops = d.max_hops.min(self.inner.max_hops);
        d.admit(&self.inner.agent_urls, Timestamp::now())?;
        Ok(Some(Box::new(d)))
    }

    pub(super) async fn send(
        &self,
        cx: CallContext,
        req: v1::SendMessageRequest,
        stream: bool,
    ) -> Result<Reply, A2aError> {
        let Some(mut message) = req.message else {
            return Err(A2aError::invalid_field("message", "is required"));
        };
        self.check_message(&message)?;
        let mut delegation = self.admit_delegation(&message, req.metadata.as_ref())?;
        let config = req.configuration.clone().unwrap_or_default();
        let permit = if stream {
            Some(self.stream_permit(&cx)?)
        } else {
            None
        };
        let running = self.inner.caller_limits.take_running(cx.limit_key())?;
        // The agent's place (to run, or to wait) is taken before any task
        // is made or continued: a full queue leaves nothing behind.
        let admission = match &self.inner.concurrency {
            None => None,
            Some(c) => Some(c.admit()?),
        };
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
        let (mut lease, prior, pass) = if new_task {
            let task_id = crate::new_id();
            let pass = self
                .at_gate(
                    &cx,
                    &task_id,
                    true,
                    &message,
                    req.metadata.as_ref(),
                    delegation.as_deref(),
                )
                .await?;
            let (attached, prior) = self.start_task(&scope, task_id, &mut message, stream);
            (self.inner.live.lease(attached), prior, pass)
        } else {
            let attached = self
                .inner
                .live
                .attach(&scope, &message.task_id, &self.inner.store, stream)
                .await?;
            let lease = self.inner.live.lease(attached);
            let pass = self
                .at_gate(
                    &cx,
                    &lease.live.id,
                    false,
                    &message,
                    req.metadata.as_ref(),
                    delegation.as_deref(),
                )
                .await?;
            if let Some(p) = push.clone() {
                self.register_send_push_config(&cx, &lease.live.id, p)
                    .await?;
            }
            let prior = self.continue_task(&lease.live, &mut message).await?;
            (lease, Some(prior), pass)
        };
        if new_task && let Some(p) = push {
            self.register_send_push_config(&cx, &lease.live.id, p)
                .await?;
        }
        // What the gate's hold lets the run hand down goes with its calls.
        if let Some((remaining, hold)) = pass.as_ref().and_then(|p| p.delegation_budget()) {
            let d = delegation
                .get_or_insert_with(|| Box::new(heddle_api::Delegation::root(self.inner.max_hops)));
            d.budget = Some(remaining);
            d.hold = Some(hold);
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
                // Created (saved, announced, pushed) before the caller is
                // answered, as a stream's first event would be.
                st.persist_on_create = true;
                live.create_if_needed(&mut st).await.map_err(|e| match e {
                    crate::EventError::Store(e) => store_err(e),
                    other => A2aError::internal(other.to_string()),
                })?;
            }
            st.settled_gen
        };
        // Boxed here, not in `spawn_execution`: a by-value argument would be
        // kept twice in that future's state and copied with it.
        let ctx = Box::new(RequestContext {
            task_id: live.id.clone(),
            context_id: message.context_id.clone(),
            message,
            task: prior.map(Box::new),
            caller: cx.caller.clone(),
            extensions: cx.extensions.clone(),
            configuration: req.configuration.map(Box::new),
            metadata: req.metadata,
            protocol_version: cx.version,
            cancel: live.cancel.clone(),
            streaming: stream,
            agent: self.inner.agent_url.clone(),
            delegation,
            max_hops: self.inner.max_hops,
        });
        self.spawn_execution(live.clone(), ctx, running, admission, pass)
            .await;

        if let Some(rx) = rx {
            // The first event is the task (created) or the agent's direct message.
            let opened = (&cx, heddle_core::method::Method::SendStreamingMessage);
            return Ok(Reply::Stream(
                self.event_stream(live, rx, None, permit, opened),
            ));
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

    /// The gate's word on this send, when the handler has one.
    async fn at_gate(
        &self,
        cx: &CallContext,
        task_id: &str,
        new_task: bool,
        message: &v1::Message,
        metadata: Option<&heddle_core::wkt::Struct>,
        delegation: Option<&heddle_api::Delegation>,
    ) -> Result<Option<Box<dyn Pass>>, A2aError> {
        let Some(gate) = &self.inner.gate else {
            return Ok(None);
        };
        gate.admit(SendAtGate {
            agent_id: &self.inner.agent_id,
            caller: &cx.caller,
            task_id,
            new_task,
            message,
            metadata,
            delegation,
        })
        .await
    }

    /// What a sent message must be: at most `max_parts` parts, from the user,
    /// and whatever the handler's message check asks.
    fn check_message(&self, message: &v1::Message) -> Result<(), A2aError> {
        let max = self.inner.limits.max_parts;
        if message.parts.len() > max {
            return Err(A2aError::invalid_field(
                "message.parts",
                format!(
                    "{} parts; this server accepts at most {max}",
                    message.parts.len()
                ),
            ));
        }
        if message.role() != v1::Role::User {
            return Err(A2aError::invalid_field("message.role", "must be ROLE_USER"));
        }
        match &self.inner.message_check {
            Some(check) => check(message),
            None => Ok(()),
        }
    }

    /// A new task, provisional until the agent's first event.
    pub(super) fn start_task(
        &self,
        scope: &Scope,
        task_id: String,
        message: &mut v1::Message,
        subscribe: bool,
    ) -> (Attached, Option<v1::Task>) {
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
    ///
    /// An agent that asked for input is answered as soon as it asked, while
    /// its run may still be ending (saving, releasing): a reply sent at once
    /// waits for that end, up to [`RUN_END_WAIT`], rather than being refused
    /// as busy.
    pub(super) async fn continue_task(
        &self,
        live: &Arc<LiveTask>,
        message: &mut v1::Message,
    ) -> Result<v1::Task, A2aError> {
        let deadline = tokio::time::Instant::now() + RUN_END_WAIT;
        let mut st = loop {
            let ended = live.settled.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let st = live.state.lock().await;
            let asked = st.created && current_state(&st).is_interrupted();
            if asked
                && live.running.load(Ordering::Acquire)
                && tokio::time::Instant::now() < deadline
            {
                drop(st);
                let _ = tokio::time::timeout_at(deadline, ended).await;
                continue;
            }
            break st;
        };
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
        // The question the task waits on goes into the history before the
        // reply to it, so the history reads in the order it was said.
        if let Some(question) = next.status.as_mut().and_then(|s| s.message.take()) {
            next.history.push(question);
        }
        next.history.push(message.clone());
        // Another replica may be running it: only the lease holder may.
        if let Some(cluster) = &self.inner.cluster
            && !cluster.acquire(&live.scope, &live.id, None).await
        {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "task {} is busy on another server replica; wait for it to ask for input",
                    live.id
                ),
            ));
        }
        self.inner
            .store
            .save_at(&live.scope, &next, st.generation)
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
    /// instead of leaving it WORKING and its caller waiting. An execution
    /// that must wait for a place ([`super::Concurrency`]) waits on a task
    /// of its own.
    pub(super) async fn spawn_execution(
        &self,
        live: Arc<LiveTask>,
        ctx: Box<RequestContext>,
        running: RunningSlot,
        admission: Option<Admission>,
        pass: Option<Box<dyn Pass>>,
    ) {
        live.running.store(true, Ordering::Release);
        if let Some(cluster) = &self.inner.cluster {
            // A new task's id is new; a continued one was leased before
            // its message was saved (`continue_task`). The lease records
            // the request, for a replica that resumes the run.
            let run = cluster.leases_tasks().then(|| leased_run(&ctx));
            cluster.acquire(&live.scope, &live.id, run.as_ref()).await;
        }
        let slot = match admission {
            None => None,
            Some(Admission::Run(slot)) => Some(slot),
            Some(Admission::Wait(place)) => {
                // Boxed: its state stays out of every send's future.
                return Box::pin(self.queue_execution(live, ctx, running, place, pass)).await;
            }
        };
        let span = crate::trace::execute_span(self.agent_id(), &live.id, &ctx.context_id);
        crate::trace::record("a2a.task_id", &live.id);
        let mut run = Box::pin(
            self.execution(live.clone(), ctx, running, slot, pass)
                .instrument(span),
        );
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        if first.is_ready() {
            return;
        }
        // The spawned task polls it again at once, so every waker it left
        // registered is replaced by the task's own.
        let handle = tokio::spawn(run);
        live.state.lock().await.abort = Some(handle.abort_handle());
    }

    /// One run of the agent and its finish; the caller's share and the
    /// agent's place (`slot`) are given back when it ends or is dropped,
    /// and the gate's pass is told the start and the end.
    fn execution(
        &self,
        live: Arc<LiveTask>,
        ctx: Box<RequestContext>,
        running: RunningSlot,
        slot: Option<Slot>,
        mut pass: Option<Box<dyn Pass>>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let events = TaskEvents::new(live.clone(), ctx.context_id.clone());
        let executor = self.inner.executor.clone();
        let handler = self.clone();
        // The agent's future keeps the context. An async block keeps what it
        // captures in its state while it waits, so it captures the box, freed
        // as soon as the agent's future is made: 0.9 KB less per running agent.
        async move {
            if let Some(p) = pass.as_mut() {
                p.started();
            }
            let deadline = ctx.delegation.as_ref().and_then(|d| d.deadline);
            let execution = AssertUnwindSafe(executor.execute(unbox(ctx), events.clone()));
            let result = match deadline {
                None => execution.catch_unwind().await,
                // Boxed: the timer stays out of the state of every run without one.
                Some(at) => Box::pin(run_until(at, execution.catch_unwind(), &live)).await,
            };
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
            Box::pin(handler.finish_execution(&live, &events, error, pass)).await;
            drop((running, slot));
        }
    }

    /// An execution that waits for a place: its task is made visible
    /// (SUBMITTED, saved and announced to streams) and it waits on a task
    /// of its own, in priority order, until it may run or its task is
    /// canceled ([`RequestHandler::cancel_live`] ends a queued task
    /// itself, under the task's lock, so the executor never sees it).
    async fn queue_execution(
        &self,
        live: Arc<LiveTask>,
        ctx: Box<RequestContext>,
        running: RunningSlot,
        mut place: Place,
        pass: Option<Box<dyn Pass>>,
    ) {
        {
            let mut st = live.state.lock().await;
            st.queued = true;
            st.persist_on_create = true;
            if let Err(e) = live.create_if_needed(&mut st).await {
                tracing::error!(task = %live.id, error = %e, "could not save a queued task");
            }
        }
        // In the order before this send returns, so the next place to free
        // goes to the first waiter, whether or not its task was polled yet.
        place.enqueue(
            self.inner
                .concurrency
                .as_ref()
                .map_or_else(Default::default, |c| c.priority_of(&ctx)),
        );
        let handler = self.clone();
        let waiting = live.clone();
        let span = crate::trace::execute_span(self.agent_id(), &live.id, &ctx.context_id);
        let handle = tokio::spawn(
            async move {
                let slot = tokio::select! {
                    slot = place.wait() => Some(slot),
                    () = waiting.cancel.cancelled() => None,
                };
                drop(place);
                // Out of the queue under the task's lock: a cancel sees the task
                // either queued (and ends it) or running (and stops the agent).
                let canceled = {
                    let mut st = waiting.state.lock().await;
                    let canceled = waiting.cancel.is_cancelled();
                    if !canceled {
                        st.queued = false;
                    }
                    canceled
                };
                match slot {
                    Some(slot) if !canceled => {
                        handler
                            .execution(waiting, ctx, running, Some(slot), pass)
                            .await;
                    }
                    _ => {
                        drop(slot);
                        let events = TaskEvents::new(waiting.clone(), ctx.context_id.clone());
                        let reason = "the task was canceled while it waited to run".to_owned();
                        Box::pin(handler.finish_execution(&waiting, &events, Some(reason), pass))
                            .await;
                        drop(running);
                    }
                }
            }
            .instrument(span),
        );
        live.state.lock().await.abort = Some(handle.abort_handle());
    }

    /// After `execute` returns: a task left active is failed (an agent bug or
    /// an agent error), unflushed artifacts are saved, and the task leaves the
    /// live registry if nobody watches it.
    pub(super) async fn finish_execution(
        &self,
        live: &Arc<LiveTask>,
        events: &TaskEvents,
        error: Option<String>,
        pass: Option<Box<dyn Pass>>,
    ) {
        // A run that ends just as this replica wakes from a pause past its
        // lease must not end a task another replica has taken over.
        let lost = match &self.inner.cluster {
            Some(cluster) => cluster.fence(&live.scope, &live.id).await == Fence::Lost,
            None => false,
        };
        {
            let mut st = live.state.lock().await;
            st.abort = None;
            // A task lost to another replica is that one's to finish.
            if !st.replied && !st.lost && !lost {
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
                } else if st.dirty
                    && self
                        .inner
                        .store
                        .save_at(&live.scope, &st.task, st.generation)
                        .await
                        .is_ok()
                {
                    st.dirty = false;
                }
            }
            if !st.replied && crate::trace::enabled() {
                crate::trace::record("a2a.state", current_state(&st).as_str_name());
            }
            if let Some(pass) = pass {
                pass.ended((!st.replied).then_some(&st.task));
            }
            live.running.store(false, Ordering::Release);
            // A reply to the agent's question may be waiting for this end.
            live.settled.notify_waiters();
        }
        if let Some(cluster) = &self.inner.cluster {
            cluster.release(&live.scope, &live.id).await;
            live.lease_let_go();
        }
        self.inner.live.release(&live.id);
    }

    /// A blocking send: waits until the task is terminal or interrupted, or
    /// the agent answered with a message. Uses the task's `settled` signal, not
    /// the event fan-out, so an unwatched task publishes nothing.
    pub(super) async fn wait_for_answer(
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
}

/// The value out of its box, freeing the box (which is the point, hence the allow).
#[allow(clippy::boxed_local)]
pub(super) fn unbox<T>(b: Box<T>) -> T {
    *b
}

/// The message a panic carried, when it is text.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What a run is asked with beside its message, as its lease records it.
fn leased_run(ctx: &RequestContext) -> heddle_store::LeasedRun {
    heddle_store::LeasedRun {
        configuration: ctx.configuration.as_deref().cloned(),
        metadata: ctx.metadata.clone(),
        extensions: ctx.extensions.clone(),
        protocol_version: ctx.protocol_version.as_str().to_owned(),
    }
}
