//! The floor Heddle is measured against: a bare hyper server that parses the
//! same JSON-RPC request into a `serde_json::Value` and answers a completed
//! echo task of the same shape and size as Heddle's, with no task engine, no
//! store and no validation. `heddle-bench-floor [ADDR]` (default 127.0.0.1:9090).
//!
//! `POST /stream` answers a SendStreamingMessage the way Heddle's
//! `writer-stream` agent does, as SSE: the task (SUBMITTED), WORKING, the
//! artifact in three chunks, COMPLETED, written in one go. Any other path
//! answers unary: a `GetTask` request gets the stored-task shape (with a
//! fixed text), anything else the echo task.
//!
//! With a second address (`heddle-bench-floor ADDR GRPC_ADDR`) it also serves
//! the gRPC floor there: bare hyper HTTP/2 + prost, answering
//! `/lf.a2a.v1.A2AService/SendMessage` with the same echo task as protobuf
//! (one DATA frame, `grpc-status: 0` in the trailers); see `grpc.rs`.

mod grpc;

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
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

async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let streaming = req.uri().path() == "/stream";
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(Response::builder()
                .status(400)
                .body(Full::new(Bytes::new()))
                .unwrap_or_default());
        }
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if streaming {
        return Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(Full::new(Bytes::from(stream_events(&req))))
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
        .body(Full::new(Bytes::from(bytes)))
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
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9090".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("floor listening on http://{addr}");
    if let Some(grpc_addr) = std::env::args().nth(2) {
        let grpc = tokio::net::TcpListener::bind(&grpc_addr).await?;
        println!("gRPC floor listening on {grpc_addr}");
        tokio::spawn(grpc::serve(grpc));
    }
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(echo))
                .await;
        });
    }
}
