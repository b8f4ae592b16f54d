//! Serving a router on a TCP listener: HTTP/1.1 and HTTP/2 with prior
//! knowledge (so gRPC too) on one port, both by hyper, until a shutdown
//! signal, then letting open connections finish.
//!
//! Each connection's protocol is told from its first bytes by *peeking* at
//! the socket, and the connection then goes straight to hyper's HTTP/1 or
//! HTTP/2 server (hyper-util's `auto` builder would read the bytes itself
//! and hand them back through a rewinding wrapper, which grows hyper's read
//! buffer on every connection). HTTP/2 connections write through
//! `coalesce`, so that the answers to many concurrent streams leave in one
//! system call rather than one each.
//!
//! Everything a client controls at the connection level has a bound, set
//! by [`ConnLimits`]: how many connections are open (in all and per client
//! address), how long a new connection may stay silent, how long a request
//! head may take, how long an idle connection is kept, and how long a
//! request body may take in all. Body *sizes* are the routes' business
//! ([`crate::Limits::max_body_bytes`]), so that they are set in one place
//! for every protocol.
//!
//! ```no_run
//! # async fn run(app: axum::Router) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! heddle_server::listen::serve(listener, app, std::future::pending()).await
//! # }
//! ```

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use futures::FutureExt;

use axum::{Router, extract::ConnectInfo};
use hyper::server::conn as hyper_conn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
    sync::watch,
};

mod admission;
mod coalesce;
mod conn_service;
mod limits;

use coalesce::Coalesce;
use conn_service::{Activity, ConnService};
pub use conn_service::{BodyTimedOut, PeerAddr};
pub use limits::ConnLimits;

/// The first bytes an HTTP/2 client with prior knowledge sends (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How many header fields hyper's HTTP/1 parser takes when not told.
const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

/// Which HTTP a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    Http1,
    Http2,
}

/// Turns `true` when the server stops accepting; every connection holds a
/// receiver, so the sender sees when the last one has finished.
pub(crate) type Drain = watch::Receiver<bool>;

/// What a listener serves: an axum [`Router`] ready to serve
/// (`with_state(())`), or such a router wrapped whole in tower layers
/// (`tower::ServiceBuilder::new().layer(…).service(router)`).
///
/// Layers that concern every request (tracing, a host check, CORS) belong
/// around the whole router: `Router::layer` puts a layer on each route
/// instead, boxed and cloned on every request with the route.
pub trait Served:
    tower::Service<
        http::Request<axum::body::Body>,
        Response = http::Response<axum::body::Body>,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Served for S where
    S: tower::Service<
            http::Request<axum::body::Body>,
            Response = http::Response<axum::body::Body>,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// Serves `app` on `listener` (plain TCP) until `shutdown` resolves, then
/// lets open connections finish, with [`ConnLimits::default`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, ConnLimits::default(), shutdown).await
}

/// [`serve`] with connection `limits` of the caller's choosing.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // The route table is built once here, not per connection.
    serve_service(listener, app.with_state(()), limits, shutdown).await
}

/// [`serve_with`] for any [`Served`] service, such as a router wrapped in
/// layers.
pub async fn serve_service<S: Served>(
    listener: TcpListener,
    app: S,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limits = limits.sane();
    // Shared, not copied into every connection's future.
    let shared = Arc::new(limits);
    accept_loop(listener, limits, shutdown, move |tcp, peer, drain| {
        let app = app.clone();
        let limits = shared.clone();
        async move {
            let wire = match sniff(&tcp, limits.first_byte_timeout).await {
                Ok(Some(wire)) => wire,
                Ok(None) => {
                    tracing::debug!(%peer, "no request within the first-byte timeout");
                    return;
                }
                Err(_) => return,
            };
            serve_connection(tcp, wire, app, peer, None::<()>, &limits, drain).await;
        }
    })
    .await
}

