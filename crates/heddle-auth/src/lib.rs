//! # heddle-auth
//!
//! Authentication for A2A servers, as a tower layer that works on axum
//! routers and on the tonic gRPC server alike.
//!
//! An [`Authenticator`] checks each request's credentials and, when they
//! verify, inserts [`heddle_server::Caller::authenticated`] into the request
//! extensions, where every binding reads it. Credentials it understands:
//!
//! * **Bearer JWTs** ([`jwt`]): HS256, RS256, ES256 and EdDSA, from static keys,
//!   a JWKS URL (cached; an unknown `kid` triggers a rate-limited refetch, so
//!   keys rotate without a restart) or an OpenID Connect issuer (discovery →
//!   `jwks_uri`). `iss`, `aud`, `exp` and `nbf` are checked with a leeway;
//!   `alg: none` and algorithm confusion are refused; tokens are size-capped.
//! * **API keys** ([`apikey`]) in a header (`api-key` by default), a query
//!   parameter or a cookie, stored only as SHA-256 hashes (a key is 256
//!   random bits, so a slow password hash would guard nothing) and compared
//!   in constant time; a verified key is remembered in memory for a minute,
//!   so its row is read once per key and not once per request. A key's caller
//!   is `key:{id}`, its never-reused id, not its name.
//!
//! Missing or bad credentials get 401 with `WWW-Authenticate` (gRPC:
//! UNAUTHENTICATED), a verified caller lacking a required scope 403 (gRPC:
//! PERMISSION_DENIED), each in the form of the binding the layer guards
//! ([`reject`]): a layer is attached per binding. Card paths stay public. A [`Caller`](heddle_server::Caller)
//! that an earlier layer (mutual TLS) already authenticated is kept.
//!
//! ```no_run
//! # async fn run(app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
//! use heddle_auth::{Authenticator, apikey::{ApiKeys, MemoryKeyStore}};
//! let keys = ApiKeys::new(std::sync::Arc::new(MemoryKeyStore::default()));
//! let (_record, secret) = keys.create("ci").await?; // hand `secret` to the client, once
//! let auth = Authenticator::builder().api_keys(keys).build()?;
//! let app = app.layer(auth.layer(heddle_auth::reject::Binding::JsonRpc));
//! # Ok(()) }
//! ```

pub mod apikey;
pub mod card;
pub mod config;
mod error;
pub mod jwt;
mod layer;
pub mod reject;

pub use config::AuthConfig;
pub use error::AuthError;
pub use layer::{
    AuthLayer, AuthService, Authenticator, AuthenticatorBuilder, KeyLocation, Principal,
};
