//! [`LeaseStore`] for [`PostgresStore`]: the `task_leases` table
//! (`migrations/postgres/6_generations_leases.sql`).
//!
//! Claiming is one `DELETE … RETURNING` over rows locked with
//! `FOR UPDATE SKIP LOCKED`, so replicas reaping at the same moment split
//! the expired leases between them and none is ended twice. Times are the
//! database's (`now_ms!`), so replicas whose clocks disagree still agree on
//! which leases have expired.

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;
use sqlx::Row as _;

use crate::postgres::db;
use crate::{ExpiredLease, HeldLease, LeaseStore, LeasedRun, PostgresStore, Scope, StoreError};

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
        run: Option<&LeasedRun>,
    ) -> Result<bool, StoreError> {
        let request = run.map(|r| {
            v1::SendMessageRequest {
                configuration: r.configuration.clone(),
                metadata: r.metadata.clone(),
                ..Default::default()
            }
            .encode_to_vec()
        });
        let done = sqlx::query(concat!(
            "INSERT INTO task_leases (agent, task_id, owner, replica, expires_ms,
                run_request, run_extensions, run_version)
             VALUES ($1, $2, $5, $3, ",
            now_ms!(),
            " + $4, $6, $7, $8)
             ON CONFLICT (agent, task_id) DO UPDATE SET owner = EXCLUDED.owner,
                replica = EXCLUDED.replica, expires_ms = EXCLUDED.expires_ms,
                run_request = COALESCE(EXCLUDED.run_request, task_leases.run_request),
                run_extensions = COALESCE(EXCLUDED.run_extensions, task_leases.run_extensions),
                run_version = COALESCE(EXCLUDED.run_version, task_leases.run_version)
             WHERE task_leases.replica = EXCLUDED.replica OR task_leases.expires_ms < ",
            now_ms!()
        ))
        .bind(&scope.agent)
        .bind(task_id)
        .bind(replica)
        .bind(ttl_ms)
        .bind(&scope.owner)
        .bind(request)
        .bind(run.map(|r| r.extensions.as_slice()))
        .bind(run.map(|r| r.protocol_version.as_str()))
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
        claimant: &str,
        limit: usize,
    ) -> Result<Vec<ExpiredLease>, StoreError> {
        let rows = sqlx::query(concat!(
            "DELETE FROM task_leases WHERE (agent, task_id) IN (
                SELECT agent, task_id FROM task_leases WHERE expires_ms < ",
            now_ms!(),
            " AND agent = ANY($1) AND replica <> $3
                ORDER BY expires_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING agent, owner, task_id, replica, run_request, run_extensions, run_version"
        ))
        .bind(agents)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(claimant)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        // The rows are gone already: one that cannot be read must not take
        // the others' tasks with it.
        Ok(rows.iter().filter_map(expired_lease).collect())
    }
}

/// One claimed lease row; `None` (logged) when it cannot be read. A run
/// record that cannot be read is left out: the task is then resumed without
/// it, or failed.
fn expired_lease(row: &sqlx::postgres::PgRow) -> Option<ExpiredLease> {
    let read = || -> Result<(String, String, String, String), sqlx::Error> {
        Ok((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ))
    };
    let (agent, owner, task_id, replica) = match read() {
        Ok(fields) => fields,
        Err(e) => {
            tracing::error!(error = %e, "an expired task lease could not be read; its task is not ended");
            return None;
        }
    };
    let run = match leased_run(row) {
        Ok(run) => run,
        Err(e) => {
            tracing::warn!(task = %task_id, error = %e, "a task lease's run record could not be read");
            None
        }
    };
    Some(ExpiredLease {
        scope: Scope::new(agent, owner),
        task_id,
        replica,
        run,
    })
}

/// The run record of a claimed lease row, if it has one.
fn leased_run(row: &sqlx::postgres::PgRow) -> Result<Option<LeasedRun>, String> {
    let Some(request) = row
        .try_get::<Option<Vec<u8>>, _>(4)
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let request = v1::SendMessageRequest::decode(request.as_slice()).map_err(|e| e.to_string())?;
    Ok(Some(LeasedRun {
        configuration: request.configuration,
        metadata: request.metadata,
        extensions: row
            .try_get::<Option<Vec<String>>, _>(5)
            .map_err(|e| e.to_string())?
            .unwrap_or_default(),
        protocol_version: row
            .try_get::<Option<String>, _>(6)
            .map_err(|e| e.to_string())?
            .unwrap_or_default(),
    }))
}
