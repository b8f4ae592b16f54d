//! # heddle-server
//!
//! The transport-neutral A2A server and its bindings.
//!
//! A request's path: HTTP → tower layers (limits, tracing, auth → [`Caller`])
//! → a binding decodes the wire form into a [`heddle_core::call::Call`] →
//! [`RequestHandler::handle`] applies the rules (task lookup scoped to the
//! caller, state machine, blocking or streaming) → the agent's
//! [`AgentExecutor`] publishes events on [`TaskEvents`] → each event is
//! checked, persisted through the [`heddle_store::TaskStore`] and fanned out
//! → the binding encodes the [`Reply`] in the caller's version.
//!
//! * [`agent`]: the [`AgentExecutor`] trait agents implement.
//! * [`handler`]: the dispatcher and task manager.
//! * [`lifecycle`]: the task state machine.
//! * `jsonrpc` (private) and [`server::AgentRoutes`]: the JSON-RPC + SSE
//!   binding and the card routes as an axum router.
//! * `grpc` (feature `grpc`): the gRPC binding, v1.0 and v0.3, for many
//!   agents on one listener, with health and reflection.
//! * [`listen`]: serving any of these routers on a TCP listener, HTTP/1.1
//!   and HTTP/2 on one port (what `heddle serve` uses; `axum::serve` works
//!   too, with a larger read buffer per HTTP/1 connection).
//! * `tls` (feature `tls`): serving any of these routers over TLS (rustls),
//!   with mTLS client certificates as the [`Caller`].
//!
//! A one-agent server of your own:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use heddle_server::{AgentRoutes, Limits, RequestHandler};
//! # async fn run(card: heddle_core::v1::AgentCard, agent: Arc<dyn heddle_server::AgentExecutor>) {
//! let store = Arc::new(heddle_store::MemoryStore::default());
//! let handler = RequestHandler::new("my-agent", card, agent, store, Limits::default());
//! let app = AgentRoutes::new(handler).router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! heddle_server::listen::serve(listener, app, std::future::pending()).await.unwrap();
//! # }
//! ```

pub mod agent;
pub mod card;
mod events;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod handler;
mod json;
mod jsonrpc;
pub mod lifecycle;
pub mod listen;
mod live;
pub mod push;
mod rest;
mod rest_v03;
mod rest_v03_push;
pub mod server;
mod sse;
#[cfg(feature = "tls")]
pub mod tls;

pub use agent::{AgentError, AgentExecutor, Caller, RequestContext};
pub use events::{EventError, TaskEvents};
pub use handler::{CallContext, EventStream, Limits, Reply, RequestHandler};
pub use push::{PushNotifier, PushOptions, PushPolicy};
pub use server::{AgentRoutes, card_router};

/// A fresh, time-ordered id (UUID v7), formatted without `fmt` machinery.
pub(crate) fn new_id() -> String {
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid::Uuid::now_v7()
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}
