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
//! * [`agent`]: the [`AgentExecutor`] trait agents implement, with
//!   [`RequestContext`], [`TaskEvents`] and [`Caller`]. They are defined in
//!   `heddle-api` (so an agent crate need not link this one) and re-exported
//!   here; the server implements the [`agent::TaskSink`] behind
//!   `TaskEvents` for each task it runs.
//! * [`handler`]: the dispatcher and task manager, put together with
//!   [`HandlerBuilder`]. Its options: [`limits`](HandlerBuilder::limits)
//!   (body, parts, streams, batch, cancel grace),
//!   [`caller_limits`](HandlerBuilder::caller_limits) (per-caller request
//!   rate and running tasks, shared across agents),
//!   [`stream_slots`](HandlerBuilder::stream_slots),
//!   [`agent_rate`](HandlerBuilder::agent_rate) (the agent's own request
//!   rate, all callers together: [`limit::AgentRate`]),
//!   [`concurrency`](HandlerBuilder::concurrency) (at most N executions at
//!   once, the others queued by [`Priority`]: [`Concurrency`]),
//!   [`message_check`](HandlerBuilder::message_check),
//!   [`versions`](HandlerBuilder::versions),
//!   [`extended_card`](HandlerBuilder::extended_card),
//!   [`push`](HandlerBuilder::push),
//!   [`observer`](HandlerBuilder::observer) (calls, streams and task
//!   states told to an [`Observer`], for metrics) and
//!   [`stream_drain`](HandlerBuilder::stream_drain) (open streams ended
//!   with a last event telling clients to subscribe again, when the
//!   server stops: [`StreamDrain`]).
//! * [`observe`]: the [`Observer`] trait and what it is told.
//! * [`lifecycle`]: the task state machine.
//! * `jsonrpc` (private) and [`server::AgentRoutes`]: the JSON-RPC + SSE
//!   binding and the card routes as an axum router.
//! * `grpc` (feature `grpc`): the gRPC binding, v1.0 and v0.3, for many
//!   agents on one listener, with health and reflection.
//! * [`listen`]: serving any of these routers on a TCP listener, HTTP/1.1
//!   and HTTP/2 (both hyper) on one port, with connection caps and
//!   timeouts ([`listen::ConnLimits`]): what `heddle serve` uses.
//!   `axum::serve` works too, without those limits.
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
pub mod binding;
pub mod card;
pub mod cluster;
mod downgrade;
mod events;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod guard;
pub mod handler;
mod json;
mod jsonrpc;
pub mod lifecycle;
pub mod limit;
pub mod listen;
mod live;
pub mod observe;
pub mod profile;
pub mod push;
mod redact;
mod rest;
pub mod server;
mod sse;
#[cfg(feature = "tls")]
pub mod tls;
pub mod trace;

pub use agent::{
    AgentError, AgentExecutor, Caller, DELEGATION_EXT, Delegation, DelegationError, RequestContext,
};
pub use binding::{Binding, refusal, refusal_parts};
pub use events::{EventError, TaskEvents};
pub use handler::{
    CallContext, Concurrency, EventStream, HandlerBuilder, Limits, MessageCheck, Pass, Priority,
    PriorityFn, RESUBSCRIBE_KEY, Reply, RequestHandler, SendAtGate, SendGate, StreamDrain,
    StreamSlots,
};
pub use heddle_api::delegation;
pub use live::{Event, Update};
pub use observe::Observer;
pub use push::{PushNotifier, PushOptions, PushPolicy};
pub use server::{AgentRoutes, CARD_PATHS, card_router, lenient_paths, normalize_path};

/// A fresh, time-ordered id (UUID v7, RFC 9562): Unix milliseconds, then
/// the fraction of the millisecond in the 12 bits of `rand_a` (the RFC's
/// method 3, about 244 ns a step), then 62 random bits from the thread's
/// CSPRNG; formatted without `fmt` machinery.
///
/// Ids made in order sort in that order (to 244 ns), which keeps, say, push
/// configs listed `ORDER BY created, id` in creation order within a
/// millisecond. `Uuid::now_v7` does that with a counter shared by every
/// thread, which was a third of each id's cost.
pub fn new_id() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let millis = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX);
    // 0..4096: the sub-millisecond part, in 1/4096 ms.
    let fraction = (since_epoch.subsec_nanos() % 1_000_000) * 4096 / 1_000_000;
    let mut random: [u8; 10] = rand::random();
    // The builder takes `rand_a` from the low nibble of byte 0 and byte 1.
    let [high, low] = u16::try_from(fraction).unwrap_or(0x0fff).to_be_bytes();
    random[0] = high;
    random[1] = low;
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid::Builder::from_unix_timestamp_millis(millis, &random)
        .into_uuid()
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}

#[cfg(test)]
mod id_tests {
    #[test]
    fn new_ids_are_distinct_lowercase_uuid_v7_of_now() {
        let before = std::time::SystemTime::now();
        let ids: Vec<String> = (0..1000).map(|_| super::new_id()).collect();
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        for id in &ids {
            assert_eq!(id.len(), 36);
            assert_eq!(id, &id.to_lowercase());
            let uuid = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!(uuid.get_version_num(), 7, "{id}");
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
            let (secs, nanos) = uuid.get_timestamp().expect("v7 has one").to_unix();
            let at = std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
            let drift = at.duration_since(before).unwrap_or_else(|e| e.duration());
            assert!(drift < std::time::Duration::from_secs(5), "{id}: {drift:?}");
        }
    }

    #[test]
    fn ids_made_a_microsecond_apart_sort_in_the_order_made() {
        let mut ids = Vec::new();
        for _ in 0..200 {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_micros(1) {}
            ids.push(super::new_id());
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
    }
}
