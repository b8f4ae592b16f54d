//! `heddle wallet` against a running `heddle serve` with priced agents on
//! SQLite: top up, pay for tasks, and a `kill -9` between reserve and
//! settle that leaves the ledger consistent after the restart (the task
//! that was running is released, the one waiting for its caller keeps its
//! hold and is paid when it ends).

use std::process::Output;

use serde_json::{Value, json};

mod common;

const CONFIG: &str = r#"
[[agents]]
id = "clerk"
kind = "builtin"
builtin = "writer"
pricing = { model = "per_task", rate = 0.1, currency = "USD" }

[[agents]]
id = "slow"
kind = "builtin"
builtin = "conformance"
pricing = { model = "per_task", rate = 0.05, currency = "USD" }
"#;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `heddle wallet ARGS --hub URL --admin-token-file TOKEN`, which must succeed.
fn wallet(url: &str, token: &str, args: &[&str]) -> String {
    let mut all = vec!["wallet"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--hub", url, "--admin-token-file", token]);
    let out = common::heddle(&all);
    assert!(
        out.status.success(),
        "heddle {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

async fn send(url: &str, agent: &str, message: Value, immediately: bool) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": message,
        "configuration": {"returnImmediately": immediately},
    }});
    let reply: Value = reqwest::Client::new()
        .post(format!("{url}/api/v1/agents/{agent}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("JSON");
    reply["result"]["task"].clone()
}

fn message(id: &str, text: &str, task: Option<&str>) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_between_reserve_and_settle_leaves_the_ledger_consistent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hub.toml");
    std::fs::write(&config, CONFIG).expect("config");
    let token = dir.path().join("admin-token");
    let store = format!("sqlite:{}", dir.path().join("hub.db").display());
    let args = [
        "--default-agent",
        "clerk",
        "--config",
        config.to_str().expect("UTF-8"),
        "--admin-token-file",
        token.to_str().expect("UTF-8"),
    ];
    let token = token.to_str().expect("UTF-8");

    let mut server = common::serve(&store, &args);
    let url = server.url.clone();
    assert_eq!(
        wallet(
            &url,
            token,
            &["topup", "anonymous", "1", "--memo", "card 4242"]
        ),
        "anonymous: balance 1 USD\n"
    );
    // The writer asks a question: its task holds 0.10 while it waits.
    let waiting = send(&url, "clerk", message("w1", "a brief", None), false).await;
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // The slow agent works for seconds: its task holds 0.05 while it runs.
    let running = send(
        &url,
        "slow",
        message("test-resubscribe-message-id-wallet", "go", None),
        true,
    )
    .await;
    assert!(running["id"].is_string(), "{running}");
    assert_eq!(
        wallet(&url, token, &["balance", "anonymous"]),
        "anonymous: 0.85 USD (held: 0.15 USD)\n"
    );

    server.child.kill().expect("kill -9");
    server.child.wait().expect("reaped");

    let server = common::serve(&store, &args);
    let url = server.url.clone();
    // The running task failed at the restart and its hold came back; the
    // waiting one still holds its price.
    assert_eq!(
        wallet(&url, token, &["balance", "anonymous"]),
        "anonymous: 0.9 USD (held: 0.1 USD)\n"
    );
    let id = waiting["id"].as_str().expect("id");
    let done = send(
        &url,
        "clerk",
        message("w2", "the board, one page", Some(id)),
        false,
    )
    .await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let mut balance = String::new();
    for _ in 0..100 {
        balance = wallet(&url, token, &["balance", "anonymous"]);
        if balance == "anonymous: 0.9 USD (held: nothing)\n" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(balance, "anonymous: 0.9 USD (held: nothing)\n");
    assert_eq!(
        wallet(&url, token, &["earnings", "clerk"]),
        "clerk: earned 0.1 USD\n"
    );
    assert_eq!(
        wallet(&url, token, &["earnings", "slow"]),
        "slow: earned 0 USD\n"
    );
    let history = wallet(&url, token, &["history", "anonymous"]);
    let kinds: Vec<&str> = history
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        kinds,
        ["settle", "settle", "reserve", "reserve", "topup"],
        "{history}"
    );
    assert!(history.contains("card 4242"), "{history}");
}
