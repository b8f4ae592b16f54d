//! The PostgreSQL store, for several hub replicas sharing one database.
//!
//! * The same rows as the SQLite store: each task is protobuf bytes beside
//!   the columns ListTasks filters and sorts on, with an index per ListTasks
//!   shape (`migrations/postgres/`), and the same keyset page tokens
//!   (`crate::page`), so a page costs an index range scan however many
//!   tasks are stored.
//! * SQLite serializes every write through one writer thread; PostgreSQL
//!   takes writes from every replica at once. What relied on that single
//!   writer says so here instead: a save is one upsert statement (atomic on
//!   its own), `save_with_deliveries` is one transaction, ListTasks reads its
//!   page and its total in one snapshot, and the outbox is claimed per
//!   ordering group under a lock (`crate::postgres_push`).
//! * Migrations are SQL files embedded with `sqlx::migrate!`; sqlx records
//!   them (with checksums) in `_sqlx_migrations` and takes an advisory lock
//!   while it runs them, so replicas starting together migrate once.
//! * Everything lives in one schema (the connection's `search_path`), so
//!   several hubs, or tests, can share one database.

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection as _, Postgres, QueryBuilder, Row as _};

use crate::memory::{interrupted_status, page_size, was_running};
use crate::page::{PageToken, status_ms};
use crate::postgres_url::{check_schema, create_schema, redact_url, split_schema};
use crate::{ListPage, ListQuery, NewDelivery, PushStore, Scope, StoreError, TaskStore};

/// The schema migrations, compiled into the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Keeps the original owner and refuses to touch another owner's row: an
/// upsert from a different owner matches the conflict but not the `WHERE`,
/// so it changes nothing. One statement, so concurrent saves from several
/// replicas never interleave within a row.
/// Generation 0 (a plain `save`) writes whatever is stored; a later
/// generation never goes back, and never moves a task that ended
/// (COMPLETED, FAILED, CANCELED, REJECTED): a replica that lost its task to
/// another, which ended it, cannot write it again.
const UPSERT: &str =
    "INSERT INTO tasks (agent, id, owner, context_id, state, status_ms, body, generation)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (agent, id) DO UPDATE SET
        context_id = EXCLUDED.context_id,
        state = EXCLUDED.state,
        status_ms = EXCLUDED.status_ms,
        body = EXCLUDED.body,
        generation = GREATEST(tasks.generation, EXCLUDED.generation)
    WHERE tasks.owner = EXCLUDED.owner
        AND (EXCLUDED.generation = 0
            OR (tasks.generation <= EXCLUDED.generation
                AND (tasks.state NOT IN (3, 4, 5, 7)
                    OR tasks.generation = EXCLUDED.generation)))";

/// How to connect a [`PostgresStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Most connections in the pool.
    pub max_connections: u32,
    /// How long opening a connection (or waiting for a free one) may take.
    pub connect_timeout: Duration,
    /// The schema Heddle's tables live in (created if missing); `None` for
    /// the URL's `schema` query parameter, or else the server's default
    /// `search_path` (normally `public`). Letters, digits and `_` only.
    pub schema: Option<String>,
    /// How long a replica holds the outbox deliveries it claimed before
    /// another may take them over. Longer than one delivery pass (the push
    /// worker's request timeout), or a slow pass is taken over and sent
    /// twice (receivers deduplicate by delivery id); it is also how long
    /// deliveries a crashed replica had claimed wait.
    pub claim_lease: Duration,
}

impl Default for PostgresOptions {
    /// 10 connections, 10 s to connect, the default schema, a 60 s claim.
    fn default() -> Self {
        Self {
            max_connections: 10,
            connect_timeout: Duration::from_secs(10),
            schema: None,
            claim_lease: Duration::from_secs(60),
        }
    }
}

/// A [`TaskStore`], [`PushStore`] and [`crate::RegistryStore`] in PostgreSQL.
/// See the module docs for the design. Cheap to share: it is a pool.
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// Where it is, without the password (for banners and logs).
    url: String,
    /// This instance's name in outbox claims: unique per store, so two
    /// replicas (or two stores in one process) never mistake each other's
    /// claims for their own.
    pub(crate) claimant: String,
    /// [`PostgresOptions::claim_lease`], in milliseconds.
    pub(crate) claim_lease_ms: i64,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// A database failure as a [`StoreError`]. sqlx's messages name no
/// password (connection errors carry the server's message or an I/O error),
/// and configuration errors, which might quote the URL, are replaced.
pub(crate) fn db(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(_) => {
            StoreError::Database("invalid PostgreSQL connection settings".into())
        }
        sqlx::Error::PoolClosed => StoreError::Closed,
        other => StoreError::Database(other.to_string()),
    }
}

