//! A registration's `answer_metadata`: the card declares the extension and
//! every answer carries the object under its URI, in both versions.

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use heddle_hub::{
    Hub,
    agents::{DemoOptions, demo_builtins},
    answer_metadata::{AnswerMetadata, EXTENSION_URI},
    registry::AgentEntry,
};
use heddle_store::MemoryStore;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn app() -> Router {
    let mut entry = AgentEntry::builtin("mimi", "echo");
    entry.answer_metadata = Some(AnswerMetadata {
        model: Some("gemini-2.5-flash".into()),
        task_type: Some("chat".into()),
        file_types: vec!["text/plain".into(), "application/pdf".into()],
    });
    let builder = Hub::builder("http://test.local", Arc::new(MemoryStore::default()));
    demo_builtins(builder, DemoOptions::default())
        .entry(entry)
        .build()
        .await
        .router()
}

async fn call(app: &Router, req: Request<Body>) -> Value {
    let resp = app.clone().oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("JSON")
}

fn expected() -> Value {
    json!({
        "model": "gemini-2.5-flash",
        "taskType": "chat",
        "supportedFileTypes": ["text/plain", "application/pdf"],
    })
}

#[tokio::test]
async fn the_card_declares_the_answer_metadata_extension() {
    let app = app().await;
    let card = call(
        &app,
        Request::get("/api/v1/agents/mimi/.well-known/agent-card.json")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["uri"] == EXTENSION_URI))
        .unwrap_or_else(|| panic!("no answer-metadata extension in {card}"));
    assert_eq!(ext["params"], expected());
}

#[tokio::test]
async fn every_answer_carries_the_object_in_both_versions() {
    let app = app().await;
    let v1 = call(
        &app,
        Request::post("/api/v1/agents/mimi/a2a")
            .header(header::CONTENT_TYPE, "application/json")
            .header("A2A-Version", "1.0")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}).to_string(),
            ))
            .expect("request"),
    )
    .await;
    let artifact = &v1["result"]["task"]["artifacts"][0];
    assert_eq!(artifact["metadata"][EXTENSION_URI], expected(), "{v1}");

    let v03 = call(
        &app,
        Request::post("/api/v1/agents/mimi/a2a")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {"kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}).to_string(),
            ))
            .expect("request"),
    )
    .await;
    let artifact = &v03["result"]["artifacts"][0];
    assert_eq!(artifact["metadata"][EXTENSION_URI], expected(), "{v03}");
}
