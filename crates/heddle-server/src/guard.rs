//! Which requests reach the routes at all: the `Host` a request names must
//! be one this server answers for.
//!
//! A server on `127.0.0.1` with no authentication is not safe just because
//! it is local: a web page the user visits can point a DNS name of its own
//! at 127.0.0.1 (DNS rebinding) and then read and drive the server as a
//! same-origin page. What gives such a request away is its `Host`, the
//! attacker's name. [`HostGuard`] answers `421 Misdirected Request` to any
//! `Host` outside its list, and `400` to an HTTP/1.1 request without
//! exactly one `Host` field (RFC 9112 §3.2). HTTP/2 requests carry the name
//! as `:authority`, checked the same way.
//!
//! CORS is not this layer's business: without a CORS layer (the default of
//! `heddle serve`) browsers let no other origin read an answer, and the
//! JSON-RPC and REST bindings refuse bodies that are not
//! `application/json` (a type a page cannot send cross-origin without a
//! preflight that nothing here answers).
//!
//! ```
//! use heddle_server::guard::HostGuard;
//! let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
//! let guard = HostGuard::for_listener("127.0.0.1:8080".parse().unwrap(), &[]);
//! let app = guard.wrap(app);
//! ```

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use axum::{
    extract::Request,
    response::{IntoResponse, Response},
};
use http::{HeaderValue, StatusCode, Version, header};

/// The host names (with port) requests may name; see the module docs.
#[derive(Clone, Debug)]
pub struct HostGuard {
    allowed: Arc<Vec<String>>,
    any: bool,
}

impl HostGuard {
    /// Requests naming any of `hosts` (`host:port`, or `host` for port 80
    /// and 443; compared without case). `*` allows every host.
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(hosts: I) -> Self {
        let mut allowed = Vec::new();
        let mut any = false;
        for h in hosts {
            let h = h.as_ref().trim().to_ascii_lowercase();
            if h == "*" {
                any = true;
            } else if !h.is_empty() {
                allowed.push(h);
            }
        }
        Self {
            allowed: Arc::new(allowed),
            any,
        }
    }

    /// The hosts a server listening on `listen` answers for: that address,
    /// and for a loopback address also `localhost` and the other loopback
    /// spellings on the same port, plus `extra` (the public URL's host, and
    /// any others the operator allows). A listener on every address
    /// (`0.0.0.0`, `[::]`) allows every host unless `extra` names some.
    pub fn for_listener(listen: SocketAddr, extra: &[String]) -> Self {
        let port = listen.port();
        let mut hosts: Vec<String> = extra.to_vec();
        match listen.ip() {
            ip if ip.is_unspecified() => {
                if extra.is_empty() {
                    hosts.push("*".into());
                }
            }
            ip if ip.is_loopback() => {
                for name in ["localhost", "127.0.0.1", "[::1]"] {
                    hosts.push(format!("{name}:{port}"));
                }
                hosts.push(authority(ip, port));
            }
            ip => hosts.push(authority(ip, port)),
        }
        Self::new(hosts)
    }

    /// Whether `host` (a `Host` value or an `:authority`) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let host = host.trim();
        self.allowed.iter().any(|a| a.eq_ignore_ascii_case(host))
            || default_port_stripped(host)
                .is_some_and(|bare| self.allowed.iter().any(|a| a.eq_ignore_ascii_case(bare)))
    }

    /// `router` behind the guard.
    pub fn wrap(&self, router: axum::Router) -> axum::Router {
        router.layer(self.clone())
    }

    /// What the guard says of a request's head: `None` to let it through.
    pub fn refusal(&self, req: &Request) -> Option<Response> {
        let mut hosts = req.headers().get_all(header::HOST).iter();
        let first = hosts.next();
        if req.version() == Version::HTTP_11 && (first.is_none() || hosts.next().is_some()) {
            return Some(refuse(
                StatusCode::BAD_REQUEST,
                "an HTTP/1.1 request needs exactly one Host header field",
            ));
        }
        let named = match first {
            Some(h) => h.to_str().ok(),
            None => req.uri().authority().map(|a| a.as_str()),
        };
        match named {
            Some(host) if self.allows(host) => None,
            Some(_) => Some(refuse(
                StatusCode::MISDIRECTED_REQUEST,
                "this server does not answer for that Host (see --allow-host)",
            )),
            None if self.any => None,
            None => Some(refuse(StatusCode::BAD_REQUEST, "the request names no host")),
        }
    }
}

