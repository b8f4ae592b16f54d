//! [`PushStore`] for [`SqliteStore`]: two tables beside `tasks`.
//!
//! * `push_configs`: one row per (agent, task, config id), owned like tasks.
//!   The config is protobuf bytes.
//! * `push_outbox`: one row per delivery, `seq` its recording order; `state`
//!   is 0 pending, 2 dead (delivered rows are deleted). Writes go through the
//!   writer thread, so a delivery is committed before the worker can see it.

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;
use rusqlite::{OptionalExtension as _, Row, params};

use crate::sqlite::db;
use crate::{
    Delivery, DeliveryOutcome, NewDelivery, PushConfigRecord, PushStore, Scope, SqliteStore,
    StoreError,
};

/// Schema migration 2 (see `sqlite::MIGRATIONS`).
pub(crate) const MIGRATION: &str = "CREATE TABLE push_configs (
        agent     TEXT    NOT NULL,
        task_id   TEXT    NOT NULL,
        id        TEXT    NOT NULL,
        owner     TEXT    NOT NULL,
        version   TEXT    NOT NULL,
        created   INTEGER NOT NULL,
        body      BLOB    NOT NULL,
        PRIMARY KEY (agent, task_id, id)
    ) WITHOUT ROWID;
    CREATE TABLE push_outbox (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT    NOT NULL,
        agent      TEXT    NOT NULL,
        owner      TEXT    NOT NULL,
        task_id    TEXT    NOT NULL,
        version    TEXT    NOT NULL,
        target     BLOB    NOT NULL,
        content_type TEXT  NOT NULL,
        body       BLOB    NOT NULL,
        state      INTEGER NOT NULL DEFAULT 0,
        attempts   INTEGER NOT NULL DEFAULT 0,
        next_ms    INTEGER NOT NULL DEFAULT 0,
        last_error TEXT    NOT NULL DEFAULT ''
    );
    CREATE INDEX push_outbox_by_state ON push_outbox (state, seq);";

/// Schema migration 5: each delivery keeps the trace context of its event.
pub(crate) const TRACE_MIGRATION: &str =
    "ALTER TABLE push_outbox ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
     ALTER TABLE push_outbox ADD COLUMN tracestate TEXT NOT NULL DEFAULT '';";

/// Schema migration 7: each delivery names its config, so the outbox finds
/// the first pending delivery of every task and config from an index. The
/// rows written before it get their config's id from their target
/// ([`fill_config_ids`]), so they stay in line with the ones after.
pub(crate) const HEADS_MIGRATION: &str =
    "ALTER TABLE push_outbox ADD COLUMN config_id TEXT NOT NULL DEFAULT '';
     CREATE INDEX push_outbox_heads ON push_outbox (state, agent, task_id, config_id, seq);";

/// Part of migration 7: the config id of every delivery written before it,
/// read from its target.
pub(crate) fn fill_config_ids(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let rows: Vec<(i64, Vec<u8>)> = {
        let mut stmt = tx
            .prepare("SELECT seq, target FROM push_outbox WHERE config_id = ''")
            .map_err(db)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)?
    };
    let mut update = tx
        .prepare("UPDATE push_outbox SET config_id = ?2 WHERE seq = ?1")
        .map_err(db)?;
    for (seq, target) in rows {
        // A target that does not decode keeps '' (its row is corrupt either way).
        if let Ok(config) = decode_config(&target) {
            update.execute(params![seq, config.id]).map_err(db)?;
        }
    }
    Ok(())
}

const PENDING: i64 = 0;
const DEAD: i64 = 2;

fn decode_config(body: &[u8]) -> Result<v1::TaskPushNotificationConfig, StoreError> {
    v1::TaskPushNotificationConfig::decode(body)
        .map_err(|e| StoreError::Corrupt("push config".into(), e.to_string()))
}

fn config_row(row: &Row<'_>) -> Result<PushConfigRecord, StoreError> {
    let version: String = row.get(0).map_err(db)?;
    let body: Vec<u8> = row.get(1).map_err(db)?;
    Ok(PushConfigRecord {
        config: decode_config(&body)?,
        version,
    })
}

