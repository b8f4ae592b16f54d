//! Bearer JWT verification with `jsonwebtoken`: static keys, a JWKS URL, or
//! an OpenID Connect issuer whose discovery document names the JWKS.
//!
//! Each key carries the one algorithm it may verify: a token whose header
//! names another (an RS256 public key offered as an HS256 secret, say) is
//! refused before any signature check, and `alg: none` never parses. JWKS
//! keys are cached; a token with an unknown `kid` triggers a refetch, at most
//! once per [`Jwks::min_refetch`], so a rotated key is picked up without a
//! restart and a flood of made-up `kid`s cannot hammer the key server.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use jsonwebtoken::{
    Algorithm, DecodingKey, Validation,
    errors::ErrorKind,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm},
};
use serde::Deserialize;

use crate::AuthError;

/// The algorithms a key may be configured with.
pub const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::HS256,
    Algorithm::RS256,
    Algorithm::ES256,
    Algorithm::EdDSA,
];

/// Parses an algorithm name (`HS256`, `RS256`, `ES256`, `EdDSA`).
pub fn parse_algorithm(name: &str) -> Result<Algorithm, AuthError> {
    ALGORITHMS
        .into_iter()
        .find(|a| format!("{a:?}").eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            AuthError::Config(format!(
                "unsupported JWT algorithm {name:?}: use HS256, RS256, ES256 or EdDSA"
            ))
        })
}

/// A verification key bound to one algorithm.
#[derive(Clone)]
pub struct StaticKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

impl std::fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl StaticKey {
    /// An HS256 shared secret.
    pub fn hmac(kid: Option<String>, secret: &[u8]) -> Result<Self, AuthError> {
        if secret.len() < 32 {
            return Err(AuthError::Config(
                "an HS256 secret must be at least 32 bytes".into(),
            ));
        }
        Ok(Self {
            kid,
            alg: Algorithm::HS256,
            key: DecodingKey::from_secret(secret),
        })
    }

    /// A public key in PEM for `alg` (RS256, ES256 or EdDSA).
    pub fn public_pem(kid: Option<String>, alg: Algorithm, pem: &[u8]) -> Result<Self, AuthError> {
        let key = match alg {
            Algorithm::RS256 => DecodingKey::from_rsa_pem(pem),
            Algorithm::ES256 => DecodingKey::from_ec_pem(pem),
            Algorithm::EdDSA => DecodingKey::from_ed_pem(pem),
            other => {
                return Err(AuthError::Config(format!(
                    "{other:?} takes a shared secret, not a PEM key"
                )));
            }
        }
        .map_err(|e| AuthError::Config(format!("reading the {alg:?} public key: {e}")))?;
        Ok(Self { kid, alg, key })
    }
}

/// The algorithm a JWK may verify: its `alg`, else the one its key type implies.
fn jwk_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    let alg = match jwk.common.key_algorithm {
        Some(KeyAlgorithm::RS256) => Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => Algorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => Algorithm::EdDSA,
        Some(_) => return None,
        None => match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => return None,
        },
    };
    // The key type must fit the algorithm; symmetric keys never come from a JWKS.
    let fits = matches!(
        (&jwk.algorithm, alg),
        (AlgorithmParameters::RSA(_), Algorithm::RS256)
            | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256)
            | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
    );
    fits.then_some(alg)
}

/// Reads the signing keys of a JWKS document, skipping keys this verifier
/// cannot use (encryption keys, other types).
pub fn parse_jwks(body: &[u8]) -> Result<Vec<StaticKey>, AuthError> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(body)
        .map_err(|e| AuthError::Unavailable(format!("JWKS is not a key set: {e}")))?;
    Ok(set
        .keys
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
        .filter(|j| {
            !matches!(
                j.common.public_key_use,
                Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
            )
        })
        .filter_map(|j| {
            let alg = jwk_algorithm(&j)?;
            let key = DecodingKey::from_jwk(&j).ok()?;
            Some(StaticKey {
                kid: j.common.key_id.clone(),
                alg,
                key,
            })
        })
        .collect())
}

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
        .unwrap_or_default()
}

