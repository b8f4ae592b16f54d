//! Closed-loop load: C keep-alive connections, each sending the next request
//! as soon as the last answer arrives, for D seconds after a one-second
//! warm-up. Prints one JSON line: requests/s, p50/p99 latency (µs), errors.
//!
//! `heddle-bench-loadgen URL CONNECTIONS SECONDS|Nr [BODY_FILE]`: `100000r`
//! sends exactly that many requests (no warm-up) instead of running for a time.
//!
//! A `grpc://host:port/TENANT` URL drives the v1.0 gRPC `SendMessage` instead:
//! CONNECTIONS concurrent streams multiplexed over `H2_CONNS` (default 1)
//! HTTP/2 connections, as a gRPC channel does, each request a length-prefixed
//! protobuf `SendMessageRequest` for TENANT (the agent id) and each answer
//! checked for `grpc-status: 0`.
//!
//! An `sse://host:port/path` URL drives SendStreamingMessage over HTTP/1.1
//! (default body: a v1.0 JSON-RPC SendStreamingMessage; a REST body file
//! works too): each connection reads one stream to its end, counting SSE
//! events (blank-line terminated), then opens the next. Prints events/s,
//! streams/s and p50/p99 of whole-stream latency.
//!
//! A `hold://host:port/path` URL opens CONNECTIONS streams, each on its own
//! connection, waits for each stream's first event, prints one JSON line
//! (`{"open": N, ...}`) once every stream is open (or has failed), then keeps
//! them open and idle for SECONDS and exits: the caller reads the server's
//! memory in between. Streams are opened `HOLD_PARALLEL` (default 256) at a time.

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use heddle_proto::v1;
use http_body_util::{BodyExt, Full};
use hyper::{
    Request,
    client::conn::{http1, http2},
};
use hyper_util::rt::{TokioExecutor, TokioIo};

const DEFAULT_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-0001","role":"ROLE_USER","parts":[{"text":"Summarize the quarterly report in three short paragraphs."}]}}}"#;
const DEFAULT_STREAM_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"bench-0001","role":"ROLE_USER","parts":[{"text":"Summarize the quarterly report in three short paragraphs."}]}}}"#;

/// Longest a request (or a whole stream) may take: past it, it counts as an error and its
/// connection stops, so a server that never ends a stream cannot hang the run.
const STALL: Duration = Duration::from_secs(30);
/// Requests left in count mode, shared by every connection.
static BUDGET: AtomicI64 = AtomicI64::new(i64::MAX);
/// SSE events received on streams that started after the warm-up.
static EVENTS: AtomicU64 = AtomicU64::new(0);

/// What each connection does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Unary requests over HTTP/1.1.
    Unary,
    /// gRPC unary calls over HTTP/2.
    Grpc,
    /// SSE streams read to their end, one after another.
    Sse,
    /// SSE streams opened once and held idle.
    Hold,
}

struct Target {
    host: String,
    path: String,
    mode: Mode,
    /// `Some(tenant)` for a `grpc://` URL.
    grpc_tenant: Option<String>,
}

fn parse_url(url: &str) -> Option<Target> {
    let (scheme, rest) = url.split_once("://")?;
    let mode = match scheme {
        "http" => Mode::Unary,
        "grpc" => Mode::Grpc,
        "sse" => Mode::Sse,
        "hold" => Mode::Hold,
        _ => return None,
    };
    let grpc = mode == Mode::Grpc;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    Some(Target {
        host: host.to_owned(),
        mode,
        grpc_tenant: grpc.then(|| path.trim_start_matches('/').to_owned()),
        path: if grpc {
            "/lf.a2a.v1.A2AService/SendMessage".to_owned()
        } else {
            path
        },
    })
}

/// The gRPC request body: a five-byte frame header and the same message the
/// JSON-RPC body carries, as protobuf.
fn grpc_body(tenant: &str) -> Bytes {
    let message = v1::Message::new(
        "bench-0001",
        v1::Role::User,
        vec![v1::Part::text(
            "Summarize the quarterly report in three short paragraphs.",
        )],
    );
    let request = v1::SendMessageRequest {
        tenant: tenant.to_owned(),
        message: Some(message),
        ..Default::default()
    };
    Bytes::from(heddle_core::grpc_frame::encode(&request).unwrap_or_default())
}

