//! Serving an Agent Card: the dual-version JSON at both well-known names,
//! with `ETag`, `Last-Modified` and `Cache-Control` so clients can cache it
//! and revalidate with a conditional GET (v1 §8.6).

use std::{
    hash::{Hash, Hasher},
    sync::Arc,
    time::SystemTime,
};

use axum::{
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use heddle_core::{card::dual_card_json, v1};

/// A card rendered once, with its validators.
#[derive(Clone, Debug)]
pub struct CardDocument {
    body: Bytes,
    etag: HeaderValue,
    last_modified: HeaderValue,
}

/// How long clients may cache the card without revalidating.
const MAX_AGE: &str = "public, max-age=300";

impl CardDocument {
    /// Renders `card` in its dual-version form.
    pub fn new(card: &v1::AgentCard) -> Self {
        let body = serde_json::to_vec(&dual_card_json(card)).unwrap_or_default();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        let etag = HeaderValue::from_str(&format!("\"{:016x}\"", h.finish()))
            .unwrap_or(HeaderValue::from_static("\"0\""));
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(SystemTime::now()))
            .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
        Self {
            body: Bytes::from(body),
            etag,
            last_modified,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Answers a GET, honouring `If-None-Match` and `If-Modified-Since`.
    pub fn respond(&self, headers: &HeaderMap) -> Response {
        let not_modified = match headers.get(header::IF_NONE_MATCH) {
            Some(inm) => inm.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim() == "*" || t.trim() == self.etag)
            }),
            None => headers
                .get(header::IF_MODIFIED_SINCE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| httpdate::parse_http_date(v).ok())
                .zip(
                    self.last_modified
                        .to_str()
                        .ok()
                        .and_then(|v| httpdate::parse_http_date(v).ok()),
                )
                .is_some_and(|(since, modified)| modified <= since),
        };
        let common = [
            (header::ETAG, self.etag.clone()),
            (header::LAST_MODIFIED, self.last_modified.clone()),
            (header::CACHE_CONTROL, HeaderValue::from_static(MAX_AGE)),
        ];
        if not_modified {
            return (StatusCode::NOT_MODIFIED, common).into_response();
        }
        (
            common,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body.clone(),
        )
            .into_response()
    }
}

/// GET handler for a card route.
pub(crate) async fn serve(State(doc): State<Arc<CardDocument>>, headers: HeaderMap) -> Response {
    doc.respond(&headers)
}
