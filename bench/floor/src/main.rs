//! The floor Heddle is measured against: a bare hyper server that parses the
//! same JSON-RPC request into a `serde_json::Value` and answers a completed
//! echo task of the same shape and size as Heddle's, with no task engine, no
//! store and no validation. `heddle-bench-floor [ADDR]` (default 127.0.0.1:9090).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
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
    let msg = &req["params"]["message"];
    let text = msg["parts"][0]["text"].clone();
    let (task, ctx) = (
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
    );
    let mut user = msg.clone();
    user["taskId"] = json!(task);
    user["contextId"] = json!(ctx);
    let resp = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"task": {
        "id": task, "contextId": ctx,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-30T10:59:32.916Z"},
        "artifacts": [{"artifactId": uuid::Uuid::now_v7().to_string(), "name": "echo", "parts": [{"text": text}]}],
        "history": [user]}}});
    let bytes = serde_json::to_vec(&resp).unwrap_or_default();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .unwrap_or_default())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9090".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("floor listening on http://{addr}");
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
