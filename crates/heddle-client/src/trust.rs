//! What the client trusts: TLS roots and its own certificate for mutual
//! TLS ([`TlsOptions`]), and the keys a card's signature must verify with
//! ([`CardVerification`]).

use heddle_signing::{KeySet, Verdict, signature_headers, verify_card};
use serde_json::Value;

use crate::ClientError;

/// A client certificate chain and its private key (PEM), for mutual TLS.
#[derive(Clone)]
pub struct ClientIdentity {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl ClientIdentity {
    /// From the PEM texts of the certificate (chain) and the private key.
    pub fn from_pem(cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        Self {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
        }
    }
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity([redacted])")
    }
}

/// TLS settings for HTTP and gRPC. The system's trusted roots (read by
/// rustls-native-certs) and the built-in web PKI roots (webpki-roots, for
/// machines without a system store) are always trusted;
/// [`TlsOptions::ca_certs`] adds private CAs.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// Extra CA certificates to trust, each a PEM text (may hold several).
    pub ca_certs: Vec<Vec<u8>>,
    /// The certificate to present to servers that ask for one (mTLS).
    pub client_identity: Option<ClientIdentity>,
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Transport(format!("{what}: {e}"))
}

impl TlsOptions {
    /// Applies these settings to an HTTP client builder.
    pub fn apply(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, ClientError> {
        for pem in &self.ca_certs {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| tls_error("CA certificate", e))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(id) = &self.client_identity {
            let mut both = id.cert_pem.clone();
            both.push(b'\n');
            both.extend_from_slice(&id.key_pem);
            builder = builder.identity(
                reqwest::Identity::from_pem(&both)
                    .map_err(|e| tls_error("client certificate", e))?,
            );
        }
        Ok(builder)
    }

    /// The gRPC (tonic) TLS configuration.
    pub(crate) fn grpc_config(&self) -> tonic::transport::ClientTlsConfig {
        let mut config = tonic::transport::ClientTlsConfig::new()
            .with_native_roots()
            .with_webpki_roots();
        for pem in &self.ca_certs {
            config = config.ca_certificate(tonic::transport::Certificate::from_pem(pem));
        }
        if let Some(id) = &self.client_identity {
            config = config.identity(tonic::transport::Identity::from_pem(
                &id.cert_pem,
                &id.key_pem,
            ));
        }
        config
    }
}

/// Largest JWKS fetched.
const MAX_JWKS: usize = 1 << 20;

/// Card signatures a client requires: a discovered card must verify with a
/// pinned key, a key from a pinned JWKS URL, or a key from the signature's
/// `jku` when that URL starts with a trusted prefix; otherwise discovery
/// fails with [`ClientError::CardSignature`].
#[derive(Clone, Debug, Default)]
pub struct CardVerification {
    /// Keys trusted outright.
    pub keys: KeySet,
    /// JWKS URLs whose keys are trusted (fetched at each verification).
    pub jwks_urls: Vec<String>,
    /// URL prefixes a signature's `jku` may start with to be fetched, e.g.
    /// `https://agents.example.com/`. A prefix matches only up to a `/`,
    /// `?` or `#` boundary, so `https://a.example` does not trust
    /// `https://a.example.evil.test/`. Only asymmetric keys are taken from a
    /// `jku`: an HMAC key published at a URL is no secret.
    pub trusted_jku: Vec<String>,
}

/// Whether `url` is under `prefix` (at a path boundary).
pub fn jku_trusted(url: &str, prefix: &str) -> bool {
    let Some(rest) = url.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['/', '?', '#'])
}

async fn fetch_jwks(http: &reqwest::Client, url: &str) -> Result<KeySet, String> {
    let resp = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| ClientError::from(e).to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let body = crate::body::read_limited(resp, MAX_JWKS, "JWKS")
        .await
        .map_err(|e| match e {
            ClientError::BodyTooLarge { .. } => "larger than 1 MiB".to_owned(),
            e => e.to_string(),
        })?;
    KeySet::from_json(&String::from_utf8_lossy(&body)).map_err(|e| e.to_string())
}

impl CardVerification {
    /// Pins the keys of a JWK or JWKS text.
    pub fn with_jwks_text(mut self, text: &str) -> Result<Self, ClientError> {
        let keys = KeySet::from_json(text)
            .map_err(|e| ClientError::CardSignature(format!("trusted keys: {e}")))?;
        self.keys.extend(keys);
        Ok(self)
    }

    /// Checks `card` (the card JSON as served): fetches the pinned JWKS URLs
    /// and any trusted `jku`, then verifies. A pinned JWKS URL that cannot be
    /// fetched is an error; an untrusted or unreachable `jku` only leaves the
    /// signature unverifiable.
    pub async fn verify(
        &self,
        http: &reqwest::Client,
        card: &Value,
    ) -> Result<Verdict, ClientError> {
        self.verify_any(http, &[card]).await
    }

    /// [`CardVerification::verify`] for a card known in several JSON forms
    /// (as served, and as the model read from it): verified if any form
    /// verifies, else the first form's verdict. Keys are fetched once.
    pub async fn verify_any(
        &self,
        http: &reqwest::Client,
        forms: &[&Value],
    ) -> Result<Verdict, ClientError> {
        let mut keys = self.keys.clone();
        for url in &self.jwks_urls {
            let fetched = fetch_jwks(http, url)
                .await
                .map_err(|e| ClientError::CardSignature(format!("JWKS {url}: {e}")))?;
            keys.extend(fetched);
        }
        let mut notes = Vec::new();
        let mut fetched: Vec<String> = Vec::new();
        for header in forms.iter().flat_map(|card| signature_headers(card)) {
            let Some(jku) = header.jku else { continue };
            if fetched.contains(&jku) || self.jwks_urls.contains(&jku) {
                continue;
            }
            if !self.trusted_jku.iter().any(|p| jku_trusted(&jku, p)) {
                notes.push(format!("jku {jku} is not trusted"));
                fetched.push(jku);
                continue;
            }
            match fetch_jwks(http, &jku).await {
                Ok(k) => keys.extend(k.without_symmetric()),
                Err(e) => notes.push(format!("jku {jku}: {e}")),
            }
            fetched.push(jku);
        }
        let mut first = None;
        for card in forms {
            match verify_card(card, &keys) {
                v @ Verdict::Verified { .. } => return Ok(v),
                v => {
                    first.get_or_insert(v);
                }
            }
        }
        Ok(match first.unwrap_or(Verdict::Absent) {
            Verdict::Unverifiable(why) if !notes.is_empty() => {
                Verdict::Unverifiable(format!("{why} ({})", notes.join("; ")))
            }
            v => v,
        })
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod discovery_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jku_prefixes_match_at_a_boundary_only() {
        assert!(jku_trusted(
            "https://a.example/jwks.json",
            "https://a.example"
        ));
        assert!(jku_trusted(
            "https://a.example/keys/jwks.json",
            "https://a.example/keys/"
        ));
        assert!(jku_trusted("https://a.example", "https://a.example"));
        assert!(!jku_trusted(
            "https://a.example.evil.test/jwks.json",
            "https://a.example"
        ));
        assert!(!jku_trusted(
            "http://a.example/jwks.json",
            "https://a.example"
        ));
        assert!(!jku_trusted(
            "https://a.example/keysX/jwks.json",
            "https://a.example/keys"
        ));
    }

    #[test]
    fn the_client_identity_debug_hides_the_key() {
        let id = ClientIdentity::from_pem("CERT", "-----BEGIN PRIVATE KEY-----secret");
        assert!(!format!("{id:?}").contains("secret"));
    }
}