fn delivery_row(row: &Row<'_>) -> Result<Delivery, StoreError> {
    let target: Vec<u8> = row.get(6).map_err(db)?;
    Ok(Delivery {
        seq: row.get(0).map_err(db)?,
        item: NewDelivery {
            id: row.get(1).map_err(db)?,
            scope: Scope::new(
                row.get::<_, String>(2).map_err(db)?,
                row.get::<_, String>(3).map_err(db)?,
            ),
            task_id: row.get(4).map_err(db)?,
            target: PushConfigRecord {
                config: decode_config(&target)?,
                version: row.get(5).map_err(db)?,
            },
            content_type: row.get(7).map_err(db)?,
            body: row.get(8).map_err(db)?,
            traceparent: row.get(12).map_err(db)?,
            tracestate: row.get(13).map_err(db)?,
        },
        attempts: row.get(9).map_err(db)?,
        next_attempt_ms: row.get(10).map_err(db)?,
        last_error: row.get(11).map_err(db)?,
    })
}

const DELIVERY_COLUMNS: &str = "seq, id, agent, owner, task_id, version, target, content_type, body, attempts, next_ms, last_error, traceparent, tracestate";

impl SqliteStore {
    async fn deliveries(&self, state: i64, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM push_outbox WHERE state = ?1 ORDER BY seq LIMIT ?2"
        );
        self.deliveries_by(sql, state, limit).await
    }

    /// The deliveries `sql` selects, given `?1` a state and `?2` a limit.
    async fn deliveries_by(
        &self,
        sql: String,
        state: i64,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
            let mut rows = stmt.query(params![state, limit]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                out.push(delivery_row(row)?);
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl PushStore for SqliteStore {
    async fn put_push_config(
        &self,
        scope: &Scope,
        record: &PushConfigRecord,
    ) -> Result<(), StoreError> {
        let (agent, owner) = (scope.agent.clone(), scope.owner.clone());
        let (task_id, id) = (record.config.task_id.clone(), record.config.id.clone());
        let version = record.version.clone();
        let body = record.config.encode_to_vec();
        let now = now_ms();
        self.exec(move |tx| {
            // Another owner's row matches the conflict but not the WHERE: untouched.
            tx.prepare_cached(
                "INSERT INTO push_configs (agent, task_id, id, owner, version, created, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (agent, task_id, id) DO UPDATE SET
                    version = excluded.version, body = excluded.body
                 WHERE push_configs.owner = excluded.owner",
            )
            .and_then(|mut s| s.execute(params![agent, task_id, id, owner, version, now, body]))
            .map(|n| n as u64)
            .map_err(db)
        })
        .await?;
        Ok(())
    }

    async fn get_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError> {
        let (agent, owner) = (scope.agent.clone(), scope.owner.clone());
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT version, body FROM push_configs
                     WHERE agent = ?1 AND task_id = ?2 AND id = ?3 AND owner = ?4",
                )
                .map_err(db)?;
            let row = stmt
                .query_row(params![agent, task_id, id, owner], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .optional()
                .map_err(db)?;
            row.map(|(version, body)| {
                Ok(PushConfigRecord {
                    config: decode_config(&body)?,
                    version,
                })
            })
            .transpose()
        })
        .await
    }

    async fn list_push_configs(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        let (agent, owner, task_id) =
            (scope.agent.clone(), scope.owner.clone(), task_id.to_owned());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT version, body FROM push_configs
                     WHERE agent = ?1 AND task_id = ?2 AND owner = ?3 ORDER BY created, id",
                )
                .map_err(db)?;
            let mut rows = stmt.query(params![agent, task_id, owner]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                out.push(config_row(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn delete_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let (agent, owner) = (scope.agent.clone(), scope.owner.clone());
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        let n = self
            .exec(move |tx| {
                tx.prepare_cached(
                    "DELETE FROM push_configs WHERE agent = ?1 AND task_id = ?2 AND id = ?3 AND owner = ?4",
                )
                .and_then(|mut s| s.execute(params![agent, task_id, id, owner]))
                .map(|n| n as u64)
                .map_err(db)
            })
            .await?;
        Ok(n > 0)
    }

    async fn push_tasks(&self) -> Result<Vec<(Scope, String)>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT DISTINCT agent, owner, task_id FROM push_configs")
                .map_err(db)?;
            let mut rows = stmt.query([]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                let agent: String = row.get(0).map_err(db)?;
                let owner: String = row.get(1).map_err(db)?;
                out.push((Scope::new(agent, owner), row.get(2).map_err(db)?));
            }
            Ok(out)
        })
        .await
    }

    async fn enqueue_deliveries(&self, items: Vec<NewDelivery>) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        self.exec(move |tx| insert_deliveries(tx, &items)).await?;
        Ok(())
    }

    async fn pending_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        self.deliveries(PENDING, limit).await
    }

    async fn delivery_heads(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        self.deliveries_by(heads_sql(), PENDING, limit).await
    }

    async fn purge_finished_configs(
        &self,
        before_ms: i64,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.exec(move |tx| {
            // Driven by the configs (few: this keeps them so), each task
            // looked up by its key.
            let tasks: Vec<(String, String)> = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT DISTINCT c.agent, c.task_id FROM push_configs c
                         JOIN tasks t ON t.agent = c.agent AND t.id = c.task_id
                         WHERE t.state IN (3, 4, 5, 7) AND t.status_ms < ?1
                           AND NOT EXISTS (SELECT 1 FROM push_outbox o
                               WHERE o.state = 0 AND o.agent = c.agent AND o.task_id = c.task_id)
                         LIMIT ?2",
                    )
                    .map_err(db)?;
                let rows = stmt
                    .query_map(params![before_ms, limit], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)?
            };
            let mut stmt = tx
                .prepare_cached("DELETE FROM push_configs WHERE agent = ?1 AND task_id = ?2")
                .map_err(db)?;
            for (agent, task) in &tasks {
                stmt.execute(params![agent, task]).map_err(db)?;
            }
            Ok(tasks.len() as u64)
        })
        .await
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        self.read(|conn| {
            let n: i64 = conn
                .prepare_cached("SELECT COUNT(*) FROM push_outbox WHERE state = ?1")
                .map_err(db)?
                .query_row(params![PENDING], |r| r.get(0))
                .map_err(db)?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn finish_delivery(&self, seq: i64, outcome: DeliveryOutcome) -> Result<(), StoreError> {
        self.exec(move |tx| {
            let n = match outcome {
                DeliveryOutcome::Delivered => tx
                    .prepare_cached("DELETE FROM push_outbox WHERE seq = ?1")
                    .and_then(|mut s| s.execute(params![seq])),
                DeliveryOutcome::Retry {
                    attempts,
                    next_attempt_ms,
                    error,
                } => tx
                    .prepare_cached(
                        "UPDATE push_outbox SET attempts = ?2, next_ms = ?3, last_error = ?4 WHERE seq = ?1",
                    )
                    .and_then(|mut s| s.execute(params![seq, attempts, next_attempt_ms, error])),
                DeliveryOutcome::Dead { attempts, error } => tx
                    .prepare_cached(
                        "UPDATE push_outbox SET state = ?2, attempts = ?3, last_error = ?4 WHERE seq = ?1",
                    )
                    .and_then(|mut s| s.execute(params![seq, DEAD, attempts, error])),
            };
            n.map(|n| n as u64).map_err(db)
        })
        .await?;
        Ok(())
    }

    async fn dead_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        self.deliveries(DEAD, limit).await
    }

    async fn task_deliveries(
        &self,
        agent: &str,
        task_id: &str,
        limit: usize,
    ) -> Result<crate::TaskDeliveries, StoreError> {
        let (agent, task_id) = (agent.to_owned(), task_id.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            // Found through `push_outbox_heads` (state, agent, task_id, …).
            let sql = format!(
                "SELECT {DELIVERY_COLUMNS} FROM push_outbox
                 WHERE state = ?1 AND agent = ?2 AND task_id = ?3 ORDER BY seq LIMIT ?4"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
            let mut of_state = |state: i64| -> Result<Vec<Delivery>, StoreError> {
                let mut rows = stmt
                    .query(params![state, agent, task_id, limit])
                    .map_err(db)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next().map_err(db)? {
                    out.push(delivery_row(row)?);
                }
                Ok(out)
            };
            Ok(crate::TaskDeliveries {
                pending: of_state(PENDING)?,
                dead: of_state(DEAD)?,
            })
        })
        .await
    }

    async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, StoreError> {
        let seqs = seqs.to_vec();
        self.exec(move |tx| {
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE push_outbox SET state = ?2, attempts = 0, next_ms = 0
                     WHERE seq = ?1 AND state = ?3",
                )
                .map_err(db)?;
            let mut replayed = 0u64;
            for seq in seqs {
                let n = stmt.execute(params![seq, PENDING, DEAD]).map_err(db)?;
                replayed = replayed.saturating_add(n as u64);
            }
            Ok(replayed)
        })
        .await
    }
}

