//! The JSON-RPC 2.0 binding over HTTP (v1 §9, v0.3 §7): decode, dispatch to
//! the [`RequestHandler`], encode in the caller's version. Streams go out as
//! SSE, one JSON-RPC response per `data:` line.
//!
//! Version policy: `A2A-Version` decides (absent = 0.3, v1 §3.6.2), and the
//! method name must belong to that version. One exception, for clients that
//! forget the header: a header-less request with a v1.0 method name
//! (`SendMessage`) is served as v1.0, since the name cannot be v0.3. A v0.3
//! name in a request that says `A2A-Version: 1.0` is MethodNotFound.

use std::convert::Infallible;

use axum::{
    extract::{FromRequestParts, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::{StreamExt, future::BoxFuture};
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    call::{Calls, Decoded, Item, parse_calls},
    compat::v03,
    jsonrpc::{Id, Response as RpcResponse},
    method::{Dialect, Method},
    v1,
    version::VERSION_HEADER,
};
use serde::Serialize;

use crate::{
    agent::Caller,
    handler::{CallContext, Reply, RequestHandler},
};

// The header names as lower-case `HeaderName`s, made at compile time: a
// lookup by the mixed-case `&str` lower-cases and parses it on every request.
const VERSION_NAME: HeaderName = HeaderName::from_static("a2a-version");
const EXTENSIONS_NAMES: [HeaderName; 2] = [
    HeaderName::from_static(heddle_core::version::EXTENSIONS_KEYS[0]),
    HeaderName::from_static(heddle_core::version::EXTENSIONS_KEYS[1]),
];

/// The header-level facts of a request.
pub(crate) struct Envelope {
    pub version: Result<Option<ProtocolVersion>, A2aError>,
    pub extensions: Vec<String>,
    pub caller: Caller,
    /// The client's address (see [`CallContext::peer`]).
    pub peer: Option<std::net::IpAddr>,
    /// `Last-Event-ID` (see [`CallContext::resume_after`]).
    pub resume_after: Option<u64>,
}

/// The generation a reconnecting SSE client names in `Last-Event-ID` (or
/// gRPC metadata of that name). Our event ids are decimal generations; any
/// other value is not ours and is ignored.
pub(crate) fn last_event_id(value: Option<&[u8]>) -> Option<u64> {
    std::str::from_utf8(value?).ok()?.trim().parse().ok()
}

/// Who is calling: the caller an authentication layer put in the request,
/// and the client's address.
pub(crate) struct Who {
    pub caller: Option<Caller>,
    pub peer: Option<std::net::IpAddr>,
}

impl Who {
    pub(crate) fn of(parts: &Parts) -> Self {
        Self {
            caller: parts.extensions.get::<Caller>().cloned(),
            peer: parts
                .extensions
                .get::<crate::listen::PeerAddr>()
                .map(|a| a.0.ip()),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Who {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(parts))
    }
}

impl Envelope {
    pub(crate) fn from_parts(headers: &HeaderMap, query: Option<&str>, who: Who) -> Self {
        let header = headers.get(VERSION_NAME).and_then(|v| v.to_str().ok());
        let from_query = query.and_then(|q| {
            q.split('&').find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| k.eq_ignore_ascii_case(VERSION_HEADER))
                    .map(|(_, v)| v)
            })
        });
        let version = match header.or(from_query).map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => ProtocolVersion::from_header(Some(v)).map(Some),
        };
        let extensions = heddle_core::version::extension_uris(
            EXTENSIONS_NAMES
                .iter()
                .flat_map(|name| headers.get_all(name).iter())
                .filter_map(|v| v.to_str().ok()),
        );
        Self {
            version,
            extensions,
            caller: who.caller.unwrap_or_default(),
            peer: who.peer,
            resume_after: last_event_id(headers.get("last-event-id").map(|v| v.as_bytes())),
        }
    }
}

