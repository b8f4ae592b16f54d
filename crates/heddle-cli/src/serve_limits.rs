//! `heddle serve` limits: what one client may make the server hold, and for
//! how long. Each flag maps to one field of [`ConnLimits`] (the listener)
//! or [`Limits`] (the agents' handlers); the README's limits table lists
//! them.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context as _;
use axum::{body::Body, extract::Request, http::Response};
use clap::Args;
use heddle_server::{
    Limits,
    guard::HostGuard,
    limit::CallerLimits,
    listen::{ConnLimits, Served},
};

/// The limit flags of `heddle serve`.
#[derive(Args, Debug)]
pub struct LimitArgs {
    /// Largest request body in bytes (every binding, HTTP/1.1 and HTTP/2).
    #[arg(long, default_value_t = 8 << 20)]
    pub max_body_bytes: usize,
    /// Most parts in one message.
    #[arg(long, default_value_t = 256)]
    pub max_parts: usize,
    /// Most streams (SSE and gRPC) open at once, across every agent.
    #[arg(long, default_value_t = 10_000)]
    pub max_streams: usize,
    /// Most streams one caller holds open at once (anonymous callers: per client address).
    #[arg(long, default_value_t = 2_500)]
    pub max_streams_per_caller: usize,
    /// Most requests in one JSON-RPC batch.
    #[arg(long, default_value_t = Limits::default().max_batch)]
    pub max_batch: usize,
    /// Requests a second from one caller (by key or token; by IP address when
    /// anonymous), on every binding; past it, 429 / RESOURCE_EXHAUSTED with
    /// Retry-After. 0 turns the limit off.
    #[arg(long, default_value_t = 1_000)]
    pub rate_limit: u32,
    /// Requests one caller may make at once above --rate-limit before it applies.
    #[arg(long, default_value_t = 2_000)]
    pub rate_burst: u32,
    /// Tasks of one caller running at once (anonymous callers: per client address).
    #[arg(long, default_value_t = 1_000)]
    pub max_running_tasks_per_caller: usize,
    /// Connections open at once; at the cap new ones wait to be accepted.
    #[arg(long, default_value_t = ConnLimits::default().max_connections)]
    pub max_connections: usize,
    /// Connections open at once from one IP address; past it new ones are closed.
    #[arg(long, default_value_t = ConnLimits::default().max_connections_per_ip)]
    pub max_connections_per_ip: usize,
    /// Seconds a new connection may stay silent before its first byte.
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().first_byte_timeout.as_secs_f64())]
    pub first_byte_timeout: f64,
    /// Seconds an HTTP/1.1 request head may take (from when the connection is ready for it).
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().header_timeout.as_secs_f64())]
    pub header_timeout: f64,
    /// Seconds an idle connection (no request in flight, nothing received) is kept.
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().idle_timeout.as_secs_f64())]
    pub idle_timeout: f64,
    /// Seconds a request body may take to arrive, in all.
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().body_timeout.as_secs_f64())]
    pub body_timeout: f64,
    /// Seconds a write may wait on a client that takes nothing; then it is disconnected.
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().write_timeout.as_secs_f64())]
    pub write_timeout: f64,
    /// The kernel send buffer of each connection, in bytes (0: the kernel's own, which grows).
    #[arg(long, default_value_t = ConnLimits::default().send_buffer_bytes.unwrap_or(0))]
    pub send_buffer_bytes: usize,
    /// Seconds a client gets to finish the TLS handshake.
    #[arg(long, value_name = "SECS", default_value_t = ConnLimits::default().tls_handshake_timeout.as_secs_f64())]
    pub tls_handshake_timeout: f64,
}

/// The longest any of these timeouts may be (a day): deadlines are
/// computed as now + timeout, which must not overflow.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

fn secs(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero() && *d <= LONGEST)
        .ok_or_else(|| anyhow::anyhow!("--{flag} takes a number of seconds above 0, at most a day"))
}

impl LimitArgs {
    /// The listener's limits.
    pub fn conn_limits(&self) -> anyhow::Result<ConnLimits> {
        Ok(ConnLimits {
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            first_byte_timeout: secs("first-byte-timeout", self.first_byte_timeout)?,
            header_timeout: secs("header-timeout", self.header_timeout)?,
            idle_timeout: secs("idle-timeout", self.idle_timeout)?,
            body_timeout: secs("body-timeout", self.body_timeout)?,
            tls_handshake_timeout: secs("tls-handshake-timeout", self.tls_handshake_timeout)?,
            write_timeout: secs("write-timeout", self.write_timeout)?,
            send_buffer_bytes: (self.send_buffer_bytes > 0).then_some(self.send_buffer_bytes),
            ..ConnLimits::default()
        })
    }

    /// The per-caller limits, shared by every agent.
    pub fn caller_limits(&self) -> CallerLimits {
        CallerLimits::new(
            std::num::NonZeroU32::new(self.rate_limit),
            std::num::NonZeroU32::new(self.rate_burst).unwrap_or(std::num::NonZeroU32::MIN),
            self.max_running_tasks_per_caller,
        )
    }

