//! Keys: a signing key from a JWK (`oct`, for HS*) or a PEM private key
//! (PKCS#8 EC P-256/P-384, Ed25519 or RSA; PKCS#1 RSA), and the public keys
//! a verifier trusts, from a JWK or a JWKS.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, jwk::Jwk};
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair,
    KeyPair as _, RsaKeyPair,
};
use serde_json::{Value, json};

use crate::{SigningError, jcs::canonicalize};

/// A private key that signs cards, with its algorithm and key id.
pub struct SigningKey {
    pub(crate) alg: Algorithm,
    pub(crate) kid: String,
    pub(crate) key: EncodingKey,
    public: Option<Value>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// The name of an algorithm as JWS writes it.
pub fn alg_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::HS256 => "HS256",
        Algorithm::HS384 => "HS384",
        Algorithm::HS512 => "HS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        Algorithm::EdDSA => "EdDSA",
    }
}

/// The algorithms accepted in a signature header (never `none`).
pub fn parse_alg(name: &str) -> Result<Algorithm, SigningError> {
    if name.eq_ignore_ascii_case("none") {
        return Err(SigningError::Key("alg \"none\" is refused".into()));
    }
    name.parse::<Algorithm>()
        .map_err(|_| SigningError::Key(format!("unsupported alg {name:?}")))
}

/// The key type (`kty`, and `crv` for EC and OKP) an algorithm needs.
fn kty_fits(alg: Algorithm, kty: &str, crv: Option<&str>) -> bool {
    match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => kty == "oct",
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => kty == "RSA",
        Algorithm::ES256 => kty == "EC" && crv == Some("P-256"),
        Algorithm::ES384 => kty == "EC" && crv == Some("P-384"),
        Algorithm::EdDSA => kty == "OKP" && crv == Some("Ed25519"),
    }
}

/// RFC 7638 JWK thumbprint (SHA-256, base64url) of a public JWK.
pub fn thumbprint(jwk: &Value) -> Result<String, SigningError> {
    let field = |k: &str| jwk.get(k).cloned().unwrap_or(Value::Null);
    let members = match jwk.get("kty").and_then(Value::as_str) {
        Some("EC") => json!({"crv": field("crv"), "kty": "EC", "x": field("x"), "y": field("y")}),
        Some("RSA") => json!({"e": field("e"), "kty": "RSA", "n": field("n")}),
        Some("OKP") => json!({"crv": field("crv"), "kty": "OKP", "x": field("x")}),
        Some("oct") => json!({"k": field("k"), "kty": "oct"}),
        other => return Err(SigningError::Key(format!("unknown kty {other:?}"))),
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, canonicalize(&members)?.as_bytes());
    Ok(B64.encode(digest.as_ref()))
}

impl SigningKey {
    /// Reads a key file: a JWK (JSON; `oct` keys, for HS256/384/512) or a PEM
    /// private key. `alg` overrides the default algorithm (HS256 for `oct`,
    /// else the one the key type implies: ES256, ES384, EdDSA, RS256); `kid`
    /// overrides the JWK's `kid` (default: the RFC 7638 thumbprint).
    pub fn from_file_text(
        text: &str,
        alg: Option<&str>,
        kid: Option<&str>,
    ) -> Result<Self, SigningError> {
        let alg = alg.map(parse_alg).transpose()?;
        let mut key = if text.trim_start().starts_with('{') {
            Self::from_jwk_text(text, alg)?
        } else {
            Self::from_pem(text, alg)?
        };
        if let Some(kid) = kid {
            kid.clone_into(&mut key.kid);
        }
        Ok(key)
    }

    /// A PKCS#8 private key in DER (what `ring` generates, or a `.der` file);
    /// `alg` as for [`from_file_text`](Self::from_file_text).
    pub fn from_pkcs8_der(der: &[u8], alg: Option<&str>) -> Result<Self, SigningError> {
        let text = pem::encode(&pem::Pem::new("PRIVATE KEY", der.to_vec()));
        Self::from_file_text(&text, alg, None)
    }