/// The version a decoded call is served in, per the policy above.
fn effective_version(
    header: &Result<Option<ProtocolVersion>, A2aError>,
    d: &Decoded,
) -> Result<ProtocolVersion, A2aError> {
    let header = header.clone()?;
    let named = if d.dialect == Dialect::V1 {
        ProtocolVersion::V1_0
    } else {
        ProtocolVersion::V0_3
    };
    match (header, named) {
        (None, v) => Ok(v),
        (Some(h), v) if h == v => Ok(v),
        (Some(h), _) => {
            let name = d.call.method().jsonrpc_name(named).unwrap_or("?");
            let right = d.call.method().jsonrpc_name(h).unwrap_or("(none)");
            Err(A2aError::new(
                ErrorCode::MethodNotFound,
                format!("{name} is not an A2A {h} method; with A2A-Version {h} use {right}"),
            ))
        }
    }
}

/// The request's media type when it is not JSON (`application/json` or
/// `application/a2a+json`, any parameters); `None` when it is, or is absent.
/// Shared by every HTTP binding.
pub(crate) fn non_json_media_type(headers: &HeaderMap) -> Option<String> {
    // A body without a type is not JSON: a browser page can send one
    // cross-origin without asking (a `no-cors` fetch), a JSON one it cannot.
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        return Some("no Content-Type".into());
    };
    let Ok(ct) = ct.to_str() else {
        return Some("an unreadable Content-Type".into());
    };
    let mime = ct.split(';').next().unwrap_or("").trim();
    let json = mime.eq_ignore_ascii_case("application/json")
        || mime.eq_ignore_ascii_case("application/a2a+json");
    (!json).then(|| mime.to_ascii_lowercase())
}

fn is_json(headers: &HeaderMap) -> bool {
    non_json_media_type(headers).is_none()
}

/// A JSON-RPC error answer: HTTP 200, except for a retryable refusal,
/// which is 429 with `Retry-After` so that HTTP clients and proxies back off
/// (see [`Answer::Exhausted`]).
pub(crate) fn error_response(id: Id, err: &A2aError) -> Response {
    encode_error(id, err).into_response()
}

/// What the JSON-RPC endpoint reads from a request's head, read in place
/// (the `HeaderMap` extractor would copy the whole map on every request).
pub(crate) struct RpcHead {
    env: Envelope,
    json: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for RpcHead {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            env: Envelope::from_parts(&parts.headers, parts.uri.query(), Who::of(parts)),
            json: is_json(&parts.headers),
        })
    }
}

/// The answer to a body that could not be read: 413 past the size limit,
/// 400 otherwise (cut short, or not in by its deadline).
fn unreadable_body(e: &axum::Error) -> Response {
    let (status, err) = body_error(e);
    let mut resp = error_response(Id::Null, &err);
    *resp.status_mut() = status;
    resp
}

/// Why a request body could not be read, for every HTTP binding: larger
/// than the limit (413), or cut off or too slow (400).
pub(crate) fn body_error(e: &axum::Error) -> (StatusCode, A2aError) {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                A2aError::new(
                    ErrorCode::InvalidRequest,
                    "the request body is larger than this server accepts",
                ),
            );
        }
        source = err.source();
    }
    (
        StatusCode::BAD_REQUEST,
        A2aError::new(
            ErrorCode::InvalidRequest,
            "the request body could not be read",
        ),
    )
}

