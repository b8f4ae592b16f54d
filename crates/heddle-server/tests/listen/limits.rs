//! Every [`ConnLimits`] bound, black-box over a real socket.

use std::time::{Duration, Instant};

use axum::{Router, body::Bytes, routing::get, routing::post};
use heddle_server::listen::ConnLimits;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpSocket, TcpStream},
};

fn app() -> Router {
    Router::new()
        .route("/ping", get(|| async { "pong" }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/hold",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                "held"
            }),
        )
}

/// Short bounds, so that each can be seen to act in a test.
fn short() -> ConnLimits {
    ConnLimits {
        first_byte_timeout: Duration::from_millis(600),
        header_timeout: Duration::from_millis(1500),
        idle_timeout: Duration::from_millis(800),
        body_timeout: Duration::from_millis(800),
        ..ConnLimits::default()
    }
}

async fn start(limits: ConnLimits) -> String {
    start_app(app(), limits).await
}

async fn start_app(app: Router, limits: ConnLimits) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(heddle_server::listen::serve_with(
        listener,
        app,
        limits,
        std::future::pending(),
    ));
    addr
}

/// Connects from the loopback address `from` (127.0.0.x), so that tests of
/// per-address caps have addresses to themselves.
async fn connect_from(from: [u8; 4], addr: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind((std::net::Ipv4Addr::from(from), 0).into())?;
    socket.connect(addr.parse().expect("addr")).await
}

/// Reads until the server closes; how long that took, and what came.
async fn until_closed(tcp: &mut TcpStream, within: Duration) -> (Duration, String) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept the connection past {within:?}"
    );
    (start.elapsed(), String::from_utf8_lossy(&seen).into_owned())
}

async fn ping(tcp: &mut TcpStream) -> String {
    tcp.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 1024];
    let n = tcp.read(&mut buf).await.expect("read");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_connection_that_never_speaks_is_closed_at_the_first_byte_timeout() {
    let addr = start(short()).await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    let (took, _) = until_closed(&mut tcp, Duration::from_secs(5)).await;
    assert!(took >= Duration::from_millis(500), "{took:?}");
}

#[tokio::test]
async fn a_slowloris_head_is_cut_at_the_header_timeout() {
    let addr = start(short()).await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let start = Instant::now();
    // A byte every 200 ms: never idle, never done.
    let dribble = async {
        for b in b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if tcp.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), dribble).await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(3500),
        "the head was cut after {took:?}"
    );
    let (_, answer) = until_closed(&mut tcp, Duration::from_secs(2)).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let addr = start(short()).await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    assert!(ping(&mut tcp).await.ends_with("pong"));
    let (took, _) = until_closed(&mut tcp, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_millis(1400),
        "idle for {took:?}"
    );
}

/// Over HTTP/2 only requests keep a connection: a client that sends PING
/// frames and no request is closed at the idle timeout all the same.
#[tokio::test]
async fn http2_pings_without_requests_do_not_keep_a_connection_open() {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // Frame head: 24-bit length, type, flags, stream 0.
    let frame = |kind: u8, payload: &[u8]| {
        let len = u32::try_from(payload.len()).expect("small").to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, 0, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    };
    let addr = start(short()).await;
    let tcp = TcpStream::connect(&addr).await.expect("connect");
    let (mut rd, mut wr) = tcp.into_split();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(0x4, &[])); // SETTINGS
    wr.write_all(&hello).await.expect("preface");
    // A PING every 200 ms, four times within each idle period.
    let pinger = tokio::spawn(async move {
        for n in 0u64.. {
            if wr.write_all(&frame(0x6, &n.to_be_bytes())).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let start = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 1024];
        while matches!(rd.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    pinger.abort();
    let took = start.elapsed();
    assert!(closed.is_ok(), "PINGs kept the connection open past 5 s");
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_millis(2500),
        "closed after {took:?}"
    );
}

#[tokio::test]
async fn a_slow_answer_is_not_idle() {
    let addr = start(short()).await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    // Three seconds of silence in both directions, past the idle timeout.
    let (_, answer) = until_closed(&mut tcp, Duration::from_secs(6)).await;
    assert!(answer.ends_with("held"), "{answer}");
}

#[tokio::test]
async fn a_body_still_arriving_at_the_body_deadline_is_refused() {
    let addr = start(short()).await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        .await
        .expect("write");
    let start = Instant::now();
    // Ten bytes every 100 ms would take a second: past the 800 ms deadline,
    // though never silent for long.
    let mut answer = Vec::new();
    for _ in 0..10 {
        if tcp.write_all(b"0123456789").await.is_err() {
            break;
        }
        let mut buf = [0u8; 512];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(100), tcp.read(&mut buf)).await
        {
            answer.extend_from_slice(&buf[..n]);
            if n == 0 || !answer.is_empty() {
                break;
            }
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(start.elapsed() < Duration::from_millis(1000));
}

#[tokio::test]
async fn at_the_connection_cap_a_new_client_waits_while_the_served_one_is_answered() {
    let addr = start(ConnLimits {
        max_connections: 2,
        ..short()
    })
    .await;
    let mut served = TcpStream::connect(&addr).await.expect("connect");
    assert!(ping(&mut served).await.ends_with("pong"));
    let mut second = TcpStream::connect(&addr).await.expect("connect");
    assert!(ping(&mut second).await.ends_with("pong"));
    // The third is in the backlog: connected, never read.
    let mut third = TcpStream::connect(&addr).await.expect("connect");
    third
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 256];
    let waiting = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
    assert!(waiting.is_err(), "a connection past the cap was served");
    // The ones already in are served as before.
    assert!(ping(&mut served).await.ends_with("pong"));
    // One leaves: the third gets its answer.
    drop(second);
    let n = tokio::time::timeout(Duration::from_secs(2), third.read(&mut buf))
        .await
        .expect("the waiting client is served once a slot frees")
        .expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("pong"));
}

