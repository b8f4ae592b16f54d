//! Serving a router on a TCP listener: HTTP/1.1 and HTTP/2 with prior
//! knowledge (so gRPC too) on one port, until a shutdown signal, then letting
//! open connections finish.
//!
//! Each connection's protocol is told from its first bytes by *peeking* at
//! the socket, and the connection then goes straight to hyper's HTTP/1 or
//! HTTP/2 server. hyper-util's `auto` builder (what `axum::serve` uses) reads
//! those bytes itself and hands them back through a rewinding wrapper; hyper's
//! HTTP/1 read buffer then receives them in a read of their own and grows
//! from 8 to 16 KB on every connection, for the connection's life: 80 MB
//! with 10,000 open SSE streams.
//!
//! HTTP/2 connections write through [`coalesce`], so that the answers to
//! many concurrent streams leave in one system call rather than one each.
//!
//! ```no_run
//! # async fn run(app: axum::Router) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! heddle_server::listen::serve(listener, app, std::future::pending()).await
//! # }
//! ```

use std::{error::Error as StdError, future::Future, net::SocketAddr, time::Duration};

use axum::{Router, extract::Request, response::Response};
use hyper::{body::Incoming, server::conn as hyper_conn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{
        conn::auto,
        graceful::{GracefulShutdown, Watcher},
    },
    service::TowerToHyperService,
};
use tokio::net::{TcpListener, TcpStream};

mod coalesce;

use coalesce::Coalesce;

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

/// Serves `app` on `listener` (plain TCP) until `shutdown` resolves, then
/// lets open connections finish (up to 10 s).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // The route table is built once here, not per connection.
    let app = app.with_state(());
    accept_loop(listener, shutdown, move |tcp, _peer, watcher| {
        let app = app.clone();
        async move {
            let Ok(wire) = sniff(&tcp).await else { return };
            serve_connection(TokioIo::new(tcp), wire, app, watcher).await;
        }
    })
    .await
}

/// Accepts connections until `shutdown` resolves and runs `serve_one` for
/// each on a task of its own, under the graceful-shutdown watcher it is
/// given; then lets open connections finish (up to 10 s). Accepted sockets
/// get `TCP_NODELAY`: SSE events and HTTP/2's headers, data and trailers
/// frames are small writes that must not wait out the peer's delayed ACK.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    serve_one: F,
) -> std::io::Result<()>
where
    F: Fn(TcpStream, SocketAddr, Watcher) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
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
        tokio::spawn(serve_one(tcp, peer, graceful.watcher()));
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
    Ok(())
}

/// Tells HTTP/2 with prior knowledge from HTTP/1 by peeking at the first
/// bytes, leaving them in the socket for hyper to read.
async fn sniff(tcp: &TcpStream) -> std::io::Result<Wire> {
    let mut first = [0u8; H2_PREFACE.len()];
    let n = tcp.peek(&mut first).await?;
    Ok(classify(&first[..n]))
}

/// The wire the first `n` bytes of a connection show.
fn classify(first: &[u8]) -> Wire {
    if first.is_empty() {
        // Closed before a byte: hyper sees the EOF and ends quietly.
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

/// Serves one connection with the HTTP `wire` names, under the graceful
/// shutdown `watcher`. (No A2A binding uses HTTP/1.1 `Upgrade`.)
pub(crate) async fn serve_connection<I, S, B>(io: I, wire: Wire, service: S, watcher: Watcher)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let service = TowerToHyperService::new(service);
    let result: Result<(), Box<dyn StdError + Send + Sync>> = match wire {
        Wire::Http1 => {
            let conn = hyper_conn::http1::Builder::new().serve_connection(io, service);
            watcher.watch(conn).await.map_err(Into::into)
        }
        // The other two are boxed: inline, the largest of the three would set
        // the size of every connection's task, HTTP/1 ones (the many) included.
        // Writes gathered until h2 flushes: many answers to a system call.
        Wire::Http2 => {
            let conn = hyper_conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(Coalesce::new(io), service);
            Box::pin(watcher.watch(conn)).await.map_err(Into::into)
        }
        Wire::Undecided => {
            Box::pin(async move {
                let builder = auto::Builder::new(TokioExecutor::new());
                watcher.watch(builder.serve_connection(io, service)).await
            })
            .await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection: {e}");
    }
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
