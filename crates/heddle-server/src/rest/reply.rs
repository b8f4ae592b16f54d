//! A REST answer in wire form: every reply and error of both versions is
//! encoded here. Errors are `{"error": google.rpc.Status}` with the
//! catalogue's HTTP status (v1 §11.6); v0.3 answers are ProtoJSON of the
//! v0.3 proto.

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::StreamExt;
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    compat::v03_proto,
    method::Method,
    v1::{self, send_message_response::Payload as SendPayload},
    v03_proto as pb,
};
use serde::Serialize;

use crate::handler::{EventStream, Reply};

/// `result` as `method`'s answer in `version`.
pub(super) fn encode(
    method: Method,
    version: ProtocolVersion,
    result: Result<Reply, A2aError>,
) -> Response {
    let reply = match result {
        Ok(reply) => reply,
        Err(e) => return error(&e),
    };
    match version {
        ProtocolVersion::V1_0 => encode_v1(method, reply),
        ProtocolVersion::V0_3 => encode_v03(method, reply),
    }
}

fn encode_v1(method: Method, reply: Reply) -> Response {
    let ok = StatusCode::OK;
    match reply {
        Reply::Stream(s) => sse_v1(s),
        Reply::Task(t) if method == Method::SendMessage => {
            json(ok, &send_response(SendPayload::Task(t)))
        }
        Reply::Task(t) => json(ok, &t),
        Reply::Message(m) => json(ok, &send_response(SendPayload::Message(m))),
        Reply::Tasks(t) => json(ok, &t),
        Reply::Card(c) => json(ok, &c),
        Reply::PushConfig(c) => json(ok, &c),
        Reply::PushConfigs(l) => json(ok, &l),
        // google.protobuf.Empty
        Reply::Empty => json(ok, &serde_json::json!({})),
    }
}

fn encode_v03(method: Method, reply: Reply) -> Response {
    let ok = StatusCode::OK;
    match reply {
        Reply::Stream(s) => sse_v03(s),
        Reply::Task(t) if method == Method::SendMessage => json(
            ok,
            &v03_proto::send_response_from_v1(&send_response(SendPayload::Task(t))),
        ),
        Reply::Message(m) => json(
            ok,
            &v03_proto::send_response_from_v1(&send_response(SendPayload::Message(m))),
        ),
        Reply::Task(t) => json(ok, &v03_proto::task_from_v1(&t)),
        Reply::Card(c) => json(ok, &v03_proto::card_from_v1(&c)),
        Reply::PushConfig(c) => json(ok, &v03_proto::push_config_from_v1(&c)),
        Reply::PushConfigs(l) => json(
            ok,
            &pb::ListTaskPushNotificationConfigResponse {
                configs: l
                    .configs
                    .iter()
                    .map(v03_proto::push_config_from_v1)
                    .collect(),
                next_page_token: l.next_page_token,
            },
        ),
        // v0.3 has no ListTasks route, so no call gets here with a page.
        Reply::Tasks(_) => no_route(StatusCode::NOT_FOUND),
        Reply::Empty => json(ok, &serde_json::json!({})),
    }
}

fn send_response(payload: SendPayload) -> v1::SendMessageResponse {
    v1::SendMessageResponse {
        payload: Some(payload),
    }
}

fn sse_v1(stream: EventStream) -> Response {
    crate::sse::response(
        stream.map(|update| crate::sse::task_event(update.generation, &update.response)),
    )
}

fn sse_v03(stream: EventStream) -> Response {
    let events = crate::downgrade::v03_events(stream, v03_proto::stream_response_from_v1);
    crate::sse::response(events.map(|event| match event {
        Ok((generation, ev)) => crate::sse::task_event(generation, &ev),
        Err(e) => {
            let e = crate::redact::for_caller(&e);
            crate::sse::event(&e.http_body_with_status(e.code.spec().http))
        }
    }))
}

/// `body` as JSON with `status`.
pub(crate) fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match crate::json::to_vec(body) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => error(&A2aError::internal(format!("serialization: {e}"))),
    }
}

/// An A2A error as `{"error": google.rpc.Status}` with its HTTP status (v1 §11.6).
pub(crate) fn error(err: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(err.code.spec().http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error_as(err, status)
}

/// [`error`] answered with `status` rather than the catalogue's; the body's
/// `error.code` says the same status (v1 §11.6).
pub(crate) fn error_as(err: &A2aError, status: StatusCode) -> Response {
    let err = &*crate::redact::for_caller(err);
    let body = err.http_body_with_status(status.as_u16());
    let mut resp = match crate::json::to_vec(&body) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(_) => status.into_response(),
    };
    // `Retry-After` on a retryable refusal (RFC 9110 §10.2.3).
    if let Some(secs) = err.retry_after_secs() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// A path that is no route (404), or a route without this verb (405).
pub(super) fn no_route(status: StatusCode) -> Response {
    let text = if status == StatusCode::METHOD_NOT_ALLOWED {
        "this route does not take this HTTP method"
    } else {
        "no such route"
    };
    error_as(&A2aError::new(ErrorCode::MethodNotFound, text), status)
}

/// Requests with a body must be JSON (`application/json` or
/// `application/a2a+json`): `Some(refusal)` when the body is not.
pub(super) fn check_content_type(headers: &HeaderMap, body: &Bytes) -> Option<Response> {
    if body.is_empty() {
        return None;
    }
    let mime = crate::jsonrpc::non_json_media_type(headers)?;
    let err = A2aError::new(
        ErrorCode::ContentTypeNotSupported,
        format!("request bodies must be application/json or application/a2a+json, not {mime}"),
    );
    Some(error_as(&err, StatusCode::UNSUPPORTED_MEDIA_TYPE))
}

/// A body that could not be read (larger than the limit, cut off, too
/// slow), refused in this binding's error form.
pub(super) fn unreadable_body(e: &axum::Error) -> Response {
    let (status, err) = crate::jsonrpc::body_error(e);
    error_as(&err, status)
}
