//! Where `heddle serve` writes what it observes: log lines on stderr
//! (text or JSON, filtered by `HEDDLE_LOG`), and, with `--otlp-endpoint`,
//! the spans of every A2A request and agent run (`heddle_server::trace`)
//! exported over OTLP/HTTP, with W3C trace context read from callers and
//! written on the hub's own calls, and the hub's metrics
//! (`heddle_server::observe::OtelMetrics`) exported there too, every
//! `OTEL_METRIC_EXPORT_INTERVAL` milliseconds (default 60 000).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::{metrics::SdkMeterProvider, trace::SdkTracerProvider};
use tracing_subscriber::{Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _};

use crate::serve::LogFormat;

/// Flushes the exported spans and metrics when dropped (at shutdown).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    meters: Option<SdkMeterProvider>,
}

impl Telemetry {
    /// The observer that exports the hub's metrics, when an endpoint is set.
    pub fn observer(&self) -> Option<std::sync::Arc<dyn heddle_server::Observer>> {
        use opentelemetry::metrics::MeterProvider as _;
        let meter = self.meters.as_ref()?.meter("heddle");
        Some(std::sync::Arc::new(
            heddle_server::observe::OtelMetrics::new(&meter),
        ))
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("heddle: flushing spans to the OTLP endpoint failed: {e}");
        }
        if let Some(m) = self.meters.take()
            && let Err(e) = m.shutdown()
        {
            eprintln!("heddle: flushing metrics to the OTLP endpoint failed: {e}");
        }
    }
}

/// Metrics exported periodically to the OTLP/HTTP metrics endpoint `url`.
fn meter_provider(url: String) -> anyhow::Result<SdkMeterProvider> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()?;
    Ok(SdkMeterProvider::builder()
        .with_periodic_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("heddle")
                .build(),
        )
        .build())
}

/// Spans exported in batches to the OTLP/HTTP traces endpoint `url`.
fn provider(url: String) -> anyhow::Result<SdkTracerProvider> {
    // Already installed is as good (the result says only which won).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("heddle")
                .build(),
        )
        .build())
}

/// Installs the log writer and, when `otlp` names an endpoint (the
/// collector's base URL, e.g. `http://127.0.0.1:4318`), the span exporter.
pub fn init(format: LogFormat, otlp: Option<&str>) -> anyhow::Result<Telemetry> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HEDDLE_LOG")
        .unwrap_or_else(|_| "heddle=info,warn".into());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter));
    let Some(endpoint) = otlp else {
        registry.init();
        return Ok(Telemetry {
            provider: None,
            meters: None,
        });
    };
    // Built on a thread of its own: the exporters' blocking HTTP clients
    // may not be made on the server's async workers.
    let base = endpoint.trim_end_matches('/').to_owned();
    let (provider, meters) = std::thread::spawn(move || {
        let traces = provider(format!("{base}/v1/traces"))?;
        let metrics = meter_provider(format!("{base}/v1/metrics"))?;
        anyhow::Ok((traces, metrics))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("setting up the OTLP exporter panicked"))??;
    // Only Heddle's request and run spans: the rest is for the log.
    let spans = tracing_subscriber::filter::Targets::new()
        .with_target(heddle_server::trace::TARGET, tracing::Level::INFO);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("heddle"))
        .with_filter(spans);
    registry.with(otel).init();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    Ok(Telemetry {
        provider: Some(provider),
        meters: Some(meters),
    })
}
