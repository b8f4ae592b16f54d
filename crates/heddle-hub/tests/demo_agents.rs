//! `with_demo_agents_using`: the demo agents with a `writer-stream` of the
//! caller's choosing (the benchmarks run it without a pause, and with a long
//! one to hold streams open).

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use heddle_hub::{
    Hub,
    agents::{WRITER_STREAM_CHUNKS, WriterStream, with_demo_agents_using},
};
use heddle_store::MemoryStore;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn app(pause: Duration) -> Router {
    let builder = Hub::builder("http://test.local", Arc::new(MemoryStore::default()));
    with_demo_agents_using(
        builder,
        WriterStream {
            pause,
            ..Default::default()
        },
    )
    .build()
    .await
    .router()
}

async fn v1(app: &Router, method: &str, params: Value) -> Value {
    let req = Request::post("/api/v1/agents/writer-stream/a2a")
        .header(header::CONTENT_TYPE, "application/json")
        .header("A2A-Version", "1.0")
        .body(Body::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
        ))
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let body: Value = serde_json::from_slice(&bytes).expect("JSON");
    body.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{method} failed: {body}"))
}

fn message() -> Value {
    json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]}})
}

#[tokio::test]
async fn writer_stream_without_a_pause_completes_with_its_three_chunks() {
    let app = app(Duration::ZERO).await;
    let result = tokio::time::timeout(Duration::from_secs(10), v1(&app, "SendMessage", message()))
        .await
        .expect("a blocking send completes");
    let task = &result["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let texts: Vec<&str> = task["artifacts"][0]["parts"]
        .as_array()
        .expect("the report's parts")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(texts, WRITER_STREAM_CHUNKS);
}

#[tokio::test]
async fn writer_stream_with_a_long_pause_stays_working_without_artifacts() {
    let app = app(Duration::from_secs(3600)).await;
    let mut params = message();
    params["configuration"] = json!({"returnImmediately": true});
    let id = v1(&app, "SendMessage", params).await["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    // The default pause (150 ms) would have added the first chunk by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let task = v1(&app, "GetTask", json!({"id": id})).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");
    assert!(task.get("artifacts").is_none(), "no chunk yet: {task}");
}