/// One gRPC stream: calls in a loop on a shared HTTP/2 connection.
async fn grpc_stream(
    target: &Target,
    mut sender: http2::SendRequest<Full<Bytes>>,
    body: Bytes,
    until: Instant,
    warm: Instant,
) -> (Vec<u32>, u64) {
    let mut lat = Vec::with_capacity(1 << 16);
    let mut errors = 0;
    let uri = format!("http://{}{}", target.host, target.path);
    while Instant::now() < until && BUDGET.fetch_sub(1, Ordering::Relaxed) > 0 {
        let req = Request::post(&uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("a2a-version", "1.0")
            .body(Full::new(body.clone()));
        let Ok(req) = req else {
            return (lat, errors + 1);
        };
        if sender.ready().await.is_err() {
            return (lat, errors + 1);
        }
        let start = Instant::now();
        let answer = tokio::time::timeout(STALL, async {
            let resp = sender.send_request(req).await.ok()?;
            // A body that breaks off is an error of this call only.
            let ok = resp.into_body().collect().await.is_ok_and(|collected| {
                collected
                    .trailers()
                    .and_then(|t| t.get("grpc-status"))
                    .is_some_and(|s| s == "0")
            });
            Some(ok)
        })
        .await;
        match answer {
            Ok(Some(true)) => {}
            Ok(Some(false)) => errors += 1,
            // Broken or stalled: this stream is done.
            Ok(None) | Err(_) => return (lat, errors + 1),
        }
        if start >= warm {
            lat.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }
    (lat, errors)
}

async fn h2_connect(host: &str) -> Option<http2::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(sender)
}

async fn connection(
    target: &Target,
    body: Bytes,
    until: Instant,
    warm: Instant,
) -> (Vec<u32>, u64) {
    let mut lat = Vec::with_capacity(1 << 16);
    let mut errors = 0;
    let Ok(stream) = tokio::net::TcpStream::connect(&target.host).await else {
        return (lat, 1);
    };
    let _ = stream.set_nodelay(true);
    let Ok((mut sender, conn)) = http1::handshake(TokioIo::new(stream)).await else {
        return (lat, 1);
    };
    tokio::spawn(conn);
    while Instant::now() < until && BUDGET.fetch_sub(1, Ordering::Relaxed) > 0 {
        let req = Request::post(&target.path)
            .header("host", &target.host)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(Full::new(body.clone()));
        let Ok(req) = req else {
            return (lat, errors + 1);
        };
        let start = Instant::now();
        let answer = tokio::time::timeout(STALL, async {
            let resp = sender.send_request(req).await.ok()?;
            let ok = resp.status().is_success();
            let body = resp.into_body().collect().await.map(|b| b.to_bytes());
            Some(matches!(body, Ok(body) if ok && !is_error_answer(&body)))
        })
        .await;
        match answer {
            Ok(Some(true)) => {}
            Ok(Some(false)) => errors += 1,
            // Broken or stalled: this connection is done.
            Ok(None) | Err(_) => return (lat, errors + 1),
        }
        if start >= warm {
            lat.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }
    (lat, errors)
}

/// Counts the SSE events a chunk of a stream ends (an event ends at a blank
/// line; `\r` is ignored). `at_line_start` carries across chunks whether the
/// last byte seen ended a line; it starts `false`, so a stream that opens
/// with a blank line does not count an event.
fn count_events(chunk: &[u8], at_line_start: &mut bool) -> u64 {
    let mut events = 0;
    for &b in chunk {
        match b {
            b'\r' => {}
            b'\n' => {
                if *at_line_start {
                    events += 1;
                }
                *at_line_start = true;
            }
            _ => *at_line_start = false,
        }
    }
    events
}

/// Whether an answer (or a chunk of a stream) carries a JSON-RPC error: those
/// come with HTTP 200, so the status alone does not tell. None of the
/// benchmark's texts contains the marker.
fn is_error_answer(body: &[u8]) -> bool {
    const MARKER: &[u8] = br#""error":"#;
    body.windows(MARKER.len()).any(|w| w == MARKER)
}

fn stream_request(target: &Target, body: Bytes) -> Option<Request<Full<Bytes>>> {
    Request::post(&target.path)
        .header("host", &target.host)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("a2a-version", "1.0")
        .body(Full::new(body))
        .ok()
}

async fn h1_connect(host: &str) -> Option<http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    Some(sender)
}

/// One connection reading SSE streams to their end, one after another; a
/// stream's latency is from the request to its last byte.
async fn sse_connection(
    target: &Target,
    body: Bytes,
    until: Instant,
    warm: Instant,
) -> (Vec<u32>, u64) {
    let mut lat = Vec::with_capacity(1 << 14);
    let mut errors = 0;
    let Some(mut sender) = h1_connect(&target.host).await else {
        return (lat, 1);
    };
    while Instant::now() < until && BUDGET.fetch_sub(1, Ordering::Relaxed) > 0 {
        let Some(req) = stream_request(target, body.clone()) else {
            return (lat, errors + 1);
        };
        if sender.ready().await.is_err() {
            return (lat, errors + 1);
        }
        let start = Instant::now();
        let read = tokio::time::timeout(STALL, async {
            let resp = sender.send_request(req).await.ok()?;
            let ok = resp.status().is_success();
            let mut body = resp.into_body();
            let (mut events, mut at_line_start, mut failed) = (0, false, false);
            while let Some(frame) = body.frame().await {
                if let Some(data) = frame.ok()?.data_ref() {
                    events += count_events(data, &mut at_line_start);
                    failed |= is_error_answer(data);
                }
            }
            Some((ok, events, failed))
        })
        .await;
        // Broken, or a stream that never ends: this connection is done.
        let Ok(Some((ok, events, failed))) = read else {
            return (lat, errors + 1);
        };
        if !ok || failed || events == 0 {
            errors += 1;
        }
        if start >= warm {
            EVENTS.fetch_add(events, Ordering::Relaxed);
            lat.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }
    (lat, errors)
}

/// One held stream: opens it, reports once its first event arrives (or it
/// failed), then reads whatever comes until `stop`. Returns whether the
/// stream was still open at `stop`.
async fn held_stream(
    target: Arc<Target>,
    body: Bytes,
    gate: Arc<tokio::sync::Semaphore>,
    opened: tokio::sync::mpsc::UnboundedSender<bool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> bool {
    let open = async {
        let _permit = gate.acquire().await.ok()?;
        let mut sender = h1_connect(&target.host).await?;
        let resp = sender
            .send_request(stream_request(&target, body)?)
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let mut body = resp.into_body();
        let mut at_line_start = false;
        loop {
            let frame = body.frame().await?.ok()?;
            if frame
                .data_ref()
                .is_some_and(|d| count_events(d, &mut at_line_start) > 0)
            {
                return Some((sender, body));
            }
        }
    };
    let Some((_sender, mut body)) = open.await else {
        let _ = opened.send(false);
        return false;
    };
    let _ = opened.send(true);
    loop {
        tokio::select! {
            frame = body.frame() => match frame {
                Some(Ok(_)) => {}
                _ => return false,
            },
            _ = stop.changed() => return true,
        }
    }
}

/// `hold://` mode: see the crate docs.
async fn hold(target: Target, body: Bytes, streams: usize, secs: f64) {
    let parallel: usize = std::env::var("HOLD_PARALLEL")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let gate = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let target = Arc::new(target);
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(held_stream(
                target.clone(),
                body.clone(),
                gate.clone(),
                opened_tx.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();
    drop(opened_tx);
    // Every stream reports once (open or failed) and keeps its sender while held.
    let (mut open, mut failed) = (0u64, 0u64);
    for _ in 0..streams {
        match opened_rx.recv().await {
            Some(true) => open += 1,
            Some(false) => failed += 1,
            None => break,
        }
    }
    let line = serde_json::json!({
        "open": open,
        "failed": failed,
        "open_secs": (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
    });
    println!("{line}");
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    let _ = stop_tx.send(true);
    let mut held = 0u64;
    for t in tasks {
        if t.await.unwrap_or(false) {
            held += 1;
        }
    }
    println!(
        "{}",
        serde_json::json!({ "held": held, "ended_early": open.saturating_sub(held) })
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: heddle-bench-loadgen URL CONNECTIONS SECONDS|Nr [BODY_FILE]");
        std::process::exit(2);
    }
    let Some(target) = parse_url(&args[1]) else {
        eprintln!("URL must be http://, sse://, hold:// or grpc://host:port/path");
        std::process::exit(2);
    };
    let conns: usize = args[2].parse().unwrap_or(16);
    let count = args[3]
        .strip_suffix('r')
        .and_then(|n| n.parse::<i64>().ok());
    if let Some(n) = count {
        BUDGET.store(n, Ordering::Relaxed);
    }
    let secs: f64 = if count.is_some() {
        3600.0
    } else {
        args[3].parse().unwrap_or(10.0)
    };
    let default_body = match target.mode {
        Mode::Sse | Mode::Hold => DEFAULT_STREAM_BODY,
        Mode::Unary | Mode::Grpc => DEFAULT_BODY,
    };
    let body = match &target.grpc_tenant {
        Some(tenant) => grpc_body(tenant),
        None => match args.get(4) {
            Some(file) => match std::fs::read(file) {
                Ok(b) => Bytes::from(b),
                Err(e) => {
                    eprintln!("cannot read the body file {file}: {e}");
                    std::process::exit(2);
                }
            },
            None => Bytes::from_static(default_body.as_bytes()),
        },
    };
    if target.mode == Mode::Hold {
        hold(target, body, conns, secs).await;
        return;
    }
    let started = Instant::now();
    let warm = if count.is_some() {
        started
    } else {
        started + Duration::from_secs(1)
    };
    let until = warm + Duration::from_secs_f64(secs);
    let target = Arc::new(target);
    let mut channels = Vec::new();
    if target.grpc_tenant.is_some() {
        let h2_conns: usize = std::env::var("H2_CONNS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        for _ in 0..h2_conns.max(1) {
            let Some(sender) = h2_connect(&target.host).await else {
                eprintln!("cannot open an HTTP/2 connection to {}", target.host);
                std::process::exit(1);
            };
            channels.push(sender);
        }
    }
    let tasks: Vec<_> = (0..conns)
        .map(|i| {
            let (t, b) = (target.clone(), body.clone());
            let channel = channels.get(i % channels.len().max(1)).cloned();
            tokio::spawn(async move {
                match (channel, t.mode) {
                    (Some(sender), _) => grpc_stream(&t, sender, b, until, warm).await,
                    (None, Mode::Sse) => sse_connection(&t, b, until, warm).await,
                    (None, _) => connection(&t, b, until, warm).await,
                }
            })
        })
        .collect();
    let (mut lat, mut errors) = (Vec::new(), 0);
    for t in tasks {
        if let Ok((l, e)) = t.await {
            lat.extend(l);
            errors += e;
        }
    }
    let secs = if count.is_some() {
        started.elapsed().as_secs_f64()
    } else {
        secs
    };
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let out = serde_json::json!({
        "connections": conns,
        "seconds": (secs * 100.0).round() / 100.0,
        "requests": lat.len(),
        "rps": (lat.len() as f64 / secs).round(),
        "p50_us": pct(0.50),
        "p99_us": pct(0.99),
        "errors": errors,
    });
    let out = match target.mode {
        Mode::Sse => {
            let events = EVENTS.load(Ordering::Relaxed);
            let mut out = out;
            out["events"] = events.into();
            out["events_per_s"] = (events as f64 / secs).round().into();
            out
        }
        _ => out,
    };
    println!("{out}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_events_counts_blank_line_terminated_events_across_chunks() {
        let mut at = false;
        assert_eq!(count_events(b"data: {}\n\ndata: {", &mut at), 1);
        assert_eq!(count_events(b"}\n", &mut at), 0);
        assert_eq!(count_events(b"\n", &mut at), 1);
        assert_eq!(count_events(b"data: x\r\n\r\n", &mut at), 1);
    }

    #[test]
    fn count_events_ignores_a_leading_blank_line_and_an_unterminated_event() {
        let mut at = false;
        assert_eq!(count_events(b"\ndata: x\n", &mut at), 0);
    }

    #[test]
    fn a_json_rpc_error_answer_is_an_error() {
        assert!(is_error_answer(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#
        ));
        assert!(!is_error_answer(
            br#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t"}}}"#
        ));
    }

    #[test]
    fn parse_url_tells_the_modes_apart() {
        let t = parse_url("sse://127.0.0.1:1/a/b").expect("sse url");
        assert_eq!((t.mode, t.path.as_str()), (Mode::Sse, "/a/b"));
        let t = parse_url("hold://127.0.0.1:1").expect("hold url");
        assert_eq!((t.mode, t.path.as_str()), (Mode::Hold, "/"));
        let t = parse_url("grpc://127.0.0.1:1/echo").expect("grpc url");
        assert_eq!(t.grpc_tenant.as_deref(), Some("echo"));
        assert!(parse_url("ftp://x/y").is_none());
    }
}
