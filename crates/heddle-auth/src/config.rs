//! Authentication settings as a config file spells them (the `[auth]` table
//! of `heddle serve --config FILE`):
//!
//! ```toml
//! [auth.api_keys]
//! location = "header"        # header | query | cookie
//! name = "api-key"
//!
//! [auth.jwt]
//! issuer = "https://issuer.example"
//! audience = ["https://agents.example"]
//! leeway_secs = 60
//! jwks_url = "https://issuer.example/jwks.json"
//! # oidc_issuer = "https://accounts.example"   (discovery → jwks_uri)
//! # required_scopes = ["a2a"]
//!
//! [[auth.jwt.keys]]
//! kid = "k1"
//! alg = "HS256"
//! secret_env = "HEDDLE_JWT_SECRET"   # or secret = "…", or pem_file = "…" for RS256/ES256/EdDSA
//! ```

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;

use crate::{
    AuthError, Authenticator,
    apikey::ApiKeys,
    jwt::{Jwks, JwtVerifier, KeySource, Oidc, StaticKey, parse_algorithm},
    layer::KeyLocation,
};

/// The `[auth]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// API key settings (keys themselves live in the key store).
    #[serde(default)]
    pub api_keys: ApiKeyConfig,
    /// JWT settings; absent: bearer tokens are not accepted.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
}

/// Where API keys travel.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Whether API keys are accepted (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `header`, `query` or `cookie`.
    #[serde(default = "header")]
    pub location: String,
    /// The header, parameter or cookie name.
    #[serde(default = "api_key")]
    pub name: String,
    /// Seconds a verified key is trusted before its row is read again.
    #[serde(default = "sixty")]
    pub cache_ttl_secs: u64,
}

fn yes() -> bool {
    true
}
fn header() -> String {
    "header".into()
}
fn api_key() -> String {
    "api-key".into()
}
fn sixty() -> u64 {
    60
}

impl Default for ApiKeyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            location: header(),
            name: api_key(),
            cache_ttl_secs: sixty(),
        }
    }
}

/// JWT settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: Option<String>,
    /// Accepted `aud` values (any one).
    #[serde(default)]
    pub audience: Vec<String>,
    /// Clock skew tolerated on `exp`/`nbf`, in seconds (default 60).
    pub leeway_secs: Option<u64>,
    /// Longest token accepted, in bytes (default 8192).
    pub max_token_bytes: Option<usize>,
    /// A JWKS URL.
    pub jwks_url: Option<String>,
    /// An OpenID Connect issuer (its discovery document names the JWKS).
    pub oidc_issuer: Option<String>,
    /// Scopes every token must grant (else 403).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Static keys.
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
}

/// One static key.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Its `kid`, if tokens name one.
    pub kid: Option<String>,
    /// `HS256`, `RS256`, `ES256` or `EdDSA`.
    pub alg: String,
    /// HS256 secret, inline.
    pub secret: Option<String>,
    /// HS256 secret, from this environment variable.
    pub secret_env: Option<String>,
    /// Public key PEM file (RS256, ES256, EdDSA).
    pub pem_file: Option<PathBuf>,
}

impl std::fmt::Debug for KeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyConfig")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .field("pem_file", &self.pem_file)
            .finish()
    }
}

impl KeyConfig {
    fn build(&self) -> Result<StaticKey, AuthError> {
        let alg = parse_algorithm(&self.alg)?;
        if alg == jsonwebtoken::Algorithm::HS256 {
            let secret = match (&self.secret, &self.secret_env) {
                (Some(s), None) => s.clone(),
                (None, Some(var)) => std::env::var(var).map_err(|_| {
                    AuthError::Config(format!("environment variable {var} is not set"))
                })?,
                _ => {
                    return Err(AuthError::Config(
                        "an HS256 key needs exactly one of secret, secret_env".into(),
                    ));
                }
            };
            return StaticKey::hmac(self.kid.clone(), secret.as_bytes());
        }
        let Some(path) = &self.pem_file else {
            return Err(AuthError::Config(format!("a {alg:?} key needs pem_file")));
        };
        let pem = std::fs::read(path)
            .map_err(|e| AuthError::Config(format!("reading {}: {e}", path.display())))?;
        StaticKey::public_pem(self.kid.clone(), alg, &pem)
    }
}

impl JwtConfig {
    /// The verifier these settings describe.
    pub fn build(&self) -> Result<JwtVerifier, AuthError> {
        let mut v = JwtVerifier::new();
        if let Some(i) = &self.issuer {
            v = v.issuer(i.clone());
        }
        for a in &self.audience {
            v = v.audience(a.clone());
        }
        if let Some(l) = self.leeway_secs {
            v = v.leeway(Duration::from_secs(l));
        }
        if let Some(m) = self.max_token_bytes {
            v = v.max_token_bytes(m);
        }
        for s in &self.required_scopes {
            v = v.require_scope(s.clone());
        }
        if !self.keys.is_empty() {
            let keys = self
                .keys
                .iter()
                .map(KeyConfig::build)
                .collect::<Result<Vec<_>, _>>()?;
            v = v.source(KeySource::Static(keys));
        }
        if let Some(u) = &self.jwks_url {
            v = v.source(KeySource::Jwks(Jwks::new(u.clone())));
        }
        if let Some(i) = &self.oidc_issuer {
            v = v.source(KeySource::Oidc(Oidc::new(i.clone())));
        }
        if !v.has_keys() {
            return Err(AuthError::Config(
                "[auth.jwt] needs keys, jwks_url or oidc_issuer".into(),
            ));
        }
        Ok(v)
    }
}

impl AuthConfig {
    /// An authenticator: these settings, API keys from `keys` (when enabled).
    pub fn build(&self, keys: Option<ApiKeys>) -> Result<Authenticator, AuthError> {
        let mut b = Authenticator::builder();
        if self.api_keys.enabled
            && let Some(k) = keys
        {
            let loc = match self.api_keys.location.as_str() {
                "header" => KeyLocation::Header(self.api_keys.name.to_ascii_lowercase()),
                "query" => KeyLocation::Query(self.api_keys.name.clone()),
                "cookie" => KeyLocation::Cookie(self.api_keys.name.clone()),
                other => {
                    return Err(AuthError::Config(format!(
                        "API key location {other:?}: use header, query or cookie"
                    )));
                }
            };
            b = b
                .api_keys(k.cache_ttl(Duration::from_secs(self.api_keys.cache_ttl_secs)))
                .key_location(loc);
        }
        if let Some(j) = &self.jwt {
            b = b.jwt(j.build()?);
        }
        b.build()
    }
}
