//! A refused request's answer, in the form of the binding the layer guards.
//!
//! The failure is an entry of the error catalogue (UNAUTHENTICATED,
//! PERMISSION_DENIED, UNAVAILABLE), rendered by the server's own refusal
//! ([`heddle_server::refusal_parts`]): a JSON-RPC error object with HTTP
//! 401/403/503, a REST `google.rpc.Status` body, or a trailers-only gRPC
//! status. HTTP answers to 401 and 403 carry `WWW-Authenticate` challenges
//! (RFC 6750 for bearer tokens).
//!
//! The layer is attached per binding ([`crate::Authenticator::layer`]), so
//! it knows which form to use; nothing is guessed from the path.

use bytes::Bytes;
use heddle_core::{A2aError, ErrorCode};
use http::{HeaderValue, Response, StatusCode, header};

pub use heddle_server::Binding;

use crate::{AuthError, Authenticator};

/// JSON-RPC error code for missing or bad credentials (Heddle's own; the
/// spec leaves authentication to the transport).
pub const JSONRPC_UNAUTHENTICATED: i64 = ErrorCode::Unauthenticated.spec().jsonrpc as i64;
/// JSON-RPC error code for a caller without permission (Heddle's own).
pub const JSONRPC_PERMISSION_DENIED: i64 = ErrorCode::PermissionDenied.spec().jsonrpc as i64;

/// Response bodies the layer can build a rejection in.
pub trait RejectionBody: Default {
    /// A body holding `bytes`.
    fn from_bytes(bytes: Bytes) -> Self;
}

impl RejectionBody for axum::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        axum::body::Body::from(bytes)
    }
}

impl RejectionBody for tonic::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        tonic::body::Body::new(axum::body::Body::from(bytes))
    }
}

/// `"` and `\` cannot appear in a quoted challenge parameter without escaping.
fn quoted(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == '"' || c == '\\' || c.is_control() {
                '\''
            } else {
                c
            }
        })
        .collect()
}

/// The `WWW-Authenticate` challenges for `err` (RFC 6750 for bearer).
fn challenges(auth: &Authenticator, err: &AuthError) -> Vec<String> {
    let mut out = Vec::new();
    if auth.jwt().is_some() {
        out.push(match err {
            AuthError::Missing => "Bearer realm=\"a2a\"".to_owned(),
            AuthError::Forbidden(m) => format!(
                "Bearer realm=\"a2a\", error=\"insufficient_scope\", error_description=\"{}\"",
                quoted(m)
            ),
            other => format!(
                "Bearer realm=\"a2a\", error=\"invalid_token\", error_description=\"{}\"",
                quoted(&other.to_string())
            ),
        });
    }
    if auth.api_keys().is_some() {
        let loc = auth.key_location();
        out.push(format!(
            "ApiKey realm=\"a2a\", in=\"{}\", name=\"{}\"",
            loc.kind(),
            quoted(loc.name())
        ));
    }
    out
}

/// The refusal of a request for `binding`.
pub fn response<B: RejectionBody>(
    auth: &Authenticator,
    binding: Binding,
    err: &AuthError,
) -> Response<B> {
    let refusal = heddle_server::refusal_parts(binding, &err.to_a2a());
    let status = refusal.status();
    let mut resp = refusal.map(B::from_bytes);
    if binding != Binding::Grpc
        && (status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN)
    {
        for c in challenges(auth, err) {
            if let Ok(v) = HeaderValue::from_str(&c) {
                resp.headers_mut().append(header::WWW_AUTHENTICATE, v);
            }
        }
    }
    resp
}

impl AuthError {
    /// The failure as an entry of the error catalogue. Its message never
    /// carries the credential.
    pub fn to_a2a(&self) -> A2aError {
        let code = match self {
            AuthError::Forbidden(_) => ErrorCode::PermissionDenied,
            AuthError::Unavailable(_) | AuthError::Config(_) => ErrorCode::Unavailable,
            _ => ErrorCode::Unauthenticated,
        };
        A2aError::new(code, self.to_string())
    }
}
