//! How a client is configured: the bindings it may use, credentials, bounds,
//! and the polling that stands in for streams an agent does not offer.

use std::{sync::Arc, time::Duration};

use heddle_core::ProtocolVersion;

use crate::{ClientError, Credentials};

/// A protocol binding this client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP.
    JsonRpc,
    /// HTTP+JSON (REST).
    Rest,
    /// gRPC (HTTP/2, `lf.a2a.v1` or `a2a.v1` service).
    Grpc,
}

impl Binding {
    /// The binding named on a card (`JSONRPC`, `HTTP+JSON`, `GRPC`).
    pub fn from_card_name(name: &str) -> Option<Self> {
        match name {
            "JSONRPC" => Some(Self::JsonRpc),
            "HTTP+JSON" => Some(Self::Rest),
            "GRPC" => Some(Self::Grpc),
            _ => None,
        }
    }

    /// Parses a user's name for a binding (`jsonrpc`, `rest`, `grpc`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "jsonrpc" | "json-rpc" => Some(Self::JsonRpc),
            "rest" | "http+json" | "http" => Some(Self::Rest),
            "grpc" => Some(Self::Grpc),
            _ => None,
        }
    }
}

/// Sees every request and response, with secrets redacted (for `--debug`).
pub type WireLog = Arc<dyn Fn(&str) + Send + Sync>;

/// How to build a client.
#[derive(Clone)]
pub struct ClientOptions {
    /// Bindings in order of preference. The default is JSON-RPC then REST:
    /// gRPC is used only when listed, since it often listens on a separate
    /// port (and needs HTTP/2) that networks reaching the HTTP URL may not reach.
    pub bindings: Vec<Binding>,
    /// Force a protocol version instead of negotiating.
    pub version: Option<ProtocolVersion>,
    /// Credentials to present.
    pub credentials: Credentials,
    /// Extra headers on every request.
    pub headers: Vec<(String, String)>,
    /// Timeout of each unary call (streams have none).
    pub timeout: Duration,
    /// Retries of idempotent calls on transient failures.
    pub retries: u32,
    /// The wire log, if any.
    pub wire_log: Option<WireLog>,
    /// An HTTP client to reuse. OAuth 2.0 token requests use it too, under
    /// its redirect policy: reqwest's default follows a 307 or 308 with the
    /// body, which holds the client secret, so give it
    /// `reqwest::redirect::Policy::none()` when using OAuth. (Without it, a
    /// client is built whose token requests follow no redirects.)
    pub http: Option<reqwest::Client>,
    /// Extra CAs and a client certificate, for HTTP and gRPC (not applied to
    /// a caller-supplied [`ClientOptions::http`]).
    pub tls: crate::TlsOptions,
    /// When set, discovery requires a card signature that verifies.
    pub card_verification: Option<crate::CardVerification>,
    /// Largest unary answer (or error body) and, at discovery, the largest
    /// card accepted, in bytes: a larger one is a
    /// [`ClientError::BodyTooLarge`]. Default [`crate::DEFAULT_MAX_BODY_BYTES`]
    /// (16 MiB). Stream events have their own bound (16 MiB each).
    pub max_body_bytes: usize,
    /// How [`crate::A2aClient::send_streaming`], [`crate::A2aClient::subscribe`]
    /// and [`crate::A2aClient::wait`] poll an agent whose card says it does
    /// not stream.
    pub polling: Polling,
}

/// Polling GetTask, where an agent cannot stream. Each wait is half again
/// the one before, up to `max_interval`: a task that finishes at once is
/// seen quickly, one that runs for minutes costs few calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    /// The wait before the first poll.
    pub initial_interval: Duration,
    /// The longest wait between two polls.
    pub max_interval: Duration,
    /// How long a task may stay unfinished before polling gives up (with
    /// [`ClientError::Transport`]; the task itself runs on).
    pub max_wait: Duration,
}

impl Default for Polling {
    fn default() -> Self {
        Self {
            initial_interval: Duration::from_millis(250),
            max_interval: Duration::from_secs(5),
            max_wait: Duration::from_secs(30 * 60),
        }
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            bindings: vec![Binding::JsonRpc, Binding::Rest],
            version: None,
            credentials: Credentials::default(),
            headers: Vec::new(),
            timeout: Duration::from_secs(60),
            retries: 3,
            wire_log: None,
            http: None,
            tls: crate::TlsOptions::default(),
            card_verification: None,
            max_body_bytes: crate::DEFAULT_MAX_BODY_BYTES,
            polling: Polling::default(),
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("bindings", &self.bindings)
            .field("version", &self.version)
            .field("credentials", &self.credentials)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("polling", &self.polling)
            .finish_non_exhaustive()
    }
}

/// The HTTP client `opts` describe: [`ClientOptions::http`] when given,
/// else a new one with [`ClientOptions::tls`] applied.
pub fn http_client(opts: &ClientOptions) -> Result<reqwest::Client, ClientError> {
    match &opts.http {
        Some(c) => Ok(c.clone()),
        None => opts
            .tls
            .apply(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .user_agent(concat!("heddle/", env!("CARGO_PKG_VERSION"))),
            )?
            .build()
            .map_err(ClientError::from),
    }
}
