//! `listen::serve`: HTTP/1.1 and HTTP/2 with prior knowledge on one port,
//! and a shutdown that lets a request in flight finish.

use std::time::Duration;

use axum::{Router, extract::Path, routing::get};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};

fn app() -> Router {
    Router::new()
        .route("/ping", get(|| async { "pong" }))
        .route(
            "/echo/{n}",
            // Up to 5.6 KB: answers below and above h2's 1 KB copy threshold.
            get(|Path(n): Path<u32>| async move { format!("{n}:").repeat(n as usize * 7) }),
        )
        .route(
            "/drip",
            get(|| async {
                // The first chunk now, the second two seconds later.
                let chunks = futures::stream::unfold(0, |i| async move {
                    match i {
                        0 => Some((Ok::<_, std::convert::Infallible>("first"), 1)),
                        1 => {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                            Some((Ok("second"), 2))
                        }
                        _ => None,
                    }
                });
                axum::body::Body::from_stream(chunks)
            }),
        )
        .route(
            "/slow",
            get(|| async {
                SLOW_ENTERED.store(true, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                "done"
            }),
        )
}

/// Set when `/slow` starts serving a request.
static SLOW_ENTERED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

async fn start() -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        heddle_server::listen::serve(listener, app(), async {
            let _ = stopped.await;
        })
        .await
        .expect("serve");
    });
    (addr, stop, server)
}

/// A client that speaks HTTP/2 with prior knowledge, as gRPC clients do.
fn h2_client() -> reqwest::Client {
    reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client")
}

#[tokio::test]
async fn http1_and_http2_prior_knowledge_share_the_port() {
    let (addr, _stop, _server) = start().await;

    // HTTP/1.1, written by hand in one segment.
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("pong"), "{answer}");

    // HTTP/1.1 whose request line arrives a byte at a time: the first byte
    // ("G") already rules HTTP/2 out.
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    for b in b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" {
        tcp.write_all(&[*b]).await.expect("write");
    }
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // HTTP/2 with prior knowledge (as gRPC clients speak it).
    let client = h2_client();
    let res = client
        .get(format!("http://{addr}/ping"))
        .send()
        .await
        .expect("h2 request");
    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    assert_eq!(res.text().await.expect("body"), "pong");
}

/// HTTP/2 writes are gathered until h2 flushes (`listen::coalesce`): many
/// concurrent answers on one connection arrive whole and each to its own
/// stream, and a streamed body's chunks are not held back until its end.
#[tokio::test]
async fn http2_answers_are_gathered_but_never_held_back() {
    let (addr, _stop, _server) = start().await;
    let client = h2_client();
    let calls = (0..200u32).map(|n| {
        let (client, addr) = (client.clone(), addr.clone());
        async move {
            let res = client
                .get(format!("http://{addr}/echo/{n}"))
                .send()
                .await
                .expect("h2 request");
            assert_eq!(res.version(), reqwest::Version::HTTP_2);
            (n, res.text().await.expect("body"))
        }
    });
    let answers = tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(calls))
        .await
        .expect("every answer is flushed");
    for (n, body) in answers {
        assert_eq!(body, format!("{n}:").repeat(n as usize * 7), "stream {n}");
    }

    let mut res = client
        .get(format!("http://{addr}/drip"))
        .send()
        .await
        .expect("h2 request");
    let first = tokio::time::timeout(Duration::from_secs(1), res.chunk())
        .await
        .expect("the first chunk arrives before the second is made")
        .expect("chunk");
    assert_eq!(first.as_deref(), Some(&b"first"[..]));
    let second = res.chunk().await.expect("chunk");
    assert_eq!(second.as_deref(), Some(&b"second"[..]));
}

#[tokio::test]
async fn shutdown_lets_the_request_in_flight_finish() {
    let (addr, stop, server) = start().await;
    let slow = tokio::spawn(async move {
        reqwest::get(format!("http://{addr}/slow"))
            .await
            .expect("request")
            .text()
            .await
            .expect("body")
    });
    // Stop only once the request is being served (not after a fixed wait,
    // which a loaded machine may not honour).
    tokio::time::timeout(Duration::from_secs(10), async {
        while !SLOW_ENTERED.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the slow request reaches its handler");
    stop.send(()).expect("stop");
    assert_eq!(slow.await.expect("join"), "done");
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server returns once it is drained")
        .expect("join");
}

/// Sends `what` when dropped: tells a test that the server let go of a
/// request's future or an answer's body.
struct Dropped(
    &'static str,
    tokio::sync::mpsc::UnboundedSender<&'static str>,
);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.1.send(self.0);
    }
}

/// A server whose `/never` answers never come and whose `/stalled` stream
/// sends one chunk and then nothing; each reports when it is dropped.
async fn start_stalling() -> (String, tokio::sync::mpsc::UnboundedReceiver<&'static str>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (never_tx, stalled_tx) = (tx.clone(), tx);
    let app = Router::new()
        .route(
            "/never",
            get(move || {
                let guard = Dropped("handler", never_tx.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                    "unreachable"
                }
            }),
        )
        .route(
            "/stalled",
            get(move || {
                let guard = Dropped("stream", stalled_tx.clone());
                async move {
                    let first =
                        futures::stream::once(async { Ok::<_, std::convert::Infallible>("first") });
                    let rest = futures::stream::unfold(guard, |guard| async move {
                        std::future::pending::<()>().await;
                        Some((Ok("never"), guard))
                    });
                    axum::body::Body::from_stream(futures::StreamExt::chain(first, rest))
                }
            }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(heddle_server::listen::serve(
        listener,
        app,
        std::future::pending(),
    ));
    (addr, rx)
}

/// HTTP/1.1: a client that leaves while its request runs, or while its
/// stream waits for the next event, takes the request with it (so an SSE
/// subscriber that went away does not stay subscribed).
#[tokio::test]
async fn http1_clients_that_leave_take_their_request_and_stream_with_them() {
    let (addr, mut dropped) = start_stalling().await;

    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(tcp);
    let what = tokio::time::timeout(Duration::from_secs(5), dropped.recv())
        .await
        .expect("the handler's future is dropped once the client is gone");
    assert_eq!(what, Some("handler"));

    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"GET /stalled HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("first") {
        let mut buf = [0u8; 512];
        let n = tcp.read(&mut buf).await.expect("read");
        assert!(n > 0, "closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(tcp);
    let what = tokio::time::timeout(Duration::from_secs(5), dropped.recv())
        .await
        .expect("the stalled stream is dropped once the client is gone");
    assert_eq!(what, Some("stream"));
}

#[path = "listen/limits.rs"]
mod limits;