/// Largest JWKS or discovery document read.
const MAX_DOC_BYTES: usize = 256 << 10;

async fn fetch(client: &reqwest::Client, url: &str) -> Result<bytes::Bytes, AuthError> {
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| AuthError::Unavailable(format!("fetching {url}: {}", e.without_url())))?;
    if !resp.status().is_success() {
        return Err(AuthError::Unavailable(format!(
            "fetching {url}: HTTP {}",
            resp.status()
        )));
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| AuthError::Unavailable(format!("reading {url}: {}", e.without_url())))?;
    if body.len() > MAX_DOC_BYTES {
        return Err(AuthError::Unavailable(format!("{url} is too large")));
    }
    Ok(body)
}

#[derive(Default)]
struct JwksState {
    keys: Vec<StaticKey>,
    fetched: Option<Instant>,
    attempted: Option<Instant>,
}

/// A JWKS URL's keys, cached and refetched on rotation.
pub struct Jwks {
    url: String,
    client: reqwest::Client,
    state: tokio::sync::RwLock<JwksState>,
    refetch: tokio::sync::Mutex<()>,
    min_refetch: Duration,
    max_age: Duration,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Jwks {
    /// Keys from `url`, kept 10 minutes, refetched for an unknown `kid` at
    /// most every 30 seconds.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            client: http_client(),
            state: tokio::sync::RwLock::default(),
            refetch: tokio::sync::Mutex::new(()),
            min_refetch: Duration::from_secs(30),
            max_age: Duration::from_secs(600),
        }
    }

    /// The shortest time between two fetches.
    #[must_use]
    pub fn min_refetch(mut self, d: Duration) -> Self {
        self.min_refetch = d;
        self
    }

    /// How long fetched keys are used before they are fetched again.
    #[must_use]
    pub fn max_age(mut self, d: Duration) -> Self {
        self.max_age = d;
        self
    }

    fn find(keys: &[StaticKey], kid: Option<&str>) -> Option<StaticKey> {
        match kid {
            Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
            // No `kid`: only unambiguous with a single key.
            None if keys.len() == 1 => keys.first().cloned(),
            None => None,
        }
    }

    /// The key for `kid`, fetching the set when it is stale or lacks it.
    async fn key(&self, kid: Option<&str>) -> Result<StaticKey, AuthError> {
        {
            let st = self.state.read().await;
            let fresh = st.fetched.is_some_and(|t| t.elapsed() < self.max_age);
            if fresh && let Some(k) = Self::find(&st.keys, kid) {
                return Ok(k);
            }
        }
        // One fetch at a time; whoever waited re-checks what it brought.
        let _one = self.refetch.lock().await;
        {
            let st = self.state.read().await;
            let fresh = st.fetched.is_some_and(|t| t.elapsed() < self.max_age);
            if let Some(k) = Self::find(&st.keys, kid).filter(|_| fresh) {
                return Ok(k);
            }
            let recent = st.attempted.is_some_and(|t| t.elapsed() < self.min_refetch);
            if recent {
                // Rate-limited: keep serving what we have.
                return Self::find(&st.keys, kid)
                    .ok_or_else(|| AuthError::Invalid("unknown signing key (kid)".into()));
            }
        }
        self.state.write().await.attempted = Some(Instant::now());
        let fetched = fetch(&self.client, &self.url)
            .await
            .and_then(|b| parse_jwks(&b));
        let mut st = self.state.write().await;
        match fetched {
            Ok(keys) => {
                st.keys = keys;
                st.fetched = Some(Instant::now());
            }
            Err(e) => {
                tracing::warn!(url = %self.url, error = %e, "JWKS fetch failed; keeping the keys we had");
                if st.keys.is_empty() {
                    return Err(e);
                }
            }
        }
        Self::find(&st.keys, kid)
            .ok_or_else(|| AuthError::Invalid("unknown signing key (kid)".into()))
    }
}

