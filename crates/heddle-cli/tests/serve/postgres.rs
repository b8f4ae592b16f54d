//! `heddle serve --store postgres://…`: tasks outlive the process, in a
//! schema of the test's own. Needs `HEDDLE_TEST_POSTGRES_URL`; without it
//! the test says it skipped and passes, unless `HEDDLE_REQUIRE_SERVICES=1`.

use serde_json::json;
use sqlx::{AssertSqlSafe, Connection as _};

use super::{message, rpc, serve};

/// The test database's URL, or `None` (after saying so) to skip.
pub(super) fn database(test: &str) -> Option<String> {
    super::common::service_url(test, "HEDDLE_TEST_POSTGRES_URL", "PostgreSQL")
}

/// `url` with a password added to a user that has none (trust auth ignores
/// it), so the test can check that no banner shows it.
fn with_password(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (user, host) = rest.split_once('@')?;
    (!user.contains(':')).then(|| format!("{scheme}://{user}:s3cret-pw@{host}"))
}

/// Drops the test's schema when the test ends, even by a panic.
pub(super) struct DropSchema {
    pub(super) url: String,
    pub(super) name: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                    let sql = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
                    let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                }
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_the_server_on_postgres() {
    let Some(url) = database("a_task_outlives_the_server_on_postgres") else {
        return;
    };
    let name = format!("heddle_cli_test_{}", std::process::id());
    let _cleanup = DropSchema {
        url: url.clone(),
        name: name.clone(),
    };
    let base = with_password(&url).unwrap_or_else(|| url.clone());
    let sep = if base.contains('?') { '&' } else { '?' };
    let store = format!("{base}{sep}schema={name}");

    let (code, out, err) = super::heddle(&["db", "migrate", "--store", &store]);
    assert_eq!(code, 0, "db migrate: {out}{err}");
    assert!(out.starts_with("migrated postgres"), "{out}");
    assert!(!out.contains("s3cret-pw"), "the password is printed: {out}");

    let server = serve(&store);
    assert!(
        server.banner.contains("(store: postgres"),
        "{}",
        server.banner
    );
    assert!(
        !server.banner.contains("s3cret-pw"),
        "the password is printed: {}",
        server.banner
    );
    let client = reqwest::Client::new();
    let sent = rpc(
        &client,
        &server.url,
        "echo",
        "SendMessage",
        json!({"message": message("pg-1", "hello postgres")}),
    )
    .await
    .expect("send");
    let task_id = sent["task"]["id"].as_str().expect("task id").to_owned();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    drop(server);

    // A new process on the same schema: the task is there.
    let again = serve(&store);
    let got = rpc(
        &client,
        &again.url,
        "echo",
        "GetTask",
        json!({"id": task_id}),
    )
    .await
    .expect("get");
    assert_eq!(got["id"], json!(task_id), "{got}");
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
    let text = got["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(text.contains("hello postgres"), "{got}");
}

/// API keys kept in PostgreSQL: a key made with `heddle keys` is accepted by
/// two servers on the store, and once revoked, refused by one that had not
/// seen it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_in_postgres_are_shared_by_every_server() {
    let Some(url) = database("api_keys_in_postgres_are_shared_by_every_server") else {
        return;
    };
    let name = format!("heddle_cli_keys_{}", std::process::id());
    let _cleanup = DropSchema {
        url: url.clone(),
        name: name.clone(),
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{sep}schema={name}");
    let (code, key, err) = super::heddle(&["keys", "create", "--name", "ci", "--store", &store]);
    assert_eq!(code, 0, "keys create: {key}{err}");
    let key = key.trim().to_owned();
    assert!(key.starts_with("hdk_"), "{key}");

    let (code, _, err) = super::heddle(&["keys", "create", "--name", "ci", "--store", &store]);
    assert_ne!(code, 0);
    assert!(
        err.contains("already named"),
        "a second active key named ci: {err}"
    );

    let a = super::serve_with(&store, &["--require-auth"]);
    let b = super::serve_with(&store, &["--require-auth"]);
    let client = reqwest::Client::new();
    let call = |base: String, key: Option<String>| {
        let client = client.clone();
        async move {
            let mut req = client
                .post(format!("{base}/api/v1/agents/echo/a2a"))
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": message("k-1", "hi")}}));
            if let Some(key) = key {
                req = req.header("api-key", key);
            }
            req.send().await.expect("call").status().as_u16()
        }
    };
    assert_eq!(call(a.url.clone(), Some(key.clone())).await, 200);
    assert_eq!(call(a.url.clone(), None).await, 401);

    let (code, out, err) = super::heddle(&["keys", "revoke", "ci", "--store", &store]);
    assert_eq!(code, 0, "keys revoke: {out}{err}");
    assert_eq!(
        call(b.url.clone(), Some(key.clone())).await,
        401,
        "a server that had not seen the key refuses it at once"
    );
    let (code, listed, _) = super::heddle(&["keys", "list", "--store", &store, "-o", "json"]);
    assert_eq!(code, 0);
    assert!(listed.contains("\"revokedAt\":\""), "{listed}");
}