#[tokio::test]
async fn an_address_past_its_share_is_refused_and_another_address_is_served() {
    let addr = start(ConnLimits {
        max_connections_per_ip: 3,
        ..short()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut tcp = connect_from([127, 0, 0, 11], &addr).await.expect("connect");
        assert!(ping(&mut tcp).await.ends_with("pong"));
        held.push(tcp);
    }
    let mut fourth = connect_from([127, 0, 0, 11], &addr).await.expect("connect");
    let (_, answer) = until_closed(&mut fourth, Duration::from_secs(2)).await;
    assert!(answer.is_empty(), "{answer}");
    let mut other = connect_from([127, 0, 0, 12], &addr).await.expect("connect");
    assert!(ping(&mut other).await.ends_with("pong"));
}

/// A flood of 20,000 silent connections from one address, past its share
/// and the connection cap, while a client from another address asks for
/// an answer: it gets one within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_silent_connections_leave_room_for_a_new_client() {
    let addr = start(ConnLimits {
        max_connections: 2_000,
        max_connections_per_ip: 1_000,
        ..ConnLimits::default()
    })
    .await;
    let flood_addr = addr.clone();
    let flood = tokio::spawn(async move {
        let mut open: Vec<TcpStream> = Vec::new();
        let mut made = 0usize;
        while made < 20_000 {
            match connect_from([127, 0, 0, 21], &flood_addr).await {
                Ok(tcp) => {
                    made += 1;
                    open.push(tcp);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
            // Keep this process under its file limit: let go of the ones
            // the server already closed.
            if open.len() >= 4_000 {
                open.retain(|tcp| {
                    let mut b = [0u8; 1];
                    matches!(tcp.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                });
            }
        }
        (made, open)
    });
    // Into the flood.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    let mut tcp = connect_from([127, 0, 0, 22], &addr).await.expect("connect");
    let answer = tokio::time::timeout(Duration::from_secs(1), ping(&mut tcp))
        .await
        .expect("answered within a second");
    assert!(answer.ends_with("pong"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(1));
    let (made, open) = flood.await.expect("flood");
    assert_eq!(made, 20_000);
    assert!(open.len() <= 4_000);
    // And once the flood is done, still.
    let mut tcp = connect_from([127, 0, 0, 22], &addr).await.expect("connect");
    let answer = tokio::time::timeout(Duration::from_secs(1), ping(&mut tcp))
        .await
        .expect("answered within a second");
    assert!(answer.ends_with("pong"), "{answer}");
}

/// Tells the test when the server dropped an endless stream.
struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A client that stops reading a stream is let go at the write timeout,
/// and the stream with it (its task, in Heddle, goes on without it).
#[tokio::test]
async fn a_client_that_stops_reading_is_dropped_at_the_write_timeout() {
    let (dropped_tx, dropped) = tokio::sync::oneshot::channel();
    let guard = std::sync::Arc::new(std::sync::Mutex::new(Some(OnDrop(Some(dropped_tx)))));
    let app = Router::new().route(
        "/firehose",
        get(move || {
            let held = guard.lock().ok().and_then(|mut g| g.take());
            async move {
                let chunk = Bytes::from(vec![b'x'; 64 << 10]);
                let body = futures::stream::unfold(held, move |held| {
                    let chunk = chunk.clone();
                    async move { Some((Ok::<_, std::convert::Infallible>(chunk), held)) }
                });
                axum::body::Body::from_stream(body)
            }
        }),
    );
    let addr = start_app(
        app,
        ConnLimits {
            write_timeout: Duration::from_millis(700),
            ..short()
        },
    )
    .await;
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    tcp.write_all(b"GET /firehose HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    // Never read. The buffers fill, the writes wait, the timeout fires.
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("the stream is dropped once the client takes nothing")
        .expect("signal");
}

/// A request head with `n` header fields besides Host.
fn head_with_fields(n: usize) -> String {
    let mut head = String::from("GET /ping HTTP/1.1\r\nHost: x\r\n");
    for i in 0..n {
        head.push_str(&format!("X-Field-{i}: v\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    head
}

#[tokio::test]
async fn header_fields_past_max_headers_are_refused_with_431() {
    // hyper's own default (100) and a smaller cap of ours both hold.
    for (cap, fields_ok) in [(100, 97), (8, 5)] {
        let addr = start(ConnLimits {
            max_headers: cap,
            ..short()
        })
        .await;
        for (fields, want) in [(fields_ok, "200 OK"), (cap + 1, "431")] {
            let mut tcp = TcpStream::connect(&addr).await.expect("connect");
            tcp.write_all(head_with_fields(fields).as_bytes())
                .await
                .expect("write");
            let (_, seen) = until_closed(&mut tcp, Duration::from_secs(3)).await;
            assert!(
                seen.starts_with(&format!("HTTP/1.1 {want}")),
                "cap {cap}, {fields} fields: {seen:?}"
            );
        }
    }
}
