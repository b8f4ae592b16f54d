//! Closed-loop load: C keep-alive connections, each sending the next request
//! as soon as the last answer arrives, for D seconds after a one-second
//! warm-up. Prints one JSON line: requests/s, p50/p99 latency (µs), errors.
//!
//! `heddle-bench-loadgen URL CONNECTIONS SECONDS|Nr [BODY_FILE]`: `100000r`
//! sends exactly that many requests (no warm-up) instead of running for a time.

use std::{
    sync::atomic::{AtomicI64, Ordering},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1};
use hyper_util::rt::TokioIo;

const DEFAULT_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-0001","role":"ROLE_USER","parts":[{"text":"Summarize the quarterly report in three short paragraphs."}]}}}"#;

/// Requests left in count mode, shared by every connection.
static BUDGET: AtomicI64 = AtomicI64::new(i64::MAX);

struct Target {
    host: String,
    path: String,
}

fn parse_url(url: &str) -> Option<Target> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    Some(Target {
        host: host.to_owned(),
        path,
    })
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
    let body = args
        .get(4)
        .and_then(|f| std::fs::read(f).ok())
        .map_or(Bytes::from_static(DEFAULT_BODY.as_bytes()), Bytes::from);
    let started = Instant::now();
    let warm = if count.is_some() {
        started
    } else {
        started + Duration::from_secs(1)
    };
    let until = warm + Duration::from_secs_f64(secs);
    let target = std::sync::Arc::new(target);
    let tasks: Vec<_> = (0..conns)
        .map(|_| {
            let (t, b) = (target.clone(), body.clone());
            tokio::spawn(async move { connection(&t, b, until, warm).await })
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
