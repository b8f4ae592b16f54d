//! The observer's figures as OpenTelemetry metrics, for a server that
//! exports metrics over OTLP rather than (or beside) a Prometheus scrape.
//!
//! [`OtelMetrics`] records on instruments of the meter it is given (the
//! application installs the meter provider and its exporter). The names
//! are `a2a.*` with the attributes of the trace spans (`gen_ai.agent.id`,
//! `a2a.method`, `a2a.binding`, `a2a.version`), plus `a2a.outcome` (`OK`
//! or the error's catalogue reason) and `a2a.state` where they apply.

use std::time::{Duration, SystemTime};

use opentelemetry::{
    KeyValue,
    metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter},
};

use super::{CallEvent, Observer, PushEvent, StreamEvent, TaskStateEvent};

/// Records what an [`Observer`] is told on OpenTelemetry instruments.
#[derive(Debug)]
pub struct OtelMetrics {
    /// When counting began: a task that entered its state earlier was not
    /// counted in it.
    started: SystemTime,
    requests: Counter<u64>,
    duration: Histogram<f64>,
    streams: UpDownCounter<i64>,
    transitions: Counter<u64>,
    active: UpDownCounter<i64>,
    push: Counter<u64>,
    outbox: Gauge<u64>,
}

impl OtelMetrics {
    /// The instruments, made on `meter`.
    pub fn new(meter: &Meter) -> Self {
        Self {
            started: SystemTime::now(),
            requests: meter
                .u64_counter("a2a.server.requests")
                .with_description("Calls answered by an agent's handler")
                .with_unit("{request}")
                .build(),
            duration: meter
                .f64_histogram("a2a.server.request.duration")
                .with_description(
                    "Time from a call reaching the handler to its answer (a stream: to its start)",
                )
                .with_unit("s")
                .build(),
            streams: meter
                .i64_up_down_counter("a2a.server.streams")
                .with_description("Event streams (SSE or gRPC) open now")
                .with_unit("{stream}")
                .build(),
            transitions: meter
                .u64_counter("a2a.task.transitions")
                .with_description("Tasks entering each state (creation enters the first)")
                .with_unit("{task}")
                .build(),
            active: meter
                .i64_up_down_counter("a2a.tasks.active")
                .with_description("Tasks in each non-terminal state now (entered since the start)")
                .with_unit("{task}")
                .build(),
            push: meter
                .u64_counter("a2a.push.deliveries")
                .with_description("Push delivery attempts by outcome")
                .with_unit("{attempt}")
                .build(),
            outbox: meter
                .u64_gauge("a2a.push.outbox.pending")
                .with_description("Push deliveries waiting after the worker's last pass")
                .with_unit("{delivery}")
                .build(),
        }
    }
}

fn binding(b: Option<crate::Binding>) -> &'static str {
    b.map_or("direct", crate::Binding::as_str)
}

impl Observer for OtelMetrics {
    fn call(&self, call: &CallEvent<'_>) {
        let mut attrs = vec![
            KeyValue::new("gen_ai.agent.id", call.agent_id.to_owned()),
            KeyValue::new("a2a.method", call.method.names().v1),
            KeyValue::new("a2a.binding", binding(call.binding)),
            KeyValue::new("a2a.version", call.version.as_str()),
        ];
        self.duration.record(call.elapsed.as_secs_f64(), &attrs);
        let outcome = match call.outcome {
            Ok(()) => "OK",
            Err(code) => code.spec().reason,
        };
        attrs.push(KeyValue::new("a2a.outcome", outcome));
        self.requests.add(1, &attrs);
    }

    fn stream_opened(&self, stream: &StreamEvent<'_>) {
        self.streams.add(1, &stream_attrs(stream));
    }

    fn stream_closed(&self, stream: &StreamEvent<'_>, _open_for: Duration) {
        self.streams.add(-1, &stream_attrs(stream));
    }

    fn task_state(&self, change: &TaskStateEvent<'_>) {
        let attrs = |state: heddle_core::v1::TaskState| {
            [
                KeyValue::new("gen_ai.agent.id", change.agent_id.to_owned()),
                KeyValue::new("a2a.state", state.as_str_name()),
            ]
        };
        self.transitions.add(1, &attrs(change.to));
        if let (Some(from), Some(since)) = (change.from, change.from_since)
            && !from.is_terminal()
            && since >= self.started
        {
            self.active.add(-1, &attrs(from));
        }
        if !change.to.is_terminal() {
            self.active.add(1, &attrs(change.to));
        }
    }

    fn push_attempt(&self, attempt: &PushEvent<'_>) {
        self.push.add(
            1,
            &[
                KeyValue::new("gen_ai.agent.id", attempt.agent_id.to_owned()),
                KeyValue::new("a2a.outcome", attempt.outcome.as_str()),
            ],
        );
    }

    fn push_outbox(&self, pending: usize) {
        self.outbox
            .record(u64::try_from(pending).unwrap_or(u64::MAX), &[]);
    }
}

fn stream_attrs(stream: &StreamEvent<'_>) -> [KeyValue; 3] {
    [
        KeyValue::new("gen_ai.agent.id", stream.agent_id.to_owned()),
        KeyValue::new("a2a.method", stream.method.names().v1),
        KeyValue::new("a2a.binding", binding(stream.binding)),
    ]
}
