//! A manifest's input schema checked against what callers send: on its own,
//! and installed on a hub agent, where every binding and version refuses a
//! bad data part with InvalidParams naming its pointer, and makes no task.

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    http::{Request, header},
};
use heddle_core::{A2aError, ErrorCode, jsonrpc::ErrorObject, rpc, v1};
use heddle_hub::{Hub, agents::Echo, manifest::InputCheck};
use heddle_proto::v1::a2a_service_client::A2aServiceClient;
use heddle_store::MemoryStore;
use http_body_util::BodyExt;
use prost::Message as _;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::full;

/// The full manifest's check.
fn check() -> InputCheck {
    InputCheck::new(&full()).expect("the schema compiles")
}

fn message(parts: Vec<v1::Part>) -> v1::Message {
    v1::Message::new("m-1", v1::Role::User, parts)
}

#[test]
fn data_that_matches_passes_and_text_is_not_checked() {
    let ok = message(vec![
        v1::Part::text("total this, please"),
        v1::Part::data(json!({"amount": 12.5, "currency": "EUR", "lines": [{"text": "a"}]})),
    ]);
    assert_eq!(check().check(&ok), Ok(()));
    assert_eq!(check().check(&message(vec![v1::Part::text("hi")])), Ok(()));
}

#[test]
fn each_violation_is_named_by_its_pointer_in_the_message() {
    let bad = message(vec![
        v1::Part::text("total this"),
        v1::Part::data(json!({"amount": -1, "currency": "EUR"})),
        v1::Part::data(json!({"currency": "eur", "lines": [{"text": 3}]})),
    ]);
    let err = check().check(&bad).expect_err("refused");
    assert_eq!(err.code, ErrorCode::InvalidParams);
    let mut fields: Vec<&str> = err.violations.iter().map(|v| v.field.as_str()).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "/parts/1/data/amount",
            "/parts/2/data",
            "/parts/2/data/currency",
            "/parts/2/data/lines/0/text",
        ]
    );
    assert!(
        err.message.contains("/parts/1/data/amount"),
        "{}",
        err.message
    );
}

#[test]
fn a_flood_of_violations_is_capped() {
    let items: Vec<Value> = (0..100).map(|_| json!({"text": 1})).collect();
    let bad = message(vec![v1::Part::data(
        json!({"amount": 1, "currency": "EUR", "lines": items}),
    )]);
    let err = check().check(&bad).expect_err("refused");
    assert_eq!(err.violations.len(), 32);
    assert!(err.message.ends_with("(and 68 more)"), "{}", err.message);
}

#[test]
fn a_schema_that_does_not_compile_is_an_error() {
    assert!(
        InputCheck::from_schema(&json!({"$ref": "https://schemas.example.com/x.json"})).is_err()
    );
}

/// A hub with one agent made from the full manifest, its input check
/// installed; the HTTP router and a gRPC client of it.
async fn hub() -> (Router, A2aServiceClient<tonic::transport::Channel>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let m = full();
    let hub = Hub::builder("http://test.local", Arc::new(MemoryStore::default()))
        .grpc_url(addr.to_string())
        .agent("invoices", m.profile(None), Arc::new(Echo))
        .message_check("invoices", check().into_message_check())
        .build()
        .await;
    let routes = hub.grpc_routes().expect("gRPC is on");
    tokio::spawn(async move { axum::serve(listener, routes.into_axum_router()).await });
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_lazy();
    (hub.router(), A2aServiceClient::new(channel))
}

async fn post(router: &Router, path: &str, v1: bool, body: Value) -> (u16, Value) {
    let mut req = Request::post(format!("/api/v1/agents/invoices{path}"))
        .header(header::CONTENT_TYPE, "application/json");
    if v1 {
        req = req.header("A2A-Version", "1.0");
    }
    let req = req.body(Body::from(body.to_string())).expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).expect("a JSON answer"),
    )
}