/// POST handler for a JSON-RPC endpoint.
pub(crate) async fn endpoint(
    State(handler): State<RequestHandler>,
    RpcHead { env, json }: RpcHead,
    body: axum::body::Body,
) -> Response {
    if !json {
        let err = A2aError::new(
            ErrorCode::ContentTypeNotSupported,
            "JSON-RPC requests must be application/json",
        );
        let mut resp = error_response(Id::Null, &err);
        *resp.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return resp;
    }
    // Read against the handler's own limit, not a `DefaultBodyLimit` layer:
    // a layer is one more boxed route level on every request.
    let body = match axum::body::to_bytes(body, handler.limits().max_body_bytes).await {
        Ok(body) => body,
        Err(e) => return unreadable_body(&e),
    };
    match parse_calls(&body, handler.limits().max_batch) {
        Err(e) => error_response(Id::Null, &e),
        Ok(Calls::Single(item)) => match dispatch(&handler, &env, item, false).await {
            Some(r) => r.into_response(),
            None => StatusCode::NO_CONTENT.into_response(),
        },
        Ok(Calls::Batch(items)) => {
            // The rate layer counted the HTTP request once; each call counts.
            let more = u32::try_from(items.len().saturating_sub(1)).unwrap_or(u32::MAX);
            let key = crate::limit::CallerKey::of(Some(&env.caller), env.peer);
            if let Err(e) = handler.caller_limits().check_rate_n(key, more) {
                return error_response(Id::Null, &e);
            }
            let mut parts: Vec<Bytes> = Vec::with_capacity(items.len());
            for item in items {
                match dispatch(&handler, &env, item, true).await {
                    Some(Answer::Json(bytes) | Answer::Exhausted(bytes, _)) => parts.push(bytes),
                    Some(Answer::Stream(_)) | None => {}
                }
            }
            if parts.is_empty() {
                return StatusCode::NO_CONTENT.into_response();
            }
            let mut out =
                Vec::with_capacity(parts.iter().map(Bytes::len).sum::<usize>() + parts.len() + 2);
            out.push(b'[');
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(p);
            }
            out.push(b']');
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                out,
            )
                .into_response()
        }
    }
}

/// One answered request: a JSON body or an SSE stream.
enum Answer {
    Json(Bytes),
    /// A ResourceExhausted error: answered alone, it is HTTP 429 with
    /// `Retry-After` (seconds).
    Exhausted(Bytes, u64),
    Stream(Response),
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self {
            Answer::Json(b) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                b,
            )
                .into_response(),
            Answer::Exhausted(b, secs) => (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ),
                    (header::RETRY_AFTER, HeaderValue::from(secs)),
                ],
                b,
            )
                .into_response(),
            Answer::Stream(r) => r,
        }
    }
}

fn encode<T: Serialize>(id: Id, result: &T) -> Answer {
    match crate::json::to_vec(&RpcResponse::result(id.clone(), result)) {
        Ok(b) => Answer::Json(b.into()),
        Err(e) => encode_error(id, &A2aError::internal(format!("serialization: {e}"))),
    }
}

fn encode_error(id: Id, err: &A2aError) -> Answer {
    let err = &*crate::redact::for_caller(err);
    match crate::json::to_vec(&RpcResponse::error(id, err)) {
        Ok(b) if err.code == ErrorCode::ResourceExhausted => {
            Answer::Exhausted(b.into(), err.retry_after_secs().unwrap_or(1))
        }
        Ok(b) => Answer::Json(b.into()),
        Err(_) => Answer::Json(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#,
        )),
    }
}

/// Runs one request; `None` for a notification.
///
/// Decoding and the checks run in `start`, outside any future, so this
/// future holds only the call's boxed future and the reply's id: axum moves
/// it (and boxes it per route layer) on every request.
async fn dispatch(
    handler: &RequestHandler,
    env: &Envelope,
    item: Item,
    in_batch: bool,
) -> Option<Answer> {
    let Started {
        call,
        id,
        version,
        method,
    } = match start(handler, env, item, in_batch) {
        Start::Running(started) => started,
        Start::Answered(answer) => return answer,
    };
    let reply_id = id.clone().unwrap_or(Id::Null);
    let answer = match call.await {
        // v0.3 §7.9: `tasks/resubscribe` answers with a stream whose events
        // are JSON-RPC responses, an error included (as the official SDKs
        // do). A retryable refusal stays HTTP 429, so clients back off.
        Err(e)
            if version == ProtocolVersion::V0_3
                && method == Method::SubscribeToTask
                && e.code != ErrorCode::ResourceExhausted =>
        {
            Answer::Stream(sse_error(reply_id, &e))
        }
        Err(e) => encode_error(reply_id, &e),
        Ok(Reply::Stream(stream)) => Answer::Stream(sse(reply_id, version, stream)),
        Ok(reply) => encode_reply(reply_id, version, method, reply),
    };
    // Notifications get no answer, but a stream is still the caller's.
    match (&id, &answer) {
        (None, Answer::Json(_)) => None,
        _ => Some(answer),
    }
}

