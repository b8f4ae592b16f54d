//! Signing an Agent Card and checking its signatures (v1 §8.4.2, §8.4.3).

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    KeySet, SigningError, SigningKey,
    keys::{alg_name, parse_alg},
    payload::{PayloadForm, card_payload},
};

/// The JWS protected header of a card signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedHeader {
    /// The algorithm.
    pub alg: String,
    /// `"JOSE"` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typ: Option<String>,
    /// The key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// Where the signer publishes its JWKS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jku: Option<String>,
    /// Extensions the verifier must understand (none are supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crit: Option<Vec<String>>,
}

/// What checking a card's signatures found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A signature checked out with a trusted key.
    Verified {
        /// The key that verified it.
        kid: Option<String>,
        /// Its algorithm.
        alg: String,
    },
    /// Signatures are present, but no trusted key can check them (unknown
    /// `kid`, `jku` not trusted), and none was found wrong.
    Unverifiable(String),
    /// The card carries no signature.
    Absent,
    /// A signature is malformed, uses a refused algorithm or key, or does not
    /// match the card.
    Invalid(String),
}

impl Verdict {
    /// The one-word name: `verified`, `unverifiable`, `absent`, `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Verified { .. } => "verified",
            Verdict::Unverifiable(_) => "unverifiable",
            Verdict::Absent => "absent",
            Verdict::Invalid(_) => "invalid",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Verified { kid, alg } => write!(
                f,
                "verified ({alg}, kid {})",
                kid.as_deref().unwrap_or("none")
            ),
            Verdict::Unverifiable(why) => write!(f, "unverifiable: {why}"),
            Verdict::Absent => f.write_str("absent: the card has no signatures"),
            Verdict::Invalid(why) => write!(f, "invalid: {why}"),
        }
    }
}

/// Signs `card` (an Agent Card JSON object, as it will be served) with
/// `key` and appends the signature to its `signatures` (other signatures
/// stay, for key rotation). `jku` names where the public key is published.
pub fn sign_card(
    card: &mut Value,
    key: &SigningKey,
    jku: Option<&str>,
) -> Result<(), SigningError> {
    let payload = card_payload(card, PayloadForm::Spec)?;
    let header = ProtectedHeader {
        alg: alg_name(key.alg).to_owned(),
        typ: Some("JOSE".into()),
        kid: Some(key.kid.clone()),
        jku: jku.map(str::to_owned),
        crit: None,
    };
    let protected = B64.encode(
        serde_json::to_vec(&header).map_err(|e| SigningError::Canonicalize(e.to_string()))?,
    );
    let input = format!("{protected}.{}", B64.encode(payload.as_bytes()));
    let signature = jsonwebtoken::crypto::sign(input.as_bytes(), &key.key, key.alg)
        .map_err(|e| SigningError::Key(format!("signing failed: {e}")))?;
    let Value::Object(map) = card else {
        return Err(SigningError::NotACard(
            "the card is not a JSON object".into(),
        ));
    };
    let entry = serde_json::json!({"protected": protected, "signature": signature});
    match map
        .entry("signatures")
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(list) => list.push(entry),
        _ => return Err(SigningError::NotACard("`signatures` is not a list".into())),
    }
    Ok(())
}

/// Signs a card file as it will be served: like [`sign_card`], and for a
/// dual v1.0 + v0.3 card a second signature over its v1.0 view
/// ([`v1_view`]), the form the official Python SDK verifies.
pub fn sign_served_card(
    card: &mut Value,
    key: &SigningKey,
    jku: Option<&str>,
) -> Result<(), SigningError> {
    use heddle_core::card::{CardForm, card_form};
    let view = (card_form(card) == CardForm::Dual)
        .then(|| v1_view(card))
        .flatten();
    sign_card(card, key, jku)?;
    if let Some(mut view) = view {
        sign_card(&mut view, key, jku)?;
        let extra = view
            .get("signatures")
            .and_then(Value::as_array)
            .and_then(|s| s.last())
            .cloned()
            .ok_or_else(|| SigningError::NotACard("no signature was added".into()))?;
        if let Some(Value::Array(list)) = card.get_mut("signatures") {
            list.push(extra);
        }
    }
    Ok(())
}

/// The protected headers of the card's signatures that can be read (for a
/// verifier deciding which `jku` to fetch).
pub fn signature_headers(card: &Value) -> Vec<ProtectedHeader> {
    signatures(card)
        .iter()
        .filter_map(|s| s.get("protected").and_then(Value::as_str))
        .filter_map(|p| decode_header(p).ok())
        .collect()
}