fn jsonrpc_error(answer: &Value) -> Option<A2aError> {
    let obj: ErrorObject = serde_json::from_value(answer.get("error")?.clone()).ok()?;
    Some(A2aError::from_jsonrpc(&obj))
}

/// Sends `data` over each binding and version; the A2A error each answers
/// with (`None`: a task was made), by wire.
async fn send_everywhere(data: Value) -> Vec<(&'static str, Option<A2aError>)> {
    let (router, mut grpc) = hub().await;
    let v1_message = json!({
        "messageId": "m-1", "role": "ROLE_USER",
        "parts": [{"text": "total"}, {"data": data}]
    });
    let v03_message = json!({
        "kind": "message", "messageId": "m-1", "role": "user",
        "parts": [{"kind": "text", "text": "total"}, {"kind": "data", "data": data}]
    });
    let mut out = Vec::new();
    for (wire, method, msg, v1) in [
        ("JSON-RPC 1.0", "SendMessage", &v1_message, true),
        (
            "JSON-RPC 1.0 stream",
            "SendStreamingMessage",
            &v1_message,
            true,
        ),
        ("JSON-RPC 0.3", "message/send", &v03_message, false),
        ("JSON-RPC 0.3 stream", "message/stream", &v03_message, false),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": msg}});
        let req = Request::post("/api/v1/agents/invoices/a2a")
            .header(header::CONTENT_TYPE, "application/json");
        let req = if v1 {
            req.header("A2A-Version", "1.0")
        } else {
            req
        };
        let resp = router
            .clone()
            .oneshot(req.body(Body::from(body.to_string())).expect("request"))
            .await
            .expect("response");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        // A refused stream answers with one JSON-RPC error, as JSON or as
        // one SSE event; an accepted one with events.
        let first = text
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(&text);
        let answer: Value = serde_json::from_str(first.trim()).expect("JSON");
        out.push((wire, jsonrpc_error(&answer)));
    }
    let (status, answer) = post(
        &router,
        "/rest/message:send",
        true,
        json!({"message": v1_message}),
    )
    .await;
    out.push((
        "REST 1.0",
        (status != 200).then(|| A2aError::from_http_body(status, &answer)),
    ));
    let mut req = tonic::Request::new(v1::SendMessageRequest {
        tenant: "invoices".into(),
        message: Some(serde_json::from_value(v1_message).expect("v1 message")),
        configuration: None,
        metadata: None,
    });
    req.metadata_mut()
        .insert("a2a-version", "1.0".parse().expect("metadata"));
    let sent = grpc.send_message(req).await;
    out.push((
        "gRPC 1.0",
        sent.err().map(|s| {
            let status = rpc::Status::decode(s.details()).expect("status details");
            A2aError::from_grpc_status(&status)
        }),
    ));
    // Refused messages leave no task behind.
    let (_, listed) = post(
        &router,
        "/a2a",
        true,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}),
    )
    .await;
    let made = listed["result"]["tasks"].as_array().map_or(0, Vec::len);
    let refused = out.iter().filter(|(_, e)| e.is_some()).count();
    assert_eq!(
        made,
        out.len() - refused,
        "a task per accepted message only"
    );
    out
}

#[tokio::test]
async fn a_bad_data_part_is_refused_on_every_binding_before_a_task_exists() {
    for (wire, err) in send_everywhere(json!({"amount": -1, "currency": "EUR"})).await {
        let err = err.unwrap_or_else(|| panic!("{wire}: accepted"));
        assert_eq!(err.code, ErrorCode::InvalidParams, "{wire}: {err}");
        assert!(
            err.violations
                .iter()
                .any(|v| v.field == "/parts/1/data/amount"),
            "{wire}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_good_data_part_reaches_the_agent_on_every_binding() {
    for (wire, err) in send_everywhere(json!({"amount": 3, "currency": "EUR"})).await {
        assert!(err.is_none(), "{wire}: {err:?}");
    }
}
