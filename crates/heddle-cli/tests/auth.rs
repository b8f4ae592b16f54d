//! Turning authentication on in one step: `heddle keys create`, then
//! `heddle serve --require-auth`; the CLI as a client with and without the key.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Output, Stdio},
};

use serde_json::Value;

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn heddle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("heddle runs")
}

fn serve(store: &str, config: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--require-auth",
            "--config",
        ])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("heddle serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout);
    let mut first = String::new();
    lines.read_line(&mut first).expect("banner");
    assert!(first.contains("authentication required"), "{first}");
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let url = first
        .split(" at ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("url in banner")
        .to_owned();
    Server { child, url }
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