    /// The handlers' limits.
    pub fn handler_limits(&self) -> Limits {
        Limits {
            max_body_bytes: self.max_body_bytes,
            max_parts: self.max_parts,
            max_streams: self.max_streams,
            max_streams_per_caller: self.max_streams_per_caller,
            max_batch: self.max_batch,
            ..Limits::default()
        }
    }
}

/// The Host check of a listener on `listen` reached at `public_url`, with
/// the operator's `allow_hosts`.
fn host_guard(
    listen: SocketAddr,
    public_url: &str,
    allow_hosts: &[String],
) -> anyhow::Result<HostGuard> {
    let public =
        url::Url::parse(public_url).with_context(|| format!("--public-url {public_url}"))?;
    let mut hosts = allow_hosts.to_vec();
    // A public URL defaulted from an unspecified listen address names no
    // host a client would send: it adds nothing (and must not turn the
    // "any host" of such a listener into "only 0.0.0.0").
    let unspecified = match public.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_unspecified(),
        _ => false,
    };
    if let Some(host) = public.host_str().filter(|_| !unspecified) {
        hosts.push(match public.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        });
    }
    Ok(HostGuard::for_listener(listen, &hosts))
}

/// `app` behind the Host check (see [`HostGuard`]) and, when origins are
/// named, a CORS policy that lets exactly those call it from a browser,
/// with a tracing span a request. The layers wrap the whole router once
/// (`Router::layer` would put each on every route, boxed and cloned with
/// the route on every request).
pub fn guarded<S>(
    app: S,
    listen: SocketAddr,
    public_url: &str,
    allow_hosts: &[String],
    cors_origins: &[String],
) -> anyhow::Result<impl Served>
where
    S: tower::Service<Request, Response = Response<Body>, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let cors = if cors_origins.is_empty() {
        None
    } else {
        Some(cors(cors_origins)?)
    };
    Ok(tower::ServiceBuilder::new()
        .map_response(|r: Response<_>| r.map(Body::new))
        // Spans name the path, never the query: an API key may travel there.
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &Request| {
                tracing::debug_span!("request", method = %req.method(), path = %req.uri().path())
            }),
        )
        .option_layer(cors)
        .layer(host_guard(listen, public_url, allow_hosts)?)
        .service(app))
}

/// The CORS policy that lets exactly `origins` call the hub from a browser.
fn cors(origins: &[String]) -> anyhow::Result<tower_http::cors::CorsLayer> {
    let origins = origins
        .iter()
        .map(|o| {
            // A browser's Origin is scheme://host[:port], never `*` nor a path.
            let o = o.trim_end_matches('/');
            if o == "*" || !(o.starts_with("https://") || o.starts_with("http://")) {
                anyhow::bail!("--cors-origin {o}: name an origin, such as https://console.example");
            }
            o.parse::<axum::http::HeaderValue>()
                .with_context(|| format!("--cors-origin {o}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    use axum::http::{Method, header};
    Ok(tower_http::cors::CorsLayer::new()
        .allow_origin(origins)
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::HeaderName::from_static("a2a-version"),
            header::HeaderName::from_static("a2a-extensions"),
            header::HeaderName::from_static("api-key"),
            header::HeaderName::from_static("x-api-key"),
        ])
        .expose_headers([header::HeaderName::from_static("a2a-extensions")]))
}

#[cfg(test)]
mod tests {
    use axum::Router;

    use super::*;

    #[test]
    fn a_listener_on_every_address_with_a_defaulted_public_url_allows_any_host() {
        let listen: SocketAddr = ([0, 0, 0, 0], 8080).into();
        let guard = host_guard(listen, "http://0.0.0.0:8080", &[]).expect("guard");
        assert!(guard.allows("192.0.2.10:8080") && guard.allows("hub.example"));
        let named = host_guard(listen, "https://hub.example", &[]).expect("guard");
        assert!(named.allows("hub.example") && !named.allows("other.example"));
    }

    #[test]
    fn a_loopback_listener_allows_its_public_host_and_the_allowed_ones() {
        let listen: SocketAddr = ([127, 0, 0, 1], 8080).into();
        let guard =
            host_guard(listen, "https://hub.example", &["alias.example".into()]).expect("guard");
        for ok in ["hub.example", "alias.example", "localhost:8080"] {
            assert!(guard.allows(ok), "{ok}");
        }
        assert!(!guard.allows("rebind.example:8080"));
    }

    #[test]
    fn a_wildcard_or_malformed_cors_origin_is_refused_at_start() {
        let listen: SocketAddr = ([127, 0, 0, 1], 8080).into();
        for bad in ["*", "console.example", ""] {
            let r = guarded(
                Router::new(),
                listen,
                "http://127.0.0.1:8080",
                &[],
                &[bad.into()],
            );
            assert!(r.is_err(), "{bad:?}");
        }
        let ok = guarded(
            Router::new(),
            listen,
            "http://127.0.0.1:8080",
            &[],
            &["https://console.example/".into()],
        );
        assert!(ok.is_ok());
    }
}
