//! [`LeaseStore`] for [`PostgresStore`]: the `task_leases` table
//! (`migrations/postgres/6_generations_leases.sql`).
//!
//! Claiming is one `DELETE … RETURNING` over rows locked with
//! `FOR UPDATE SKIP LOCKED`, so replicas reaping at the same moment split
//! the expired leases between them and none is ended twice. Times are the
//! database's (`now_ms!`), so replicas whose clocks disagree still agree on
//! which leases have expired.

use async_trait::async_trait;
use sqlx::Row as _;

use crate::postgres::db;
use crate::{ExpiredLease, HeldLease, LeaseStore, PostgresStore, Scope, StoreError};

/// The database's clock, in Unix milliseconds (a macro, for `concat!`).
macro_rules! now_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

#[async_trait]
impl LeaseStore for PostgresStore {
    async fn acquire_lease(
        &self,
        scope: &Scope,
        task_id: &str,
        replica: &str,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(concat!(
            "INSERT INTO task_leases (agent, task_id, owner, replica, expires_ms)
             VALUES ($1, $2, $5, $3, ",
            now_ms!(),
            " + $4)
             ON CONFLICT (agent, task_id) DO UPDATE SET owner = EXCLUDED.owner,
                replica = EXCLUDED.replica, expires_ms = EXCLUDED.expires_ms
             WHERE task_leases.replica = EXCLUDED.replica OR task_leases.expires_ms < ",
            now_ms!()
        ))
        .bind(&scope.agent)
        .bind(task_id)
        .bind(replica)
        .bind(ttl_ms)
        .bind(&scope.owner)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() > 0)
    }

    async fn lease_holder(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT replica FROM task_leases WHERE agent = $1 AND task_id = $2")
            .bind(agent)
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn renew_leases(&self, replica: &str, ttl_ms: i64) -> Result<Vec<HeldLease>, StoreError> {
        let rows = sqlx::query(concat!(
            "UPDATE task_leases SET expires_ms = ",
            now_ms!(),
            " + $2 WHERE replica = $1 RETURNING agent, task_id"
        ))
        .bind(replica)
        .bind(ttl_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let bad = |e: sqlx::Error| StoreError::Corrupt("task lease".into(), e.to_string());
                Ok(HeldLease {
                    agent: row.try_get(0).map_err(bad)?,
                    task_id: row.try_get(1).map_err(bad)?,
                })
            })
            .collect()
    }

    async fn release_lease(
        &self,
        agent: &str,
        task_id: &str,
        replica: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM task_leases WHERE agent = $1 AND task_id = $2 AND replica = $3")
            .bind(agent)
            .bind(task_id)
            .bind(replica)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn claim_expired(
        &self,
        agents: &[String],
        limit: usize,
    ) -> Result<Vec<ExpiredLease>, StoreError> {
        let rows = sqlx::query(concat!(
            "DELETE FROM task_leases WHERE (agent, task_id) IN (
                SELECT agent, task_id FROM task_leases WHERE expires_ms < ",
            now_ms!(),
            " AND agent = ANY($1)
                ORDER BY expires_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING agent, owner, task_id, replica"
        ))
        .bind(agents)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let bad = |e: sqlx::Error| StoreError::Corrupt("task lease".into(), e.to_string());
                Ok(ExpiredLease {
                    scope: Scope::new(
                        row.try_get::<String, _>(0).map_err(bad)?,
                        row.try_get::<String, _>(1).map_err(bad)?,
                    ),
                    task_id: row.try_get(2).map_err(bad)?,
                    replica: row.try_get(3).map_err(bad)?,
                })
            })
            .collect()
    }
}