fn corrupt(id: &str, e: impl fmt::Display) -> StoreError {
    StoreError::Corrupt(id.to_owned(), e.to_string())
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`, with
    /// libpq's query parameters such as `sslmode`, plus `schema`), creates
    /// the schema if missing and runs the migrations not yet applied.
    pub async fn connect(url: &str, opts: PostgresOptions) -> Result<Self, StoreError> {
        let store = Self::open(url, &opts).await?;
        MIGRATOR.run(&store.pool).await.map_err(migrate_error)?;
        Ok(store)
    }

    /// Runs the migrations not yet applied, then closes (`heddle db migrate`):
    /// so a deployment can migrate once before starting its replicas.
    pub async fn migrate_only(url: &str, opts: PostgresOptions) -> Result<(), StoreError> {
        let store = Self::connect(url, opts).await?;
        store.pool.close().await;
        Ok(())
    }

    /// The pool, for tables another crate keeps beside Heddle's (such as
    /// `heddle-auth`'s API keys): its connections already use the schema.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The URL it was opened with (with its `schema`), any password
    /// replaced by `***`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A pool on `url` whose connections use the schema, created if missing.
    async fn open(url: &str, opts: &PostgresOptions) -> Result<Self, StoreError> {
        let (base, url_schema) = split_schema(url);
        let schema = match (&opts.schema, url_schema) {
            (Some(a), Some(b)) if *a != b => {
                return Err(StoreError::Database(format!(
                    "two schemas given: {a:?} in the options, {b:?} in the URL"
                )));
            }
            (Some(a), _) => Some(a.clone()),
            (None, b) => b,
        };
        let mut shown = redact_url(&base);
        let mut connect = PgConnectOptions::from_str(&base).map_err(db)?;
        // One plain connection first: it reports an unreachable server or a
        // refused login as such (a pool only says it timed out), and
        // creates the schema before any pooled connection selects it.
        let mut conn = tokio::time::timeout(
            opts.connect_timeout,
            sqlx::PgConnection::connect_with(&connect),
        )
        .await
        .map_err(|_| StoreError::Database("timed out connecting to PostgreSQL".into()))?
        .map_err(db)?;
        if let Some(schema) = &schema {
            check_schema(schema)?;
            create_schema(&mut conn, schema).await?;
            connect = connect.options([("search_path", schema.as_str())]);
            shown.push(if shown.contains('?') { '&' } else { '?' });
            shown.push_str("schema=");
            shown.push_str(schema);
        }
        let _ = conn.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .acquire_timeout(opts.connect_timeout)
            .connect_with(connect)
            .await
            .map_err(db)?;
        Ok(Self {
            pool,
            url: shown,
            claimant: uuid::Uuid::new_v4().to_string(),
            claim_lease_ms: i64::try_from(opts.claim_lease.as_millis()).unwrap_or(i64::MAX),
        })
    }
}

fn migrate_error(e: sqlx::migrate::MigrateError) -> StoreError {
    match e {
        sqlx::migrate::MigrateError::Execute(e) => db(e),
        other => StoreError::Database(format!("migrating the schema: {other}")),
    }
}

fn decode(id: &str, body: &[u8]) -> Result<v1::Task, StoreError> {
    v1::Task::decode(body).map_err(|e| corrupt(id, e))
}

/// Binds the task row of `task` in `scope` to [`UPSERT`] and runs it; a
/// save at a generation older than the stored one is a conflict.
async fn upsert<'c, E>(
    exec: E,
    scope: &Scope,
    task: &v1::Task,
    generation: u64,
) -> Result<(), StoreError>
where
    E: sqlx::Executor<'c, Database = Postgres>,
{
    let done = sqlx::query(UPSERT)
        .bind(&scope.agent)
        .bind(&task.id)
        .bind(&scope.owner)
        .bind(&task.context_id)
        .bind(task.status.as_ref().map_or(0, |s| s.state))
        .bind(status_ms(task))
        .bind(task.encode_to_vec())
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
        .execute(exec)
        .await
        .map_err(db)?;
    if generation > 0 && done.rows_affected() == 0 {
        return Err(StoreError::Conflict(task.id.clone()));
    }
    Ok(())
}

/// The filters of `query` in `scope`, appended to `sql` after `WHERE`.
fn push_filter(sql: &mut QueryBuilder<Postgres>, scope: &Scope, query: &ListQuery) {
    sql.push("agent = ")
        .push_bind(scope.agent.clone())
        .push(" AND owner = ")
        .push_bind(scope.owner.clone());
    if let Some(context) = &query.context_id {
        sql.push(" AND context_id = ").push_bind(context.clone());
    }
    if let Some(state) = query.state {
        sql.push(" AND state = ").push_bind(state as i32);
    }
    if let Some(after) = query.status_after_ms {
        sql.push(" AND status_ms >= ").push_bind(after);
    }
}

/// One task by its primary key. The owner is compared by the caller, not
/// here: with `owner` in the `WHERE`, a prepared statement's generic plan,
/// made while the table's statistics still said "empty", picked an index
/// leading with `(agent, owner)` and scanned every task of the caller to
/// find one (measured in `bench/results/2026-12-05-stores.md`).
const SELECT_TASK: &str = "SELECT body, generation, owner FROM tasks WHERE agent = $1 AND id = $2";

impl PostgresStore {
    /// The task and the generation it was saved at (`load` and `load_at`),
    /// by [`SELECT_TASK`], the owner compared here.
    async fn select(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        let row = sqlx::query(SELECT_TASK)
            .bind(&scope.agent)
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner: &str = row.try_get(2).map_err(|e| corrupt(task_id, e))?;
        if owner != scope.owner {
            return Ok(None);
        }
        let body: Vec<u8> = row.try_get(0).map_err(|e| corrupt(task_id, e))?;
        let generation: i64 = row.try_get(1).map_err(|e| corrupt(task_id, e))?;
        Ok(Some((
            decode(task_id, &body)?,
            u64::try_from(generation).unwrap_or(0),
        )))
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError> {
        Ok(self.select(scope, task_id).await?.map(|(task, _)| task))
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        upsert(&self.pool, scope, task, 0).await
    }

    async fn save_at(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
    ) -> Result<(), StoreError> {
        upsert(&self.pool, scope, task, generation).await
    }

    async fn load_at(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        self.select(scope, task_id).await
    }

    /// One transaction when `outbox` is this store (the server's usual
    /// set-up, one store in both roles); otherwise save, then record.
    async fn save_with_deliveries(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
        deliveries: Vec<NewDelivery>,
        outbox: &dyn PushStore,
    ) -> Result<(), StoreError> {
        if deliveries.is_empty() {
            return self.save_at(scope, task, generation).await;
        }
        if !std::ptr::addr_eq(self, outbox) {
            self.save_at(scope, task, generation).await?;
            return outbox.enqueue_deliveries(deliveries).await;
        }
        let mut tx = self.pool.begin().await.map_err(db)?;
        upsert(&mut *tx, scope, task, generation).await?;
        crate::postgres_push::insert_deliveries(&mut tx, &deliveries).await?;
        tx.commit().await.map_err(db)
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        let token = query
            .page_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(PageToken::decode)
            .transpose()?;
        let size = page_size(query);

        let mut count = QueryBuilder::<Postgres>::new("SELECT COUNT(*) FROM tasks WHERE ");
        push_filter(&mut count, scope, query);
        let mut page =
            QueryBuilder::<Postgres>::new("SELECT body, id, status_ms FROM tasks WHERE ");
        push_filter(&mut page, scope, query);
        if let Some(token) = &token {
            page.push(" AND (status_ms, id) < (")
                .push_bind(token.ts_ms)
                .push(", ")
                .push_bind(token.id.clone())
                .push(")");
        }
        page.push(" ORDER BY status_ms DESC, id DESC LIMIT ")
            .push_bind(i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1));

        // One snapshot, so the page and the total agree.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(db)?;
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let rows = page.build().fetch_all(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;

        let more = rows.len() > size;
        // Capped: `size` comes from the request.
        let mut tasks = Vec::with_capacity(size.min(100));
        let mut last = None;
        for row in rows.iter().take(size) {
            let id: String = row.try_get(1).map_err(|e| corrupt("?", e))?;
            let ts_ms: i64 = row.try_get(2).map_err(|e| corrupt(&id, e))?;
            let body: Vec<u8> = row.try_get(0).map_err(|e| corrupt(&id, e))?;
            tasks.push(decode(&id, &body)?);
            last = Some(PageToken { ts_ms, id });
        }
        Ok(ListPage {
            tasks,
            next_page_token: last
                .filter(|_| more)
                .map(|t| t.encode())
                .unwrap_or_default(),
            total_size: u32::try_from(total).unwrap_or(u32::MAX),
        })
    }

    async fn purge_finished(&self, before_ms: i64, limit: usize) -> Result<u64, StoreError> {
        // One statement: the tasks, then their configs and links. A task
        // another transaction holds is left for the next pass.
        let gone: i64 = sqlx::query_scalar(
            "WITH gone AS (
                DELETE FROM tasks WHERE (agent, id) IN (
                    SELECT agent, id FROM tasks t
                    WHERE state IN (3, 4, 5, 7) AND status_ms < $1
                      AND NOT EXISTS (SELECT 1 FROM push_outbox o
                          WHERE o.state = 0 AND o.agent = t.agent AND o.task_id = t.id)
                    ORDER BY status_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING agent, id),
             configs AS (DELETE FROM push_configs c USING gone
                 WHERE c.agent = gone.agent AND c.task_id = gone.id),
             links AS (DELETE FROM task_links k USING gone
                 WHERE k.agent = gone.agent AND k.task_id = gone.id)
             SELECT COUNT(*) FROM gone",
        )
        .bind(before_ms)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(u64::try_from(gone).unwrap_or(0))
    }

    /// In one transaction, with the live rows locked: a corrupt row leaves
    /// every task untouched rather than half done. Replicas sharing the
    /// database must not call this (it would fail the tasks the others are
    /// running); they end a dead replica's tasks through its expired leases
    /// ([`crate::LeaseStore`]) instead.
    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let rows =
            sqlx::query("SELECT agent, id, body FROM tasks WHERE state IN (1, 2) FOR UPDATE")
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
        let mut failed: u64 = 0;
        for row in rows {
            let agent: String = row.try_get(0).map_err(|e| corrupt("?", e))?;
            let id: String = row.try_get(1).map_err(|e| corrupt("?", e))?;
            let body: Vec<u8> = row.try_get(2).map_err(|e| corrupt(&id, e))?;
            let mut task = decode(&id, &body)?;
            if !task.status.as_ref().is_some_and(|s| was_running(s.state)) {
                // The column and the body disagree; trust the body.
                continue;
            }
            task.status = Some(interrupted_status(&task, reason));
            sqlx::query(
                "UPDATE tasks SET state = $1, status_ms = $2, body = $3, generation = generation + 1
                 WHERE agent = $4 AND id = $5",
            )
            .bind(v1::TaskState::Failed as i32)
            .bind(status_ms(&task))
            .bind(task.encode_to_vec())
            .bind(&agent)
            .bind(&id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            failed = failed.saturating_add(1);
        }
        tx.commit().await.map_err(db)?;
        Ok(failed)
    }

    /// The configs and outbox tables beside `tasks` (`crate::postgres_push`).
    fn push_store(self: Arc<Self>) -> Option<Arc<dyn PushStore>> {
        Some(self)
    }

    /// The registry tables beside `tasks` (`crate::postgres_registry`).
    fn registry_store(self: Arc<Self>) -> Option<Arc<dyn crate::RegistryStore>> {
        Some(self)
    }

    /// The ledger tables beside `tasks` (`crate::postgres_ledger`).
    fn ledger_store(self: Arc<Self>) -> Option<Arc<dyn crate::LedgerStore>> {
        Some(self)
    }

    /// The lease table beside `tasks` (`crate::postgres_lease`).
    fn lease_store(self: Arc<Self>) -> Option<Arc<dyn crate::LeaseStore>> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test should fail loudly

    use super::*;

    /// A generic plan (what a prepared statement settles on after five runs),
    /// made on a table whose statistics say nothing yet, still reads one task
    /// through the primary key.
    #[tokio::test]
    async fn a_task_is_read_by_its_primary_key_under_a_generic_plan() {
        let url = match std::env::var("HEDDLE_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => {
                assert!(
                    std::env::var("HEDDLE_REQUIRE_SERVICES").as_deref() != Ok("1"),
                    "HEDDLE_REQUIRE_SERVICES=1 but HEDDLE_TEST_POSTGRES_URL is not set"
                );
                println!("skipped: needs PostgreSQL (set HEDDLE_TEST_POSTGRES_URL)");
                return;
            }
        };
        let schema = format!("heddle_unit_plan_{}", std::process::id());
        let opts = PostgresOptions {
            max_connections: 1,
            schema: Some(schema.clone()),
            ..Default::default()
        };
        let store = PostgresStore::connect(&url, opts).await.unwrap();
        let mut conn = store.pool.acquire().await.unwrap();
        let prepare = format!(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE get_task (text, text) AS {SELECT_TASK};"
        );
        // Unwrapped only after the schema is dropped, so a failure leaves nothing behind.
        let plan = match sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
            .execute(&mut *conn)
            .await
        {
            Ok(_) => {
                sqlx::query_scalar::<_, String>("EXPLAIN EXECUTE get_task ('agent', 't-1')")
                    .fetch_all(&mut *conn)
                    .await
            }
            Err(e) => Err(e),
        };
        drop(conn);
        let drop_schema = format!("DROP SCHEMA \"{schema}\" CASCADE");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop_schema))
            .execute(&store.pool)
            .await
            .unwrap();
        let plan = plan.unwrap().join("\n");
        assert!(plan.contains("tasks_pkey"), "{plan}");
    }
}
