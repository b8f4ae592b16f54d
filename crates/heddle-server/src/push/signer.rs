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
use ring::{
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _},
};
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

/// Signs delivery JWTs with one ES256 key.
pub struct PushSigner {
    kid: String,
    issuer: String,
    encoding: jsonwebtoken::EncodingKey,
    /// The uncompressed public point (0x04 ‖ x ‖ y).
    public: Vec<u8>,
}

impl fmt::Debug for PushSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the private key.
        f.debug_struct("PushSigner")
            .field("kid", &self.kid)
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
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|e| SignerError::Key(e.to_string()))?;
        Self::from_pkcs8(pkcs8.as_ref(), issuer)
    }

    /// The key in a PKCS#8 file (PEM `-----BEGIN PRIVATE KEY-----` or DER),
    /// e.g. from `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`.
    pub fn load(path: &Path, issuer: impl Into<String>) -> Result<Self, SignerError> {
        let bytes = std::fs::read(path)
            .map_err(|e| SignerError::Read(path.display().to_string(), e.to_string()))?;
        let der = match std::str::from_utf8(&bytes) {
            Ok(text) if text.contains("-----BEGIN") => {
                let b64: String = text
                    .lines()
                    .filter(|l| !l.starts_with("-----"))
                    .collect::<Vec<_>>()
                    .concat();
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|e| SignerError::Key(e.to_string()))?
            }
            _ => bytes,
        };
        Self::from_pkcs8(&der, issuer)
    }

    fn from_pkcs8(der: &[u8], issuer: impl Into<String>) -> Result<Self, SignerError> {
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &SystemRandom::new())
                .map_err(|e| SignerError::Key(e.to_string()))?;
        let public = pair.public_key().as_ref().to_vec();
        // The key id: a digest of the public key, stable for a loaded key.
        let digest = ring::digest::digest(&ring::digest::SHA256, &public);
        let kid = URL_SAFE_NO_PAD.encode(&digest.as_ref()[..12]);
        Ok(Self {
            kid,
            issuer: issuer.into(),
            encoding: jsonwebtoken::EncodingKey::from_ec_der(der),
            public,
        })
    }

    /// The key id (`kid`).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK Set.
    pub fn jwks(&self) -> serde_json::Value {
        // An uncompressed P-256 point: 0x04, then 32 bytes of x and 32 of y.
        let x = self.public.get(1..33).unwrap_or_default();
        let y = self.public.get(33..65).unwrap_or_default();
        serde_json::json!({"keys": [{
            "kty": "EC",
            "crv": "P-256",
            "alg": "ES256",
            "use": "sig",
            "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(x),
            "y": URL_SAFE_NO_PAD.encode(y),
        }]})
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
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        match jsonwebtoken::encode(&header, &claims, &self.encoding) {
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
