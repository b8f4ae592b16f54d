//! The floor Heddle is measured against: a bare hyper server that parses the
//! same JSON-RPC request into a `serde_json::Value` and answers a completed
//! echo task of the same shape and size as Heddle's, with no task engine, no
//! store and no validation. `heddle-bench-floor [ADDR]` (default 127.0.0.1:9090).
//!
//! `POST /stream` answers a SendStreamingMessage the way Heddle's
//! `writer-stream` agent does, as SSE: the task (SUBMITTED), WORKING, the
//! artifact in three chunks, COMPLETED, written in one go. `POST /hold`
//! answers the first two of those events and then keeps the stream open and
//! silent until the client leaves: the floor for the memory an idle SSE
//! stream costs (Heddle's `writer-stream` paused after WORKING). Any other path
//! answers unary: a `GetTask` request gets the stored-task shape (with a
//! fixed text), anything else the echo task.
//!
//! With `--lean` (`heddle-bench-floor ADDR --lean`) every unary request is
//! answered by the lean floor (`lean.rs`): typed structs in and out instead
//! of `serde_json::Value`, the reference for Heddle's CPU per request.
//!
//! With a second address (`heddle-bench-floor ADDR GRPC_ADDR`) it also serves
//! the gRPC floor there: bare hyper HTTP/2 + prost, answering
//! `/lf.a2a.v1.A2AService/SendMessage` with the same echo task as protobuf
//! (one DATA frame, `grpc-status: 0` in the trailers); see `grpc.rs`.

mod grpc;
mod lean;

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    Request, Response,
    body::{Body, Frame, Incoming, SizeHint},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The three chunks of Heddle's `writer-stream` report.
const CHUNKS: [&str; 3] = [
    "Report, part one: the findings. ",
    "Part two: what they mean. ",
    "Part three: what to do next.",
];

fn now() -> &'static str {
    "2026-11-30T10:59:32.916Z"
}

/// The SSE answer to a SendStreamingMessage: the events Heddle's
/// `writer-stream` sends, each a JSON-RPC response in a `data:` line.
fn stream_events(req: &Value) -> Vec<u8> {
    let msg = &req["params"]["message"];
    let (task, ctx) = (
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
    );
    let mut user = msg.clone();
    user["taskId"] = json!(task);
    user["contextId"] = json!(ctx);
    let status = |state: &str| {
        json!({"statusUpdate": {"taskId": task, "contextId": ctx,
            "status": {"state": state, "timestamp": now()}}})
    };
    let mut events = vec![
        json!({"task": {"id": task, "contextId": ctx,
            "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": now()}, "history": [user]}}),
        status("TASK_STATE_WORKING"),
    ];
    let artifact_id = format!("{task}-report");
    for (i, chunk) in CHUNKS.iter().enumerate() {
        events.push(json!({"artifactUpdate": {"taskId": task, "contextId": ctx,
            "artifact": {"artifactId": artifact_id, "name": "report", "parts": [{"text": chunk}]},
            "append": i > 0, "lastChunk": i == CHUNKS.len() - 1}}));
    }
    events.push(status("TASK_STATE_COMPLETED"));
    let mut out = Vec::with_capacity(2048);
    for result in events {
        out.extend_from_slice(b"data: ");
        let _ = serde_json::to_writer(
            &mut out,
            &json!({"jsonrpc": "2.0", "id": req["id"], "result": result}),
        );
        out.extend_from_slice(b"\n\n");
    }
    out
}

/// An answer's body: whole, or (for `/hold`) a first chunk and then a stream
/// that stays open and silent until the connection goes.
enum FloorBody {
    Whole(Full<Bytes>),
    Held(Option<Bytes>),
}

impl Default for FloorBody {
    fn default() -> Self {
        Self::Whole(Full::default())
    }
}

impl From<Vec<u8>> for FloorBody {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Whole(Full::new(Bytes::from(bytes)))
    }
}

impl Body for FloorBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Whole(full) => Pin::new(full).poll_frame(cx),
            // Never woken again: the connection's end drops the body.
            Self::Held(first) => first
                .take()
                .map_or(Poll::Pending, |b| Poll::Ready(Some(Ok(Frame::data(b))))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Whole(full) => full.is_end_stream(),
            Self::Held(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Whole(full) => full.size_hint(),
            Self::Held(_) => SizeHint::default(),
        }
    }
}

