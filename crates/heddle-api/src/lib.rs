//! # heddle-api
//!
//! The seams of Heddle: what an agent author implements or names, and what a
//! task store implements.
//!
//! * Agents: [`AgentExecutor`], run once per message with a
//!   [`RequestContext`] and a [`TaskEvents`] handle to report on the task.
//! * Stores: [`TaskStore`] and, separately, [`PushStore`] (push configs and
//!   the delivery outbox), with their types. Every call is scoped by
//!   [`Scope`].
//!
//! Why this crate exists: an agent or a third-party store should build
//! against a few stable traits, not against the whole server. This crate
//! depends on `heddle-core` and a handful of small pure-Rust crates only; it
//! links none of hyper, tonic, axum, reqwest or rusqlite (`.ci/run` checks
//! that), so an agent crate that depends on it and `heddle-core` compiles no
//! HTTP, gRPC or database stack. `heddle-server` runs agents behind these
//! traits and re-exports them under their old paths; `heddle-store` provides
//! the memory and SQLite stores and the contract suite a store must pass.
//!
//! ```
//! use heddle_api::{AgentError, AgentExecutor, RequestContext, TaskEvents, async_trait};
//!
//! struct Echo;
//!
//! #[async_trait]
//! impl AgentExecutor for Echo {
//!     async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
//!         events.artifact_text("echo", ctx.text()).await?;
//!         events.complete(None).await?;
//!         Ok(())
//!     }
//! }
//! ```

mod agent;
pub mod delegation;
mod events;
mod ledger;
mod store;

pub use agent::{AgentError, AgentExecutor, Caller, RequestContext};
pub use delegation::{DELEGATION_EXT, Delegation, DelegationError};
pub use events::{EventError, IllegalTransition, TaskEvents, TaskSink};
pub use ledger::{
    Account, Entry, LedgerStore, NewReservation, Reservation, Reserved, Settlement, valid_currency,
};
pub use store::{
    AgentRecord, Delivery, DeliveryOutcome, ExpiredLease, HeldLease, LeaseStore, LeasedRun,
    ListPage, ListQuery, NewDelivery, PushConfigRecord, PushStore, RegistryStore, Scope,
    StoreError, TaskDeliveries, TaskStore,
};

/// The attribute every implementation of this crate's traits needs (they
/// are `async` traits usable as trait objects), re-exported so an agent
/// crate does not need its own dependency on `async-trait`.
pub use async_trait::async_trait;

/// Cancellation of a running task ([`RequestContext::cancel`]), re-exported
/// so an agent can name the type without depending on `tokio-util`.
pub use tokio_util::sync::CancellationToken;
