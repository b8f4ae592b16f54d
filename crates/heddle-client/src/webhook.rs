//! For push notification receivers: check a delivery's credential and read
//! its event, whichever protocol version the config was created in.
//!
//! ```
//! use heddle_client::webhook::{Delivery, PushEvent};
//! let headers = reqwest::header::HeaderMap::new();
//! let body = br#"{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}"#;
//! let d = Delivery::parse(&headers, body).unwrap();
//! assert_eq!(d.task_id(), "t1");
//! assert!(matches!(d.event, PushEvent::V1(_)));
//! ```

use heddle_core::{compat::v03, v1};
use reqwest::header::HeaderMap;

/// The header Heddle puts each delivery's id in (the same on every retry).
pub const DELIVERY_ID_HEADER: &str = "X-A2A-Delivery-Id";
/// The header that carries the config's token (v0.3 §9.5).
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// The header that carries the delivery's JWT, when the server signs them.
pub const JWT_HEADER: &str = "X-A2A-Notification-JWT";

/// Why a delivery was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The JWT is missing, invalid, expired, signed by an unknown key, or
    /// does not match this delivery's body.
    #[error("the delivery JWT does not verify: {0}")]
    BadJwt(String),
    /// The token header is missing or differs from the config's token.
    #[error("the notification token is missing or wrong")]
    BadToken,
    /// The body is neither a v1.0 `StreamResponse` nor a v0.3 `Task`.
    #[error("the body is not a push notification: {0}")]
    BadBody(String),
}

/// The event a delivery carries.
#[derive(Clone, Debug, PartialEq)]
pub enum PushEvent {
    /// A v1.0 delivery: one stream event.
    V1(v1::StreamResponse),
    /// A v0.3 delivery: the whole task, upgraded to v1.0.
    V03(v1::Task),
}

/// One delivery as received.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// The delivery id (`X-A2A-Delivery-Id`), for dropping duplicates.
    pub id: Option<String>,
    /// The event.
    pub event: PushEvent,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Constant-time comparison, so the check does not leak the token's prefix.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks the token header against the token the receiver gave in its config.
pub fn verify_token(headers: &HeaderMap, expected: &str) -> Result<(), WebhookError> {
    match header(headers, TOKEN_HEADER) {
        Some(got) if same(got.as_bytes(), expected.as_bytes()) => Ok(()),
        _ => Err(WebhookError::BadToken),
    }
}

/// What a verified delivery JWT says.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtClaims {
    /// The server that sent it.
    pub iss: String,
    /// The delivery id.
    pub jti: String,
    /// The task.
    pub task_id: String,
    /// base64url SHA-256 of the body.
    pub body_sha256: String,
}

/// Verifies the delivery's JWT ([`JWT_HEADER`]) against the sender's JWKS
/// (e.g. fetched from its `/.well-known/jwks.json`): signature by the key the
/// `kid` names, expiry, the issuer when given, the body's hash, and that the
/// `jti` is the delivery id header.
pub fn verify_jwt(
    headers: &HeaderMap,
    body: &[u8],
    jwks: &jsonwebtoken::jwk::JwkSet,
    issuer: Option<&str>,
) -> Result<JwtClaims, WebhookError> {
    use base64::Engine as _;
    let bad = |e: &dyn std::fmt::Display| WebhookError::BadJwt(e.to_string());
    let jwt = header(headers, JWT_HEADER).ok_or_else(|| bad(&"no JWT header"))?;
    let kid = jsonwebtoken::decode_header(jwt)
        .map_err(|e| bad(&e))?
        .kid
        .ok_or_else(|| bad(&"the JWT names no key (kid)"))?;
    let jwk = jwks
        .find(&kid)
        .ok_or_else(|| bad(&format!("key {kid:?} is not in the JWKS")))?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| bad(&e))?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    if let Some(iss) = issuer {
        validation.set_issuer(&[iss]);
    }
    let claims = jsonwebtoken::decode::<JwtClaims>(jwt, &key, &validation)
        .map_err(|e| bad(&e))?
        .claims;
    let digest = ring::digest::digest(&ring::digest::SHA256, body);
    let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
    if !same(hash.as_bytes(), claims.body_sha256.as_bytes()) {
        return Err(bad(&"the body does not match the JWT's bodySha256"));
    }
    if header(headers, DELIVERY_ID_HEADER).is_some_and(|id| id != claims.jti) {
        return Err(bad(&"the JWT's jti is not this delivery's id"));
    }
    Ok(claims)
}

