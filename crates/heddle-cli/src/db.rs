//! `heddle db`: the store's schema, apart from serving. `heddle serve`
//! migrates at start too; running the migrations alone first lets a
//! deployment change the schema once, before it starts several replicas.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use heddle_store::{PostgresOptions, PostgresStore};

/// `heddle db …`
#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Run the store's migrations not yet applied, then exit.
    Migrate {
        /// The store: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (also
        /// `postgresql://`; `?schema=NAME` for a schema of its own).
        #[arg(long)]
        store: String,
    },
}

/// Runs a `db` command.
pub async fn run(cmd: DbCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DbCommand::Migrate { store } => {
            if !crate::serve::is_postgres(&store) {
                bail!(
                    "heddle db migrate takes a postgres:// store (SQLite files migrate when opened)"
                );
            }
            let shown = heddle_store::redact_url(&store);
            PostgresStore::migrate_only(&store, PostgresOptions::default())
                .await
                .with_context(|| format!("migrating the PostgreSQL store at {shown}"))?;
            println!("migrated {shown}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
