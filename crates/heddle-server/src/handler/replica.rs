//! What a handler does for the other replicas of its cluster
//! ([`crate::cluster`]): mirror the events of a task another replica runs
//! to its own subscribers, resume a stream from a generation, cancel a task
//! it runs when asked, and end a task whose replica died.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures::StreamExt as _;
use heddle_core::{
    A2aError, ErrorCode,
    method::Method,
    v1::{self, stream_response::Payload},
};
use heddle_store::{ExpiredLease, LeasedRun, Scope};

use super::{
    CallContext, EventStream, RequestHandler,
    drain::RESUBSCRIBE_REASON,
    stream::{LOST_REASON, is_final, resubscribe_event},
};
use crate::{
    agent::Caller,
    cluster::{Cluster, EventFeed},
    events::{TaskEvents, current_state},
    live::{Event, LiveState, LiveTask},
};

/// How long catching up with the bus may take before a takeover or a
/// cancel goes ahead with what the store holds.
const CATCH_UP: Duration = Duration::from_secs(5);

/// How often a mirror with no events checks whether anyone still listens.
const MIRROR_IDLE: Duration = Duration::from_secs(5);

impl RequestHandler {
    fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.inner.cluster.as_ref()
    }

    /// A cancel another replica relayed: `None` unless this replica runs
    /// the task.
    pub(crate) async fn cancel_here(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Option<Result<v1::Task, A2aError>> {
        let live = self.inner.live.get(scope, id)?;
        if !live.running.load(Ordering::Acquire) {
            return None;
        }
        let caller = Caller {
            id: scope.owner.clone(),
            authenticated: !scope.owner.is_empty(),
        };
        Some(self.cancel_live(&live, &caller).await)
    }

    /// A cancel of a task this replica does not run: sent to the replica
    /// holding its lease. `None` when there is none, or it did not answer
    /// (dead): the caller then ends the task here.
    pub(super) async fn cancel_elsewhere(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Option<Result<v1::Task, A2aError>> {
        let cluster = self.cluster()?;
        if self
            .inner
            .live
            .get(scope, id)
            .is_some_and(|l| l.running.load(Ordering::Acquire))
        {
            return None;
        }
        let holder = cluster.other_holder(scope, id).await?;
        match cluster.bus().request_cancel(&holder, scope, id).await {
            Ok(answer) => answer,
            // The holder may still be canceling: canceling here too would
            // run the agent's cancel twice.
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "could not relay a cancel");
                Some(Err(A2aError::internal(
                    "the server replica running this task did not answer the cancel; try again",
                )))
            }
        }
    }

    /// Ends a task whose replica stopped renewing its lease (`lease`, as
    /// claimed): catches up with the events that replica published after
    /// its last save, then, unless the task already ended (or this replica
    /// runs it), resumes it if its agent can, or fails it with `reason`.
    /// Subscribers on every replica see that end.
    pub async fn take_over(&self, lease: ExpiredLease, reason: &str) -> Result<(), A2aError> {
        let ExpiredLease {
            scope,
            task_id,
            run,
            ..
        } = lease;
        let (scope, id) = (&scope, task_id.as_str());
        let attached = self
            .inner
            .live
            .attach(scope, id, &self.inner.store, false)
            .await?;
        let lease = self.inner.live.lease(attached);
        let live = lease.live.clone();
        if live.running.load(Ordering::Acquire) {
            // Ours after all (a renewal failed): keep running it.
            if let Some(cluster) = self.cluster() {
                cluster.acquire(scope, id, run.as_ref()).await;
            }
            return Ok(());
        }
        self.catch_up(&live).await;
        let mut st = live.state.lock().await;
        let state = current_state(&st);
        if !st.created || state.is_terminal() || state.is_interrupted() {
            return Ok(());
        }
        // A gated (priced) run is not resumed: its gate's pass died with
        // the replica, and a second run would go unaccounted.
        if self.inner.executor.resumable() && self.inner.gate.is_none() {
            drop(st);
            match self.resume_run(live.clone(), run).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(task = %id, error = %e.message, "could not resume a task; failing it");
                    st = live.state.lock().await;
                }
            }
        }
        let events = TaskEvents::new(live.clone(), st.task.context_id.clone());
        let msg = events.agent_message(vec![v1::Part::text(reason)]);
        live.apply_status(
            &mut st,
            events.context_id(),
            v1::TaskState::Failed,
            Some(msg),
        )
        .await
        .map_err(|e| A2aError::internal(e.to_string()))?;
        if let Some(gate) = &self.inner.gate {
            gate.ended_outside_run(&st.task);
        }
        Ok(())
    }

    /// Stops the run here of a task another replica took over (this one's
    /// lease ran out while it was paused or cut off): the task accepts
    /// nothing more from it, the run is aborted, a caller blocked on it gets
    /// the task as it stands here, and this replica's streams of it end with
    /// the resubscribe event, so their clients pick the task up from the
    /// store and the bus, where the replica that took it over writes.
    pub(crate) async fn lose(&self, scope: &Scope, id: &str) {
        let Some(live) = self.inner.live.get(scope, id) else {
            return;
        };
        {
            let mut st = live.state.lock().await;
            st.lost = true;
            if let Some(run) = st.abort.take() {
                run.abort();
            }
            live.running.store(false, Ordering::Release);
            live.lease_let_go();
            // A run still in its first, inline part stops at its next event.
            live.cancel.cancel();
            st.settled_gen = st.settled_gen.saturating_add(1);
            live.settled.notify_waiters();
            live.broadcast(&lost_marker(&st.task));
        }
        // Whoever attaches next (a client subscribing again here) gets the
        // task afresh from the store, not this stopped copy.
        self.inner.live.evict(&live);
    }

    /// Aborts every run of this agent on its own task here: for a replica
    /// handing its tasks to the others, which end or resume them. A run in
    /// the middle of a poll stops at its next await; one still in the
    /// first, inline part of its request (or just being spawned) has no
    /// abort handle yet and stops with the process.
    pub(crate) async fn abort_runs(&self) {
        for live in self.inner.live.running() {
            if let Some(run) = live.state.lock().await.abort.take() {
                run.abort();
            }
        }
    }

    /// Runs a resumable agent's task again here, its replica gone: the
    /// executor gets the task as it stands (caught up from the bus) and its
    /// last user message, for its owner, with the delegation context that
    /// message carries (checked again: its deadline may have passed), in
    /// its turn under the agent's concurrency limit. What the first call
    /// carried beside the message (its configuration, metadata, activated
    /// extensions and protocol version) comes from the lease (`run`), when
    /// the dead replica recorded it. The run is not streamed to anyone
    /// itself: subscribers follow it over the bus.
    async fn resume_run(
        &self,
        live: Arc<LiveTask>,
        run: Option<LeasedRun>,
    ) -> Result<(), A2aError> {
        let task = live.state.lock().await.task.clone();
        let owner = &live.scope.owner;
        let caller = if owner.is_empty() {
            Caller::anonymous()
        } else {
            Caller::authenticated(owner.clone())
        };
        let running = self
            .inner
            .caller_limits
            .take_running(crate::limit::CallerKey::of(Some(&caller), None))?;
        let message = task
            .history
            .iter()
            .rev()
            .find(|m| m.role == v1::Role::User as i32)
            .cloned()
            .unwrap_or_default();
        let delegation = self.admit_delegation(&message, None)?;
        let run = run.unwrap_or_default();
        let admission = match &self.inner.concurrency {
            None => None,
            Some(c) => Some(c.admit()?),
        };
        let ctx = Box::new(heddle_api::RequestContext {
            task_id: live.id.clone(),
            context_id: task.context_id.clone(),
            message,
            task: Some(Box::new(task)),
            caller,
            extensions: run.extensions,
            configuration: run.configuration.map(Box::new),
            metadata: run.metadata,
            protocol_version: heddle_core::ProtocolVersion::parse(&run.protocol_version)
                .unwrap_or(heddle_core::ProtocolVersion::V1_0),
            cancel: live.cancel.clone(),
            streaming: false,
            agent: self.inner.agent_url.clone(),
            delegation,
            max_hops: self.inner.max_hops,
        });
        tracing::info!(task = %live.id, "resuming a task whose replica stopped");
        self.spawn_execution(live, ctx, running, admission, None)
            .await;
        Ok(())
    }

    /// Applies the events on the bus after the live task's generation, up
    /// to the last one there now (or until [`CATCH_UP`] runs out).
    pub(super) async fn catch_up(&self, live: &Arc<LiveTask>) {
        let Some(cluster) = self.cluster() else {
            return;
        };
        let after = live.state.lock().await.generation;
        let last = match cluster.bus().last_generation(&live.scope, &live.id).await {
            Ok(last) if last > after => last,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(task = %live.id, error = %e, "could not read a task's last event");
                return;
            }
        };
        let caught = tokio::time::timeout(CATCH_UP, async {
            let mut feed = cluster
                .bus()
                .follow(&live.scope, &live.id, after)
                .await
                .map_err(|e| e.to_string())?;
            while let Some(event) = feed.next().await {
                let event = event.map_err(|e| e.to_string())?;
                let generation = event.generation;
                apply_mirrored(live, event).await;
                if generation >= last {
                    break;
                }
            }
            Ok::<(), String>(())
        })
        .await;
        match caught {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(task = %live.id, error = %e, "could not catch up"),
            Err(_) => tracing::warn!(task = %live.id, "catching up with the bus timed out"),
        }
        // Whatever was missed, the next event must not reuse a generation
        // the bus already holds (it would be dropped as a duplicate).
        let mut st = live.state.lock().await;
        if st.generation < last {
            tracing::warn!(task = %live.id, have = st.generation, last,
                "continuing a task with events of it missing here");
            st.generation = last;
        }
    }

    /// Mirrors the events of a task run elsewhere to this replica's
    /// subscribers, until the task ends or nobody here listens.
    pub(super) async fn mirror(&self, live: &Arc<LiveTask>) {
        let Some(cluster) = self.cluster().cloned() else {
            return;
        };
        let after = {
            let mut st = live.state.lock().await;
            if st.mirrored || live.running.load(Ordering::Acquire) {
                return;
            }
            st.mirrored = true;
            st.generation
        };
        let feed = match cluster.bus().follow(&live.scope, &live.id, after).await {
            Ok(feed) => feed,
            Err(e) => {
                tracing::warn!(task = %live.id, error = %e, "could not follow a task's events");
                live.state.lock().await.mirrored = false;
                return;
            }
        };
        let handler = self.clone();
        let live = live.clone();
        tokio::spawn(async move {
            mirror_feed(&live, feed).await;
            handler.inner.live.release(&live.id);
        });
    }

    /// SubscribeToTask from a client that saw events up to `after`: the
    /// events after it, straight from the bus (no snapshot), until the task
    /// ends or waits. `None` when the bus cannot give them: the caller
    /// subscribes as usual, snapshot first.
    pub(super) async fn resume(
        &self,
        cx: &CallContext,
        id: &str,
        after: u64,
    ) -> Result<Option<EventStream>, A2aError> {
        let Some(cluster) = self.cluster().cloned() else {
            return Err(A2aError::internal("resume without a cluster"));
        };
        let permit = self.stream_permit(cx)?;
        let scope = self.scope(&cx.caller);
        // The task must be the caller's, and must not have ended by
        // `after`: a stream over an ended task would wait forever. (One
        // waiting for input waits here as it would on a plain subscribe.)
        let Some((task, stored)) = self
            .inner
            .store
            .load_at(&scope, id)
            .await
            .map_err(super::store_err)?
        else {
            return Err(A2aError::task_not_found(id));
        };
        let state = task
            .status
            .as_ref()
            .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state);
        let last = cluster
            .bus()
            .last_generation(&scope, id)
            .await
            .map_err(|e| A2aError::internal(e.to_string()))?;
        if state.is_terminal() && after >= stored.max(last) {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "task {id} is {} and has no events after {after}",
                    state.as_str_name()
                ),
            ));
        }
        // An id this task never gave, or events the bus no longer holds (the
        // store is ahead of it): the stream starts again from a snapshot.
        if after > stored.max(last) || stored > last {
            return Ok(None);
        }
        let feed = cluster
            .bus()
            .follow(&scope, id, after)
            .await
            .map_err(|e| A2aError::internal(e.to_string()))?;
        let observer = self.inner.observer.clone();
        let opened = observer.as_ref().map(|o| {
            let stream = crate::observe::StreamEvent {
                agent_id: &self.inner.agent_id,
                method: Method::SubscribeToTask,
                binding: cx.binding,
                version: cx.version,
            };
            o.stream_opened(&stream);
            std::time::Instant::now()
        });
        let agent_id = self.inner.agent_id.clone();
        let (binding, version) = (cx.binding, cx.version);
        // What a drained stream's last event says: the last status sent.
        // Before any, the stored one when it is not an end (the client has
        // not seen the end yet), else plain WORKING.
        let stored_status = task
            .status
            .clone()
            .filter(|s| !s.state().is_terminal())
            .unwrap_or_else(|| v1::TaskStatus {
                state: v1::TaskState::Working as i32,
                ..Default::default()
            });
        let seen = Seen {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: Some(stored_status),
            last: after,
        };
        let drain = self.inner.drain.clone();
        let s = futures::stream::unfold(
            (Some(feed), permit, seen),
            move |(feed, permit, mut seen)| {
                let drain = drain.clone();
                async move {
                    let mut feed = feed?;
                    let next = tokio::select! {
                        biased;
                        () = drain.wait() => {
                            let last = resubscribe_event(
                                &seen.task_id, &seen.context_id, seen.status.take(), seen.last,
                                RESUBSCRIBE_REASON);
                            return Some((last, (None, permit, seen)));
                        }
                        next = feed.next() => next,
                    };
                    match next {
                        Some(Ok(event)) => {
                            seen.note(&event);
                            let end = is_final(&event.response);
                            let next = if end { None } else { Some(feed) };
                            Some((Arc::new(event), (next, permit, seen)))
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "a resumed stream's feed failed");
                            None
                        }
                        None => None,
                    }
                }
            },
        );
        let closed = CloseObserved {
            observer,
            opened,
            agent_id,
            binding,
            version,
        };
        Ok(Some(Box::pin(s.map(move |event| {
            let _keep = &closed;
            event
        }))))
    }
}

