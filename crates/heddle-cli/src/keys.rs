//! `heddle keys`: API keys for `heddle serve --require-auth`, kept as SHA-256
//! hashes beside the tasks (table `api_keys`): in the task store's SQLite
//! file, or in its PostgreSQL database, where every replica checks them. A
//! key's tasks belong to `key:ID`; the name is for people, and may be reused
//! once revoked.

use std::{
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use clap::Subcommand;
use heddle_auth::apikey::{ApiKeys, KeyRecord, PostgresKeyStore, SqliteKeyStore};

/// `heddle keys …`.
#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Create an API key; it is printed once, on stdout, and stored only as a hash.
    Create {
        /// A name for the key (who or what uses it). Tasks it creates belong to
        /// `key:ID`, its id, so a new key reusing a revoked key's name gets none of them.
        #[arg(long)]
        name: String,
        /// Where keys live: `sqlite:PATH` or `postgres://…` (default: the
        /// store of `heddle serve`).
        #[arg(long)]
        store: Option<String>,
    },
    /// List the keys (names, ids and caller ids, never the keys).
    List {
        /// Where keys live: `sqlite:PATH` or `postgres://…` (default: the
        /// store of `heddle serve`).
        #[arg(long)]
        store: Option<String>,
        /// `text` or `json`.
        #[arg(short, long, default_value = "text")]
        output: String,
    },
    /// Revoke a key by name or id; a running server refuses it within a minute
    /// (at once for keys it has not seen yet).
    Revoke {
        /// The key's name or id.
        name_or_id: String,
        /// Where keys live: `sqlite:PATH` or `postgres://…` (default: the
        /// store of `heddle serve`).
        #[arg(long)]
        store: Option<String>,
    },
}

/// Where keys live, from a `--store` value: the task store's SQLite file
/// (the default one when the task store is in memory) or its PostgreSQL
/// database.
#[derive(Debug)]
pub enum KeyDb {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (with its `schema`).
    Postgres(String),
}

impl std::fmt::Display for KeyDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            // Never the password.
            Self::Postgres(url) => f.write_str(&heddle_store::redact_url(url)),
        }
    }
}

/// Where the keys of a `--store` value live.
pub fn key_db(store: Option<&str>) -> anyhow::Result<KeyDb> {
    match store {
        None | Some("memory") => Ok(KeyDb::Sqlite(crate::serve::default_db())),
        Some(s) if s.starts_with("sqlite:") => {
            Ok(KeyDb::Sqlite(PathBuf::from(&s["sqlite:".len()..])))
        }
        Some(s) if crate::serve::is_postgres(s) => Ok(KeyDb::Postgres(s.to_owned())),
        Some(other) => bail!(
            "unknown store {:?}: use `sqlite:PATH` or `postgres://…`",
            heddle_store::redact_url(other)
        ),
    }
}

/// Opens the key table in `db`, creating the file and table if needed.
pub async fn open(db: &KeyDb) -> anyhow::Result<ApiKeys> {
    match db {
        KeyDb::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let store = SqliteKeyStore::open(path)
                .with_context(|| format!("opening the key store at {}", path.display()))?;
            Ok(ApiKeys::new(Arc::new(store)))
        }
        KeyDb::Postgres(url) => {
            // A small pool of its own: key checks are few (cached) and short.
            let opts = heddle_store::PostgresOptions {
                max_connections: 2,
                ..Default::default()
            };
            let tasks = heddle_store::PostgresStore::connect(url, opts)
                .await
                .with_context(|| format!("opening the key store at {db}"))?;
            let store = PostgresKeyStore::open(tasks.pool().clone())
                .await
                .with_context(|| format!("opening the key store at {db}"))?;
            Ok(ApiKeys::new(Arc::new(store)))
        }
    }
}

fn date(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
    httpdate::fmt_http_date(t)
}

fn json(r: &KeyRecord) -> serde_json::Value {
    serde_json::json!({
        "id": r.id,
        "name": r.name,
        "caller": r.principal(),
        "legacyHash": r.has_legacy_hash(),
        "createdAt": date(r.created_at),
        "revokedAt": r.revoked_at.map(date),
    })
}

/// Runs a `keys` subcommand.
pub async fn run(cmd: KeysCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        KeysCommand::Create { name, store } => {
            let path = key_db(store.as_deref())?;
            let keys = open(&path).await?;
            let (record, key) = keys.create(&name).await?;
            eprintln!(
                "Created API key {:?} (id {}, caller {}) in {}. It is shown only this once:",
                record.name,
                record.id,
                record.principal(),
                path
            );
            println!("{}", key.expose());
            eprintln!(
                "Clients send it in the `api-key` header (heddle: --api-key KEY) to a server \
                 started with `heddle serve --require-auth`."
            );
            Ok(ExitCode::SUCCESS)
        }
        KeysCommand::List { store, output } => {
            let path = key_db(store.as_deref())?;
            let keys = open(&path).await?.list().await?;
            match output.as_str() {
                "json" => {
                    let all: Vec<_> = keys.iter().map(json).collect();
                    println!("{}", serde_json::Value::Array(all));
                }
                "text" => {
                    if keys.is_empty() {
                        eprintln!(
                            "No API keys in {path}; create one with `heddle keys create --name NAME`."
                        );
                    }
                    for k in &keys {
                        let status = match k.revoked_at {
                            Some(t) => format!("revoked {}", date(t)),
                            None if k.has_legacy_hash() => {
                                "refused: argon2 hash from an older heddle, recreate it".to_owned()
                            }
                            None => "active".to_owned(),
                        };
                        println!(
                            "{}  {:<20}  created {}  {status}",
                            k.id,
                            k.name,
                            date(k.created_at)
                        );
                    }
                }
                other => bail!("unknown output {other:?}: use text or json"),
            }
            Ok(ExitCode::SUCCESS)
        }
        KeysCommand::Revoke { name_or_id, store } => {
            let path = key_db(store.as_deref())?;
            let revoked = open(&path).await?.revoke(&name_or_id).await?;
            if revoked.is_empty() {
                bail!("no active key is named or has the id {name_or_id:?}");
            }
            for r in revoked {
                println!("revoked {} ({})", r.name, r.id);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
