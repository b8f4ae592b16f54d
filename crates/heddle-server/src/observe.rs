//! Watching a server at work: an [`Observer`] is told of every call, stream,
//! task state change and push delivery, so that a server (the hub's
//! `/metrics`, or one of your own) can count what happens without reading
//! the store.
//!
//! Set one with [`crate::HandlerBuilder::observer`] (calls, streams, task
//! states) and [`crate::PushNotifier::observe`] (deliveries). A handler with
//! none pays nothing for it: no clock read, no allocation.
//!
//! Each method is called on the path it describes, so it must be quick:
//! bump a counter, not write to a database. Every method has an empty
//! default, so an observer implements only what it counts.
//!
//! What is not seen: a request refused before its call is read (by the
//! authentication or a rate layer, or undecodable), since no call exists
//! yet; tasks changed by the store itself at start-up
//! (`TaskStore::fail_interrupted`).

mod otel;

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use heddle_core::{ErrorCode, ProtocolVersion, method::Method, v1::TaskState};

use crate::binding::Binding;

/// Told what a server does, for metrics (see the [module](self)).
pub trait Observer: Send + Sync + 'static {
    /// A call the handler answered, successfully or not. For a streaming
    /// method this is the stream's opening; its close is
    /// [`stream_closed`](Self::stream_closed).
    fn call(&self, call: &CallEvent<'_>) {
        let _ = call;
    }

    /// A stream (SSE or gRPC server stream) began.
    fn stream_opened(&self, stream: &StreamEvent<'_>) {
        let _ = stream;
    }

    /// A stream that [`stream_opened`](Self::stream_opened) announced
    /// ended, after `open_for`: the task settled, or the client left.
    fn stream_closed(&self, stream: &StreamEvent<'_>, open_for: Duration) {
        let _ = (stream, open_for);
    }

    /// A task was created, or its state changed (saved before this is
    /// called).
    fn task_state(&self, change: &TaskStateEvent<'_>) {
        let _ = change;
    }

    /// One push delivery attempt ended.
    fn push_attempt(&self, attempt: &PushEvent<'_>) {
        let _ = attempt;
    }

    /// The deliveries waiting in the push outbox after a pass of the
    /// delivery worker (at least every second), as the store counts them
    /// ([`PushStore::pending_count`](heddle_store::PushStore::pending_count)).
    fn push_outbox(&self, pending: usize) {
        let _ = pending;
    }
}

pub use otel::OtelMetrics;

/// Two observers told the same things, in order: a server that keeps its
/// own figures and exports them over OpenTelemetry too.
#[derive(Debug, Clone)]
pub struct Both(pub Arc<dyn Observer>, pub Arc<dyn Observer>);

impl Observer for Both {
    fn call(&self, call: &CallEvent<'_>) {
        self.0.call(call);
        self.1.call(call);
    }

    fn stream_opened(&self, stream: &StreamEvent<'_>) {
        self.0.stream_opened(stream);
        self.1.stream_opened(stream);
    }

    fn stream_closed(&self, stream: &StreamEvent<'_>, open_for: Duration) {
        self.0.stream_closed(stream, open_for);
        self.1.stream_closed(stream, open_for);
    }

    fn task_state(&self, change: &TaskStateEvent<'_>) {
        self.0.task_state(change);
        self.1.task_state(change);
    }

    fn push_attempt(&self, attempt: &PushEvent<'_>) {
        self.0.push_attempt(attempt);
        self.1.push_attempt(attempt);
    }

    fn push_outbox(&self, pending: usize) {
        self.0.push_outbox(pending);
        self.1.push_outbox(pending);
    }
}

impl std::fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// A call the handler answered ([`Observer::call`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CallEvent<'a> {
    /// The agent called.
    pub agent_id: &'a str,
    /// The operation; its names are in [`heddle_core::method::METHODS`].
    pub method: Method,
    /// The binding it came by; `None` for a call made in-process, not
    /// through one of the three bindings.
    pub binding: Option<Binding>,
    /// The protocol version the caller speaks.
    pub version: ProtocolVersion,
    /// `Ok`, or the error catalogue's code of the answer.
    pub outcome: Result<(), ErrorCode>,
    /// From the handler receiving the call to its answer (for a stream:
    /// to the stream being ready), encoding excluded.
    pub elapsed: Duration,
}

/// A stream's facts ([`Observer::stream_opened`], [`Observer::stream_closed`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct StreamEvent<'a> {
    /// The agent streaming.
    pub agent_id: &'a str,
    /// SendStreamingMessage or SubscribeToTask.
    pub method: Method,
    /// The binding it goes out by (`None`: in-process).
    pub binding: Option<Binding>,
    /// The protocol version it is encoded in.
    pub version: ProtocolVersion,
}

/// A task created or moved to another state ([`Observer::task_state`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct TaskStateEvent<'a> {
    /// The agent the task belongs to.
    pub agent_id: &'a str,
    /// The task.
    pub task_id: &'a str,
    /// The state it left, `None` when it was just created.
    pub from: Option<TaskState>,
    /// When the task entered `from`, as its status says. An observer that
    /// keeps a gauge of tasks by state counts a task out of `from` only if
    /// it counted it in: a task that entered `from` before the observer
    /// began (an INPUT_REQUIRED task kept from a previous process) was not.
    pub from_since: Option<SystemTime>,
    /// The state it is in now.
    pub to: TaskState,
}

/// How a push delivery attempt ended ([`PushEvent::outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    /// The receiver took it (2xx).
    Delivered,
    /// It failed and will be tried again later.
    Retrying,
    /// It failed for good (refused address, 4xx, or attempts exhausted).
    DeadLettered,
}

impl PushOutcome {
    /// A lower-case name, for a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            PushOutcome::Delivered => "delivered",
            PushOutcome::Retrying => "retrying",
            PushOutcome::DeadLettered => "dead_lettered",
        }
    }
}

/// One push delivery attempt ([`Observer::push_attempt`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct PushEvent<'a> {
    /// The agent whose task the event is of.
    pub agent_id: &'a str,
    /// How it went.
    pub outcome: PushOutcome,
}

/// A status timestamp as a [`SystemTime`] (`None` before the epoch or unset).
pub(crate) fn since(status: Option<&heddle_core::v1::TaskStatus>) -> Option<SystemTime> {
    let ts = status?.timestamp.as_ref()?;
    let secs = u64::try_from(ts.seconds).ok()?;
    let nanos = u32::try_from(ts.nanos).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}
