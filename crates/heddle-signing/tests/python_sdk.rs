//! Cross-check with the official Python SDK's card signing (a2a-sdk 1.3.0,
//! `a2a.utils.signing`) through `tests/interop/python/card_signing.py`: for
//! HS256, ES256, RS256 and EdDSA, a card the SDK signs verifies in Heddle,
//! and a card Heddle signs verifies in the SDK. The card has a 0.3 interface,
//! so both sides serve it in dual v1.0 + v0.3 form: the SDK signs the v1.0
//! model and serves the union; `heddle_signing::CardSigner` signs the served
//! union and the v1.0 view.
//!
//! Needs `tests/interop/.venv` (`tests/interop/setup.sh`). Without it the test
//! prints a note and passes, unless `HEDDLE_REQUIRE_INTEROP=1`.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use heddle_core::{card::dual_card_json, v1};
use heddle_signing::{CardSigner, KeySet, SigningKey, Verdict, sign_card, verify_card};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn python() -> Option<PathBuf> {
    let python = root().join("tests/interop/.venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    let msg = format!("{} missing (run tests/interop/setup.sh)", python.display());
    if std::env::var("HEDDLE_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("HEDDLE_REQUIRE_INTEROP=1 but {msg}");
    }
    eprintln!("SKIP python_sdk card signing: {msg}");
    None
}

/// Runs the helper with `card` on standard input; (exit ok, stdout).
fn helper(python: &Path, args: &[&str], card: &Value) -> (bool, String) {
    let mut child = Command::new(python)
        .arg(root().join("tests/interop/python/card_signing.py"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(card.to_string().as_bytes())
        .expect("write card");
    let out = child.wait_with_output().expect("python ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "helper {args:?} crashed: {stderr}"
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A v1 card with nested objects, non-ASCII text and numbers in extension params.
fn card() -> Value {
    json!({
        "name": "Écho — the echo agent",
        "description": "Repeats what you say, \"verbatim\"",
        "version": "1.2.0",
        "supportedInterfaces": [
            {"url": "https://agents.example/echo/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://agents.example/echo/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "https://agents.example/echo/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ],
        "provider": {"organization": "Example", "url": "https://example.com"},
        "capabilities": {"streaming": true, "pushNotifications": false,
            "extensions": [{"uri": "urn:x", "required": true, "params": {"depth": 2, "ratio": 0.5, "big": 1e21, "tiny": 1e-7}}]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echo text", "tags": ["echo", "démo"],
            "examples": ["hello 👋"]}]
    })
}

/// (alg, signing key file, the JWK a verifier trusts).
fn keys() -> Vec<(&'static str, PathBuf, Value)> {
    let hmac = testdata("hmac.jwk.json");
    let hmac_jwk: Value =
        serde_json::from_str(&std::fs::read_to_string(&hmac).expect("jwk")).expect("jwk");
    let mut out = vec![("HS256", hmac, hmac_jwk)];
    for (alg, file) in [
        ("ES256", "ec.pem"),
        ("RS256", "rsa.pem"),
        ("EdDSA", "ed25519.pem"),
    ] {
        let path = testdata(file);
        let key = SigningKey::from_file_text(
            &std::fs::read_to_string(&path).expect("pem"),
            None,
            Some("py-1"),
        )
        .expect("key");
        out.push((alg, path, key.public_jwk().expect("public")));
    }
    out
}

#[test]
fn cards_signed_by_the_python_sdk_verify_in_heddle_and_back() {
    let Some(python) = python() else { return };
    for (alg, key_file, jwk) in keys() {
        let kid = jwk["kid"].as_str().expect("kid").to_owned();
        let mut trusted = KeySet::new();
        trusted.add(jwk.clone()).expect("jwk");

        // Python signs, Heddle verifies (and rejects a changed copy).
        let (ok, out) = helper(
            &python,
            &["sign", alg, &kid, key_file.to_str().expect("path")],
            &card(),
        );
        assert!(ok, "{alg}: python could not sign: {out}");
        let signed: Value = serde_json::from_str(&out).expect("signed card JSON");
        assert!(
            signed.get("protocolVersion").is_some(),
            "the SDK serves a dual card: {signed}"
        );
        assert_eq!(
            verify_card(&signed, &trusted),
            Verdict::Verified {
                kid: Some(kid.clone()),
                alg: alg.into()
            },
            "{alg}: the SDK's signature"
        );
        let mut changed = signed.clone();
        changed["version"] = json!("1.2.1");
        assert!(matches!(
            verify_card(&changed, &trusted),
            Verdict::Invalid(_)
        ));

        // Heddle signs, Python verifies (and rejects a changed copy).
        let key = SigningKey::from_file_text(
            &std::fs::read_to_string(&key_file).expect("key"),
            None,
            Some(&kid),
        )
        .expect("key");
        let mut ours = card();
        sign_card(&mut ours, &key, None).expect("sign");
        let jwk_text = jwk.to_string();
        let (ok, out) = helper(&python, &["verify", alg, &jwk_text], &ours);
        assert!(ok, "{alg}: the SDK refused Heddle's signature: {out}");

        // As `heddle serve` signs and serves it: the dual card.
        let mut model: v1::AgentCard = serde_json::from_value(card()).expect("v1 card");
        CardSigner::new(key, None).sign(&mut model).expect("sign");
        let served = dual_card_json(&model);
        assert!(served.get("additionalInterfaces").is_some() || served.get("url").is_some());
        let (ok, out) = helper(&python, &["verify", alg, &jwk_text], &served);
        assert!(ok, "{alg}: the SDK refused Heddle's served card: {out}");
        let mut changed = ours.clone();
        changed["skills"][0]["tags"][1] = json!("demo");
        let (ok, _) = helper(&python, &["verify", alg, &jwk_text], &changed);
        assert!(!ok, "{alg}: the SDK accepted a changed card");
    }
}
