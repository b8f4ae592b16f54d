//! Event streams: SubscribeToTask, and the relay every stream uses.

use std::{sync::Arc, time::Instant};

use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    method::Method,
    v1::{self, stream_response::Payload},
    wkt::Struct,
};
use tokio::sync::broadcast::error::RecvError;

use super::{
    CallContext, EventStream, RequestHandler,
    drain::{RESUBSCRIBE_KEY, RESUBSCRIBE_REASON},
    stream_slots::StreamSlot,
};
use crate::{
    Binding,
    live::{Event, LiveTask, Update},
    observe::StreamEvent,
};

impl RequestHandler {
    pub(super) fn stream_permit(&self, cx: &CallContext) -> Result<StreamSlot, A2aError> {
        self.inner.streams.take(cx.limit_key())
    }

    /// Relays the task's events until it ends or waits; `first` (a snapshot)
    /// goes out before them. Dropping the stream detaches; it never cancels.
    pub(super) fn event_stream(
        &self,
        live: Arc<LiveTask>,
        rx: tokio::sync::broadcast::Receiver<Update>,
        first: Option<Update>,
        permit: Option<StreamSlot>,
        opened: (&CallContext, Method),
    ) -> EventStream {
        struct Guard {
            handler: RequestHandler,
            id: String,
            _permit: Option<StreamSlot>,
            /// The stream's facts and start, when an observer watches.
            watch: Option<(Method, Option<Binding>, ProtocolVersion, Instant)>,
            /// The generation of the last snapshot or task event sent (0:
            /// none): events at or below it are already out.
            sent: u64,
            /// The last status sent: what a drained stream's last event
            /// repeats (the live task may be ahead of what was sent).
            status: Option<v1::TaskStatus>,
        }
        impl Drop for Guard {
            fn drop(&mut self) {
                self.handler.inner.live.release(&self.id);
                if let (Some(observer), Some((method, binding, version, start))) =
                    (&self.handler.inner.observer, self.watch)
                {
                    let stream = StreamEvent {
                        agent_id: &self.handler.inner.agent_id,
                        method,
                        binding,
                        version,
                    };
                    observer.stream_closed(&stream, start.elapsed());
                }
            }
        }
        // A stream resumed at exactly the task's generation (no snapshot)
        // has sent, in effect, everything up to it.
        let sent = if first.is_none() {
            opened.0.resume_after.unwrap_or(0)
        } else {
            0
        };
        let watch = self.inner.observer.as_ref().map(|observer| {
            let (cx, method) = opened;
            observer.stream_opened(&StreamEvent {
                agent_id: &self.inner.agent_id,
                method,
                binding: cx.binding,
                version: cx.version,
            });
            (method, cx.binding, cx.version, Instant::now())
        });
        let guard = Guard {
            handler: self.clone(),
            id: live.id.clone(),
            _permit: permit,
            watch,
            sent,
            status: None,
        };
        let s = futures::stream::unfold(
            (Some(rx), first, false, live, guard),
            |(rx, first, done, live, mut guard)| async move {
                if done {
                    return None;
                }
                let mut rx = rx?;
                if let Some(snapshot) = first {
                    guard.sent = snapshot.generation;
                    note_status(&mut guard.status, &snapshot);
                    return Some((snapshot, (Some(rx), None, false, live, guard)));
                }
                // An event applied between the subscription and its
                // snapshot is in both: the snapshot's generation says so.
                let update = loop {
                    let next = tokio::select! {
                        biased;
                        () = guard.handler.inner.drain.wait() => None,
                        next = rx.recv() => Some(next),
                    };
                    match next {
                        None => {
                            let last = {
                                let st = live.state.lock().await;
                                let t = &st.task;
                                let status = guard.status.clone().or_else(|| t.status.clone());
                                resubscribe_event(
                                    &t.id,
                                    &t.context_id,
                                    status,
                                    guard.sent,
                                    RESUBSCRIBE_REASON,
                                )
                            };
                            return Some((last, (None, None, true, live, guard)));
                        }
                        Some(Ok(u)) if u.generation != 0 && u.generation <= guard.sent => {}
                        // A status update with no generation is this
                        // replica's last word on a task it lost
                        // (`RequestHandler::lose`): the stream ends as a
                        // drained one does, naming what it sent.
                        Some(Ok(u)) if u.generation == 0 && is_status(&u.response) => {
                            let t = &live.id;
                            let context = context_of(&u.response);
                            let status = guard.status.clone().or_else(|| status_of(&u.response));
                            let last =
                                resubscribe_event(t, context, status, guard.sent, LOST_REASON);
                            return Some((last, (None, None, true, live, guard)));
                        }
                        Some(other) => break other,
                    }
                };
                match update {
                    Ok(update) => {
                        guard.sent = guard.sent.max(update.generation);
                        note_status(&mut guard.status, &update);
                        let end = is_final(&update.response);
                        let rx = if end { None } else { Some(rx) };
                        Some((update, (rx, None, end, live, guard)))
                    }
                    Err(RecvError::Lagged(_)) => {
                        // Too slow: resynchronise with a fresh snapshot.
                        let snap = {
                            let st = live.state.lock().await;
                            Arc::new(Event::new(st.generation, Payload::Task(st.task.clone())))
                        };
                        let end = is_final(&snap.response);
                        // What the channel still holds up to it is in it.
                        guard.sent = snap.generation;
                        note_status(&mut guard.status, &snap);
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

    /// SubscribeToTask: the current task first, then its events.
    pub(super) async fn subscribe(
        &self,
        cx: &CallContext,
        id: &str,
    ) -> Result<EventStream, A2aError> {
        if let (Some(after), Some(_)) = (cx.resume_after, &self.inner.cluster)
            && let Some(resumed) = self.resume(cx, id, after).await?
        {
            return Ok(resumed);
        }
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
            (st.created).then(|| (st.task.clone(), st.generation))
        };
        let Some((snapshot, generation)) = snapshot else {
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
        // Another replica may run it: its events come over the bus.
        self.mirror(&live).await;
        // A client that saw exactly the snapshot's generation needs no
        // snapshot (a single server resumes only from where it stands).
        let first = (cx.resume_after != Some(generation) || generation == 0)
            .then(|| Arc::new(Event::new(generation, Payload::Task(snapshot))));
        Ok(self.event_stream(live, rx, first, Some(permit), (cx, Method::SubscribeToTask)))
    }
}

/// Why a stream of a task this replica lost to another ended, in its last
/// event.
pub(super) const LOST_REASON: &str = "another server replica took this task over; subscribe to \
     the task again to follow it";

fn is_status(update: &v1::StreamResponse) -> bool {
    matches!(update.payload, Some(Payload::StatusUpdate(_)))
}

fn status_of(update: &v1::StreamResponse) -> Option<v1::TaskStatus> {
    match &update.payload {
        Some(Payload::StatusUpdate(u)) => u.status.clone(),
        _ => None,
    }
}

fn context_of(update: &v1::StreamResponse) -> &str {
    match &update.payload {
        Some(Payload::StatusUpdate(u)) => &u.context_id,
        _ => "",
    }
}

/// Keeps the status `update` carries, if it carries one.
pub(super) fn note_status(status: &mut Option<v1::TaskStatus>, update: &Event) {
    match &update.response.payload {
        Some(Payload::StatusUpdate(u)) => status.clone_from(&u.status),
        Some(Payload::Task(t)) => status.clone_from(&t.status),
        _ => {}
    }
}

/// The last event of a stream drained because the server is stopping: the
/// last `status` the stream sent, keyed [`RESUBSCRIBE_KEY`] with why and the last
/// generation sent. It has no generation of its own (it changes nothing),
/// so a client resuming after the last event it saw misses nothing.
pub(super) fn resubscribe_event(
    task_id: &str,
    context_id: &str,
    status: Option<v1::TaskStatus>,
    last: u64,
    reason: &str,
) -> Update {
    let mut why = serde_json::Map::new();
    why.insert("reason".into(), reason.into());
    if last != 0 {
        why.insert("lastEventId".into(), last.to_string().into());
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert(RESUBSCRIBE_KEY.into(), why.into());
    Arc::new(Event::new(
        0,
        Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            status,
            metadata: Some(Struct(metadata)),
        }),
    ))
}

pub(super) fn is_final(update: &v1::StreamResponse) -> bool {
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
