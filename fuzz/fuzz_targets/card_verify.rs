//! Any bytes as what a card verifier reads from the network: a JWKS (served
//! at a `jku`) and a signed Agent Card, through canonicalization, the
//! protected headers and verification against HMAC and ES256 keys. Nothing
//! may panic. And a card Heddle signs itself must verify.
#![no_main]

use std::sync::OnceLock;

use heddle_signing::{
    KeySet, SigningKey, Verdict, canonicalize, sign_card, signature_headers, verify_card,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const HMAC_JWK: &str =
    r#"{"kty":"oct","kid":"fuzz-hmac","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM"}"#;

/// The signing key and the trusted keys: the HMAC key and a fresh ES256 key.
fn keys() -> &'static (SigningKey, KeySet) {
    static KEYS: OnceLock<(SigningKey, KeySet)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let rng = ring::rand::SystemRandom::new();
        let der = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .expect("an ES256 key");
        let es256 = SigningKey::from_pkcs8_der(der.as_ref(), Some("ES256")).expect("ES256");
        let mut trusted = KeySet::from_json(HMAC_JWK).expect("HMAC JWK");
        trusted
            .add(es256.public_jwk().expect("public JWK"))
            .expect("ES256 JWK");
        (es256, trusted)
    })
}

fuzz_target!(|data: &[u8]| {
    let (signer, trusted) = keys();
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = KeySet::from_json(text);
    }
    let Ok(card) = serde_json::from_slice::<Value>(data) else { return };
    let _ = canonicalize(&card);
    let _ = signature_headers(&card);
    let _ = verify_card(&card, trusted);
    // Whatever the card holds, once Heddle has signed it (alone), it verifies.
    if let Value::Object(map) = &card {
        let mut unsigned = Value::Object(map.clone());
        if let Value::Object(m) = &mut unsigned {
            m.remove("signatures");
        }
        if sign_card(&mut unsigned, signer, None).is_ok() {
            let verdict = verify_card(&unsigned, trusted);
            assert!(
                matches!(verdict, Verdict::Verified { .. }),
                "a card Heddle signed did not verify: {verdict:?}"
            );
        }
    }
});
