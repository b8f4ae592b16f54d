//! API keys in an SQLite table, by default in the task store's file. The
//! table has its own migration record (`heddle_auth_schema`), so it does not
//! touch the task store's `user_version`.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use rusqlite::{Connection, OptionalExtension, params};

use super::{KeyRecord, KeyStore};
use crate::AuthError;

/// Migrations of the key table, applied in order.
const MIGRATIONS: &[&str] = &["CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        hash TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
     );
     CREATE UNIQUE INDEX api_keys_active_name ON api_keys(name) WHERE revoked_at IS NULL;"];

/// API keys in SQLite.
#[derive(Debug)]
pub struct SqliteKeyStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

fn db(e: rusqlite::Error) -> AuthError {
    AuthError::Unavailable(format!("key store: {e}"))
}

impl SqliteKeyStore {
    /// Opens (creating if needed) the key table in the database at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        let path = path.as_ref().to_owned();
        let mut conn = Connection::open(&path).map_err(db)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db)?;
        let tx = conn.transaction().map_err(db)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS heddle_auth_schema (version INTEGER NOT NULL)",
        )
        .map_err(db)?;
        let version: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(version), 0) FROM heddle_auth_schema",
                [],
                |r| r.get(0),
            )
            .map_err(db)?;
        let known = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
        if version > known {
            return Err(AuthError::Config(format!(
                "{} has key table version {version}; this build knows {known}",
                path.display()
            )));
        }
        for (i, m) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            tx.execute_batch(m).map_err(db)?;
            tx.execute(
                "INSERT INTO heddle_auth_schema (version) VALUES (?1)",
                params![i64::try_from(i + 1).unwrap_or(i64::MAX)],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(Self {
            path,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection on a blocking thread: SQLite calls block.
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, AuthError> + Send + 'static,
    ) -> Result<T, AuthError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| AuthError::Unavailable(format!("key store call did not finish: {e}")))?
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyRecord> {
    Ok(KeyRecord {
        id: r.get(0)?,
        name: r.get(1)?,
        hash: r.get(2)?,
        created_at: r.get(3)?,
        revoked_at: r.get(4)?,
    })
}

#[async_trait::async_trait]
impl KeyStore for SqliteKeyStore {
    async fn insert(&self, k: &KeyRecord) -> Result<(), AuthError> {
        let k = k.clone();
        self.with_conn(move |conn| {
            conn.execute(
                "INSERT INTO api_keys (id, name, hash, created_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![k.id, k.name, k.hash, k.created_at, k.revoked_at],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, msg)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    if msg.is_some_and(|m| m.contains("api_keys.id")) {
                        AuthError::Config(format!("a key already has the id {}", k.id))
                    } else {
                        AuthError::Config(format!("an active key is already named {:?}", k.name))
                    }
                }
                e => db(e),
            })?;
            Ok(())
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
        let id = id.to_owned();
        self.with_conn(move |conn| {
            conn.query_row(
                "SELECT id, name, hash, created_at, revoked_at FROM api_keys WHERE id = ?1",
                params![id],
                row,
            )
            .optional()
            .map_err(db)
        })
        .await
    }

    async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        self.with_conn(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, name, hash, created_at, revoked_at FROM api_keys ORDER BY created_at, id",
                )
                .map_err(db)?;
            let rows = stmt.query_map([], row).map_err(db)?;
            rows.collect::<Result<_, _>>().map_err(db)
        })
        .await
    }

    async fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError> {
        let name_or_id = name_or_id.to_owned();
        self.with_conn(move |conn| {
            let tx = conn.transaction().map_err(db)?;
            let found = {
                let mut stmt = tx
                    .prepare(
                        "SELECT id, name, hash, created_at, revoked_at FROM api_keys
                         WHERE revoked_at IS NULL AND (name = ?1 OR id = ?1)",
                    )
                    .map_err(db)?;
                let rows = stmt.query_map(params![name_or_id], row).map_err(db)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(db)?
            };
            tx.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE revoked_at IS NULL AND (name = ?1 OR id = ?1)",
                params![name_or_id, at],
            )
            .map_err(db)?;
            tx.commit().map_err(db)?;
            Ok(found
                .into_iter()
                .map(|mut r| {
                    r.revoked_at = Some(at);
                    r
                })
                .collect())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::apikey::ApiKeys;

    #[tokio::test]
    async fn keys_survive_reopening_and_revocation_is_seen_by_another_handle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("heddle.db");
        let a = ApiKeys::new(Arc::new(SqliteKeyStore::open(&path).expect("open")))
            .cache_ttl(std::time::Duration::ZERO);
        let (record, key) = a.create("ci").await.expect("create");
        let b = ApiKeys::new(Arc::new(SqliteKeyStore::open(&path).expect("reopen")));
        assert_eq!(
            b.verify(key.expose()).await,
            Ok(format!("key:{}", record.id))
        );
        assert_eq!(b.list().await.expect("list").len(), 1);
        assert_eq!(b.revoke("ci").await.expect("revoke").len(), 1);
        assert!(a.verify(key.expose()).await.is_err());
        assert!(b.revoke("ci").await.expect("again").is_empty());
    }

    #[test]
    fn the_key_table_shares_a_file_with_the_task_store_without_touching_user_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("heddle.db");
        SqliteKeyStore::open(&path).expect("open");
        let conn = Connection::open(&path).expect("conn");
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("pragma");
        assert_eq!(v, 0);
        SqliteKeyStore::open(&path).expect("reopen is idempotent");
    }
}