/// The first `n` events of a stream answer (each ends in a blank line).
fn first_events(all: &[u8], n: usize) -> Bytes {
    if n == 0 {
        return Bytes::new();
    }
    let end = all
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\n\n")
        .nth(n - 1)
        .map_or(all.len(), |(i, _)| i + 2);
    Bytes::copy_from_slice(&all[..end])
}

/// The lean floor's unary answer (see `lean.rs`).
async fn lean_echo(req: Request<Incoming>) -> Result<Response<FloorBody>, Infallible> {
    let answer = match req.into_body().collect().await {
        Ok(b) => lean::answer(&b.to_bytes()),
        Err(_) => None,
    };
    Ok(match answer {
        Some(bytes) => Response::builder()
            .header("content-type", "application/json")
            .body(bytes.into())
            .unwrap_or_default(),
        None => Response::builder()
            .status(400)
            .body(FloorBody::default())
            .unwrap_or_default(),
    })
}

async fn echo(req: Request<Incoming>) -> Result<Response<FloorBody>, Infallible> {
    let path = req.uri().path().to_owned();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(Response::builder()
                .status(400)
                .body(FloorBody::default())
                .unwrap_or_default());
        }
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if path == "/stream" || path == "/hold" {
        let events = stream_events(&req);
        let body = if path == "/hold" {
            FloorBody::Held(Some(first_events(&events, 2)))
        } else {
            events.into()
        };
        return Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(body)
            .unwrap_or_default());
    }
    let get_task = req["method"] == "GetTask";
    let stored;
    let msg = if get_task {
        stored = json!({"messageId": "bench-0001", "role": "ROLE_USER",
            "parts": [{"text": "Summarize the quarterly report in three short paragraphs."}]});
        &stored
    } else {
        &req["params"]["message"]
    };
    let text = msg["parts"][0]["text"].clone();
    let (task, ctx) = (
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
    );
    let mut user = msg.clone();
    user["taskId"] = json!(task);
    user["contextId"] = json!(ctx);
    // SendMessage answers `{"task": …}`; GetTask answers the task itself.
    let task = json!({
        "id": task, "contextId": ctx,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": now()},
        "artifacts": [{"artifactId": uuid::Uuid::now_v7().to_string(), "name": "echo", "parts": [{"text": text}]}],
        "history": [user]});
    let result = if get_task {
        task
    } else {
        json!({ "task": task })
    };
    let resp = json!({"jsonrpc": "2.0", "id": req["id"], "result": result});
    let bytes = serde_json::to_vec(&resp).unwrap_or_default();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(bytes.into())
        .unwrap_or_default())
}

/// The runtime `heddle serve` picks (`heddle-cli`'s `main`): current-thread
/// when the process may use one core, as every server in the suite is
/// pinned to, so that the floor pays no work-stealing overhead Heddle does not.
fn main() -> std::io::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut builder = if cores > 1 {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build()?.block_on(serve())
}

async fn serve() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lean = args.iter().any(|a| a == "--lean");
    let mut addrs = args.into_iter().filter(|a| a != "--lean");
    let addr = addrs.next().unwrap_or_else(|| "127.0.0.1:9090".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "{} listening on http://{addr}",
        if lean { "lean floor" } else { "floor" }
    );
    if let Some(grpc_addr) = addrs.next() {
        let grpc = tokio::net::TcpListener::bind(&grpc_addr).await?;
        println!("gRPC floor listening on {grpc_addr}");
        tokio::spawn(grpc::serve(grpc));
    }
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let io = TokioIo::new(stream);
            let _ = if lean {
                http1::Builder::new()
                    .serve_connection(io, service_fn(lean_echo))
                    .await
            } else {
                http1::Builder::new()
                    .serve_connection(io, service_fn(echo))
                    .await
            };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_stream_starts_with_the_task_and_working() {
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
        let all = stream_events(&req);
        let first = first_events(&all, 2);
        let text = std::str::from_utf8(&first).expect("utf-8");
        assert_eq!(text.matches("data: ").count(), 2);
        assert!(text.ends_with("\n\n"));
        assert!(text.contains("TASK_STATE_SUBMITTED") && text.contains("TASK_STATE_WORKING"));
        assert!(!text.contains("artifactUpdate"));
        // Asking for more events than there are gives them all; none, none.
        assert_eq!(&first_events(&all, 99)[..], &all[..]);
        assert!(first_events(&all, 0).is_empty());
    }
}