/// Accepts connections until `shutdown` resolves and runs `serve_one` for
/// each on a task of its own, with the drain signal it is given; then lets
/// open connections finish (up to [`ConnLimits::drain_timeout`]).
///
/// At [`ConnLimits::max_connections`] the loop stops accepting until one
/// closes (new clients wait in the kernel's backlog; the ones being served
/// are not touched); a client address past
/// [`ConnLimits::max_connections_per_ip`] has its new connection closed at
/// once. Accepted sockets get `TCP_NODELAY`: SSE events and HTTP/2's
/// headers, data and trailers frames are small writes that must not wait
/// out the peer's delayed ACK.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
    serve_one: F,
) -> std::io::Result<()>
where
    F: Fn(TcpStream, SocketAddr, Drain) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (drain_tx, drain) = watch::channel(false);
    let admission = admission::Admission::new(&limits);
    let mut backoff = admission::AcceptBackoff::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = admission.slot() => slot,
            () = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, go on.
                    backoff.failed(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        backoff.succeeded();
        let Some(ticket) = admission.admit(slot, peer.ip()) else {
            tracing::debug!(%peer, "refused: too many connections from this address");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        if let Some(bytes) = limits.send_buffer_bytes {
            // A fixed size turns the kernel's growth of the buffer off: a
            // client that stops reading holds at most this much of ours.
            let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(bytes);
        }
        tokio::spawn(holding(serve_one(tcp, peer, drain.clone()), ticket));
    }
    drop(listener);
    drop(drain);
    drain_tx.send_replace(true);
    let _ = tokio::time::timeout(limits.drain_timeout, drain_tx.closed()).await;
    Ok(())
}

/// `conn`, keeping `held` until it finishes. `held` rides beside the future
/// (`map`), not in an async block awaiting it: such a block keeps the
/// future it captured and the one it awaits in separate slots, twice the
/// memory for every open connection.
fn holding<F, T>(conn: F, held: T) -> impl Future<Output = ()>
where
    F: Future<Output = ()>,
{
    conn.map(move |()| drop(held))
}

/// Tells HTTP/2 with prior knowledge from HTTP/1 by peeking at the first
/// bytes, leaving them in the socket for the server to read. `None` when
/// the client sent nothing telling within `timeout` (or closed).
async fn sniff(tcp: &TcpStream, timeout: Duration) -> std::io::Result<Option<Wire>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut first = [0u8; H2_PREFACE.len()];
    let mut pause = Duration::from_millis(2);
    loop {
        let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut first)).await {
            Ok(n) => n?,
            Err(_) => return Ok(None),
        };
        if n == 0 {
            return Ok(None);
        }
        if let Some(wire) = classify(&first[..n]) {
            return Ok(Some(wire));
        }
        // A strict prefix of the preface (a segment cut short): the rest is
        // on its way. `peek` answers at once while bytes wait, so pause,
        // longer each time (a client that stops there costs a few dozen
        // wake-ups, not thousands).
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// The wire the first bytes of a connection show, or `None` while they are
/// a strict prefix of the HTTP/2 preface (either is still possible).
fn classify(first: &[u8]) -> Option<Wire> {
    if !H2_PREFACE.starts_with(first) {
        Some(Wire::Http1)
    } else if first.len() == H2_PREFACE.len() {
        Some(Wire::Http2)
    } else {
        None
    }
}