fn signatures(card: &Value) -> &[Value] {
    card.get("signatures")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn decode_header(protected: &str) -> Result<ProtectedHeader, String> {
    let bytes = B64
        .decode(protected)
        .map_err(|_| "the protected header is not base64url".to_owned())?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("the protected header is not a JWS header: {e}"))
}

/// Outcome of one signature.
enum One {
    Verified(Verdict),
    Unverifiable(String),
    Invalid(String),
}

/// The v1.0 view of a card: the JSON of the v1.0 model it reads into
/// ([`heddle_core::card::parse_card`]), so without the v0.3 members of a
/// dual card. The official Python SDK signs and verifies this view.
pub fn v1_view(card: &Value) -> Option<Value> {
    let model = heddle_core::card::parse_card(card).ok()?;
    serde_json::to_value(model).ok()
}

/// Checks the card's signatures against `keys`: verified when at least one
/// signature matches a trusted key (v1 §8.4.3).
///
/// A signature may cover the card as served, or its v1.0 view
/// ([`v1_view`]), each with either presence rule of [`PayloadForm`]. The
/// v1.0 view leaves out only what the v1.0 model does not hold, so a
/// verified card read with `parse_card` is exactly what was signed.
pub fn verify_card(card: &Value, keys: &KeySet) -> Verdict {
    let sigs = signatures(card);
    if sigs.is_empty() {
        return Verdict::Absent;
    }
    let view = v1_view(card);
    let mut inputs = Vec::new();
    for doc in std::iter::once(card).chain(view.as_ref()) {
        for form in [PayloadForm::Spec, PayloadForm::DropAllEmpty] {
            match card_payload(doc, form) {
                Ok(p) => {
                    let encoded = B64.encode(p.as_bytes());
                    if !inputs.contains(&encoded) {
                        inputs.push(encoded);
                    }
                }
                Err(e) => return Verdict::Invalid(e.to_string()),
            }
        }
    }
    let mut invalid = Vec::new();
    let mut unverifiable = Vec::new();
    for (i, sig) in sigs.iter().enumerate() {
        match check_one(sig, &inputs, keys) {
            One::Verified(v) => return v,
            One::Unverifiable(why) => unverifiable.push(format!("signature {i}: {why}")),
            One::Invalid(why) => invalid.push(format!("signature {i}: {why}")),
        }
    }
    if invalid.is_empty() {
        Verdict::Unverifiable(unverifiable.join("; "))
    } else {
        Verdict::Invalid(invalid.join("; "))
    }
}

fn check_one(sig: &Value, inputs: &[String], keys: &KeySet) -> One {
    let (Some(protected), Some(signature)) = (
        sig.get("protected").and_then(Value::as_str),
        sig.get("signature").and_then(Value::as_str),
    ) else {
        return One::Invalid("needs string `protected` and `signature`".into());
    };
    let header = match decode_header(protected) {
        Ok(h) => h,
        Err(e) => return One::Invalid(e),
    };
    let alg = match parse_alg(&header.alg) {
        Ok(a) => a,
        Err(e) => return One::Invalid(e.to_string()),
    };
    if let Some(crit) = header.crit.filter(|c| !c.is_empty()) {
        return One::Invalid(format!("unsupported critical header parameters {crit:?}"));
    }
    let kid = header.kid.as_deref();
    let candidates = keys.candidates(kid);
    if candidates.is_empty() {
        return One::Unverifiable(match (kid, &header.jku) {
            (Some(k), Some(j)) => format!("no trusted key with kid {k:?} (jku {j})"),
            (Some(k), None) => format!("no trusted key with kid {k:?}"),
            (None, _) => "no kid, and no trusted keys".into(),
        });
    }
    let mut why = Vec::new();
    for key in candidates {
        if let Some(refused) = key.refuses(alg) {
            why.push(refused);
            continue;
        }
        let decoding = match key.decoding_key() {
            Ok(d) => d,
            Err(e) => {
                why.push(e.to_string());
                continue;
            }
        };
        for input in inputs {
            let message = format!("{protected}.{input}");
            if let Ok(true) =
                jsonwebtoken::crypto::verify(signature, message.as_bytes(), &decoding, alg)
            {
                return One::Verified(Verdict::Verified {
                    kid: header.kid.clone(),
                    alg: header.alg.clone(),
                });
            }
        }
        why.push("the signature does not match the card".into());
    }
    One::Invalid(why.join(", "))
}

#[cfg(test)]
#[path = "card_tests.rs"]
mod tests;
