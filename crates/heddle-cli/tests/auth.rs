//! Turning authentication on in one step: `heddle keys create`, then
//! `heddle serve --require-auth`; the CLI as a client with and without the key.

use std::path::Path;

use serde_json::Value;

mod common;

use common::{Server, heddle};

fn serve(store: &str, config: &Path) -> Server {
    let config = config.display().to_string();
    let server = common::serve(store, &["--require-auth", "--config", &config]);
    assert!(
        server.banner.contains("authentication required"),
        "{}",
        server.banner
    );
    server
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_create_then_serve_require_auth_refuses_calls_without_the_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("heddle.db").display());
    // Verified keys are re-read every time, so a revocation is seen at once.
    let config = dir.path().join("heddle.toml");
    std::fs::write(&config, "[auth.api_keys]\ncache_ttl_secs = 0\n").expect("config");

    let created = heddle(&["keys", "create", "--name", "ci", "--store", &store]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let key = text(&created.stdout).trim().to_owned();
    assert!(key.starts_with("hdk_"), "only the key on stdout: {key}");
    let listed = heddle(&["keys", "list", "--store", &store, "-o", "json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("json list");
    assert_eq!(listed[0]["name"], "ci");
    // Tasks belong to the key's id, not its (reusable) name.
    let id = listed[0]["id"].as_str().expect("id");
    assert!(key.starts_with(&format!("hdk_{id}_")), "{key}");
    assert_eq!(listed[0]["caller"], format!("key:{id}"));
    assert_eq!(listed[0]["legacyHash"], false);
    assert!(!listed.to_string().contains(&key), "list never shows a key");

    let server = serve(&store, &config);
    let echo = format!("{}/api/v1/agents/echo", server.url);

    // The card is public and declares the scheme.
    let card: Value = reqwest::get(format!("{echo}/.well-known/agent-card.json"))
        .await
        .expect("card")
        .json()
        .await
        .expect("json");
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["location"],
        "header"
    );

    for binding in ["jsonrpc", "rest", "grpc"] {
        let refused = heddle(&["send", &echo, "hello", "--binding", binding]);
        assert_eq!(refused.status.code(), Some(2), "{binding}");
        let err = text(&refused.stderr);
        assert!(err.contains("HTTP 401"), "{binding}: {err}");
        assert!(err.contains("--api-key"), "{binding}: {err}");

        let sent = heddle(&[
            "send",
            &echo,
            "hello",
            "--binding",
            binding,
            "--api-key",
            &key,
        ]);
        assert!(sent.status.success(), "{binding}: {}", text(&sent.stderr));
        assert!(text(&sent.stdout).contains("hello"), "{binding}");
    }

    let revoked = heddle(&["keys", "revoke", "ci", "--store", &store]);
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    let refused = heddle(&["send", &echo, "hello", "--api-key", &key]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("HTTP 401"));
    let again = heddle(&["keys", "revoke", "ci", "--store", &store]);
    assert_eq!(again.status.code(), Some(2), "nothing left to revoke");
}

/// Authentication runs on the head: an anonymous caller announcing an
/// 8 MiB body gets 401 before sending it, and no `100 Continue` invites it.
#[test]
fn an_anonymous_upload_is_refused_before_its_body_is_read() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("heddle.db").display());
    let config = dir.path().join("heddle.toml");
    std::fs::write(&config, "[auth.api_keys]\n").expect("config");
    let server = serve(&store, &config);
    let addr = server.url.trim_start_matches("http://").to_owned();
    for expect in ["", "Expect: 100-continue\r\n"] {
        let mut tcp = std::net::TcpStream::connect(&addr).expect("connect");
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("timeout");
        let head = format!(
            "POST /api/v1/agents/echo/a2a HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n{expect}Content-Length: {}\r\n\r\n",
            8 << 20
        );
        tcp.write_all(head.as_bytes()).expect("head");
        // The body never comes: the answer must not wait for it.
        let mut buf = [0u8; 4096];
        let n = tcp.read(&mut buf).expect("an answer before the body");
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{expect:?}: {answer}");
        assert!(!answer.contains("100 Continue"), "{answer}");
    }
}