/// A request handed to the handler: its running call and how to answer.
struct Started<'a> {
    call: BoxFuture<'a, Result<Reply, A2aError>>,
    id: Option<Id>,
    version: ProtocolVersion,
    method: Method,
}

/// What `start` made of a request.
enum Start<'a> {
    Running(Started<'a>),
    /// Refused before any call: the answer, `None` for a notification.
    Answered(Option<Answer>),
}

/// Decodes one request and starts its call, or answers it at once.
fn start<'a>(handler: &'a RequestHandler, env: &Envelope, item: Item, in_batch: bool) -> Start<'a> {
    let decoded = match item {
        Ok(d) => d,
        // An invalid notification gets no answer; an unreadable id is null.
        Err((id, e)) => return Start::Answered(id.map(|id| encode_error(id, &e))),
    };
    let version = effective_version(&env.version, &decoded);
    let id = decoded.id;
    let version = match version {
        Ok(v) => v,
        Err(e) => return Start::Answered(id.map(|id| encode_error(id, &e))),
    };
    let method = decoded.call.method();
    if in_batch && method.is_streaming() {
        let e = A2aError::new(
            ErrorCode::InvalidRequest,
            "streaming methods cannot be part of a batch",
        );
        return Start::Answered(id.map(|id| encode_error(id, &e)));
    }
    let cx = CallContext {
        caller: env.caller.clone(),
        version,
        extensions: env.extensions.clone(),
        legacy_task_id: decoded.legacy_task_id,
        peer: env.peer,
        binding: Some(crate::Binding::JsonRpc),
        resume_after: env.resume_after,
    };
    Start::Running(Started {
        call: handler.handle(cx, decoded.call),
        id,
        version,
        method,
    })
}

fn encode_reply(id: Id, version: ProtocolVersion, method: Method, reply: Reply) -> Answer {
    use v1::send_message_response::Payload as SendPayload;
    match (version, reply) {
        (ProtocolVersion::V1_0, Reply::Task(t)) if method == Method::SendMessage => encode(
            id,
            &v1::SendMessageResponse {
                payload: Some(SendPayload::Task(t)),
            },
        ),
        (ProtocolVersion::V1_0, Reply::Message(m)) => encode(
            id,
            &v1::SendMessageResponse {
                payload: Some(SendPayload::Message(m)),
            },
        ),
        (ProtocolVersion::V1_0, Reply::Task(t)) => encode(id, &t),
        (ProtocolVersion::V1_0, Reply::Tasks(t)) => encode(id, &t),
        (ProtocolVersion::V1_0, Reply::Card(c)) => encode(id, &c),
        (ProtocolVersion::V0_3, Reply::Task(t)) => encode(id, &v03::Task::from_v1(&t)),
        (ProtocolVersion::V0_3, Reply::Message(m)) => encode(id, &v03::Message::from_v1(&m)),
        // The dual form the well-known URL serves: what the card's signatures cover.
        (ProtocolVersion::V0_3, Reply::Card(c)) => {
            encode(id, &heddle_core::card::dual_card_json(&c))
        }
        (ProtocolVersion::V0_3, Reply::Tasks(_)) => {
            let name = heddle_core::method::Method::ListTasks.names().v1;
            encode_error(id, &heddle_core::call::method_not_found(name))
        }
        (ProtocolVersion::V1_0, Reply::PushConfig(c)) => encode(id, &c),
        (ProtocolVersion::V1_0, Reply::PushConfigs(l)) => encode(id, &l),
        (ProtocolVersion::V1_0, Reply::Empty) => encode(id, &serde_json::json!({})),
        (ProtocolVersion::V0_3, Reply::PushConfig(c)) => {
            encode(id, &v03::TaskPushNotificationConfig::from_v1(&c))
        }
        // v0.3 lists are a bare array of every config.
        (ProtocolVersion::V0_3, Reply::PushConfigs(l)) => encode(
            id,
            &l.configs
                .iter()
                .map(v03::TaskPushNotificationConfig::from_v1)
                .collect::<Vec<_>>(),
        ),
        (ProtocolVersion::V0_3, Reply::Empty) => encode(id, &serde_json::Value::Null),
        (_, Reply::Stream(_)) => encode_error(id, &A2aError::internal("unexpected stream")),
    }
}

