//! JSON encoding of answers and events into a buffer sized for them, and
//! the responses that carry them.
//!
//! The bytes are serde_json's; `heddle_core::json` writes them faster.
//! `serde_json::to_vec` starts at 128 bytes and grows three or four times
//! for a task (about 1 KB); starting at 1 KB saves those copies on every
//! answer (SSE events: `crate::sse`).

use axum::{
    body::Body,
    http::{HeaderName, HeaderValue, StatusCode, header},
    response::Response,
};
use serde::Serialize;

const TYPICAL_ANSWER: usize = 1024;

/// `serde_json::to_vec`'s bytes, with room for a typical answer from the
/// start, written by [`heddle_core::json`] (strings copied whole when they
/// need no escaping).
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    heddle_core::json::to_vec_with_capacity(value, TYPICAL_ANSWER)
}

/// A response with exactly these headers, its header map sized for them.
/// axum's `([(name, value)], body)` starts from an empty map, which its first
/// insert grows to room for six entries (624 bytes): a cost per answer, and
/// for an SSE stream memory held for the stream's whole life.
pub(crate) fn response<const N: usize>(
    status: StatusCode,
    headers: [(HeaderName, HeaderValue); N],
    body: Body,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let map = response.headers_mut();
    map.reserve(N);
    for (name, value) in headers {
        map.insert(name, value);
    }
    response
}

/// A JSON answer: `bytes` as `application/json`.
pub(crate) fn json_response(status: StatusCode, bytes: impl Into<Body>) -> Response {
    response(
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes.into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_response_has_its_status_and_one_content_type() {
        let r = json_response(StatusCode::CREATED, "{}");
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers().len(), 1);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        // Sized for what it holds, not for axum's default of six.
        assert!(r.headers().capacity() < 6, "{}", r.headers().capacity());
    }
}
