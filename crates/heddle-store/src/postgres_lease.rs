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
        limit: usize,
    ) -> Result<Vec<ExpiredLease>, StoreError> {
        let rows = sqlx::query(concat!(
            "DELETE FROM task_leases WHERE (agent, task_id) IN (
                SELECT agent, task_id FROM task_leases WHERE expires_ms < ",
            now_ms!(),
            " AND agent = ANY($1)
                ORDER BY expires_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING agent, owner, task_id, replica, run_request, run_extensions, run_version"
        ))
        .bind(agents)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let bad = |e: sqlx::Error| StoreError::Corrupt("task lease".into(), e.to_string());
                let task_id: String = row.try_get(2).map_err(bad)?;
                let run = match row.try_get::<Option<Vec<u8>>, _>(4).map_err(bad)? {
                    None => None,
                    Some(request) => Some(leased_run(
                        &task_id,
                        &request,
                        row.try_get::<Option<Vec<String>>, _>(5).map_err(bad)?,
                        row.try_get::<Option<String>, _>(6).map_err(bad)?,
                    )?),
                };
                Ok(ExpiredLease {
                    scope: Scope::new(
                        row.try_get::<String, _>(0).map_err(bad)?,
                        row.try_get::<String, _>(1).map_err(bad)?,
                    ),
                    task_id,
                    replica: row.try_get(3).map_err(bad)?,
                    run,
                })
            })
            .collect()
    }
}

/// A run's record as its lease row keeps it.
fn leased_run(
    task_id: &str,
    request: &[u8],
    extensions: Option<Vec<String>>,
    version: Option<String>,
) -> Result<LeasedRun, StoreError> {
    let request = v1::SendMessageRequest::decode(request)
        .map_err(|e| StoreError::Corrupt(format!("the lease of task {task_id}"), e.to_string()))?;
    Ok(LeasedRun {
        configuration: request.configuration,
        metadata: request.metadata,
        extensions: extensions.unwrap_or_default(),
        protocol_version: version.unwrap_or_default(),
    })
}
