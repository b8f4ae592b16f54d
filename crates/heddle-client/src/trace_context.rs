//! W3C trace context on every request: the current span's context
//! (`tracing` + `tracing-opentelemetry`) written as `traceparent` and
//! `tracestate` by the globally installed propagator. An application that
//! installs none (OpenTelemetry's default is a no-op) sends nothing.

use opentelemetry::propagation::Injector;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

struct Pairs(Vec<(String, String)>);

impl Injector for Pairs {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

/// The headers (gRPC: metadata) that carry the current span's context.
pub(crate) fn headers() -> Vec<(String, String)> {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return Vec::new();
    }
    let cx = span.context();
    let mut pairs = Pairs(Vec::new());
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut pairs));
    pairs.0
}
