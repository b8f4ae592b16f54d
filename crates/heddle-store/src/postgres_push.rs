//! [`PushStore`] for [`PostgresStore`]: two tables beside `tasks`
//! (`migrations/postgres/2_push.sql`).
//!
//! * `push_configs`: one row per (agent, task, config id), owned like tasks;
//!   the config is protobuf bytes.
//! * `push_outbox`: one row per delivery, `seq` its recording order.
//!
//! The push worker reads the outbox with `delivery_heads`: per group (agent,
//! task, config) only the first in line, so a group's deliveries go out in
//! order. With one process that is enough; with several replicas on one
//! database, two workers would send the same deliveries. So here reading
//! the pending deliveries (or their heads) *claims* them: a
//! delivery is returned only if no other store instance holds a live claim
//! on any pending delivery of its group, and every delivery returned is
//! claimed for [`crate::PostgresOptions::claim_lease`]. A whole group moves
//! between replicas, never single deliveries, so the order within a group
//! holds across replicas too. Claims are made under a transaction-scoped
//! advisory lock: claiming is a short read and update, and serializing it
//! makes "no two instances hold one group" exact, where `FOR UPDATE SKIP
//! LOCKED` alone locks rows, not groups (a second replica could skip a
//! locked first delivery and take the second of the same group). The
//! worker's own calls renew its claims; a claim lapses when its replica
//! stops calling (it died), and another takes the group over.

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;
use sqlx::Row as _;
use sqlx::postgres::PgRow;

use crate::postgres::db;
use crate::{
    Delivery, DeliveryOutcome, NewDelivery, PostgresStore, PushConfigRecord, PushStore, Scope,
    StoreError,
};

const PENDING: i16 = 0;
const DEAD: i16 = 2;

/// First key of the advisory lock claims run under (the second is the
/// schema's hash, so stores in different schemas do not wait on each other).
const CLAIM_LOCK: i32 = 0x4865_6464; // "Hedd"

/// The columns `delivery_row` reads, in its order (a macro, so queries
/// stay `&'static str` literals, as sqlx wants).
macro_rules! delivery_columns {
    () => {
        "seq, id, agent, owner, task_id, version, target, content_type, body, attempts, next_ms, last_error, traceparent, tracestate"
    };
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_owned(), e.to_string())
}

fn decode_config(body: &[u8]) -> Result<v1::TaskPushNotificationConfig, StoreError> {
    v1::TaskPushNotificationConfig::decode(body).map_err(|e| corrupt("push config", e))
}

fn config_row(row: &PgRow) -> Result<PushConfigRecord, StoreError> {
    let version: String = row.try_get(0).map_err(|e| corrupt("push config", e))?;
    let body: Vec<u8> = row.try_get(1).map_err(|e| corrupt("push config", e))?;
    Ok(PushConfigRecord {
        config: decode_config(&body)?,
        version,
    })
}

fn delivery_row(row: &PgRow) -> Result<Delivery, StoreError> {
    let bad = |e: sqlx::Error| corrupt("push delivery", e);
    let target: Vec<u8> = row.try_get(6).map_err(bad)?;
    let attempts: i64 = row.try_get(9).map_err(bad)?;
    Ok(Delivery {
        seq: row.try_get(0).map_err(bad)?,
        item: NewDelivery {
            id: row.try_get(1).map_err(bad)?,
            scope: Scope::new(
                row.try_get::<String, _>(2).map_err(bad)?,
                row.try_get::<String, _>(3).map_err(bad)?,
            ),
            task_id: row.try_get(4).map_err(bad)?,
            target: PushConfigRecord {
                config: decode_config(&target)?,
                version: row.try_get(5).map_err(bad)?,
            },
            content_type: row.try_get(7).map_err(bad)?,
            body: row.try_get(8).map_err(bad)?,
            traceparent: row.try_get(12).map_err(bad)?,
            tracestate: row.try_get(13).map_err(bad)?,
        },
        attempts: u32::try_from(attempts).map_err(|e| corrupt("push delivery", e))?,
        next_attempt_ms: row.try_get(10).map_err(bad)?,
        last_error: row.try_get(11).map_err(bad)?,
    })
}

