use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{Value, json};

use super::*;
use crate::thumbprint;

const HMAC_JWK: &str =
    r#"{"kty":"oct","kid":"hmac-1","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM"}"#;
const RSA_PEM: &str = include_str!("../testdata/rsa.pem");
const RSA_PUB_PEM: &str = include_str!("../testdata/rsa.pub.pem");
const EC_PEM: &str = include_str!("../testdata/ec.pem");
const ED_PEM: &str = include_str!("../testdata/ed25519.pem");

fn card() -> Value {
    json!({
        "name": "Echo",
        "description": "Repeats what you say",
        "version": "1.2.0",
        "supportedInterfaces": [
            {"url": "https://agents.example/echo/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://agents.example/echo/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "t1"}
        ],
        "provider": {"organization": "Example", "url": "https://example.com"},
        "capabilities": {"streaming": true, "pushNotifications": false,
            "extensions": [{"uri": "urn:x", "required": true, "params": {"depth": 2, "ratio": 0.5}}]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echo text", "tags": ["echo", "demo"],
            "examples": ["hello"]}],
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "iconUrl": "https://example.com/icon.png"
    })
}

fn hmac_key() -> SigningKey {
    SigningKey::from_file_text(HMAC_JWK, None, None).expect("HMAC JWK")
}

fn hmac_keys() -> KeySet {
    KeySet::from_json(HMAC_JWK).expect("JWKS")
}

fn signed(key: &SigningKey) -> Value {
    let mut c = card();
    sign_card(&mut c, key, Some("https://example.com/jwks.json")).expect("signs");
    c
}

/// Every leaf of `v` as a JSON pointer.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                leaves(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                leaves(v, format!("{at}/{i}"), out);
            }
        }
        _ => out.push(at),
    }
}

fn mutate(v: &mut Value) {
    *v = match v {
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Bool(b) => Value::Bool(!*b),
        Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 1.0),
        Value::Null => json!(1),
        _ => unreachable!("leaves only"),
    };
}

#[test]
fn hs256_signed_card_verifies_and_fails_after_any_single_field_change() {
    let original = signed(&hmac_key());
    assert_eq!(
        verify_card(&original, &hmac_keys()),
        Verdict::Verified {
            kid: Some("hmac-1".into()),
            alg: "HS256".into()
        }
    );
    let mut paths = Vec::new();
    leaves(&card(), String::new(), &mut paths);
    assert!(
        paths.len() > 25,
        "the card exercises many fields: {paths:?}"
    );
    for path in &paths {
        let mut changed = original.clone();
        mutate(changed.pointer_mut(path).expect("leaf"));
        let verdict = verify_card(&changed, &hmac_keys());
        assert!(
            matches!(verdict, Verdict::Invalid(_)),
            "changing {path} left {verdict:?}"
        );
    }
    // Removing a member or adding one breaks it too.
    for (path, key) in [
        ("", "iconUrl"),
        ("/capabilities", "streaming"),
        ("/skills/0", "examples"),
    ] {
        let mut changed = original.clone();
        changed
            .pointer_mut(path)
            .and_then(Value::as_object_mut)
            .expect("object")
            .remove(key);
        assert!(
            matches!(verify_card(&changed, &hmac_keys()), Verdict::Invalid(_)),
            "removing {path}/{key}"
        );
    }
    let mut added = original.clone();
    added["documentationUrl"] = json!("https://evil.example");
    assert!(matches!(
        verify_card(&added, &hmac_keys()),
        Verdict::Invalid(_)
    ));
}

#[test]
fn member_order_whitespace_and_empty_optional_fields_do_not_matter() {
    let signed = signed(&hmac_key());
    let text = serde_json::to_string_pretty(&signed).expect("json");
    let mut reread: Value = serde_json::from_str(&text).expect("json");
    reread["documentationUrl"] = json!("");
    reread["capabilities"]["extensions"][0]["description"] = Value::Null;
    assert!(matches!(
        verify_card(&reread, &hmac_keys()),
        Verdict::Verified { .. }
    ));
}

#[test]
fn asymmetric_keys_sign_and_verify_with_their_public_jwk() {
    for (pem, alg, kty) in [
        (EC_PEM, "ES256", "EC"),
        (RSA_PEM, "RS256", "RSA"),
        (ED_PEM, "EdDSA", "OKP"),
    ] {
        let key = SigningKey::from_file_text(pem, None, Some("k-1")).expect("PEM key");
        assert_eq!(key.alg(), alg);
        let jwk = key.public_jwk().expect("public half");
        assert_eq!(jwk["kty"], kty);
        assert!(jwk.get("d").is_none(), "no private member");
        let mut keys = KeySet::new();
        keys.add(jwk).expect("JWK");
        let c = signed(&key);
        assert_eq!(
            verify_card(&c, &keys),
            Verdict::Verified {
                kid: Some("k-1".into()),
                alg: alg.into()
            }
        );
        let mut changed = c.clone();
        changed["name"] = json!("Not Echo");
        assert!(
            matches!(verify_card(&changed, &keys), Verdict::Invalid(_)),
            "{alg}"
        );
    }
}

