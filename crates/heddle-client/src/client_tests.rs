//! The client against small hand-made servers: retries, bounds.

use std::time::Instant;

use futures::StreamExt;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::*;

/// Answers the first request 503 with `Retry-After: 1`, the next with a task.
async fn flaky_server() -> (String, tokio::task::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let handle = tokio::spawn(async move {
        let mut served = 0;
        while served < 2 {
            let Ok((mut sock, _)) = listener.accept().await else {
                break;
            };
            let mut buf = vec![0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let resp = if served == 0 {
                "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy".to_owned()
            } else {
                let body =
                    r#"{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = sock.write_all(resp.as_bytes()).await;
            served += 1;
        }
        served
    });
    (format!("http://{addr}"), handle)
}

#[tokio::test]
async fn idempotent_calls_wait_out_retry_after() {
    let (url, server) = flaky_server().await;
    let card: v1::AgentCard = serde_json::from_value(json!({
        "name": "flaky", "supportedInterfaces": [{"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]
    }))
    .expect("card");
    let client = A2aClient::from_card(
        card,
        ClientOptions {
            bindings: vec![Binding::Rest],
            ..ClientOptions::default()
        },
    )
    .expect("client");
    let start = Instant::now();
    let task = client
        .get_task("t1", None)
        .await
        .expect("retried after 503");
    assert_eq!(task.id, "t1");
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "waited for Retry-After"
    );
    assert_eq!(server.await.expect("server"), 2);
}

fn rest_card(url: &str) -> v1::AgentCard {
    serde_json::from_value(json!({
        "name": "big", "supportedInterfaces": [{"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]
    }))
    .expect("card")
}

fn rest_options() -> ClientOptions {
    ClientOptions {
        bindings: vec![Binding::Rest],
        retries: 0,
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn a_20_mb_answer_is_refused() {
    for declared in [true, false] {
        let url = crate::body::tests::big(20 << 20, declared).await;
        let client = A2aClient::from_card(rest_card(&url), rest_options()).expect("client");
        let err = client.get_task("t1", None).await.expect_err("too large");
        assert!(
            matches!(err, ClientError::BodyTooLarge { limit, .. } if limit == 16 << 20),
            "declared {declared}: {err:?}"
        );
    }
}

#[tokio::test]
async fn the_answer_bound_is_configurable() {
    let url = crate::body::tests::big(2000, true).await;
    let opts = ClientOptions {
        max_body_bytes: 1000,
        ..rest_options()
    };
    let client = A2aClient::from_card(rest_card(&url), opts).expect("client");
    let err = client.get_task("t1", None).await.expect_err("too large");
    assert!(
        matches!(err, ClientError::BodyTooLarge { limit: 1000, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_20_mb_card_is_refused() {
    let url = crate::body::tests::big(20 << 20, false).await;
    let err = A2aClient::discover(&url, rest_options())
        .await
        .expect_err("too large");
    assert!(
        matches!(
            err,
            ClientError::BodyTooLarge {
                what: "agent card",
                ..
            }
        ),
        "{err:?}"
    );
}

/// Answers every request with one SSE stream: an event, then a `data:`
/// line of 17 MiB, then another event.
async fn oversized_event_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let event = r#"{"task":{"id":"t1","contextId":"c1"}}"#;
            let mut body = format!("data: {event}\r\rdata: ").into_bytes();
            body.resize(body.len() + (17 << 20), b'x');
            body.extend_from_slice(format!("\r\rdata: {event}\r\r").as_bytes());
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&body).await;
            let _ = sock.shutdown().await;
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn an_oversized_stream_event_is_a_typed_error_and_ends_the_stream() {
    let url = oversized_event_server().await;
    let client = A2aClient::from_card(rest_card(&url), rest_options()).expect("client");
    let events: Vec<_> = client
        .subscribe("t1")
        .await
        .expect("stream")
        .collect()
        .await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].is_ok(), "{:?}", events[0]);
    assert!(
        matches!(
            events[1],
            Err(ClientError::BodyTooLarge {
                what: "server-sent event",
                ..
            })
        ),
        "{:?}",
        events[1]
    );
}
