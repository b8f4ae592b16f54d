//! # heddle-signing
//!
//! Signed Agent Cards (A2A v1 §8.4): a signature is a JWS (RFC 7515) with a
//! detached payload, the RFC 8785 canonical JSON of the card without its
//! `signatures` and with the presence rules applied ([`card_payload`]).
//!
//! * [`canonicalize`]: RFC 8785 JCS, written here (UTF-16 member order,
//!   ECMAScript number form);
//! * [`SigningKey`]: an HMAC key from an `oct` JWK, or a PEM private key
//!   (EC P-256 → ES256, Ed25519 → EdDSA, RSA → RS256);
//! * [`KeySet`]: the public keys a verifier trusts (JWK or JWKS);
//! * [`sign_card`] and [`verify_card`], whose [`Verdict`] tells verified,
//!   unverifiable (no trusted key for it), absent and invalid apart;
//! * [`CardSigner`]: a server's signer, over the dual v1.0 + v0.3 JSON it serves.
//!
//! The signature arithmetic is `jsonwebtoken`'s (ring); key types are
//! matched to the algorithm before any check, so an HS256 signature made
//! with an RSA public key as the HMAC secret never meets that key.
//!
//! ```
//! use heddle_signing::{KeySet, SigningKey, Verdict, sign_card, verify_card};
//! let jwk = r#"{"kty":"oct","kid":"k1","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM"}"#;
//! let key = SigningKey::from_file_text(jwk, None, None).unwrap();
//! let mut card = serde_json::json!({"name": "Echo", "version": "1.0"});
//! sign_card(&mut card, &key, None).unwrap();
//! let keys = KeySet::from_json(jwk).unwrap();
//! assert!(matches!(verify_card(&card, &keys), Verdict::Verified { .. }));
//! ```

mod card;
mod jcs;
mod keys;
mod payload;
mod signer;

pub use card::{
    ProtectedHeader, Verdict, sign_card, sign_served_card, signature_headers, v1_view, verify_card,
};
pub use jcs::canonicalize;
pub use keys::{KeySet, SigningKey, alg_name, thumbprint};
pub use payload::{PayloadForm, card_payload};
pub use signer::CardSigner;

/// Why signing, canonicalizing or reading a key failed.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The JSON has no canonical form (a non-finite number, too deep).
    #[error("cannot canonicalize: {0}")]
    Canonicalize(String),
    /// The document is not an Agent Card object.
    #[error("not a card: {0}")]
    NotACard(String),
    /// A key could not be read or does not fit the algorithm.
    #[error("key: {0}")]
    Key(String),
}