/// What a resumed stream has sent of its task, for the last event of a
/// drain.
struct Seen {
    task_id: String,
    context_id: String,
    status: Option<v1::TaskStatus>,
    last: u64,
}

impl Seen {
    fn note(&mut self, event: &Event) {
        self.last = self.last.max(event.generation);
        super::stream::note_status(&mut self.status, event);
    }
}

/// Tells the observer when a resumed stream closes.
struct CloseObserved {
    observer: Option<Arc<dyn crate::Observer>>,
    opened: Option<std::time::Instant>,
    agent_id: String,
    binding: Option<crate::Binding>,
    version: heddle_core::ProtocolVersion,
}

impl Drop for CloseObserved {
    fn drop(&mut self) {
        if let (Some(observer), Some(opened)) = (&self.observer, self.opened) {
            observer.stream_closed(
                &crate::observe::StreamEvent {
                    agent_id: &self.agent_id,
                    method: Method::SubscribeToTask,
                    binding: self.binding,
                    version: self.version,
                },
                opened.elapsed(),
            );
        }
    }
}

/// Applies `feed` to the mirrored task until it ends, or nobody listens.
/// The mirror stops under the task's lock, where a new subscriber checks
/// whether one runs, so none is left without.
async fn mirror_feed(live: &Arc<LiveTask>, mut feed: EventFeed) {
    loop {
        let next = tokio::time::timeout(MIRROR_IDLE, feed.next()).await;
        let stop = match next {
            Ok(Some(Ok(event))) => apply_mirrored(live, event).await,
            Ok(Some(Err(e))) => {
                tracing::warn!(task = %live.id, error = %e, "a mirrored task's feed failed");
                true
            }
            Ok(None) => true,
            Err(_) => false,
        };
        let mut st = live.state.lock().await;
        if stop || live.receivers() == 0 || live.running.load(Ordering::Acquire) {
            st.mirrored = false;
            return;
        }
    }
}

