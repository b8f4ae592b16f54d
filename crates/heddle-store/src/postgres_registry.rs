//! [`RegistryStore`] for [`PostgresStore`]: two tables beside `tasks`
//! (`migrations/postgres/3_registry.sql`), as in the SQLite store.
//!
//! * `registry_agents`: one row per registered agent, its document as the
//!   hub wrote it.
//! * `task_links`: one row per hosted task that stands for a task elsewhere.

use async_trait::async_trait;
use sqlx::Row as _;
use sqlx::postgres::PgRow;

use crate::postgres::db;
use crate::registry::now_ms;
use crate::{AgentRecord, PostgresStore, RegistryStore, StoreError};

fn record(row: &PgRow) -> Result<AgentRecord, StoreError> {
    let bad = |e: sqlx::Error| StoreError::Corrupt("registry agent".into(), e.to_string());
    Ok(AgentRecord {
        id: row.try_get(0).map_err(bad)?,
        document: row.try_get(1).map_err(bad)?,
        updated_ms: row.try_get(2).map_err(bad)?,
    })
}

#[async_trait]
impl RegistryStore for PostgresStore {
    async fn put_agent(&self, id: &str, document: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO registry_agents (id, document, updated_ms) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET document = EXCLUDED.document,
                updated_ms = EXCLUDED.updated_ms",
        )
        .bind(id)
        .bind(document)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn agent(&self, id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let row = sqlx::query("SELECT id, document, updated_ms FROM registry_agents WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.as_ref().map(record).transpose()
    }

    async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        let rows = sqlx::query("SELECT id, document, updated_ms FROM registry_agents ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(record).collect()
    }

    /// The agent and its links in one transaction, so a crash keeps both or
    /// neither.
    async fn delete_agent(&self, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("DELETE FROM task_links WHERE agent = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let done = sqlx::query("DELETE FROM registry_agents WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(done.rows_affected() > 0)
    }

    async fn put_link(&self, agent: &str, task_id: &str, link: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO task_links (agent, task_id, link) VALUES ($1, $2, $3)
             ON CONFLICT (agent, task_id) DO UPDATE SET link = EXCLUDED.link",
        )
        .bind(agent)
        .bind(task_id)
        .bind(link)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn link(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT link FROM task_links WHERE agent = $1 AND task_id = $2")
            .bind(agent)
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(|r| {
            r.try_get(0)
                .map_err(|e| StoreError::Corrupt("task link".into(), e.to_string()))
        })
        .transpose()
    }
}
