//! A refused request's answer, in the form of the binding it was for.
//!
//! * gRPC (`content-type: application/grpc…`): a trailers-only response with
//!   UNAUTHENTICATED or PERMISSION_DENIED.
//! * JSON-RPC: HTTP 401/403 with `WWW-Authenticate`, and a JSON-RPC error
//!   body (`id: null`) so JSON-RPC clients can read it: code
//!   [`JSONRPC_UNAUTHENTICATED`] or [`JSONRPC_PERMISSION_DENIED`] (the spec
//!   leaves these "custom"; the values are ours), with an `ErrorInfo` in
//!   `data` (an array in v1.0, an object in v0.3).
//! * REST: HTTP 401/403 with `WWW-Authenticate` and a `google.rpc.Status`
//!   body (`UNAUTHENTICATED` / `PERMISSION_DENIED`), as v1 §11.6 shapes errors.
//!
//! The layer cannot see which binding a route belongs to, so it reads the
//! path: REST paths end in one of the REST operation forms (`…/message:send`,
//! `…/tasks…`, `…/extendedAgentCard`, `…/v1/card`); any other POST is JSON-RPC.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, Uri, header};
use serde_json::json;

use crate::{AuthError, Authenticator};

/// JSON-RPC error code for missing or bad credentials (ours).
pub const JSONRPC_UNAUTHENTICATED: i64 = -32040;
/// JSON-RPC error code for a caller without permission (ours).
pub const JSONRPC_PERMISSION_DENIED: i64 = -32043;
/// `ErrorInfo.domain` of authentication errors.
pub const DOMAIN: &str = "heddle";

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

/// Which binding a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0.
    JsonRpc,
    /// HTTP+JSON.
    Rest,
    /// gRPC.
    Grpc,
}

/// Tells the binding from the content type and path.
pub fn binding_of(headers: &HeaderMap, uri: &Uri) -> Binding {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ct.starts_with("application/grpc") {
        return Binding::Grpc;
    }
    let path = uri.path();
    let last = path.rsplit('/').next().unwrap_or("");
    let rest = last.starts_with("message:")
        || last == "extendedAgentCard"
        || path.ends_with("/v1/card")
        || path.contains("/tasks")
        || path.contains("/rest/")
        || path.ends_with("/rest");
    if rest {
        Binding::Rest
    } else {
        Binding::JsonRpc
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

/// The refusal of a request with these headers and URI.
pub fn response<B: RejectionBody>(
    auth: &Authenticator,
    headers: &HeaderMap,
    uri: &Uri,
    err: &AuthError,
) -> Response<B> {
    let message = err.to_string();
    let binding = binding_of(headers, uri);
    if binding == Binding::Grpc {
        return tonic::Status::new(err.grpc_code(), message).into_http();
    }
    let status = err.http_status();
    let info = json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": err.reason(),
        "domain": DOMAIN,
    });
    let body = match binding {
        Binding::Rest => json!({"error": {
            "code": status.as_u16(),
            "status": err.reason(),
            "message": message,
            "details": [info],
        }}),
        _ => {
            let v1 = headers
                .get("a2a-version")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim() == "1.0");
            let code = match status {
                StatusCode::FORBIDDEN => JSONRPC_PERMISSION_DENIED,
                StatusCode::UNAUTHORIZED => JSONRPC_UNAUTHENTICATED,
                _ => -32603,
            };
            let data = if v1 { json!([info]) } else { info };
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message, "data": data}})
        }
    };
    let mut resp = Response::new(B::from_bytes(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        for c in challenges(auth, err) {
            if let Ok(v) = HeaderValue::from_str(&c) {
                h.append(header::WWW_AUTHENTICATE, v);
            }
        }
    }
    resp
}
