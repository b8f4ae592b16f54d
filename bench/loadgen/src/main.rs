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

use std::{
    sync::atomic::{AtomicI64, Ordering},
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
use prost::Message as _;

const DEFAULT_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-0001","role":"ROLE_USER","parts":[{"text":"Summarize the quarterly report in three short paragraphs."}]}}}"#;

/// Requests left in count mode, shared by every connection.
static BUDGET: AtomicI64 = AtomicI64::new(i64::MAX);

struct Target {
    host: String,
    path: String,
    /// `Some(tenant)` for a `grpc://` URL.
    grpc_tenant: Option<String>,
}

fn parse_url(url: &str) -> Option<Target> {
    let (rest, grpc) = match url.strip_prefix("grpc://") {
        Some(rest) => (rest, true),
        None => (url.strip_prefix("http://")?, false),
    };
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    Some(Target {
        host: host.to_owned(),
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
    let payload = request.encode_to_vec();
    let mut framed = Vec::with_capacity(payload.len() + 5);
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(&payload);
    Bytes::from(framed)
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
        match sender.send_request(req).await {
            Ok(resp) => match resp.into_body().collect().await {
                Ok(collected) => {
                    let ok = collected
                        .trailers()
                        .and_then(|t| t.get("grpc-status"))
                        .is_some_and(|s| s == "0");
                    if !ok {
                        errors += 1;
                    }
                }
                Err(_) => errors += 1,
            },
            Err(_) => return (lat, errors + 1),
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
        match sender.send_request(req).await {
            Ok(resp) => {
                let ok = resp.status().is_success();
                if resp.into_body().collect().await.is_err() || !ok {
                    errors += 1;
                }
            }
            Err(_) => return (lat, errors + 1),
        }
        if start >= warm {
            lat.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }
    (lat, errors)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: heddle-bench-loadgen URL CONNECTIONS SECONDS|Nr [BODY_FILE]");
        std::process::exit(2);
    }
    let Some(target) = parse_url(&args[1]) else {
        eprintln!("URL must be http://host:port/path");
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
    let body = match &target.grpc_tenant {
        Some(tenant) => grpc_body(tenant),
        None => args
            .get(4)
            .and_then(|f| std::fs::read(f).ok())
            .map_or(Bytes::from_static(DEFAULT_BODY.as_bytes()), Bytes::from),
    };
    let started = Instant::now();
    let warm = if count.is_some() {
        started
    } else {
        started + Duration::from_secs(1)
    };
    let until = warm + Duration::from_secs_f64(secs);
    let target = std::sync::Arc::new(target);
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
                match channel {
                    Some(sender) => grpc_stream(&t, sender, b, until, warm).await,
                    None => connection(&t, b, until, warm).await,
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
    println!("{out}");
}
