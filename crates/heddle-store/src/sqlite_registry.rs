//! [`RegistryStore`] for [`SqliteStore`]: two tables beside `tasks`.
//!
//! * `registry_agents`: one row per registered agent, its document as the
//!   hub wrote it.
//! * `task_links`: one row per hosted task that stands for a task elsewhere.

use async_trait::async_trait;
use rusqlite::{OptionalExtension as _, params};

use crate::registry::now_ms;
use crate::sqlite::db;
use crate::{AgentRecord, RegistryStore, SqliteStore, StoreError};

/// Schema migration 3 (see `sqlite::MIGRATIONS`).
pub(crate) const MIGRATION: &str = "CREATE TABLE registry_agents (
        id         TEXT    NOT NULL PRIMARY KEY,
        document   TEXT    NOT NULL,
        updated_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE task_links (
        agent   TEXT NOT NULL,
        task_id TEXT NOT NULL,
        link    TEXT NOT NULL,
        PRIMARY KEY (agent, task_id)
    ) WITHOUT ROWID;";

fn record(row: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRecord> {
    Ok(AgentRecord {
        id: row.get(0)?,
        document: row.get(1)?,
        updated_ms: row.get(2)?,
    })
}

#[async_trait]
impl RegistryStore for SqliteStore {
    async fn put_agent(&self, id: &str, document: &str) -> Result<(), StoreError> {
        let (id, document, at) = (id.to_owned(), document.to_owned(), now_ms());
        self.exec(move |tx| {
            tx.execute(
                "INSERT INTO registry_agents (id, document, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET document = ?2, updated_ms = ?3",
                params![id, document, at],
            )
            .map_err(db)?;
            Ok(1)
        })
        .await?;
        Ok(())
    }

    async fn agent(&self, id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT id, document, updated_ms FROM registry_agents WHERE id = ?1",
            )
            .map_err(db)?
            .query_row(params![id], record)
            .optional()
            .map_err(db)
        })
        .await
    }

    async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT id, document, updated_ms FROM registry_agents ORDER BY id")
                .map_err(db)?;
            let rows = stmt.query_map([], record).map_err(db)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db)
        })
        .await
    }

    async fn delete_agent(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        let n = self
            .exec(move |tx| {
                tx.execute("DELETE FROM task_links WHERE agent = ?1", params![id])
                    .map_err(db)?;
                let n = tx
                    .execute("DELETE FROM registry_agents WHERE id = ?1", params![id])
                    .map_err(db)?;
                Ok(n as u64)
            })
            .await?;
        Ok(n > 0)
    }

    async fn put_link(&self, agent: &str, task_id: &str, link: &str) -> Result<(), StoreError> {
        let (agent, task_id, link) = (agent.to_owned(), task_id.to_owned(), link.to_owned());
        self.exec(move |tx| {
            tx.execute(
                "INSERT INTO task_links (agent, task_id, link) VALUES (?1, ?2, ?3)
                 ON CONFLICT (agent, task_id) DO UPDATE SET link = ?3",
                params![agent, task_id, link],
            )
            .map_err(db)?;
            Ok(1)
        })
        .await?;
        Ok(())
    }

    async fn link(&self, agent: &str, task_id: &str) -> Result<Option<String>, StoreError> {
        let (agent, task_id) = (agent.to_owned(), task_id.to_owned());
        self.read(move |conn| {
            conn.prepare_cached("SELECT link FROM task_links WHERE agent = ?1 AND task_id = ?2")
                .map_err(db)?
                .query_row(params![agent, task_id], |r| r.get(0))
                .optional()
                .map_err(db)
        })
        .await
    }
}
