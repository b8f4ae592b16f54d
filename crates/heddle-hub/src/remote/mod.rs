//! Remote agents: any A2A agent, registered by its card URL, fronted by the hub.
//!
//! A remote agent is hosted like any other: a
//! [`heddle_server::RequestHandler`] whose executor is a [`RemoteAgent`].
//! The hub owns the task (its own ids, scoped to the caller, in its own
//! store), so GetTask, ListTasks, SubscribeToTask and push delivery work
//! unchanged; the executor relays each message to the upstream agent
//! through `heddle-client`, over the upstream's best interface (JSON-RPC,
//! REST or gRPC, v1.0 or v0.3), and publishes the upstream's events on the
//! hub task as they arrive.
//!
//! * [`fetch_card`] reads and checks the upstream card once (size cap,
//!   timeout, plaintext refused unless allowed, signatures, a warning list
//!   for text aimed at a model, see [`screen`]);
//! * [`hub_profile`] is what the hub's own card for it says;
//! * [`UpstreamAuth`] names the credentials the hub presents upstream, and
//!   [`SecretSource`] where their values come from;
//! * [`RemoteAgent`] is the executor. The hub task → upstream task link is
//!   kept in the store's [`heddle_store::RegistryStore`].
//!
//! Push notification configs are not forwarded: callers register them with
//! the hub, which delivers from its own task's events.
//!
//! ```no_run
//! # async fn run(store: std::sync::Arc<heddle_store::MemoryStore>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use heddle_hub::{Hub, remote::{self, FetchOptions, RemoteAgent, RemoteOptions, SecretSource, UpstreamAuth}};
//! use heddle_store::TaskStore;
//!
//! let fetched = remote::fetch_card("https://weather.example", &FetchOptions::default()).await?;
//! let links = store.clone().registry_store().ok_or("the store keeps no registry")?;
//! let auth = UpstreamAuth::Bearer { env: "WEATHER_TOKEN".into() };
//! let agent = RemoteAgent::new("weather", &fetched.card, &auth, &SecretSource::environment(),
//!     RemoteOptions::default(), links)?;
//! let hub = Hub::builder("https://hub.example", store)
//!     .agent("weather", remote::hub_profile(&fetched.card), Arc::new(agent))
//!     .build()
//!     .await;
//! # drop(hub); Ok(()) }
//! ```

mod auth;
mod card;
mod executor;
mod relay;
pub mod screen;

pub(crate) use auth::scrub as scrub_secrets;
pub use auth::{SecretSource, UpstreamAuth};
pub use card::{FetchOptions, FetchedCard, SignatureStatus, fetch_card, hub_profile, kept_card};
pub use executor::{RemoteAgent, RemoteOptions, RemoteTimeouts};

/// Why a remote agent could not be registered or built. The texts name
/// URLs without their credentials, query or fragment, and never hold a
/// secret value.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The URL cannot be used.
    #[error("invalid URL {0}")]
    InvalidUrl(String),
    /// A plaintext URL where https is required.
    #[error("plain http refused: {0}")]
    PlainHttp(String),
    /// The card could not be fetched.
    #[error("cannot fetch the agent card: {0}")]
    Fetch(String),
    /// The card is larger than allowed.
    #[error("the agent card is larger than {limit} bytes")]
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The document is not an Agent Card of either version.
    #[error("not a valid agent card: {0}")]
    InvalidCard(String),
    /// The card's signature is refused.
    #[error("agent card signature: {0}")]
    Signature(String),
    /// The registration's auth settings are malformed.
    #[error("invalid upstream auth: {0}")]
    InvalidAuth(String),
    /// A named secret is neither in the secrets file nor the environment.
    #[error("secret {0:?} is not set (in the secrets file or the environment)")]
    MissingSecret(String),
    /// The secrets file cannot be read.
    #[error("secrets file {0}")]
    SecretsFile(String),
    /// The client for the upstream cannot be built (no usable interface, a
    /// refused token URL).
    #[error("cannot reach the remote agent: {0}")]
    Client(String),
}

/// A URL as shown in messages: without user info, query or fragment (any
/// of which may hold a credential).
pub(crate) fn shown_url(url: &str) -> String {
    match heddle_client::reqwest::Url::parse(url) {
        Ok(mut u) => {
            // Setting these fails only for URLs that cannot have them.
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        // Not a URL (a bare gRPC host:port): cut at the first `?` or `#`.
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_lose_their_credentials_in_messages() {
        assert_eq!(
            super::shown_url("https://u:p@a.example/x?key=s#f"),
            "https://a.example/x"
        );
        assert_eq!(super::shown_url("h:1?k=v"), "h:1");
    }
}