/// A stream of one event: the JSON-RPC error response.
fn sse_error(id: Id, err: &A2aError) -> Response {
    let err = &*crate::redact::for_caller(err);
    let event = crate::sse::event(&RpcResponse::error(id, err));
    crate::sse::response(futures::stream::once(std::future::ready(event)))
}

/// The SSE response for a stream of task events.
fn sse(id: Id, version: ProtocolVersion, stream: crate::handler::EventStream) -> Response {
    match version {
        ProtocolVersion::V1_0 => crate::sse::response(stream.map(move |update| {
            crate::sse::task_event(
                update.generation,
                &RpcResponse::result(id.clone(), &update.response),
            )
        })),
        ProtocolVersion::V0_3 => {
            let events = crate::downgrade::v03_events(stream, v03::StreamEvent::from_v1);
            crate::sse::response(events.map(move |event| match event {
                Ok((generation, ev)) => {
                    crate::sse::task_event(generation, &RpcResponse::result(id.clone(), &ev))
                }
                Err(e) => crate::sse::event(&RpcResponse::error(id.clone(), &e)),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heddle_core::call::Call;

    #[test]
    fn header_names_are_the_spec_names() {
        use heddle_core::version::{EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER};
        assert_eq!(VERSION_NAME.as_str(), VERSION_HEADER.to_ascii_lowercase());
        assert_eq!(
            EXTENSIONS_NAMES[0].as_str(),
            EXTENSIONS_HEADER.to_ascii_lowercase()
        );
        assert_eq!(
            EXTENSIONS_NAMES[1].as_str(),
            LEGACY_EXTENSIONS_HEADER.to_ascii_lowercase()
        );
    }

    fn decoded(dialect: Dialect) -> Decoded {
        Decoded {
            id: None,
            dialect,
            call: Call::GetTask(Default::default()),
            legacy_task_id: None,
        }
    }

    #[test]
    fn version_policy() {
        let v1 = ProtocolVersion::V1_0;
        let v03 = ProtocolVersion::V0_3;
        assert_eq!(
            effective_version(&Ok(None), &decoded(Dialect::V1)).ok(),
            Some(v1),
            "header-less v1 name"
        );
        assert_eq!(
            effective_version(&Ok(None), &decoded(Dialect::V03)).ok(),
            Some(v03)
        );
        assert_eq!(
            effective_version(&Ok(Some(v1)), &decoded(Dialect::V1)).ok(),
            Some(v1)
        );
        let e = effective_version(&Ok(Some(v1)), &decoded(Dialect::V03)).expect_err("mismatch");
        assert_eq!(e.code, ErrorCode::MethodNotFound);
        assert!(e.message.contains("GetTask"), "{e}");
        let bad = ProtocolVersion::from_header(Some("99.0")).map(Some);
        assert_eq!(
            effective_version(&bad, &decoded(Dialect::V1))
                .expect_err("bad")
                .code,
            ErrorCode::VersionNotSupported
        );
    }
}
