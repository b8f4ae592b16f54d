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

/// API keys are checked with a keyed hash, not a password hash: 200 callers
/// sending wrong secrets for a key id that exists (each a request every
/// 100 ms) leave the server's memory within 50 MB of idle, and a valid
/// caller's median latency within twice its idle median. (With argon2id, at
/// 19 MiB and ~14 ms a check, the same load took gigabytes and seconds.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_wrong_api_keys_costs_neither_memory_nor_a_valid_callers_latency() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("heddle.db").display());
    let config = dir.path().join("heddle.toml");
    std::fs::write(&config, "[auth.api_keys]\n").expect("config");
    let created = heddle(&["keys", "create", "--name", "ci", "--store", &store]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let key = text(&created.stdout).trim().to_owned();
    // `hdk_{id}_{secret}`: the same id with a wrong secret.
    let (id_part, secret) = key.rsplit_once('_').expect("key shape");
    let wrong = format!("{id_part}_{}", "x".repeat(secret.len()));

    let server = serve(&store, &config);
    let url = format!("{}/api/v1/agents/echo/a2a", server.url);
    let valid = reqwest::Client::new();
    // The median of a valid caller's calls, made one after another for `span`.
    let median = |valid: reqwest::Client, key: String, span: Duration| {
        let url = url.clone();
        async move {
            let mut took = Vec::new();
            let started = Instant::now();
            while took.len() < 60 || started.elapsed() < span {
                let call = Instant::now();
                let status = get_task(&valid, &url, &key).await.expect("valid call");
                took.push(call.elapsed());
                assert_eq!(status, 200, "the valid key is served");
            }
            took.sort();
            took[took.len() / 2]
        }
    };
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
            .expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS")
            * 1024
    };

    let idle_median = median(valid.clone(), key.clone(), Duration::ZERO).await;
    let idle_rss = rss();

    // The flood runs on a runtime of its own, so that its 200 clients do
    // not queue the valid caller's requests in this test's runtime.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood = {
        let (stop, refused, url) = (stop.clone(), refused.clone(), url.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                // One pool: a client each would build 200 TLS configurations.
                let client = reqwest::Client::new();
                let flooders: Vec<_> = (0..200)
                    .map(|_| {
                        let (stop, refused) = (stop.clone(), refused.clone());
                        let (wrong, url, client) = (wrong.clone(), url.clone(), client.clone());
                        tokio::spawn(async move {
                            // 200 wrong keys at once, every second.
                            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                if let Ok(401) = get_task(&client, &url, &wrong).await {
                                    refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                }
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                        })
                    })
                    .collect();
                for f in flooders {
                    f.await.expect("flooder");
                }
            });
        })
    };
    // Measured once the first 200 have been refused.
    let started = Instant::now();
    while refused.load(std::sync::atomic::Ordering::Relaxed) < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the flood never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Three more waves of the flood while the valid caller is measured.
    let flood_median = median(valid.clone(), key.clone(), Duration::from_secs(3)).await;
    let flood_rss = rss();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().expect("flood thread");

    let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        refused >= 600,
        "the wrong keys were refused ({refused} 401s)"
    );
    let grew = flood_rss.saturating_sub(idle_rss);
    assert!(grew < 50 << 20, "RSS grew by {} MB", grew >> 20);
    assert!(
        flood_median <= idle_median * 2,
        "a valid call's median went from {idle_median:?} to {flood_median:?}"
    );
}

/// A JSON-RPC GetTask of an unknown task with `key`: its HTTP status.
async fn get_task(client: &reqwest::Client, url: &str, key: &str) -> reqwest::Result<u16> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"none"}}"#;
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .header("api-key", key)
        .body(body)
        .send()
        .await?;
    Ok(resp.status().as_u16())
}

/// `--log-format json` writes one JSON object a line, and no credential
/// reaches the log, even at debug: not an API key (valid, wrong, or in the
/// query string), not a bearer token, not the admin token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_no_credential() {
    const ADMIN: &str = "admin-token-that-must-not-be-logged-0123";
    const BEARER: &str = "bearer-secret-that-must-not-be-logged-4567";
    const WRONG: &str = "hdk_0000000000000000_wrong-key-secret-89ab";
    let dir = tempfile::tempdir().expect("tmp");
    let store = format!("sqlite:{}", dir.path().join("heddle.db").display());
    let config = dir.path().join("heddle.toml");
    std::fs::write(&config, "[auth.api_keys]\n").expect("config");
    let created = heddle(&["keys", "create", "--name", "ci", "--store", &store]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let key = text(&created.stdout).trim().to_owned();
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let config = config.display().to_string();
    let server = common::serve_logging(
        &store,
        &[
            "--require-auth",
            "--config",
            &config,
            "--log-format",
            "json",
        ],
        &[("HEDDLE_LOG", "debug"), ("HEDDLE_ADMIN_TOKEN", ADMIN)],
        log,
    );
    let client = reqwest::Client::new();
    let rpc = format!("{}/api/v1/agents/echo/a2a", server.url);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let send = |url: String, header: (&'static str, String)| {
        client
            .post(url)
            .header("A2A-Version", "1.0")
            .header(header.0, header.1)
            .json(&body)
            .send()
    };
    let ok = send(rpc.clone(), ("api-key", key.clone()))
        .await
        .expect("sent");
    assert_eq!(ok.status(), 200);
    let in_query = send(format!("{rpc}?api_key={key}"), ("api-key", key.clone()))
        .await
        .expect("sent");
    assert_eq!(in_query.status(), 200);
    let wrong = send(rpc.clone(), ("api-key", WRONG.into()))
        .await
        .expect("sent");
    assert_eq!(wrong.status(), 401);
    let bearer = send(rpc.clone(), ("authorization", format!("Bearer {BEARER}")))
        .await
        .expect("sent");
    assert_eq!(bearer.status(), 401);
    let anonymous = client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .expect("refused");
    assert_eq!(
        anonymous.status(),
        401,
        "only admins read /metrics with auth on"
    );
    let metrics = client
        .get(format!("{}/metrics", server.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("scraped");
    assert_eq!(metrics.status(), 200);
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("heddle_requests_total{agent=\"echo\""),
        "{metrics}"
    );
    drop(server);

    let logged = std::fs::read_to_string(&log_path).expect("log");
    let lines: Vec<&str> = logged.lines().collect();
    assert!(!lines.is_empty(), "debug logs something");
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
    }
    assert!(
        logged.contains("request refused"),
        "the refusals are logged: {logged}"
    );
    let secret_of_key = key.rsplit('_').next().expect("secret part");
    for secret in [
        key.as_str(),
        secret_of_key,
        WRONG,
        "wrong-key-secret",
        BEARER,
        ADMIN,
    ] {
        assert!(
            !logged.contains(secret),
            "{secret} is in the log:\n{logged}"
        );
    }
}
