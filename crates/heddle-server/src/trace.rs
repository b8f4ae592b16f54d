//! OpenTelemetry spans for A2A requests, joined to the caller's trace.
//!
//! [`TraceContextLayer`] runs each request of every binding (JSON-RPC,
//! REST, gRPC) inside an `a2a.request` span whose parent is the W3C trace
//! context the caller sent (`traceparent`, `tracestate`, read by the
//! globally installed propagator). The handler records the A2A attributes
//! on it, and the agent runs in an `a2a.execute` span under it, so calls the
//! agent makes with Heddle's client (which writes the current context on
//! each request) continue the same trace: one trace id from the first
//! caller down every hop.
//!
//! The spans have the target [`TARGET`] at INFO; an application that wants
//! them enables that target for its `tracing-opentelemetry` layer (and
//! installs a propagator, such as `TraceContextPropagator`). Disabled, a
//! span costs a callsite check per request.
//!
//! Push deliveries continue the trace too: each records the context of the
//! event it reports, and goes out in an `a2a.push` span under it with that
//! span's `traceparent` (see [`crate::push`]).
//!
//! Attribute names: `a2a.*` for the protocol's own (method, binding,
//! version, task and context id), and the OpenTelemetry GenAI conventions'
//! agent span names where they fit (`gen_ai.operation.name` =
//! `invoke_agent`, `gen_ai.agent.id`).

use std::task::{Context, Poll};

use http::{HeaderMap, Request};
use opentelemetry::propagation::{Extractor, Injector};
use tracing::{Instrument as _, Span, field::Empty, instrument::Instrumented};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of Heddle's request and execution spans.
pub const TARGET: &str = "a2a";

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The span of one request, its parent the trace context in `headers`.
pub fn request_span(headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        target: "a2a",
        "a2a.request",
        otel.kind = "server",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = Empty,
        a2a.method = Empty,
        a2a.binding = Empty,
        a2a.version = Empty,
        a2a.task_id = Empty,
        a2a.caller = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    // A span is only re-parented before it is entered, as here.
    let _ = span.set_parent(parent);
    span
}

/// The span an agent's run goes in, under the request that started it.
///
/// Its parent is the request's in the trace only, not as a `tracing` span:
/// a run outlives the request that started it (a stream's, or one that
/// returned at once), and the request's span is exported when it ends,
/// not when the run does.
pub(crate) fn execute_span(agent_id: &str, task_id: &str, context_id: &str) -> Span {
    let span = tracing::info_span!(
        target: "a2a",
        parent: None,
        "a2a.execute",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = agent_id,
        a2a.task_id = task_id,
        a2a.context_id = context_id,
        a2a.state = Empty,
    );
    if !span.is_disabled() {
        let _ = span.set_parent(Span::current().context());
    }
    span
}

/// The current span's W3C `traceparent` and `tracestate` (empty when spans
/// are off or no propagator is installed): what a push delivery records.
pub(crate) fn current_context() -> (String, String) {
    let span = Span::current();
    if span.is_disabled() {
        return (String::new(), String::new());
    }
    let mut pair = TraceHeaders::default();
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut pair));
    (pair.traceparent, pair.tracestate)
}

/// The span one push delivery attempt goes in, under the event's recorded
/// context, and the `traceparent` and `tracestate` to send with it: the
/// span's own when spans are on, else the recorded ones as they are.
pub(crate) fn push_span(
    agent_id: &str,
    task_id: &str,
    traceparent: &str,
    tracestate: &str,
) -> (Span, String, String) {
    let span = tracing::info_span!(
        target: "a2a",
        parent: None,
        "a2a.push",
        otel.kind = "client",
        gen_ai.agent.id = agent_id,
        a2a.task_id = task_id,
    );
    if span.is_disabled() || traceparent.is_empty() {
        return (span, traceparent.to_owned(), tracestate.to_owned());
    }
    let mut recorded = HeaderMap::new();
    for (name, value) in [("traceparent", traceparent), ("tracestate", tracestate)] {
        if let Ok(v) = http::HeaderValue::from_str(value) {
            recorded.insert(name, v);
        }
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(&recorded)));
    let _ = span.set_parent(parent);
    let mut own = TraceHeaders::default();
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut own));
    (span, own.traceparent, own.tracestate)
}

/// The two W3C headers a propagator writes.
#[derive(Default)]
struct TraceHeaders {
    traceparent: String,
    tracestate: String,
}

impl Injector for TraceHeaders {
    fn set(&mut self, key: &str, value: String) {
        if key.eq_ignore_ascii_case("traceparent") {
            self.traceparent = value;
        } else if key.eq_ignore_ascii_case("tracestate") {
            self.tracestate = value;
        }
    }
}

/// Whether Heddle's spans are on (a callsite check).
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: "a2a", tracing::Level::INFO)
}

/// Records `field` = `value` on the current request's span, if it is on.
pub(crate) fn record(field: &'static str, value: &str) {
    if enabled() {
        Span::current().record(field, value);
    }
}

/// Runs each request inside its [`request_span`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceContextLayer;

impl<S> tower::Layer<S> for TraceContextLayer {
    type Service = TraceContext<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TraceContext { inner }
    }
}

/// The service of [`TraceContextLayer`].
#[derive(Clone, Debug)]
pub struct TraceContext<S> {
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for TraceContext<S>
where
    S: tower::Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let span = request_span(req.headers());
        let _entered = span.enter();
        self.inner.call(req).instrument(span.clone())
    }
}