/// An OpenID Connect issuer: its discovery document gives the JWKS URL.
pub struct Oidc {
    issuer: String,
    client: reqwest::Client,
    jwks: tokio::sync::OnceCell<Jwks>,
    min_refetch: Duration,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl Oidc {
    /// The issuer URL (discovery at `{issuer}/.well-known/openid-configuration`).
    pub fn new(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into().trim_end_matches('/').to_owned(),
            client: http_client(),
            jwks: tokio::sync::OnceCell::new(),
            min_refetch: Duration::from_secs(30),
        }
    }

    /// The issuer, as tokens must name it in `iss`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The discovery document's URL.
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer)
    }

    async fn jwks(&self) -> Result<&Jwks, AuthError> {
        self.jwks
            .get_or_try_init(|| async {
                #[derive(Deserialize)]
                struct Discovery {
                    issuer: String,
                    jwks_uri: String,
                }
                let body = fetch(&self.client, &self.discovery_url()).await?;
                let d: Discovery = serde_json::from_slice(&body)
                    .map_err(|e| AuthError::Unavailable(format!("OIDC discovery document: {e}")))?;
                if d.issuer.trim_end_matches('/') != self.issuer {
                    return Err(AuthError::Unavailable(format!(
                        "OIDC discovery names issuer {:?}, not {:?}",
                        d.issuer, self.issuer
                    )));
                }
                Ok(Jwks::new(d.jwks_uri).min_refetch(self.min_refetch))
            })
            .await
    }
}

/// Where keys come from.
#[derive(Debug)]
pub enum KeySource {
    /// Configured keys.
    Static(Vec<StaticKey>),
    /// A JWKS URL.
    Jwks(Jwks),
    /// An OIDC issuer.
    Oidc(Oidc),
}

/// What a valid token says about its bearer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedToken {
    /// `iss` (may be empty).
    pub issuer: String,
    /// `sub`.
    pub subject: String,
    /// Scopes from `scope` (space-separated) or `scp`.
    pub scopes: Vec<String>,
}

impl VerifiedToken {
    /// The caller id: `jwt:{iss}#{sub}` (`iss` may be empty). The prefix
    /// keeps token subjects apart from API keys (`key:{id}`) and client
    /// certificates (`mtls:{name}`), whatever a token's issuer puts in `sub`.
    pub fn principal(&self) -> String {
        format!("jwt:{}#{}", self.issuer, self.subject)
    }
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<serde_json::Value>,
}

/// Verifies bearer JWTs.
#[derive(Debug)]
pub struct JwtVerifier {
    sources: Vec<KeySource>,
    issuer: Option<String>,
    audience: Vec<String>,
    leeway: Duration,
    max_token_bytes: usize,
    required_scopes: Vec<String>,
}

impl Default for JwtVerifier {
    fn default() -> Self {
        Self {
            sources: Vec::new(),
            issuer: None,
            audience: Vec::new(),
            leeway: Duration::from_secs(60),
            max_token_bytes: 8 << 10,
            required_scopes: Vec::new(),
        }
    }
}

impl JwtVerifier {
    /// A verifier with no keys yet, 60 s leeway, tokens up to 8 KiB.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a key source.
    #[must_use]
    pub fn source(mut self, s: KeySource) -> Self {
        if let (KeySource::Oidc(o), None) = (&s, &self.issuer) {
            self.issuer = Some(o.issuer().to_owned());
        }
        self.sources.push(s);
        self
    }

    /// Tokens must carry this `iss`.
    #[must_use]
    pub fn issuer(mut self, iss: impl Into<String>) -> Self {
        self.issuer = Some(iss.into());
        self
    }

    /// Tokens must carry one of these in `aud`.
    #[must_use]
    pub fn audience(mut self, aud: impl Into<String>) -> Self {
        self.audience.push(aud.into());
        self
    }

    /// Clock skew tolerated on `exp` and `nbf`.
    #[must_use]
    pub fn leeway(mut self, d: Duration) -> Self {
        self.leeway = d;
        self
    }

    /// Longest token accepted, in bytes.
    #[must_use]
    pub fn max_token_bytes(mut self, n: usize) -> Self {
        self.max_token_bytes = n;
        self
    }

