//! Signed deliveries: an ES256 JWT per POST, so a receiver can prove the
//! notification came from this server and was not altered.
//!
//! The JWT travels in [`JWT_HEADER`]; its claims bind it to one delivery:
//! `iss` (the server's public URL), `iat`/`exp` (five minutes), `jti` (the
//! delivery id), `taskId`, and `bodySha256` (base64url SHA-256 of the exact
//! body bytes). The public keys are served as a JWKS ([`PushSigner::jwks`],
//! at `/.well-known/jwks.json` on the hub); the JWT header's `kid` names the
//! key.

use std::{fmt, path::Path};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use heddle_signing::SigningKey;
use ring::{rand::SystemRandom, signature::EcdsaKeyPair};
use serde::Serialize;

/// The header that carries each delivery's JWT.
pub const JWT_HEADER: &str = "X-A2A-Notification-JWT";

/// How long a delivery JWT is valid.
const LIFETIME_SECS: i64 = 300;

/// Why a signing key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The key file could not be read.
    #[error("cannot read the push signing key {0}: {1}")]
    Read(String, String),
    /// The key is not a PKCS#8 P-256 key.
    #[error("the push signing key is not a PKCS#8 EC P-256 key (PEM or DER): {0}")]
    Key(String),
}

/// Signs delivery JWTs with one ES256 key (held as a [`SigningKey`], the
/// same key type that signs Agent Cards).
pub struct PushSigner {
    issuer: String,
    key: SigningKey,
}

impl fmt::Debug for PushSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the private key.
        f.debug_struct("PushSigner")
            .field("kid", &self.key.kid())
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Claims<'a> {
    iss: &'a str,
    iat: i64,
    exp: i64,
    jti: &'a str,
    task_id: &'a str,
    body_sha256: String,
}

impl PushSigner {
    /// A fresh key, made now (its JWKS changes with every start).
    pub fn generate(issuer: impl Into<String>) -> Result<Self, SignerError> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &SystemRandom::new(),
        )
        .map_err(|e| SignerError::Key(e.to_string()))?;
        Self::with_key(SigningKey::from_pkcs8_der(pkcs8.as_ref(), None), issuer)
    }

    /// The key in a PKCS#8 file (PEM `-----BEGIN PRIVATE KEY-----` or DER),
    /// e.g. from `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`.
    pub fn load(path: &Path, issuer: impl Into<String>) -> Result<Self, SignerError> {
        let bytes = std::fs::read(path)
            .map_err(|e| SignerError::Read(path.display().to_string(), e.to_string()))?;
        let key = match std::str::from_utf8(&bytes) {
            Ok(text) if text.contains("-----BEGIN") => SigningKey::from_file_text(text, None, None),
            _ => SigningKey::from_pkcs8_der(&bytes, None),
        };
        Self::with_key(key, issuer)
    }

    fn with_key(
        key: Result<SigningKey, heddle_signing::SigningError>,
        issuer: impl Into<String>,
    ) -> Result<Self, SignerError> {
        let key = key.map_err(|e| SignerError::Key(e.to_string()))?;
        if key.alg() != "ES256" {
            return Err(SignerError::Key(format!("an {} key", key.alg())));
        }
        Ok(Self {
            issuer: issuer.into(),
            key,
        })
    }

    /// The key id (`kid`): the key's RFC 7638 thumbprint.
    pub fn kid(&self) -> &str {
        self.key.kid()
    }

    /// The public key as a JWK Set.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": self.key.public_jwk().into_iter().collect::<Vec<_>>() })
    }

    /// The JWT for one delivery.
    pub(crate) fn sign(&self, delivery_id: &str, task_id: &str, body: &[u8]) -> Option<String> {
        let now = super::now_ms() / 1000;
        let digest = ring::digest::digest(&ring::digest::SHA256, body);
        let claims = Claims {
            iss: &self.issuer,
            iat: now,
            exp: now + LIFETIME_SECS,
            jti: delivery_id,
            task_id,
            body_sha256: URL_SAFE_NO_PAD.encode(digest.as_ref()),
        };
        match self.key.sign_jwt(&claims) {
            Ok(jwt) => Some(jwt),
            Err(e) => {
                tracing::error!(error = %e, "push: cannot sign a delivery");
                None
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[test]
    fn a_signed_delivery_verifies_against_the_jwks_and_no_other_key() {
        let signer = PushSigner::generate("https://hub.example").unwrap();
        let jwt = signer.sign("d-1", "t-1", b"{\"x\":1}").unwrap();
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(signer.jwks()).unwrap();
        let header = jsonwebtoken::decode_header(&jwt).unwrap();
        assert_eq!(header.kid.as_deref(), Some(signer.kid()));
        let jwk = jwks.find(signer.kid()).unwrap();
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        v.set_issuer(&["https://hub.example"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(&jwt, &key, &v).unwrap();
        assert_eq!(data.claims["jti"], "d-1");
        assert_eq!(data.claims["taskId"], "t-1");
        let other = PushSigner::generate("https://hub.example").unwrap();
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(other.jwks()).unwrap();
        let key = jsonwebtoken::DecodingKey::from_jwk(&jwks.keys[0]).unwrap();
        assert!(jsonwebtoken::decode::<serde_json::Value>(&jwt, &key, &v).is_err());
    }
}
