//! The [`Authenticator`] and its tower [`AuthLayer`].

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use heddle_core::{ProtocolVersion, method::Method};
use heddle_server::Caller;
use http::{HeaderMap, Request, Response, Uri, header};

use crate::{
    AuthError,
    apikey::ApiKeys,
    jwt::JwtVerifier,
    reject::{self, Binding, RejectionBody},
};

/// Where an API key travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyLocation {
    /// A request header (default `api-key`).
    Header(String),
    /// A query parameter.
    Query(String),
    /// A cookie.
    Cookie(String),
}

impl Default for KeyLocation {
    fn default() -> Self {
        KeyLocation::Header("api-key".into())
    }
}

impl KeyLocation {
    /// `header`, `query` or `cookie`, as cards spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            KeyLocation::Header(_) => "header",
            KeyLocation::Query(_) => "query",
            KeyLocation::Cookie(_) => "cookie",
        }
    }

    /// The header, parameter or cookie name.
    pub fn name(&self) -> &str {
        match self {
            KeyLocation::Header(n) | KeyLocation::Query(n) | KeyLocation::Cookie(n) => n,
        }
    }

    /// The API key a request carries here, if any (unchecked).
    pub fn find(&self, headers: &HeaderMap, uri: &Uri) -> Option<String> {
        match self {
            KeyLocation::Header(n) => headers
                .get(n.as_str())
                .and_then(|v| v.to_str().ok())
                .map(|s| s.trim().to_owned()),
            KeyLocation::Query(n) => uri
                .query()
                .and_then(|q| form_pairs(q).find(|(k, _)| k == n).map(|(_, v)| v)),
            KeyLocation::Cookie(n) => headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|c| c.trim().split_once('='))
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.trim().to_owned()),
        }
    }
}

/// Decodes `a=b&c=d` (percent-decoding not needed for our key alphabet,
/// which is base64url and hex; `+` and `%` never appear in a valid key).
fn form_pairs(q: &str) -> impl Iterator<Item = (String, String)> + '_ {
    q.split('&').map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k.to_owned(), v.to_owned())
    })
}

/// Who a verified credential names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The caller id tasks are scoped by: `key:{id}` (an API key's id) or
    /// `jwt:{iss}#{sub}`; mutual TLS callers, made before this layer, are
    /// `mtls:{name}`. Each kind has its own prefix, so no credential of one
    /// kind can name a caller of another.
    pub id: String,
    /// The scopes a bearer token grants (`scope` or `scp`); an API key
    /// grants none. Servers check them for their own roles (the hub's admin
    /// API, for example).
    pub scopes: Vec<String>,
}

struct Inner {
    api_keys: Option<ApiKeys>,
    key_location: KeyLocation,
    jwt: Option<JwtVerifier>,
    public_paths: Vec<String>,
    required: bool,
    max_credential_bytes: usize,
}