    /// Scopes every token must grant (else 403).
    #[must_use]
    pub fn require_scope(mut self, scope: impl Into<String>) -> Self {
        self.required_scopes.push(scope.into());
        self
    }

    /// The OIDC issuer URL, when one is a key source.
    pub fn oidc_issuer(&self) -> Option<&str> {
        self.sources.iter().find_map(|s| match s {
            KeySource::Oidc(o) => Some(o.issuer()),
            _ => None,
        })
    }

    /// Whether any key source is configured.
    pub fn has_keys(&self) -> bool {
        !self.sources.is_empty()
    }

    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<StaticKey, AuthError> {
        let mut last = AuthError::Invalid("no key verifies this token".into());
        for s in &self.sources {
            let found = match s {
                KeySource::Static(keys) => keys
                    .iter()
                    .find(|k| {
                        k.alg == alg
                            && match (kid, &k.kid) {
                                (Some(a), Some(b)) => a == b,
                                _ => true,
                            }
                    })
                    .cloned()
                    .ok_or_else(|| AuthError::Invalid("no configured key for this token".into())),
                KeySource::Jwks(j) => j.key(kid).await,
                KeySource::Oidc(o) => match o.jwks().await {
                    Ok(j) => j.key(kid).await,
                    Err(e) => Err(e),
                },
            };
            match found {
                Ok(k) => return Ok(k),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Checks `token`: size, header, key, signature, then claims.
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, AuthError> {
        if token.len() > self.max_token_bytes {
            return Err(AuthError::TooLarge(token.len()));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| AuthError::Invalid("not a JWT with a supported alg".into()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(AuthError::Invalid(format!(
                "alg {:?} is not accepted",
                header.alg
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        if key.alg != header.alg {
            return Err(AuthError::Invalid(format!(
                "the token says {:?} but its key is {:?}",
                header.alg, key.alg
            )));
        }
        let mut v = Validation::new(key.alg);
        v.algorithms = vec![key.alg];
        v.leeway = self.leeway.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        let mut required: HashSet<String> = HashSet::from(["exp".to_owned()]);
        match &self.issuer {
            Some(iss) => {
                v.set_issuer(&[iss]);
                required.insert("iss".into());
            }
            None => v.iss = None,
        }
        if self.audience.is_empty() {
            v.validate_aud = false;
        } else {
            v.set_audience(&self.audience);
            required.insert("aud".into());
        }
        v.required_spec_claims = required;
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &v).map_err(|e| {
            AuthError::Invalid(
                match e.kind() {
                    ErrorKind::ExpiredSignature => "token expired",
                    ErrorKind::ImmatureSignature => "token not yet valid",
                    ErrorKind::InvalidAudience => "wrong audience",
                    ErrorKind::InvalidIssuer => "wrong issuer",
                    ErrorKind::InvalidSignature => "bad signature",
                    ErrorKind::InvalidAlgorithm => "algorithm does not match the key",
                    ErrorKind::MissingRequiredClaim(_) => "a required claim is missing",
                    _ => "malformed token",
                }
                .into(),
            )
        })?;
        let c = data.claims;
        let subject = c
            .sub
            .filter(|s| !s.is_empty())
            .ok_or_else(|| AuthError::Invalid("the token has no subject".into()))?;
        let mut scopes: Vec<String> = c
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        match c.scp {
            Some(serde_json::Value::String(s)) => {
                scopes.extend(s.split_whitespace().map(str::to_owned));
            }
            Some(serde_json::Value::Array(a)) => {
                scopes.extend(a.iter().filter_map(|s| s.as_str().map(str::to_owned)));
            }
            _ => {}
        }
        if let Some(missing) = self.required_scopes.iter().find(|s| !scopes.contains(s)) {
            return Err(AuthError::Forbidden(format!(
                "the token lacks scope {missing:?}"
            )));
        }
        Ok(VerifiedToken {
            issuer: c.iss.unwrap_or_default(),
            subject,
            scopes,
        })
    }
}