#[test]
fn the_default_kid_is_the_jwk_thumbprint() {
    let key = SigningKey::from_file_text(EC_PEM, None, None).expect("PEM key");
    let jwk = key.public_jwk().expect("public");
    assert_eq!(key.kid(), thumbprint(&jwk).expect("thumbprint"));
}

/// RFC 7638 §3.1: the thumbprint of its example RSA key.
#[test]
fn rfc7638_thumbprint_example() {
    let jwk = json!({"kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
    assert_eq!(
        thumbprint(&jwk).expect("thumbprint"),
        "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    );
}

#[test]
fn a_signature_copied_onto_another_card_fails() {
    let a = signed(&hmac_key());
    let mut b = card();
    b["name"] = json!("Impostor");
    b["signatures"] = a["signatures"].clone();
    assert!(matches!(verify_card(&b, &hmac_keys()), Verdict::Invalid(_)));
}

#[test]
fn alg_none_is_refused() {
    let protected = B64.encode(br#"{"alg":"none","typ":"JOSE","kid":"hmac-1"}"#);
    let mut c = card();
    c["signatures"] = json!([{"protected": protected, "signature": ""}]);
    let v = verify_card(&c, &hmac_keys());
    assert!(
        matches!(&v, Verdict::Invalid(why) if why.contains("none")),
        "{v:?}"
    );
}

/// The classic confusion: HS256 keyed with the RSA public key's bytes (PEM
/// text or the modulus) must not verify against the RSA JWK, nor panic.
#[test]
fn hs256_made_with_the_rsa_public_key_is_refused_for_the_rsa_jwk() {
    let rsa = SigningKey::from_file_text(RSA_PEM, None, Some("rsa-1")).expect("RSA");
    let mut keys = KeySet::new();
    keys.add(rsa.public_jwk().expect("public")).expect("JWK");
    let n = B64
        .decode(rsa.public_jwk().expect("public")["n"].as_str().expect("n"))
        .expect("b64");
    for secret in [RSA_PUB_PEM.as_bytes(), n.as_slice()] {
        let mut c = card();
        let protected = B64.encode(br#"{"alg":"HS256","typ":"JOSE","kid":"rsa-1"}"#);
        let payload = card_payload(&c, PayloadForm::Spec).expect("payload");
        let input = format!("{protected}.{}", B64.encode(payload));
        let sig = jsonwebtoken::crypto::sign(
            input.as_bytes(),
            &EncodingKey::from_secret(secret),
            Algorithm::HS256,
        )
        .expect("hmac");
        c["signatures"] = json!([{"protected": protected, "signature": sig}]);
        let v = verify_card(&c, &keys);
        assert!(
            matches!(&v, Verdict::Invalid(why) if why.contains("does not fit")),
            "{v:?}"
        );
    }
}

#[test]
fn published_key_sets_lose_their_symmetric_keys() {
    let mut keys = hmac_keys();
    let ec = SigningKey::from_file_text(EC_PEM, None, Some("ec-1")).expect("EC");
    keys.add(ec.public_jwk().expect("public")).expect("jwk");
    let keys = keys.without_symmetric();
    assert_eq!(keys.len(), 1);
    assert!(matches!(
        verify_card(&signed(&hmac_key()), &keys),
        Verdict::Unverifiable(_)
    ));
    assert!(matches!(
        verify_card(&signed(&ec), &keys),
        Verdict::Verified { .. }
    ));
}

#[test]
fn a_jwk_pinned_to_one_alg_refuses_another() {
    let mut keys = KeySet::new();
    let mut jwk: Value = serde_json::from_str(HMAC_JWK).expect("jwk");
    jwk["alg"] = json!("HS512");
    keys.add(jwk).expect("jwk");
    assert!(matches!(
        verify_card(&signed(&hmac_key()), &keys),
        Verdict::Invalid(_)
    ));
}

#[test]
fn unknown_kid_is_unverifiable_and_no_signature_is_absent() {
    let other = SigningKey::from_file_text(HMAC_JWK, None, Some("someone-else")).expect("key");
    let v = verify_card(&signed(&other), &hmac_keys());
    assert!(
        matches!(&v, Verdict::Unverifiable(why) if why.contains("someone-else")),
        "{v:?}"
    );
    assert_eq!(verify_card(&card(), &hmac_keys()), Verdict::Absent);
    let mut empty = card();
    empty["signatures"] = json!([]);
    assert_eq!(verify_card(&empty, &hmac_keys()), Verdict::Absent);
}

#[test]
fn malformed_signatures_and_critical_headers_are_invalid() {
    for sig in [
        json!({"protected": "!!!", "signature": "x"}),
        json!({"protected": B64.encode("[1]"), "signature": "x"}),
        json!({"signature": "x"}),
        json!({"protected": B64.encode(r#"{"alg":"HS256","kid":"hmac-1","crit":["b64"]}"#), "signature": "x"}),
        json!({"protected": B64.encode(r#"{"alg":"XX999","kid":"hmac-1"}"#), "signature": "x"}),
    ] {
        let mut c = card();
        c["signatures"] = json!([sig]);
        assert!(
            matches!(verify_card(&c, &hmac_keys()), Verdict::Invalid(_)),
            "{sig}"
        );
    }
}

#[test]
fn a_dual_card_file_gets_a_second_signature_over_its_v1_view() {
    let mut dual = card();
    dual["protocolVersion"] = json!("0.3.0");
    dual["url"] = json!("https://agents.example/echo/a2a");
    dual["preferredTransport"] = json!("JSONRPC");
    sign_served_card(&mut dual, &hmac_key(), None).expect("signs");
    assert_eq!(dual["signatures"].as_array().map(Vec::len), Some(2));
    // The second alone verifies once the v0.3 members are gone (a v1.0 reader's view).
    let mut v1_only = v1_view(&dual).expect("view");
    v1_only["signatures"] = json!([dual["signatures"][1].clone()]);
    assert!(matches!(
        verify_card(&v1_only, &hmac_keys()),
        Verdict::Verified { .. }
    ));
    // A plain v1.0 card gets one.
    let mut plain = card();
    sign_served_card(&mut plain, &hmac_key(), None).expect("signs");
    assert_eq!(plain["signatures"].as_array().map(Vec::len), Some(1));
}

#[test]
fn one_good_signature_among_several_suffices() {
    let mut c = signed(&SigningKey::from_file_text(HMAC_JWK, None, Some("retired")).expect("key"));
    sign_card(&mut c, &hmac_key(), None).expect("second signature");
    assert_eq!(c["signatures"].as_array().map(Vec::len), Some(2));
    assert!(matches!(
        verify_card(&c, &hmac_keys()),
        Verdict::Verified { .. }
    ));
}

/// A signer that drops every empty value (the Python SDK 1.3.0 does, even
/// REQUIRED `skills: []`) is still verified.
#[test]
fn a_signature_over_the_python_sdk_payload_form_verifies() {
    let mut c = card();
    c["skills"] = json!([]);
    let spec = card_payload(&c, PayloadForm::Spec).expect("payload");
    let sdk = card_payload(&c, PayloadForm::DropAllEmpty).expect("payload");
    assert_ne!(spec, sdk);
    let protected = B64.encode(br#"{"alg":"HS256","typ":"JOSE","kid":"hmac-1"}"#);
    let input = format!("{protected}.{}", B64.encode(sdk));
    let secret = B64
        .decode("c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM")
        .expect("b64");
    let sig = jsonwebtoken::crypto::sign(
        input.as_bytes(),
        &EncodingKey::from_secret(&secret),
        Algorithm::HS256,
    )
    .expect("hmac");
    c["signatures"] = json!([{"protected": protected, "signature": sig}]);
    assert!(matches!(
        verify_card(&c, &hmac_keys()),
        Verdict::Verified { .. }
    ));
}

#[test]
fn keys_that_do_not_fit_are_refused_at_load() {
    assert!(SigningKey::from_file_text(EC_PEM, Some("RS256"), None).is_err());
    assert!(SigningKey::from_file_text(HMAC_JWK, Some("ES256"), None).is_err());
    assert!(SigningKey::from_file_text(r#"{"kty":"oct","k":"c2hvcnQ"}"#, None, None).is_err());
    assert!(SigningKey::from_file_text(RSA_PUB_PEM, None, None).is_err());
    assert!(SigningKey::from_file_text(HMAC_JWK, Some("none"), None).is_err());
}

#[test]
fn the_signing_key_debug_hides_the_secret() {
    let shown = format!("{:?}", hmac_key());
    assert!(
        shown.contains("redacted") && !shown.contains("c2VjcmV0"),
        "{shown}"
    );
}
