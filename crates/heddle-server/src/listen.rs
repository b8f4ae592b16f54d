//! Serving a router on a TCP listener: HTTP/1.1 and HTTP/2 with prior
//! knowledge (so gRPC too) on one port, until a shutdown signal, then letting
//! open connections finish.
//!
//! Each connection's protocol is told from its first bytes by *peeking* at
//! the socket. HTTP/1.1 connections go to Heddle's own connection driver
//! (`http1`, framing in `heddle-http1`), which holds no buffers while an
//! SSE stream waits (hyper's keeps 16 KiB a connection); HTTP/2 ones go to
//! hyper's HTTP/2 server, writing through `coalesce` so that the answers
//! to many concurrent streams leave in one system call rather than one each.
//! A connection whose first segment is a strict prefix of the HTTP/2
//! preface (`P`, `PR`, …: either protocol still possible) goes to
//! hyper-util's `auto` builder, which waits for more and serves both.
//!
//! ```no_run
//! # async fn run(app: axum::Router) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! heddle_server::listen::serve(listener, app, std::future::pending()).await
//! # }
//! ```

use std::{error::Error as StdError, future::Future, net::SocketAddr, pin::Pin, time::Duration};

use axum::{Router, extract::Request};
use hyper::{body::Incoming, server::conn as hyper_conn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tower::ServiceExt as _;

mod coalesce;
mod http1;

use coalesce::Coalesce;
pub use heddle_http1::HeadLimits;
pub use http1::ConnLimits;

/// How long open connections get to finish after the shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The first bytes an HTTP/2 client with prior knowledge sends (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Which HTTP a connection speaks, as far as is known before serving it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    Http1,
    Http2,
    /// Not known yet: hyper-util's `auto` builder reads and decides.
    Undecided,
}

/// Turns `true` when the server stops accepting; every connection holds a
/// receiver, so the sender sees when the last one has finished.
pub(crate) type Drain = watch::Receiver<bool>;

/// Serves `app` on `listener` (plain TCP) until `shutdown` resolves, then
/// lets open connections finish (up to 10 s). HTTP/1.1 requests are held to
/// [`ConnLimits::default`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, ConnLimits::default(), shutdown).await
}

/// [`serve`] with HTTP/1.1 request `limits` of the caller's choosing (the
/// body limit should be at least the largest of the routes').
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // The route table is built once here, not per connection.
    let app = app.with_state(());
    accept_loop(listener, shutdown, move |tcp, _peer, drain| {
        let app = app.clone();
        async move {
            let Ok(wire) = sniff(&tcp).await else { return };
            serve_connection(tcp, wire, app, None::<()>, limits, drain).await;
        }
    })
    .await
}

/// Accepts connections until `shutdown` resolves and runs `serve_one` for
/// each on a task of its own, with the drain signal it is given; then lets
/// open connections finish (up to 10 s). Accepted sockets get `TCP_NODELAY`:
/// SSE events and HTTP/2's headers, data and trailers frames are small
/// writes that must not wait out the peer's delayed ACK.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    serve_one: F,
) -> std::io::Result<()>
where
    F: Fn(TcpStream, SocketAddr, Drain) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (drain_tx, drain) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, go on.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve_one(tcp, peer, drain.clone()));
    }
    drop(listener);
    drop(drain);
    drain_tx.send_replace(true);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain_tx.closed()).await;
    Ok(())
}

/// Tells HTTP/2 with prior knowledge from HTTP/1 by peeking at the first
/// bytes, leaving them in the socket for the server to read.
async fn sniff(tcp: &TcpStream) -> std::io::Result<Wire> {
    let mut first = [0u8; H2_PREFACE.len()];
    let n = tcp.peek(&mut first).await?;
    Ok(classify(&first[..n]))
}

/// The wire the first `n` bytes of a connection show.
fn classify(first: &[u8]) -> Wire {
    if first.is_empty() {
        // Closed before a byte: the HTTP/1 driver sees the EOF and ends quietly.
        Wire::Http1
    } else if !H2_PREFACE.starts_with(first) {
        Wire::Http1
    } else if first.len() == H2_PREFACE.len() {
        Wire::Http2
    } else {
        // A strict prefix of the preface (a segment cut short): let the
        // auto builder wait for the rest.
        Wire::Undecided
    }
}

/// Serves one connection with the HTTP `wire` names until it ends or, once
/// `drain` turns true, until what is in flight has finished. `stamp`, when
/// set, goes into every request's extensions. (No A2A binding uses
/// HTTP/1.1 `Upgrade`.)
pub(crate) async fn serve_connection<I, T>(
    io: I,
    wire: Wire,
    app: Router,
    stamp: Option<T>,
    limits: ConnLimits,
    drain: Drain,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: Clone + Send + Sync + 'static,
{
    if wire == Wire::Http1 {
        return http1::serve(io, app, stamp, limits, drain).await;
    }
    let service = TowerToHyperService::new(app.map_request(move |mut req: Request<Incoming>| {
        if let Some(stamp) = &stamp {
            req.extensions_mut().insert(stamp.clone());
        }
        req
    }));
    let io = TokioIo::new(io);
    // Boxed: inline, the HTTP/2 connection would set the size of every
    // connection's task, HTTP/1 ones (the many) included.
    let result: Result<(), Box<dyn StdError + Send + Sync>> = if wire == Wire::Http2 {
        Box::pin(async move {
            // Writes gathered until h2 flushes: many answers to a system call.
            let conn = hyper_conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(Coalesce::new(io), service);
            until_drained(conn, drain, |c| c.graceful_shutdown())
                .await
                .map_err(Into::into)
        })
        .await
    } else {
        Box::pin(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(io, service);
            until_drained(conn, drain, |c| c.graceful_shutdown()).await
        })
        .await
    };
    if let Err(e) = result {
        tracing::debug!("connection: {e}");
    }
}

/// Drives a hyper connection; once `drain` turns true, asks it to finish
/// what is in flight (`shut`) and waits for that.
async fn until_drained<C: Future>(
    conn: C,
    mut drain: Drain,
    shut: impl FnOnce(Pin<&mut C>),
) -> C::Output {
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        out = conn.as_mut() => return out,
        _ = drain.wait_for(|d| *d) => {}
    }
    shut(conn.as_mut());
    conn.await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http1_requests_are_told_from_the_h2_preface() {
        assert_eq!(classify(b"POST /a2a HTTP/1.1\r\n"), Wire::Http1);
        // "P" alone could be either; "PR" still could; "PRI * HTTP/2.0..." is HTTP/2.
        assert_eq!(classify(b"P"), Wire::Undecided);
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), Wire::Undecided);
        assert_eq!(classify(H2_PREFACE), Wire::Http2);
        assert_eq!(classify(b"PUT /x HTTP/1.1\r\n\r\n"), Wire::Http1);
        assert_eq!(classify(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Wire::Http1);
        assert_eq!(classify(b""), Wire::Http1);
    }
}
