//! # heddle-store
//!
//! Where tasks live between requests and across restarts.
//!
//! The traits every store implements, [`TaskStore`] and [`PushStore`], live
//! in `heddle-api` (so a store or an agent can be written without this
//! crate) and are re-exported here with their types. Every call takes a
//! [`Scope`] (the agent a task belongs to and the caller that owns it), so a
//! store cannot be asked for another caller's task by accident: a task outside
//! the scope is simply not found.
//!
//! * [`MemoryStore`]: in-process, bounded (terminal tasks are evicted by age,
//!   count and bytes; live ones never are, and a live task that would grow the
//!   store past its byte limit is refused).
//! * `SqliteStore` (feature `sqlite`, on by default): the embedded default.
//!   WAL mode, one writer thread that groups concurrent saves into one
//!   transaction, a small pool of readers. Tasks are stored as protobuf
//!   bytes beside indexed columns for ListTasks. Without the feature this
//!   crate compiles no C.
//! * `PostgresStore` (feature `postgres`, off by default): the same tables
//!   in PostgreSQL, for several hub replicas sharing one database; outbox
//!   deliveries are claimed per task and config, so two replicas never send
//!   the same one. Pure Rust (sqlx), migrations embedded.
//! * `contract` (feature `contract`): the behaviour every store must share,
//!   as public async functions a third-party store runs in its own tests.
//!
//! Each of the three also keeps a hub's registry ([`RegistryStore`]) and its
//! ledger of wallets and earnings ([`LedgerStore`]): under one lock in
//! memory, on the single writer in SQLite, and in PostgreSQL with
//! conditional debits and locked reservation rows, so replicas sharing the
//! database never spend the same money twice.

#[cfg(any(test, feature = "contract"))]
pub mod contract;
mod ledger;
mod memory;
mod page;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_lease;
#[cfg(feature = "postgres")]
mod postgres_ledger;
#[cfg(feature = "postgres")]
mod postgres_push;
#[cfg(feature = "postgres")]
mod postgres_registry;
#[cfg(feature = "postgres")]
mod postgres_url;
mod push;
mod registry;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_ledger;
#[cfg(feature = "sqlite")]
mod sqlite_push;
#[cfg(feature = "sqlite")]
mod sqlite_registry;

pub use heddle_api::{
    Account, AgentRecord, Delivery, DeliveryOutcome, Entry, ExpiredLease, HeldLease, LeaseStore,
    LeasedRun, LedgerStore, ListPage, ListQuery, NewDelivery, NewReservation, PushConfigRecord,
    PushStore, RegistryStore, Reservation, Reserved, Scope, Settlement, StoreError, TaskDeliveries,
    TaskStore, valid_currency,
};
pub use memory::{DEFAULT_MEMORY_MAX_BYTES, MemoryLimits, MemoryStore};
pub use page::{PageToken, sort_key};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
#[cfg(feature = "postgres")]
pub use postgres_url::redact_url;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStore};
