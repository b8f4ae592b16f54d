//! API keys in a PostgreSQL table, on the pool of the task store
//! (`heddle_store::PostgresStore::pool`), so every replica of a hub checks
//! the same keys and sees a revocation within its cache time. As in SQLite,
//! the table keeps its own migration record (`heddle_auth_schema`), apart
//! from the task store's.

use sqlx::{PgPool, Row as _, postgres::PgRow};

use super::{KeyRecord, KeyStore};
use crate::AuthError;

/// Migrations of the key table, applied in order.
const MIGRATIONS: &[&str] = &["CREATE TABLE api_keys (
        id         TEXT COLLATE \"C\" PRIMARY KEY,
        name       TEXT   NOT NULL,
        hash       TEXT   NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
     );
     CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL;"];

/// Taken while migrating, so replicas starting together migrate once.
const MIGRATION_LOCK: i64 = 0x6865_6464_6c65_6b65; // "heddleke"

const COLUMNS: &str = "id, name, hash, created_at, revoked_at";

/// API keys in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresKeyStore {
    pool: PgPool,
}

fn db(e: sqlx::Error) -> AuthError {
    // Connection settings may quote the URL: never shown.
    match e {
        sqlx::Error::Configuration(_) => {
            AuthError::Unavailable("key store: invalid PostgreSQL connection settings".into())
        }
        other => AuthError::Unavailable(format!("key store: {other}")),
    }
}

fn row(r: &PgRow) -> Result<KeyRecord, AuthError> {
    Ok(KeyRecord {
        id: r.try_get(0).map_err(db)?,
        name: r.try_get(1).map_err(db)?,
        hash: r.try_get(2).map_err(db)?,
        created_at: r.try_get(3).map_err(db)?,
        revoked_at: r.try_get(4).map_err(db)?,
    })
}

impl PostgresKeyStore {
    /// The key table on `pool` (whose connections already use the schema
    /// Heddle's tables live in), created or migrated if needed.
    pub async fn open(pool: PgPool) -> Result<Self, AuthError> {
        let mut tx = pool.begin().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query("CREATE TABLE IF NOT EXISTS heddle_auth_schema (version BIGINT NOT NULL)")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let version: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM heddle_auth_schema")
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
        let known = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
        if version > known {
            return Err(AuthError::Config(format!(
                "the database has key table version {version}; this build knows {known}"
            )));
        }
        for (i, m) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            sqlx::raw_sql(*m).execute(&mut *tx).await.map_err(db)?;
            sqlx::query("INSERT INTO heddle_auth_schema (version) VALUES ($1)")
                .bind(i64::try_from(i + 1).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(Self { pool })
    }
}

#[async_trait::async_trait]
impl KeyStore for PostgresKeyStore {
    async fn insert(&self, k: &KeyRecord) -> Result<(), AuthError> {
        sqlx::query(
            "INSERT INTO api_keys (id, name, hash, created_at, revoked_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&k.id)
        .bind(&k.name)
        .bind(&k.hash)
        .bind(k.created_at)
        .bind(k.revoked_at)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            match e
                .as_database_error()
                .filter(|d| d.is_unique_violation())
                .and_then(|d| d.constraint())
            {
                Some("api_keys_active_name") => {
                    AuthError::Config(format!("an active key is already named {:?}", k.name))
                }
                Some(_) => AuthError::Config(format!("a key already has the id {}", k.id)),
                None => db(e),
            }
        })?;
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
        let sql = format!("SELECT {COLUMNS} FROM api_keys WHERE id = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .as_ref()
            .map(row)
            .transpose()
    }

    async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        let sql = format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at, id");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?
            .iter()
            .map(row)
            .collect()
    }

    async fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError> {
        let sql = format!(
            "UPDATE api_keys SET revoked_at = $2
             WHERE revoked_at IS NULL AND (name = $1 OR id = $1)
             RETURNING {COLUMNS}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name_or_id)
            .bind(at)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?
            .iter()
            .map(row)
            .collect()
    }
}