impl Delivery {
    /// Reads a delivery. The version comes from `A2A-Version` when present,
    /// else from the body's shape (a v0.3 task has `"kind": "task"`).
    pub fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Self, WebhookError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| WebhookError::BadBody(e.to_string()))?;
        let v03 = match header(headers, "A2A-Version") {
            Some(v) => v.trim() == "0.3",
            None => value.get("kind").and_then(|k| k.as_str()) == Some("task"),
        };
        let event = if v03 {
            let task: v03::Task =
                serde_json::from_value(value).map_err(|e| WebhookError::BadBody(e.to_string()))?;
            PushEvent::V03(task.to_v1().map_err(WebhookError::BadBody)?)
        } else {
            let event: v1::StreamResponse =
                serde_json::from_value(value).map_err(|e| WebhookError::BadBody(e.to_string()))?;
            if event.payload.is_none() {
                return Err(WebhookError::BadBody("an empty StreamResponse".into()));
            }
            PushEvent::V1(event)
        };
        Ok(Self {
            id: header(headers, DELIVERY_ID_HEADER).map(str::to_owned),
            event,
        })
    }

    /// The task the event is about.
    pub fn task_id(&self) -> &str {
        use v1::stream_response::Payload;
        match &self.event {
            PushEvent::V03(t) => &t.id,
            PushEvent::V1(e) => match &e.payload {
                Some(Payload::Task(t)) => &t.id,
                Some(Payload::StatusUpdate(u)) => &u.task_id,
                Some(Payload::ArtifactUpdate(u)) => &u.task_id,
                Some(Payload::Message(m)) => &m.task_id,
                None => "",
            },
        }
    }

    /// The task state the event reports, if it reports one.
    pub fn state(&self) -> Option<v1::TaskState> {
        use v1::stream_response::Payload;
        let status = match &self.event {
            PushEvent::V03(t) => t.status.as_ref(),
            PushEvent::V1(e) => match &e.payload {
                Some(Payload::Task(t)) => t.status.as_ref(),
                Some(Payload::StatusUpdate(u)) => u.status.as_ref(),
                _ => None,
            },
        };
        status.map(|s| s.state())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn token_must_match_exactly() {
        let mut h = HeaderMap::new();
        assert!(verify_token(&h, "secret").is_err());
        h.insert(TOKEN_HEADER, HeaderValue::from_static("secreT"));
        assert!(verify_token(&h, "secret").is_err());
        h.insert(TOKEN_HEADER, HeaderValue::from_static("secret"));
        assert!(verify_token(&h, "secret").is_ok());
    }

    #[test]
    fn parses_both_versions_bodies() {
        let mut h = HeaderMap::new();
        h.insert(DELIVERY_ID_HEADER, HeaderValue::from_static("d-1"));
        let v1_body =
            br#"{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}"#;
        let d = Delivery::parse(&h, v1_body).unwrap();
        assert_eq!(d.id.as_deref(), Some("d-1"));
        assert_eq!(
            (d.task_id(), d.state()),
            ("t1", Some(v1::TaskState::Submitted))
        );

        let v03_body =
            br#"{"kind":"task","id":"t2","contextId":"c1","status":{"state":"completed"}}"#;
        let d = Delivery::parse(&h, v03_body).unwrap();
        assert!(matches!(d.event, PushEvent::V03(_)));
        assert_eq!(
            (d.task_id(), d.state()),
            ("t2", Some(v1::TaskState::Completed))
        );

        assert!(Delivery::parse(&h, b"{}").is_err());
        assert!(Delivery::parse(&h, b"not json").is_err());
    }
}