/// Serves one connection with the HTTP `wire` names until it ends, stays
/// idle past [`ConnLimits::idle_timeout`], or, once `drain` turns true,
/// until what is in flight has finished. `stamp`, when set, goes into every
/// request's extensions, as does the [`PeerAddr`]. (No A2A binding uses
/// HTTP/1.1 `Upgrade`.)
pub(crate) async fn serve_connection<I, S, T>(
    io: I,
    wire: Wire,
    app: S,
    peer: SocketAddr,
    stamp: Option<T>,
    limits: &ConnLimits,
    drain: Drain,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Served,
    T: Clone + Send + Sync + 'static,
{
    let activity = Arc::new(Activity::new(matches!(wire, Wire::Http1)));
    let service = ConnService::new(
        app,
        ConnectInfo(peer),
        stamp,
        limits.body_timeout,
        activity.clone(),
    );
    let io = activity.watch(io, limits.write_timeout);
    let idle = limits.idle_timeout;
    let result = match wire {
        Wire::Http1 => {
            // The builder is dropped before the connection is awaited, so
            // the connection's future does not keep it.
            let conn = {
                let mut builder = hyper_conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .max_buf_size(limits.max_head_bytes);
                // hyper parses into a stack array of its default size, but
                // into a heap vector written out in full for every request
                // once a size is set, even the same one.
                if limits.max_headers != HYPER_DEFAULT_MAX_HEADERS {
                    builder.max_headers(limits.max_headers);
                }
                builder.serve_connection(TokioIo::new(io), service)
            };
            let conn = std::pin::pin!(conn);
            supervise(conn, &activity, idle, drain, |c| c.graceful_shutdown()).await
        }
        // Boxed: inline, the HTTP/2 connection would set the size of every
        // connection's task, HTTP/1 ones (the many) included.
        Wire::Http2 => {
            Box::pin(async {
                let mut builder = hyper_conn::http2::Builder::new(TokioExecutor::new());
                builder
                    .timer(TokioTimer::new())
                    .max_header_list_size(limits.max_head_bytes_u32());
                // Writes gathered until h2 flushes: many answers to a system call.
                let conn = std::pin::pin!(
                    builder.serve_connection(Coalesce::new(TokioIo::new(io)), service)
                );
                supervise(conn, &activity, idle, drain, |c| c.graceful_shutdown()).await
            })
            .await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, "connection: {e}");
    }
}

/// Why a supervised connection ended early.
#[derive(Debug, thiserror::Error)]
enum Ended {
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
    #[error("closed after {0:?} idle")]
    Idle(Duration),
}

/// Drives a hyper connection. When it has had no request in flight and
/// read nothing for the idle timeout, or once `drain` turns true, asks it
/// to finish what is in flight (`shut`) and waits for that (an idle one is
/// given a second, then dropped). The connection is pinned by the caller:
/// taken by value, it would be stored twice in this future (the argument
/// and the pinned local), and it is most of a connection's memory.
async fn supervise<C>(
    mut conn: Pin<&mut C>,
    activity: &Activity,
    idle: Duration,
    mut drain: Drain,
    shut: impl FnOnce(Pin<&mut C>),
) -> Result<(), Ended>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let mut check = tokio::time::Instant::now() + idle;
    loop {
        tokio::select! {
            out = conn.as_mut() => return out.map_err(Ended::from),
            () = drained(&mut drain) => {
                shut(conn.as_mut());
                return conn.await.map_err(Ended::from);
            }
            () = tokio::time::sleep_until(check) => {
                match activity.idle_deadline(idle) {
                    Some(at) if at <= tokio::time::Instant::now() => {
                        shut(conn.as_mut());
                        let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                        return Err(Ended::Idle(idle));
                    }
                    Some(at) => check = at,
                    // Busy: look again an idle period from now.
                    None => check = tokio::time::Instant::now() + idle,
                }
            }
        }
    }
}

/// Resolves once `drain` turns true (or its sender is gone).
async fn drained(drain: &mut Drain) {
    let _ = drain.wait_for(|d| *d).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's future is most of an open connection's memory: each
    /// wrapper must hold the connection once, not once more per layer.
    #[tokio::test]
    async fn connection_futures_hold_the_connection_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (tcp, peer) = listener.accept().await.expect("accept");
        let (_tx, drain) = watch::channel(false);
        let limits = ConnLimits::default();
        let conn = serve_connection(
            tcp,
            Wire::Http1,
            Router::new(),
            peer,
            None::<()>,
            &limits,
            drain,
        );
        let size = std::mem::size_of_val(&conn);
        // Most of it is hyper's HTTP/1 connection, held once.
        assert!(size < 1600, "serve_connection's future is {size} bytes");
        let held = holding(conn, [0u8; 16]);
        assert!(
            std::mem::size_of_val(&held) <= size + 32,
            "holding doubles the future"
        );
    }

    #[test]
    fn http1_requests_are_told_from_the_h2_preface() {
        assert_eq!(classify(b"POST /a2a HTTP/1.1\r\n"), Some(Wire::Http1));
        // "P" alone could be either; "PR" still could; the whole preface is HTTP/2.
        assert_eq!(classify(b"P"), None);
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(classify(H2_PREFACE), Some(Wire::Http2));
        assert_eq!(classify(b"PUT /x HTTP/1.1\r\n\r\n"), Some(Wire::Http1));
        assert_eq!(
            classify(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(Wire::Http1)
        );
    }
}