    /// A compact JWT over `claims`, its header naming this key's `alg` and `kid`.
    pub fn sign_jwt<T: serde::Serialize>(&self, claims: &T) -> Result<String, SigningError> {
        let mut header = jsonwebtoken::Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key)
            .map_err(|e| SigningError::Key(format!("cannot sign: {e}")))
    }

    fn from_jwk_text(text: &str, alg: Option<Algorithm>) -> Result<Self, SigningError> {
        let jwk: Value = serde_json::from_str(text)
            .map_err(|e| SigningError::Key(format!("the key is not JSON: {e}")))?;
        let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
        if kty != "oct" {
            return Err(SigningError::Key(format!(
                "a JWK signing key must be `oct` (HS256); give an {kty} private key as a PEM file"
            )));
        }
        let secret = jwk
            .get("k")
            .and_then(Value::as_str)
            .and_then(|k| B64.decode(k.trim_end_matches('=')).ok())
            .ok_or_else(|| SigningError::Key("the `oct` JWK has no base64url `k`".into()))?;
        if secret.len() < 32 {
            return Err(SigningError::Key(format!(
                "the HMAC key is {} bytes; use at least 32",
                secret.len()
            )));
        }
        let jwk_alg = jwk
            .get("alg")
            .and_then(Value::as_str)
            .map(parse_alg)
            .transpose()?;
        let alg = alg.or(jwk_alg).unwrap_or(Algorithm::HS256);
        if !kty_fits(alg, "oct", None) || jwk_alg.is_some_and(|a| a != alg) {
            return Err(SigningError::Key(format!(
                "alg {} does not fit this `oct` key",
                alg_name(alg)
            )));
        }
        let kid = match jwk.get("kid").and_then(Value::as_str) {
            Some(k) => k.to_owned(),
            None => thumbprint(&jwk)?,
        };
        Ok(Self {
            alg,
            kid,
            key: EncodingKey::from_secret(&secret),
            public: None,
        })
    }

    fn from_pem(text: &str, alg: Option<Algorithm>) -> Result<Self, SigningError> {
        let block =
            pem::parse(text).map_err(|e| SigningError::Key(format!("the key is not PEM: {e}")))?;
        let der = block.contents();
        let rng = ring::rand::SystemRandom::new();
        let (default_alg, key, public) = match block.tag() {
            "PRIVATE KEY" => {
                if let Ok(kp) =
                    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                {
                    (
                        Algorithm::ES256,
                        EncodingKey::from_ec_der(der),
                        ec_jwk("P-256", kp.public_key().as_ref()),
                    )
                } else if let Ok(kp) =
                    EcdsaKeyPair::from_pkcs8(&ECDSA_P384_SHA384_FIXED_SIGNING, der, &rng)
                {
                    (
                        Algorithm::ES384,
                        EncodingKey::from_ec_der(der),
                        ec_jwk("P-384", kp.public_key().as_ref()),
                    )
                } else if let Ok(kp) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
                    let x = B64.encode(kp.public_key().as_ref());
                    (
                        Algorithm::EdDSA,
                        EncodingKey::from_ed_der(der),
                        json!({"kty": "OKP", "crv": "Ed25519", "x": x}),
                    )
                } else if let Ok(kp) = RsaKeyPair::from_pkcs8(der) {
                    let key = EncodingKey::from_rsa_pem(text.as_bytes())
                        .map_err(|e| SigningError::Key(format!("RSA key: {e}")))?;
                    (Algorithm::RS256, key, rsa_jwk(&kp))
                } else {
                    return Err(SigningError::Key(
                        "unsupported PKCS#8 key: use EC P-256/P-384, Ed25519 or RSA (2048 bits or more)"
                            .into(),
                    ));
                }
            }
            "RSA PRIVATE KEY" => {
                let kp = RsaKeyPair::from_der(der)
                    .map_err(|e| SigningError::Key(format!("RSA key: {e}")))?;
                (
                    Algorithm::RS256,
                    EncodingKey::from_rsa_der(der),
                    rsa_jwk(&kp),
                )
            }
            "EC PRIVATE KEY" => {
                return Err(SigningError::Key(
                    "SEC1 EC keys are not read; convert with `openssl pkcs8 -topk8 -nocrypt`"
                        .into(),
                ));
            }
            other => {
                return Err(SigningError::Key(format!(
                    "PEM {other:?} is not a private key"
                )));
            }
        };
        let kty = public
            .get("kty")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let crv = public.get("crv").and_then(Value::as_str);
        let alg = alg.unwrap_or(default_alg);
        if !kty_fits(alg, kty, crv) {
            return Err(SigningError::Key(format!(
                "alg {} does not fit this {kty} key",
                alg_name(alg)
            )));
        }
        let kid = thumbprint(&public)?;
        Ok(Self {
            alg,
            kid,
            key,
            public: Some(public),
        })
    }

    /// The JWS algorithm.
    pub fn alg(&self) -> &'static str {
        alg_name(self.alg)
    }

    /// The key id written into signatures.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public JWK (with `kid`, `alg` and `use`), for asymmetric keys;
    /// `None` for HMAC keys, which have no public half.
    pub fn public_jwk(&self) -> Option<Value> {
        let mut jwk = self.public.clone()?;
        if let Value::Object(m) = &mut jwk {
            m.insert("kid".into(), Value::String(self.kid.clone()));
            m.insert("alg".into(), Value::String(self.alg().into()));
            m.insert("use".into(), Value::String("sig".into()));
        }
        Some(jwk)
    }
}