/// Checks credentials; cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("api_keys", &self.inner.api_keys.is_some())
            .field("key_location", &self.inner.key_location)
            .field("jwt", &self.inner.jwt)
            .field("required", &self.inner.required)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Authenticator`].
#[derive(Debug)]
pub struct AuthenticatorBuilder {
    api_keys: Option<ApiKeys>,
    key_location: KeyLocation,
    jwt: Option<JwtVerifier>,
    public_paths: Vec<String>,
    required: bool,
    max_credential_bytes: usize,
}

impl AuthenticatorBuilder {
    /// Accept API keys from `keys`.
    #[must_use]
    pub fn api_keys(mut self, keys: ApiKeys) -> Self {
        self.api_keys = Some(keys);
        self
    }

    /// Where API keys travel (default: the `api-key` header).
    #[must_use]
    pub fn key_location(mut self, loc: KeyLocation) -> Self {
        self.key_location = loc;
        self
    }

    /// Accept bearer JWTs that `v` verifies.
    #[must_use]
    pub fn jwt(mut self, v: JwtVerifier) -> Self {
        self.jwt = Some(v);
        self
    }

    /// A path served without credentials (exact match), besides the
    /// well-known card paths and gRPC health, which always are.
    #[must_use]
    pub fn public_path(mut self, path: impl Into<String>) -> Self {
        self.public_paths.push(path.into());
        self
    }

    /// Whether a request without credentials is refused (the default) or
    /// served as anonymous. Bad credentials are refused either way.
    #[must_use]
    pub fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// Longest credential header accepted (default 8 KiB).
    #[must_use]
    pub fn max_credential_bytes(mut self, n: usize) -> Self {
        self.max_credential_bytes = n;
        self
    }

    /// The authenticator; fails when no credential kind is configured.
    pub fn build(self) -> Result<Authenticator, AuthError> {
        if self.api_keys.is_none() && !self.jwt.as_ref().is_some_and(JwtVerifier::has_keys) {
            return Err(AuthError::Config(
                "configure API keys or JWT keys (static, JWKS or OIDC)".into(),
            ));
        }
        Ok(Authenticator {
            inner: Arc::new(Inner {
                api_keys: self.api_keys,
                key_location: self.key_location,
                jwt: self.jwt,
                public_paths: self.public_paths,
                required: self.required,
                max_credential_bytes: self.max_credential_bytes,
            }),
        })
    }
}

/// Requests that always stay public: reading the agent cards, and gRPC health.
fn always_public(method: &http::Method, path: &str) -> bool {
    let card =
        path.ends_with("/.well-known/agent-card.json") || path.ends_with("/.well-known/agent.json");
    (card && (method == http::Method::GET || method == http::Method::HEAD))
        || path.starts_with("/grpc.health.v1.Health/")
}

/// Paths where credentials are checked when present but not required: v0.3
/// gRPC `GetAgentCard` is how v0.3 clients read the public card, and gives
/// the extended card to an authenticated caller.
fn credentials_optional(path: &str) -> bool {
    Method::GetExtendedAgentCard
        .grpc_path(ProtocolVersion::V0_3)
        .is_some_and(|p| p == path)
}

impl Authenticator {
    /// A builder: credentials required, API keys in the `api-key` header.
    pub fn builder() -> AuthenticatorBuilder {
        AuthenticatorBuilder {
            api_keys: None,
            key_location: KeyLocation::default(),
            jwt: None,
            public_paths: Vec::new(),
            required: true,
            max_credential_bytes: 8 << 10,
        }
    }

    /// The tower layer for the routes of one binding, whose error form its
    /// refusals take. Attach one per binding (as
    /// [`heddle_server::AgentRoutes::around_bindings`] does), never around
    /// routes of several.
    pub fn layer(&self, binding: Binding) -> AuthLayer {
        AuthLayer {
            auth: self.clone(),
            binding,
        }
    }

    /// The API keys, when accepted.
    pub fn api_keys(&self) -> Option<&ApiKeys> {
        self.inner.api_keys.as_ref()
    }

    /// Where API keys travel.
    pub fn key_location(&self) -> &KeyLocation {
        &self.inner.key_location
    }

    /// Whether a request without credentials is refused.
    pub fn is_required(&self) -> bool {
        self.inner.required
    }

    /// The JWT verifier, when bearer tokens are accepted.
    pub fn jwt(&self) -> Option<&JwtVerifier> {
        self.inner.jwt.as_ref()
    }

    /// Whether a `method` request for `path` is served without credentials.
    pub fn is_public(&self, method: &http::Method, path: &str) -> bool {
        always_public(method, path) || self.inner.public_paths.iter().any(|p| p == path)
    }

    /// Checks a request's credentials: `Ok(None)` for an anonymous request
    /// that is allowed (auth not required), the principal when they verify.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> Result<Option<Principal>, AuthError> {
        let max = self.inner.max_credential_bytes;
        let bearer = match headers.get(header::AUTHORIZATION) {
            None => None,
            Some(v) if v.len() > max => return Err(AuthError::TooLarge(v.len())),
            Some(v) => {
                let v = v
                    .to_str()
                    .map_err(|_| AuthError::Invalid("unreadable Authorization header".into()))?;
                match v.split_once(' ') {
                    Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                        Some(token.trim().to_owned())
                    }
                    _ => {
                        return Err(AuthError::Invalid(
                            "the Authorization scheme must be Bearer".into(),
                        ));
                    }
                }
            }
        };
        if let Some(token) = bearer {
            let Some(jwt) = &self.inner.jwt else {
                return Err(AuthError::Invalid(
                    "this server takes API keys, not bearer tokens".into(),
                ));
            };
            let t = jwt.verify(&token).await?;
            return Ok(Some(Principal {
                id: t.principal(),
                scopes: t.scopes,
            }));
        }
        if let Some(keys) = &self.inner.api_keys
            && let Some(key) = self.inner.key_location.find(headers, uri)
        {
            if key.len() > max {
                return Err(AuthError::TooLarge(key.len()));
            }
            let id = keys.verify(&key).await?;
            return Ok(Some(Principal {
                id,
                scopes: Vec::new(),
            }));
        }
        if self.inner.required {
            Err(AuthError::Missing)
        } else {
            Ok(None)
        }
    }
}

/// Authenticates every request of the wrapped service.
#[derive(Clone, Debug)]
pub struct AuthLayer {
    auth: Authenticator,
    binding: Binding,
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            auth: self.auth.clone(),
            binding: self.binding,
        }
    }
}

/// The service [`AuthLayer`] makes.
#[derive(Clone, Debug)]
pub struct AuthService<S> {
    inner: S,
    auth: Authenticator,
    binding: Binding,
}

impl<S, B, ResBody> tower::Service<Request<B>> for AuthService<S>
where
    S: tower::Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    ResBody: RejectionBody + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        // The clone that was driven to readiness serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        let binding = self.binding;
        Box::pin(async move {
            let already = req
                .extensions()
                .get::<Caller>()
                .is_some_and(|c| c.authenticated);
            if already || auth.is_public(req.method(), req.uri().path()) {
                return inner.call(req).await;
            }
            let result = match auth.authenticate(req.headers(), req.uri()).await {
                Err(AuthError::Missing) if credentials_optional(req.uri().path()) => Ok(None),
                other => other,
            };
            match result {
                Ok(Some(p)) => {
                    req.extensions_mut().insert(Caller::authenticated(p.id));
                    inner.call(req).await
                }
                Ok(None) => {
                    req.extensions_mut().insert(Caller::anonymous());
                    inner.call(req).await
                }
                Err(e) => {
                    tracing::info!(path = %req.uri().path(), error = %e, "request refused");
                    Ok(reject::response(&auth, binding, &e))
                }
            }
        })
    }
}
