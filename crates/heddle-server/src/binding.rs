//! The three bindings, and a request refused before its call is read (by
//! an authentication or rate layer) in the form of the binding it was for.
//!
//! Such a refusal answers with the error catalogue's HTTP status on every
//! binding, JSON-RPC included (401, 403, 429, 503), so that HTTP clients
//! and proxies see it; a JSON-RPC error in an answer to a call that was
//! read stays HTTP 200.

use axum::{
    body::Body,
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use bytes::Bytes;
use heddle_core::{
    A2aError,
    jsonrpc::{Id, Response as RpcResponse},
};

/// Which binding a route serves, and so which error form its refusals take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// A JSON-RPC error object (id null).
    JsonRpc,
    /// A `google.rpc.Status` JSON body.
    Rest,
    /// A gRPC status in the trailers-only answer.
    Grpc,
}

impl Binding {
    /// A lower-case name (`jsonrpc`, `rest`, `grpc`), for logs and metric
    /// labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "jsonrpc",
            Binding::Rest => "rest",
            Binding::Grpc => "grpc",
        }
    }
}

/// `err` as `binding` refuses a request, with the whole body in memory (so
/// that a layer can put it in whatever body type its service uses).
pub fn refusal_parts(binding: Binding, err: &A2aError) -> http::Response<Bytes> {
    let err = &*crate::redact::for_caller(err);
    let status =
        StatusCode::from_u16(err.code.spec().http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match binding {
        Binding::JsonRpc => crate::json::to_vec(&RpcResponse::error(Id::Null, err)),
        Binding::Rest => crate::json::to_vec(&err.http_body_with_status(status.as_u16())),
        Binding::Grpc => return grpc_refusal(err),
    };
    let mut response = http::Response::new(Bytes::from(body.unwrap_or_default()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // `Retry-After` on a retryable refusal (RFC 9110 §10.2.3).
    if let Some(secs) = err.retry_after_secs() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// [`refusal_parts`] as an axum response.
pub fn refusal(binding: Binding, err: &A2aError) -> Response {
    refusal_parts(binding, err).map(Body::from)
}

/// A trailers-only gRPC answer: the status is in the headers, the body empty.
#[cfg(feature = "grpc")]
fn grpc_refusal(err: &A2aError) -> http::Response<Bytes> {
    let (parts, _) = crate::grpc::status(err).into_http::<Body>().into_parts();
    http::Response::from_parts(parts, Bytes::new())
}

#[cfg(not(feature = "grpc"))]
fn grpc_refusal(err: &A2aError) -> http::Response<Bytes> {
    refusal_parts(Binding::Rest, err)
}

#[cfg(test)]
mod tests {
    use heddle_core::ErrorCode;

    use super::*;

    #[test]
    fn a_refusal_carries_the_catalogue_status_on_every_binding() {
        let err = A2aError::new(ErrorCode::Unauthenticated, "who are you");
        let rpc = refusal_parts(Binding::JsonRpc, &err);
        assert_eq!(rpc.status(), StatusCode::UNAUTHORIZED);
        let body: serde_json::Value = serde_json::from_slice(rpc.body()).expect("json");
        assert_eq!(body["error"]["code"], -32040);
        let rest = refusal_parts(Binding::Rest, &err);
        assert_eq!(rest.status(), StatusCode::UNAUTHORIZED);
        let body: serde_json::Value = serde_json::from_slice(rest.body()).expect("json");
        assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
        assert_eq!(body["error"]["code"], 401);
    }
}