/// Each group's first pending delivery (found from `push_outbox_heads`),
/// the soonest due first (so the due ones come before any that wait out a
/// backoff, however many of those there are): `?1` the pending state, `?2`
/// the limit.
fn heads_sql() -> String {
    format!(
        "SELECT {DELIVERY_COLUMNS} FROM push_outbox WHERE seq IN (
            SELECT MIN(seq) FROM push_outbox WHERE state = ?1
            GROUP BY agent, task_id, config_id)
         ORDER BY next_ms, seq LIMIT ?2"
    )
}

/// Records deliveries in the outbox inside the writer's transaction.
pub(crate) fn insert_deliveries(
    tx: &rusqlite::Transaction<'_>,
    items: &[NewDelivery],
) -> Result<u64, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO push_outbox
                (id, agent, owner, task_id, version, target, content_type, body, traceparent,
                 tracestate, config_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .map_err(db)?;
    for d in items {
        stmt.execute(params![
            d.id,
            d.scope.agent,
            d.scope.owner,
            d.task_id,
            d.target.version,
            d.target.config.encode_to_vec(),
            d.content_type,
            d.body,
            d.traceparent,
            d.tracestate,
            d.target.config.id
        ])
        .map_err(db)?;
    }
    Ok(items.len() as u64)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[tokio::test]
    async fn pending_deliveries_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        let scope = Scope::new("agent", "alice");
        let item = NewDelivery {
            id: "d1".into(),
            scope: scope.clone(),
            task_id: "t1".into(),
            target: PushConfigRecord {
                config: v1::TaskPushNotificationConfig {
                    task_id: "t1".into(),
                    id: "c1".into(),
                    url: "https://example.com/".into(),
                    ..Default::default()
                },
                version: "0.3".into(),
            },
            content_type: "application/json".into(),
            body: b"{}".to_vec(),
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            tracestate: String::new(),
        };
        {
            let store = SqliteStore::open_path(&path).unwrap();
            store.enqueue_deliveries(vec![item.clone()]).await.unwrap();
        }
        let store = SqliteStore::open_path(&path).unwrap();
        let pending = store.pending_deliveries(10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].item, item);
    }

    /// Deliveries pending when migration 7 runs get their config's id, so
    /// they stay in one line with the ones written after.
    #[tokio::test]
    async fn migration_7_fills_the_config_ids_of_pending_deliveries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        let config = v1::TaskPushNotificationConfig {
            task_id: "t1".into(),
            id: "c9".into(),
            url: "https://example.com/".into(),
            ..Default::default()
        };
        drop(SqliteStore::open_path(&path).unwrap());
        {
            // The outbox as schema 6 left it, with one pending delivery.
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "DROP INDEX push_outbox_heads; DROP INDEX tasks_finished;
                 ALTER TABLE push_outbox DROP COLUMN config_id;
                 PRAGMA user_version = 6;",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO push_outbox (id, agent, owner, task_id, version, target, content_type, body)
                 VALUES ('d1', 'agent', 'alice', 't1', '1.0', ?1, 'application/json', x'7b7d')",
                params![config.encode_to_vec()],
            )
            .unwrap();
        }
        drop(SqliteStore::open_path(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        let id: String = conn
            .query_row(
                "SELECT config_id FROM push_outbox WHERE id = 'd1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(id, "c9");
    }

    /// The worker's query finds each group's first from the index, however
    /// long the backlog: no scan of the table.
    #[tokio::test]
    async fn delivery_heads_come_from_the_heads_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        drop(SqliteStore::open_path(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", heads_sql()))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(params![PENDING, 10], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains("push_outbox_heads"), "{plan}");
        // The heads alone are sorted by when they are due.
        assert!(!plan.lines().any(|l| l.starts_with("SCAN")), "{plan}");
    }
}
