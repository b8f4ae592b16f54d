//! # heddle-client
//!
//! Everything a caller needs to talk to any A2A agent:
//!
//! * discovery: the card from the well-known paths (both names), cached with
//!   its `ETag`; v1.0, v0.3 and dual cards all read into the v1.0 model;
//! * negotiation: the interface chosen by the caller's binding preference and
//!   the card's order, v1.0 where offered, else v0.3 with transparent
//!   conversion (the caller always sees v1.0 types);
//! * transports: JSON-RPC 2.0, HTTP+JSON and gRPC (gRPC only when asked for
//!   in [`ClientOptions::bindings`]), each in v1.0 and v0.3, for all eleven
//!   operations (push notification configs included), with streams as async
//!   [`futures::Stream`]s of typed events; an agent whose card says it does
//!   not stream is polled instead, behind the same stream type;
//! * credentials: bearer tokens, API keys (placed where the card's scheme
//!   says) and OAuth 2.0 client credentials (cached tokens; the secret goes
//!   only to a token URL the rules on [`ClientCredentials`] allow), never logged;
//! * bounds: answers and cards up to [`ClientOptions::max_body_bytes`], each
//!   stream event up to 16 MiB, token responses up to 64 KiB;
//! * trust: extra CA certificates and a client certificate (mTLS) for HTTP
//!   and gRPC ([`TlsOptions`]); signed cards required at discovery when
//!   [`ClientOptions::card_verification`] is set (pinned keys, JWKS URLs,
//!   trusted `jku` prefixes);
//! * retries with jittered backoff and `Retry-After` for idempotent calls only:
//!   a send is never retried after an ambiguous failure.
//!
//! ```no_run
//! # async fn run() -> Result<(), heddle_client::ClientError> {
//! use heddle_client::{A2aClient, ClientOptions};
//! let client = A2aClient::discover("http://127.0.0.1:8080/api/v1/agents/echo", ClientOptions::default()).await?;
//! let reply = client.send_text("hello").await?;
//! println!("{reply:?}");
//! # Ok(()) }
//! ```

mod body;
mod client;
mod credentials;
mod delegate;
mod discovery;
mod error;
mod oauth;
mod options;
mod poll;
mod push;
mod retry_after;
mod trace_context;
mod transport;
mod trust;
pub mod webhook;

pub use body::{DEFAULT_MAX_BODY_BYTES, read_limited};
pub use client::{A2aClient, SendReply};
pub use credentials::{Credentials, Secret};
pub use delegate::Delegate;
pub use discovery::{CardCache, choose_interface, fetch_card, fetch_card_verified};
pub use error::ClientError;
pub use heddle_api::{Delegation, delegation};
pub use heddle_core::task::TaskAccumulator;
/// Card signing and verification (keys, verdicts), for [`CardVerification`].
pub use heddle_signing;
pub use oauth::{ClientCredentials, TokenSource, TokenUrlRefusal, token_url_from_card};
pub use options::{Binding, ClientOptions, Polling, WireLog, http_client};
/// The HTTP client crate, for callers that share a client.
pub use reqwest;
pub use retry_after::{MAX_RETRY_AFTER, retry_after};
pub use transport::EventStream;
pub use trust::{CardVerification, ClientIdentity, TlsOptions, jku_trusted};
