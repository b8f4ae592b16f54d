//! Signing the cards a server serves: over exactly the JSON it serves (the
//! dual v1.0 + v0.3 form of [`heddle_core::card::dual_card_json`]), with the
//! signature kept in the card model so every binding serves it.

use heddle_core::{card::dual_card_json, compat::v03_proto, v1};
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

    /// Adds a signature over `card`'s served JSON to `card.signatures`, and
    /// for a dual card two more:
    ///
    /// * over its v1.0 JSON alone, which is what the official Python SDK's
    ///   verifier checks;
    /// * over the v1.0 JSON of its v0.3 form, which is all a v0.3 client
    ///   reading it as protobuf (gRPC) or its ProtoJSON (REST) receives: the
    ///   v0.3 model has no place for the v1.0 interfaces or tenants.
    pub fn sign(&self, card: &mut v1::AgentCard) -> Result<(), SigningError> {
        let to_json = |c: &v1::AgentCard| {
            serde_json::to_value(c).map_err(|e| SigningError::NotACard(e.to_string()))
        };
        let served = dual_card_json(card);
        let v1_only = to_json(card)?;
        // Only a dual card has a v0.3 form; read before any signature is added.
        let v03_read = if served == v1_only {
            None
        } else {
            Some(to_json(&v03_proto::card_to_v1(&v03_proto::card_from_v1(
                card,
            )))?)
        };
        self.sign_one(card, served)?;
        if let Some(v03_read) = v03_read {
            let v03_differs = v03_read != v1_only;
            self.sign_one(card, v1_only)?;
            if v03_differs {
                self.sign_one(card, v03_read)?;
            }
        }
        Ok(())
    }

    fn sign_one(&self, card: &mut v1::AgentCard, mut doc: Value) -> Result<(), SigningError> {
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
        // Three signatures: over the served JSON and over the v1.0 view, each
        // of which verifies the served card alone, and over what a v0.3
        // protobuf reader gets, which verifies that.
        assert_eq!(c.signatures.len(), 3);
        for keep in 0..2 {
            let mut one = served.clone();
            one["signatures"] = json!([served["signatures"][keep].clone()]);
            assert!(
                matches!(verify_card(&one, &keys), Verdict::Verified { .. }),
                "signature {keep}"
            );
        }
        let mut v03_read =
            serde_json::to_value(v03_proto::card_to_v1(&v03_proto::card_from_v1(&c)))
                .expect("json");
        v03_read["signatures"] = json!([served["signatures"][2].clone()]);
        assert!(matches!(
            verify_card(&v03_read, &keys),
            Verdict::Verified { .. }
        ));
        // A v0.3-only member changed: the served-JSON signature no longer
        // holds (the v1.0 model read from the card is what the other covers).
        let mut v03_changed = served.clone();
        v03_changed["signatures"] = json!([served["signatures"][0].clone()]);
        v03_changed["preferredTransport"] = json!("GRPC");
        assert!(matches!(
            verify_card(&v03_changed, &keys),
            Verdict::Invalid(_)
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
