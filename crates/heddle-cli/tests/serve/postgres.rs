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