/// A caller's `limit` as SQL wants it.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// Claims, then returns, pending deliveries of the groups no other
    /// instance holds: every one, oldest first, or (`heads`) each group's
    /// first, the soonest due first.
    async fn claim(&self, limit: usize, heads: bool) -> Result<Vec<Delivery>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))")
            .bind(CLAIM_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let sql = if heads { HEADS_SQL } else { PENDING_SQL };
        let rows = sqlx::query(sql)
            .bind(&self.claimant)
            .bind(sql_limit(limit))
            .fetch_all(&mut *tx)
            .await
            .map_err(db)?;
        let out = rows
            .iter()
            .map(delivery_row)
            .collect::<Result<Vec<_>, _>>()?;
        let seqs: Vec<i64> = out.iter().map(|d| d.seq).collect();
        if !seqs.is_empty() {
            sqlx::query(
                "UPDATE push_outbox SET claimed_by = $1,
                    claimed_until = now() + make_interval(secs => $2::double precision / 1000)
                 WHERE seq = ANY($3)",
            )
            .bind(&self.claimant)
            .bind(self.claim_lease_ms)
            .bind(&seqs)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }
}

/// Pending deliveries of groups no other claimant holds. The pending state
/// is spelled out (`state = 0`), not bound: the partial indexes on it serve
/// a prepared statement only so.
const PENDING_SQL: &str = concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM push_outbox o
     WHERE o.state = 0 AND NOT EXISTS (
        SELECT 1 FROM push_outbox h
        WHERE h.state = 0 AND h.agent = o.agent AND h.task_id = o.task_id
          AND h.config_id = o.config_id
          AND h.claimed_until > now() AND h.claimed_by <> $1)
     ORDER BY o.seq LIMIT $2"
);

/// The first pending delivery of each group no other claimant holds
/// (`push_outbox_heads`), the soonest due first, so the due ones come
/// before any that wait out a backoff, however many of those there are.
const HEADS_SQL: &str = concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM push_outbox o
     WHERE o.state = 0 AND o.seq IN (
        SELECT MIN(seq) FROM push_outbox WHERE state = 0
        GROUP BY agent, task_id, config_id)
       AND NOT EXISTS (
        SELECT 1 FROM push_outbox h
        WHERE h.state = 0 AND h.agent = o.agent AND h.task_id = o.task_id
          AND h.config_id = o.config_id
          AND h.claimed_until > now() AND h.claimed_by <> $1)
     ORDER BY o.next_ms, o.seq LIMIT $2"
);

