//! Discovery with required signatures, against a small HTTP server serving a
//! signed card and its JWKS.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use heddle_signing::{KeySet, SigningKey, sign_card};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::{CardVerification, ClientError, fetch_card_verified};

type Routes = Arc<Mutex<HashMap<String, String>>>;

/// An HTTP/1.1 server answering GETs from `routes` (404 otherwise); returns the base URL.
async fn serve(routes: Routes) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(answer(sock, routes.clone()));
        }
    });
    base
}

async fn answer(mut sock: TcpStream, routes: Routes) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let found = routes.lock().ok().and_then(|r| r.get(&path).cloned());
    let (status, body) = match found {
        Some(b) => ("200 OK", b),
        None => ("404 Not Found", "{}".to_owned()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}

fn key() -> SigningKey {
    SigningKey::from_file_text(
        include_str!("../../heddle-signing/testdata/ec.pem"),
        None,
        Some("agent-1"),
    )
    .expect("key")
}

/// An agent whose card is signed with `jku` = BASE/keys/jwks.json, then
/// changed by `tamper`; returns its base URL.
async fn agent(tamper: impl FnOnce(&mut Value)) -> String {
    let routes: Routes = Arc::default();
    let base = serve(routes.clone()).await;
    let mut card = json!({
        "name": "Echo", "description": "repeats", "version": "1.0",
        "supportedInterfaces": [{"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "e", "name": "E", "description": "d", "tags": ["t"]}]
    });
    sign_card(&mut card, &key(), Some(&format!("{base}/keys/jwks.json"))).expect("sign");
    tamper(&mut card);
    let jwks = json!({"keys": [key().public_jwk().expect("public")]});
    let mut r = routes.lock().expect("lock");
    r.insert("/.well-known/agent-card.json".into(), card.to_string());
    r.insert("/keys/jwks.json".into(), jwks.to_string());
    base
}

async fn discover(base: &str, v: Option<&CardVerification>) -> Result<String, ClientError> {
    let http = reqwest::Client::new();
    fetch_card_verified(&http, base, None, &[], v)
        .await
        .map(|(card, _)| card.name)
}

fn trusting(prefix: &str) -> CardVerification {
    CardVerification {
        trusted_jku: vec![prefix.to_owned()],
        ..CardVerification::default()
    }
}

#[tokio::test]
async fn a_card_signed_with_a_trusted_jku_or_a_pinned_key_is_accepted() {
    let base = agent(|_| {}).await;
    assert_eq!(
        discover(&base, Some(&trusting(&format!("{base}/keys/"))))
            .await
            .expect("verified"),
        "Echo"
    );
    let mut keys = KeySet::new();
    keys.add(key().public_jwk().expect("public")).expect("jwk");
    let pinned = CardVerification {
        keys,
        ..CardVerification::default()
    };
    assert_eq!(
        discover(&base, Some(&pinned)).await.expect("verified"),
        "Echo"
    );
    let by_url = CardVerification {
        jwks_urls: vec![format!("{base}/keys/jwks.json")],
        ..CardVerification::default()
    };
    assert_eq!(
        discover(&base, Some(&by_url)).await.expect("verified"),
        "Echo"
    );
}

#[tokio::test]
async fn cards_that_do_not_verify_are_a_card_signature_error() {
    let base = agent(|_| {}).await;
    // The jku is not under the trusted prefix: unverifiable.
    let err = discover(&base, Some(&trusting("https://keys.example/")))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, ClientError::CardSignature(m) if m.contains("unverifiable")),
        "{err}"
    );

    // Changed after signing: invalid.
    let tampered = agent(|c| c["description"] = json!("does something else")).await;
    let err = discover(&tampered, Some(&trusting(&format!("{tampered}/"))))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, ClientError::CardSignature(m) if m.contains("invalid")),
        "{err}"
    );

    // Unsigned: absent.
    let unsigned = agent(|c| {
        c.as_object_mut().map(|m| m.remove("signatures"));
    })
    .await;
    let err = discover(&unsigned, Some(&trusting(&format!("{unsigned}/"))))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, ClientError::CardSignature(m) if m.contains("absent")),
        "{err}"
    );

    // Without verification the same cards are read as before.
    assert!(discover(&tampered, None).await.is_ok());
    // A pinned JWKS URL that cannot be fetched is an error too.
    let missing = CardVerification {
        jwks_urls: vec![format!("{base}/nowhere.json")],
        ..CardVerification::default()
    };
    let err = discover(&base, Some(&missing)).await.expect_err("refused");
    assert!(
        matches!(&err, ClientError::CardSignature(m) if m.contains("HTTP 404")),
        "{err}"
    );
}