/// Applies another replica's event to the local copy of its task and
/// passes it to this replica's subscribers; whether the task ended. An
/// event the copy already holds is dropped; after a gap (an event the bus
/// lost) the copy is read again from the store, and subscribers get it
/// whole as a snapshot, so they miss nothing.
async fn apply_mirrored(live: &Arc<LiveTask>, event: Event) -> bool {
    let mut st = live.state.lock().await;
    if event.generation <= st.generation {
        return ended(&st);
    }
    if event.generation > st.generation.saturating_add(1) {
        resync(live, &mut st, event.generation).await;
        if event.generation <= st.generation {
            return ended(&st);
        }
    }
    match &event.response.payload {
        Some(Payload::Task(task)) => {
            st.task = task.clone();
            st.created = true;
        }
        Some(Payload::StatusUpdate(update)) => {
            let old = st.task.status.take();
            if let Some(message) = old.and_then(|s| s.message) {
                st.task.history.push(message);
            }
            st.task.status.clone_from(&update.status);
        }
        Some(Payload::ArtifactUpdate(update)) => {
            if let Some(artifact) = &update.artifact {
                heddle_core::task::apply_artifact(&mut st.task.artifacts, artifact, update.append);
            }
        }
        Some(Payload::Message(_)) | None => {}
    }
    st.generation = event.generation;
    let end = ended(&st);
    if end || current_state(&st).is_interrupted() {
        st.settled_gen = st.settled_gen.saturating_add(1);
        live.settled.notify_waiters();
    }
    live.broadcast(&Arc::new(event));
    end
}

/// The copy is behind by more than one event: reads the store's, if it
/// is newer, and sends it to subscribers as a snapshot.
async fn resync(live: &Arc<LiveTask>, st: &mut LiveState, wanted: u64) {
    match live.store.load_at(&live.scope, &live.id).await {
        Ok(Some((task, generation))) if generation > st.generation => {
            st.task = task;
            st.generation = generation;
            live.broadcast(&Arc::new(Event::new(
                generation,
                Payload::Task(st.task.clone()),
            )));
        }
        Ok(_) => tracing::warn!(task = %live.id, have = st.generation, wanted,
            "events of a mirrored task are missing from the bus and the store"),
        Err(e) => tracing::warn!(task = %live.id, error = %e, "could not resync a mirrored task"),
    }
}

fn ended(st: &LiveState) -> bool {
    current_state(st).is_terminal()
}

/// What [`RequestHandler::lose`] gives this replica's streams of a task it
/// lost: a status update with no generation, which ends each stream with
/// its own resubscribe event (see `event_stream`).
fn lost_marker(task: &v1::Task) -> Arc<Event> {
    resubscribe_event(
        &task.id,
        &task.context_id,
        task.status.clone(),
        0,
        LOST_REASON,
    )
}