/// The guard is its own layer: a plain [`tower::Service`] around the
/// routes, with no boxed future on the way through (what
/// `axum::middleware::from_fn` would cost on every request).
impl<S> tower::Layer<S> for HostGuard {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            guard: self.clone(),
            inner,
        }
    }
}

/// A service behind a [`HostGuard`].
#[derive(Clone, Debug)]
pub struct Guarded<S> {
    guard: HostGuard,
    inner: S,
}

impl<S> tower::Service<Request> for Guarded<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future =
        futures::future::Either<std::future::Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match self.guard.refusal(&req) {
            Some(refused) => futures::future::Either::Left(std::future::ready(Ok(refused))),
            None => futures::future::Either::Right(self.inner.call(req)),
        }
    }
}

fn authority(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

/// `host` without a `:80` or `:443` suffix, when it has one.
fn default_port_stripped(host: &str) -> Option<&str> {
    host.strip_suffix(":80")
        .or_else(|| host.strip_suffix(":443"))
}

fn refuse(status: StatusCode, message: &'static str) -> Response {
    let body = serde_json::json!({ "error": { "code": status.as_u16(), "message": message } });
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, hosts: &[&str]) -> Request {
        let mut b = http::Request::builder().uri("/x").version(version);
        for h in hosts {
            b = b.header(header::HOST, *h);
        }
        b.body(axum::body::Body::empty()).unwrap_or_default()
    }

    #[test]
    fn a_loopback_listener_answers_for_its_loopback_names_only() {
        let g = HostGuard::for_listener(SocketAddr::from(([127, 0, 0, 1], 8080)), &[]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert!(g.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1:8081",
            "localhost",
            "attacker.test",
        ] {
            assert!(!g.allows(bad), "{bad}");
        }
    }

    #[test]
    fn the_public_url_host_and_default_ports_are_allowed() {
        let g = HostGuard::for_listener(
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            &["agents.example".into()],
        );
        assert!(g.allows("agents.example"));
        assert!(g.allows("agents.example:443"));
        assert!(!g.allows("agents.example:8443"));
    }

    #[test]
    fn http11_needs_exactly_one_host() {
        let g = HostGuard::new(["*"]);
        assert!(g.refusal(&req(Version::HTTP_11, &["a:1"])).is_none());
        let none = g.refusal(&req(Version::HTTP_11, &[]));
        assert_eq!(none.map(|r| r.status()), Some(StatusCode::BAD_REQUEST));
        let two = g.refusal(&req(Version::HTTP_11, &["a:1", "b:2"]));
        assert_eq!(two.map(|r| r.status()), Some(StatusCode::BAD_REQUEST));
        // HTTP/1.0 may omit it.
        assert!(g.refusal(&req(Version::HTTP_10, &[])).is_none());
    }

    #[test]
    fn a_rebinding_host_is_misdirected() {
        let g = HostGuard::for_listener(SocketAddr::from(([127, 0, 0, 1], 8080)), &[]);
        let r = g.refusal(&req(Version::HTTP_11, &["rebind.attacker.example:8080"]));
        assert_eq!(r.map(|r| r.status()), Some(StatusCode::MISDIRECTED_REQUEST));
    }

    #[test]
    fn an_unspecified_listener_allows_any_host_unless_told_otherwise() {
        let any = HostGuard::for_listener(SocketAddr::from(([0, 0, 0, 0], 8080)), &[]);
        assert!(any.allows("whatever.example"));
        let named = HostGuard::for_listener(
            SocketAddr::from(([0, 0, 0, 0], 8080)),
            &["hub.example".into()],
        );
        assert!(!named.allows("whatever.example"));
    }
}