fn ec_jwk(crv: &str, point: &[u8]) -> Value {
    // An uncompressed point: 0x04 ‖ x ‖ y.
    let coords = point.get(1..).unwrap_or_default();
    let (x, y) = coords.split_at(coords.len() / 2);
    json!({"kty": "EC", "crv": crv, "x": B64.encode(x), "y": B64.encode(y)})
}

fn rsa_jwk(kp: &RsaKeyPair) -> Value {
    let public: ring::rsa::PublicKeyComponents<Vec<u8>> = kp.public().into();
    let strip = |b: &[u8]| {
        let start = b.iter().position(|x| *x != 0).unwrap_or(b.len());
        B64.encode(&b[start..])
    };
    json!({"kty": "RSA", "n": strip(&public.n), "e": strip(&public.e)})
}

/// One trusted public key (or shared HMAC secret).
#[derive(Clone)]
pub(crate) struct TrustedKey {
    pub(crate) jwk: Value,
    pub(crate) parsed: Jwk,
}

/// The keys a verifier trusts: pinned JWKs and those fetched from allowed `jku`s.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: Vec<TrustedKey>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self
            .keys
            .iter()
            .map(|k| k.jwk.get("kid").and_then(Value::as_str).unwrap_or("?"))
            .collect();
        f.debug_struct("KeySet").field("kids", &kids).finish()
    }
}

impl KeySet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a JWKS (`{"keys": [...]}`) or a single JWK. Private members of a
    /// JWK are ignored; a key of an unknown type is an error.
    pub fn from_json(text: &str) -> Result<Self, SigningError> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| SigningError::Key(format!("the key set is not JSON: {e}")))?;
        let mut set = Self::new();
        match doc.get("keys") {
            Some(Value::Array(keys)) => {
                for k in keys {
                    set.add(k.clone())?;
                }
            }
            Some(_) => return Err(SigningError::Key("`keys` is not a list".into())),
            None => set.add(doc)?,
        }
        Ok(set)
    }

    /// Adds one JWK.
    pub fn add(&mut self, jwk: Value) -> Result<(), SigningError> {
        let parsed: Jwk = serde_json::from_value(jwk.clone()).map_err(|e| {
            let kid = jwk.get("kid").and_then(Value::as_str).unwrap_or("?");
            SigningError::Key(format!("JWK {kid:?}: {e}"))
        })?;
        self.keys.push(TrustedKey { jwk, parsed });
        Ok(())
    }

    /// Adds every key of `other`.
    pub fn extend(&mut self, other: KeySet) {
        self.keys.extend(other.keys);
    }

    /// The set without symmetric (`oct`) keys: a key published in a JWKS
    /// for anyone to fetch is no secret, so an HMAC signature checked with
    /// it proves nothing.
    #[must_use]
    pub fn without_symmetric(mut self) -> Self {
        self.keys
            .retain(|k| k.jwk.get("kty").and_then(Value::as_str) != Some("oct"));
        self
    }

    /// Whether the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The keys a signature with `kid` may be checked with: those with that
    /// `kid`, or, for a signature without one, every key.
    pub(crate) fn candidates(&self, kid: Option<&str>) -> Vec<&TrustedKey> {
        self.keys
            .iter()
            .filter(|k| match kid {
                Some(kid) => k.jwk.get("kid").and_then(Value::as_str) == Some(kid),
                None => true,
            })
            .collect()
    }
}

impl TrustedKey {
    /// Why this key may not check an `alg` signature, if it may not: the key
    /// type must fit the algorithm (no HS256 with an RSA key's bytes), and a
    /// JWK that names its `alg` is used for that one only.
    pub(crate) fn refuses(&self, alg: Algorithm) -> Option<String> {
        let kty = self.jwk.get("kty").and_then(Value::as_str).unwrap_or("?");
        let crv = self.jwk.get("crv").and_then(Value::as_str);
        if !kty_fits(alg, kty, crv) {
            return Some(format!(
                "alg {} does not fit a {kty} key{}",
                alg_name(alg),
                crv.map(|c| format!(" ({c})")).unwrap_or_default()
            ));
        }
        match self.jwk.get("alg").and_then(Value::as_str) {
            Some(a) if a != alg_name(alg) => Some(format!(
                "the key is for {a}, the signature says {}",
                alg_name(alg)
            )),
            _ => None,
        }
    }

    pub(crate) fn decoding_key(&self) -> Result<DecodingKey, SigningError> {
        DecodingKey::from_jwk(&self.parsed).map_err(|e| SigningError::Key(format!("JWK: {e}")))
    }
}