#[async_trait]
impl PushStore for PostgresStore {
    async fn put_push_config(
        &self,
        scope: &Scope,
        record: &PushConfigRecord,
    ) -> Result<(), StoreError> {
        // Another owner's row matches the conflict but not the WHERE: untouched.
        sqlx::query(
            "INSERT INTO push_configs (agent, task_id, id, owner, version, body)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (agent, task_id, id) DO UPDATE SET
                version = EXCLUDED.version, body = EXCLUDED.body
             WHERE push_configs.owner = EXCLUDED.owner",
        )
        .bind(&scope.agent)
        .bind(&record.config.task_id)
        .bind(&record.config.id)
        .bind(&scope.owner)
        .bind(&record.version)
        .bind(record.config.encode_to_vec())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn get_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT version, body FROM push_configs
             WHERE agent = $1 AND task_id = $2 AND id = $3 AND owner = $4",
        )
        .bind(&scope.agent)
        .bind(task_id)
        .bind(id)
        .bind(&scope.owner)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(config_row).transpose()
    }

    async fn list_push_configs(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT version, body FROM push_configs
             WHERE agent = $1 AND task_id = $2 AND owner = $3 ORDER BY created",
        )
        .bind(&scope.agent)
        .bind(task_id)
        .bind(&scope.owner)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(config_row).collect()
    }

    async fn delete_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM push_configs WHERE agent = $1 AND task_id = $2 AND id = $3 AND owner = $4",
        )
        .bind(&scope.agent)
        .bind(task_id)
        .bind(id)
        .bind(&scope.owner)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() > 0)
    }

    async fn push_tasks(&self) -> Result<Vec<(Scope, String)>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT agent, owner, task_id FROM push_configs")
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|row| {
                let bad = |e: sqlx::Error| corrupt("push config", e);
                let agent: String = row.try_get(0).map_err(bad)?;
                let owner: String = row.try_get(1).map_err(bad)?;
                Ok((Scope::new(agent, owner), row.try_get(2).map_err(bad)?))
            })
            .collect()
    }

    async fn enqueue_deliveries(&self, items: Vec<NewDelivery>) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(db)?;
        insert_deliveries(&mut tx, &items).await?;
        tx.commit().await.map_err(db)
    }

    /// Claims, then returns, the pending deliveries of the groups no other
    /// instance holds (see the module docs), oldest first.
    async fn pending_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        self.claim(limit, false).await
    }

    /// As [`pending_deliveries`](Self::pending_deliveries), the first of
    /// each group only, the soonest due first.
    async fn delivery_heads(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        self.claim(limit, true).await
    }

    async fn purge_finished_configs(
        &self,
        before_ms: i64,
        limit: usize,
    ) -> Result<u64, StoreError> {
        // Driven by the configs (few: this keeps them so), each task looked
        // up by its key.
        let purged: i64 = sqlx::query_scalar(
            "WITH ended AS (
                SELECT DISTINCT c.agent, c.task_id FROM push_configs c
                JOIN tasks t ON t.agent = c.agent AND t.id = c.task_id
                WHERE t.state IN (3, 4, 5, 7) AND t.status_ms < $1
                  AND NOT EXISTS (SELECT 1 FROM push_outbox o
                      WHERE o.state = 0 AND o.agent = c.agent AND o.task_id = c.task_id)
                LIMIT $2),
             gone AS (DELETE FROM push_configs c USING ended
                 WHERE c.agent = ended.agent AND c.task_id = ended.task_id)
             SELECT COUNT(*) FROM ended",
        )
        .bind(before_ms)
        .bind(sql_limit(limit))
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(u64::try_from(purged).unwrap_or(0))
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_outbox WHERE state = 0")
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn finish_delivery(&self, seq: i64, outcome: DeliveryOutcome) -> Result<(), StoreError> {
        let query = match outcome {
            DeliveryOutcome::Delivered => {
                sqlx::query("DELETE FROM push_outbox WHERE seq = $1").bind(seq)
            }
            // The claim stays: this instance retries it, in order.
            DeliveryOutcome::Retry {
                attempts,
                next_attempt_ms,
                error,
            } => sqlx::query(
                "UPDATE push_outbox SET attempts = $2, next_ms = $3, last_error = $4 WHERE seq = $1",
            )
            .bind(seq)
            .bind(i64::from(attempts))
            .bind(next_attempt_ms)
            .bind(error),
            DeliveryOutcome::Dead { attempts, error } => sqlx::query(
                "UPDATE push_outbox SET state = $2, attempts = $3, last_error = $4 WHERE seq = $1",
            )
            .bind(seq)
            .bind(DEAD)
            .bind(i64::from(attempts))
            .bind(error),
        };
        query.execute(&self.pool).await.map_err(db)?;
        Ok(())
    }

    async fn dead_deliveries(&self, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let sql = concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM push_outbox WHERE state = $1 ORDER BY seq LIMIT $2"
        );
        let rows = sqlx::query(sql)
            .bind(DEAD)
            .bind(sql_limit(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(delivery_row).collect()
    }

    /// A plain read, unlike [`pending_deliveries`](Self::pending_deliveries)
    /// here: it sees the deliveries other replicas hold and claims none.
    async fn task_deliveries(
        &self,
        agent: &str,
        task_id: &str,
        limit: usize,
    ) -> Result<crate::TaskDeliveries, StoreError> {
        // Found through `push_outbox_groups` (agent, task_id, …).
        let sql = concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM push_outbox WHERE agent = $1 AND task_id = $2 AND state = $3 ORDER BY seq LIMIT $4"
        );
        let mut found = crate::TaskDeliveries::default();
        for (state, into) in [(PENDING, &mut found.pending), (DEAD, &mut found.dead)] {
            let rows = sqlx::query(sql)
                .bind(agent)
                .bind(task_id)
                .bind(state)
                .bind(sql_limit(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
            *into = rows.iter().map(delivery_row).collect::<Result<_, _>>()?;
        }
        Ok(found)
    }

    async fn replay_dead(&self, seqs: &[i64]) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE push_outbox SET state = $2, attempts = 0, next_ms = 0,
                claimed_by = '', claimed_until = '-infinity'
             WHERE seq = ANY($1) AND state = $3",
        )
        .bind(seqs)
        .bind(PENDING)
        .bind(DEAD)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }
}

/// Records deliveries in the outbox inside `tx`, in the given order (one
/// statement each, so `seq` follows that order).
pub(crate) async fn insert_deliveries(
    tx: &mut sqlx::PgTransaction<'_>,
    items: &[NewDelivery],
) -> Result<(), StoreError> {
    for d in items {
        sqlx::query(
            "INSERT INTO push_outbox
                (id, agent, owner, task_id, config_id, version, target, content_type, body,
                 traceparent, tracestate)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&d.id)
        .bind(&d.scope.agent)
        .bind(&d.scope.owner)
        .bind(&d.task_id)
        .bind(&d.target.config.id)
        .bind(&d.target.version)
        .bind(d.target.config.encode_to_vec())
        .bind(&d.content_type)
        .bind(&d.body)
        .bind(&d.traceparent)
        .bind(&d.tracestate)
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    }
    Ok(())
}
