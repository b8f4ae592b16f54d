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
