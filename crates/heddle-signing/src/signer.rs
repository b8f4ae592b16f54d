//! Signing the cards a server serves: over exactly the JSON it serves (the
//! dual v1.0 + v0.3 form of [`heddle_core::card::dual_card_json`]), with the
//! signature kept in the card model so every binding serves it.

use heddle_core::{card::dual_card_json, v1};
use serde_json::{Value, json};

use crate::{SigningError, SigningKey, sign_card};

/// A key and the `jku` to name in its signatures.
#[derive(Debug)]
pub struct CardSigner {
    key: SigningKey,
    jku: Option<String>,
}

impl CardSigner {
    /// Signs with `key`, naming `jku` (where the public key is published).
    pub fn new(key: SigningKey, jku: Option<String>) -> Self {
        Self { key, jku }
    }

    /// The signing key.
    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// Adds a signature over `card`'s served JSON to `card.signatures`.
    pub fn sign(&self, card: &mut v1::AgentCard) -> Result<(), SigningError> {
        let mut doc = dual_card_json(card);
        sign_card(&mut doc, &self.key, self.jku.as_deref())?;
        let entry = doc
            .get("signatures")
            .and_then(Value::as_array)
            .and_then(|s| s.last())
            .ok_or_else(|| SigningError::NotACard("no signature was added".into()))?;
        let field = |k: &str| {
            entry
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        card.signatures.push(v1::AgentCardSignature {
            protected: field("protected"),
            signature: field("signature"),
            header: None,
        });
        Ok(())
    }

    /// The JWKS to publish (at the `jku`): the public key, or `None` for an
    /// HMAC key, whose verifiers hold the shared secret.
    pub fn jwks(&self) -> Option<Value> {
        self.key.public_jwk().map(|k| json!({ "keys": [k] }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KeySet, Verdict, verify_card};

    fn card() -> v1::AgentCard {
        serde_json::from_value(json!({
            "name": "Echo", "description": "", "version": "1.0",
            "supportedInterfaces": [
                {"url": "http://127.0.0.1:8080/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://127.0.0.1:8080/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ],
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "echo", "tags": ["echo"]}]
        }))
        .expect("card")
    }

    #[test]
    fn the_served_dual_card_verifies_and_a_changed_one_does_not() {
        let key = SigningKey::from_file_text(include_str!("../testdata/ec.pem"), None, None)
            .expect("key");
        let signer = CardSigner::new(key, Some("https://h/.well-known/jwks.json".into()));
        let mut c = card();
        signer.sign(&mut c).expect("sign");
        let keys = KeySet::from_json(&signer.jwks().expect("jwks").to_string()).expect("jwks");
        let served = dual_card_json(&c);
        assert!(served.get("protocolVersion").is_some(), "a dual card");
        assert!(matches!(
            verify_card(&served, &keys),
            Verdict::Verified { .. }
        ));
        // A card changed after signing fails.
        let mut changed = c.clone();
        changed.version = "2.0".into();
        assert!(matches!(
            verify_card(&dual_card_json(&changed), &keys),
            Verdict::Invalid(_)
        ));
    }

    #[test]
    fn hmac_signers_publish_no_jwks() {
        let key = SigningKey::from_file_text(include_str!("../testdata/hmac.jwk.json"), None, None)
            .expect("key");
        assert!(CardSigner::new(key, None).jwks().is_none());
    }
}
