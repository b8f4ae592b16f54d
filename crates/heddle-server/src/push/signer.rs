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
    /// Public JWKs of keys that signed before this one, still published
    /// while a rotation overlaps ([`PushSigner::keep_previous`]).
    previous: Vec<serde_json::Value>,
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
            previous: Vec::new(),
        })
    }

    /// Also publishes the public half of the key at `path`, which signed
    /// deliveries before this one: while a rotation overlaps (replicas
    /// restarting one by one, receivers holding a cached JWKS, JWTs signed
    /// in the last five minutes) both keys verify. The file is the old
    /// PKCS#8 key (only its public half is kept) or its public JWK (JSON;
    /// any private member is dropped). Publishing the same key as the
    /// current one is a no-op.
    pub fn keep_previous(mut self, path: &Path) -> Result<Self, SignerError> {
        let bytes = std::fs::read(path)
            .map_err(|e| SignerError::Read(path.display().to_string(), e.to_string()))?;
        let jwk = previous_jwk(&bytes)?;
        let kid = jwk.get("kid").and_then(serde_json::Value::as_str);
        let known = kid == Some(self.kid())
            || self
                .previous
                .iter()
                .any(|p| p.get("kid").and_then(serde_json::Value::as_str) == kid);
        if !known {
            self.previous.push(jwk);
        }
        Ok(self)
    }

    /// The key id (`kid`): the key's RFC 7638 thumbprint.
    pub fn kid(&self) -> &str {
        self.key.kid()
    }

    /// The public keys as a JWK Set: the signing key first, then those kept
    /// from before a rotation.
    pub fn jwks(&self) -> serde_json::Value {
        let keys: Vec<_> = self
            .key
            .public_jwk()
            .into_iter()
            .chain(self.previous.iter().cloned())
            .collect();
        serde_json::json!({ "keys": keys })
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

/// The public JWK of an earlier signing key: from its PKCS#8 file, or from
/// a JWK file of which only the public EC P-256 members are kept.
fn previous_jwk(bytes: &[u8]) -> Result<serde_json::Value, SignerError> {
    let text = std::str::from_utf8(bytes).unwrap_or_default();
    if text.trim_start().starts_with('{') {
        let jwk: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SignerError::Key(e.to_string()))?;
        let member = |k: &str| jwk.get(k).and_then(serde_json::Value::as_str);
        let (Some("EC"), Some("P-256"), Some(x), Some(y)) =
            (member("kty"), member("crv"), member("x"), member("y"))
        else {
            return Err(SignerError::Key(
                "a previous key's JWK must be an EC P-256 key (kty, crv, x, y)".into(),
            ));
        };
        let mut public = serde_json::json!({"kty": "EC", "crv": "P-256", "x": x, "y": y});
        let kid =
            heddle_signing::thumbprint(&public).map_err(|e| SignerError::Key(e.to_string()))?;
        if let serde_json::Value::Object(m) = &mut public {
            m.insert("kid".into(), kid.into());
            m.insert("alg".into(), "ES256".into());
            m.insert("use".into(), "sig".into());
        }
        return Ok(public);
    }
    let key = if text.contains("-----BEGIN") {
        SigningKey::from_file_text(text, None, None)
    } else {
        SigningKey::from_pkcs8_der(bytes, None)
    }
    .map_err(|e| SignerError::Key(e.to_string()))?;
    if key.alg() != "ES256" {
        return Err(SignerError::Key(format!("an {} key", key.alg())));
    }
    key.public_jwk()
        .ok_or_else(|| SignerError::Key("the key has no public half".into()))
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

    fn pkcs8_pem() -> String {
        let rng = SystemRandom::new();
        let der =
            EcdsaKeyPair::generate_pkcs8(&ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    }

    fn verifies(jwt: &str, jwks: &serde_json::Value) -> bool {
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(jwks.clone()).unwrap();
        let kid = jsonwebtoken::decode_header(jwt).unwrap().kid.unwrap();
        let Some(jwk) = jwks.find(&kid) else {
            return false;
        };
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        v.set_issuer(&["https://hub.example"]);
        jsonwebtoken::decode::<serde_json::Value>(jwt, &key, &v).is_ok()
    }

    /// A rotation: the new key signs, the old one's public half stays in the
    /// JWKS, so a delivery signed before the rotation still verifies; from a
    /// JWK file only the public members are published.
    #[test]
    fn a_rotated_key_stays_in_the_jwks_beside_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let (old_path, new_path) = (dir.path().join("old.pem"), dir.path().join("new.pem"));
        std::fs::write(&old_path, pkcs8_pem()).unwrap();
        std::fs::write(&new_path, pkcs8_pem()).unwrap();
        let old = PushSigner::load(&old_path, "https://hub.example").unwrap();
        let signed_before = old.sign("d-1", "t-1", b"{}").unwrap();

        let new = PushSigner::load(&new_path, "https://hub.example")
            .unwrap()
            .keep_previous(&old_path)
            .unwrap()
            // Twice, or the current key again: published once.
            .keep_previous(&old_path)
            .unwrap()
            .keep_previous(&new_path)
            .unwrap();
        let jwks = new.jwks();
        let kids: Vec<_> = jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(kids, [new.kid(), old.kid()], "the signing key first");
        assert!(
            jwks["keys"]
                .as_array()
                .unwrap()
                .iter()
                .all(|k| k.get("d").is_none())
        );
        let signed_after = new.sign("d-2", "t-1", b"{}").unwrap();
        assert!(verifies(&signed_before, &jwks));
        assert!(verifies(&signed_after, &jwks));
        assert!(
            !verifies(&signed_after, &old.jwks()),
            "the old JWKS lacks the new key"
        );

        // A JWK file with its private member: only the public part is kept.
        let mut private = old.key.public_jwk().unwrap();
        private["d"] = serde_json::Value::String("secret-part".into());
        let jwk_path = dir.path().join("old.jwk");
        std::fs::write(&jwk_path, private.to_string()).unwrap();
        let from_jwk = PushSigner::load(&new_path, "https://hub.example")
            .unwrap()
            .keep_previous(&jwk_path)
            .unwrap();
        let published = from_jwk.jwks().to_string();
        assert!(!published.contains("secret-part"));
        assert!(verifies(&signed_before, &from_jwk.jwks()));

        // Not an EC P-256 key: refused, saying why.
        std::fs::write(&jwk_path, r#"{"kty":"oct","k":"c2VjcmV0"}"#).unwrap();
        let refused = PushSigner::generate("https://hub.example")
            .unwrap()
            .keep_previous(&jwk_path)
            .unwrap_err();
        assert!(refused.to_string().contains("P-256"), "{refused}");
    }
}
