//! The unary RPCs of both A2A services without tonic's per-call codec.
//!
//! tonic serves a unary call as a one-message stream: a streaming decoder
//! over the request body, a boxed service future, and an encoding body that
//! the HTTP/2 server polls message by message. For A2A's small unary messages
//! that machinery cost more than the call itself (callgrind: about 12k
//! instructions of an echo `SendMessage`'s 84k). A unary request is one
//! length-prefixed message, so [`Unary`] reads the body whole, decodes the
//! message with prost, calls the very same [`V1Service`] / [`V03Service`]
//! method tonic would call, and answers with one DATA frame and the
//! `grpc-status` trailer.
//!
//! Everything else goes to the tonic-generated service unchanged: the
//! streaming RPCs, unknown methods, and any request whose message is
//! compressed (`grpc-encoding`), so that tonic's own answer to it stands.
//! Errors are tonic's: a failed call is the [`Status`]'s trailers-only
//! response, and the framing errors use tonic's codes (`INTERNAL` for a
//! malformed frame, `OUT_OF_RANGE` for one over the size limit).

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, header::CONTENT_TYPE};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, SizeHint};
use prost::Message;
use tonic::{Request, Response, Status, body::Body as TonicBody, server::NamedService};
use tower::Service;

use heddle_proto::{v1::a2a_service_server as v1_server, v03::a2a_service_server as v03_server};

use super::{V1Service, V03Service};

/// `Content-Type` of every gRPC answer.
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");
/// Length of a gRPC message frame's header: a compression flag and a big-endian `u32` length.
const FRAME_HEADER: usize = 5;

type HttpRequest = http::Request<TonicBody>;
type HttpResponse = http::Response<TonicBody>;
type BoxFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

/// One of the two A2A services with its unary RPCs served by [`Unary`]'s
/// direct path and the rest by the tonic-generated server `S`.
#[derive(Clone, Debug)]
pub struct Unary<Svc, S> {
    service: Svc,
    generated: S,
    max_message_bytes: usize,
}

impl<Svc, S> Unary<Svc, S> {
    pub(super) fn new(service: Svc, generated: S, max_message_bytes: usize) -> Self {
        Self {
            service,
            generated,
            max_message_bytes,
        }
    }
}

impl NamedService for Unary<V1Service, v1_server::A2aServiceServer<V1Service>> {
    const NAME: &'static str = super::V1_SERVICE;
}

impl NamedService for Unary<V03Service, v03_server::A2aServiceServer<V03Service>> {
    const NAME: &'static str = super::V03_SERVICE;
}

/// Answers `req` through `method` of `service` if it is a plain unary call.
macro_rules! unary {
    ($self:ident, $req:ident, $trait:path, $method:ident) => {{
        let service = $self.service.clone();
        Box::pin(call($req, $self.max_message_bytes, move |r| async move {
            <_ as $trait>::$method(&service, r).await
        }))
    }};
}

impl Service<HttpRequest> for Unary<V1Service, v1_server::A2aServiceServer<V1Service>> {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> BoxFuture {
        use v1_server::A2aService as A;
        if compressed(&req) {
            return self.generated.call(req);
        }
        let Some(method) = req.uri().path().strip_prefix("/lf.a2a.v1.A2AService/") else {
            return self.generated.call(req);
        };
        match method {
            "SendMessage" => unary!(self, req, A, send_message),
            "GetTask" => unary!(self, req, A, get_task),
            "ListTasks" => unary!(self, req, A, list_tasks),
            "CancelTask" => unary!(self, req, A, cancel_task),
            "CreateTaskPushNotificationConfig" => {
                unary!(self, req, A, create_task_push_notification_config)
            }
            "GetTaskPushNotificationConfig" => {
                unary!(self, req, A, get_task_push_notification_config)
            }
            "ListTaskPushNotificationConfigs" => {
                unary!(self, req, A, list_task_push_notification_configs)
            }
            "DeleteTaskPushNotificationConfig" => {
                unary!(self, req, A, delete_task_push_notification_config)
            }
            "GetExtendedAgentCard" => unary!(self, req, A, get_extended_agent_card),
            _ => self.generated.call(req),
        }
    }
}

impl Service<HttpRequest> for Unary<V03Service, v03_server::A2aServiceServer<V03Service>> {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> BoxFuture {
        use v03_server::A2aService as A;
        if compressed(&req) {
            return self.generated.call(req);
        }
        let Some(method) = req.uri().path().strip_prefix("/a2a.v1.A2AService/") else {
            return self.generated.call(req);
        };
        match method {
            "SendMessage" => unary!(self, req, A, send_message),
            "GetTask" => unary!(self, req, A, get_task),
            "CancelTask" => unary!(self, req, A, cancel_task),
            "CreateTaskPushNotificationConfig" => {
                unary!(self, req, A, create_task_push_notification_config)
            }
            "GetTaskPushNotificationConfig" => {
                unary!(self, req, A, get_task_push_notification_config)
            }
            "ListTaskPushNotificationConfig" => {
                unary!(self, req, A, list_task_push_notification_config)
            }
            "DeleteTaskPushNotificationConfig" => {
                unary!(self, req, A, delete_task_push_notification_config)
            }
            "GetAgentCard" => unary!(self, req, A, get_agent_card),
            _ => self.generated.call(req),
        }
    }
}

/// Whether the request declares a compressed message encoding; those go to
/// tonic, which refuses them (these services enable no compression).
fn compressed(req: &HttpRequest) -> bool {
    req.headers()
        .get("grpc-encoding")
        .is_some_and(|v| v.as_bytes() != b"identity")
}

/// Decodes the one request message, runs `method` and encodes its answer.
async fn call<Req, Resp, F, Fut>(
    req: HttpRequest,
    max_message_bytes: usize,
    method: F,
) -> Result<HttpResponse, Infallible>
where
    Req: Message + Default,
    Resp: Message,
    F: FnOnce(Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let answer = match read_request(req, max_message_bytes).await {
        Ok(request) => method(request).await,
        Err(status) => Err(status),
    };
    Ok(match answer {
        Ok(response) => respond(response.get_ref()),
        Err(status) => status.into_http(),
    })
}

/// The request with its message decoded; trailers, if any, join the metadata.
async fn read_request<Req: Message + Default>(
    req: HttpRequest,
    max_message_bytes: usize,
) -> Result<Request<Req>, Status> {
    let (mut parts, body) = req.into_parts();
    let limit = max_message_bytes.saturating_add(FRAME_HEADER);
    let collected =
        Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| match e.downcast::<Status>() {
                Ok(status) => *status,
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    too_large(max_message_bytes, None)
                }
                Err(e) => Status::internal(format!("reading the request: {e}")),
            })?;
    if let Some(trailers) = collected.trailers() {
        parts.headers.extend(trailers.clone());
    }
    let message = decode_frame(&collected.to_bytes(), max_message_bytes)?;
    Ok(Request::from_http(http::Request::from_parts(
        parts, message,
    )))
}

/// The one length-prefixed message of a unary request body.
fn decode_frame<Req: Message + Default>(
    body: &[u8],
    max_message_bytes: usize,
) -> Result<Req, Status> {
    let Some((head, rest)) = body.split_first_chunk::<FRAME_HEADER>() else {
        return Err(if body.is_empty() {
            Status::internal("Missing request message.")
        } else {
            Status::internal("Unexpected EOF decoding stream.")
        });
    };
    match head[0] {
        0 => {}
        1 => {
            return Err(Status::internal(
                "protocol error: received message with compressed-flag but no grpc-encoding was specified",
            ));
        }
        f => {
            return Err(Status::internal(format!(
                "protocol error: received message with invalid compression flag: {f} (valid flags are 0 and 1)"
            )));
        }
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > max_message_bytes {
        return Err(too_large(max_message_bytes, Some(len)));
    }
    match rest.len().cmp(&len) {
        std::cmp::Ordering::Less => Err(Status::internal("Unexpected EOF decoding stream.")),
        std::cmp::Ordering::Greater => Err(Status::internal(
            "a unary call takes exactly one request message",
        )),
        std::cmp::Ordering::Equal => Req::decode(rest).map_err(|e| Status::internal(e.to_string())),
    }
}

/// A request over the size limit, in tonic's words when the length is known.
fn too_large(limit: usize, found: Option<usize>) -> Status {
    Status::out_of_range(match found {
        Some(len) => format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {limit} bytes"
        ),
        None => format!("the request body is larger than the message limit of {limit} bytes"),
    })
}

/// A successful answer: `message` in one frame, then `grpc-status: 0`.
fn respond<M: Message>(message: &M) -> HttpResponse {
    let len = message.encoded_len();
    let Ok(prefix) = u32::try_from(len) else {
        return Status::resource_exhausted(format!("the answer is too large ({len} bytes)"))
            .into_http();
    };
    let mut buf = BytesMut::with_capacity(FRAME_HEADER + len);
    buf.put_u8(0);
    buf.put_u32(prefix);
    message.encode_raw(&mut buf);
    let mut response = http::Response::new(TonicBody::new(OneMessage {
        data: Some(buf.freeze()),
        trailers: true,
    }));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, GRPC_CONTENT_TYPE);
    response
}

/// A response body of one data frame followed by the `grpc-status: 0` trailer.
struct OneMessage {
    data: Option<Bytes>,
    trailers: bool,
}

impl Body for OneMessage {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut trailers = HeaderMap::with_capacity(1);
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && !self.trailers
    }

    fn size_hint(&self) -> SizeHint {
        let len = self.data.as_ref().map_or(0, Bytes::len);
        SizeHint::with_exact(len as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heddle_core::v1;

    fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn a_well_formed_frame_decodes() {
        let msg = v1::GetTaskRequest {
            id: "t-1".into(),
            ..Default::default()
        };
        let got: v1::GetTaskRequest =
            decode_frame(&frame(0, &msg.encode_to_vec()), 1024).expect("decodes");
        assert_eq!(got, msg);
    }

    #[test]
    fn malformed_frames_are_internal_or_out_of_range() {
        let payload = v1::GetTaskRequest {
            id: "t-1".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let cases: [(Vec<u8>, tonic::Code); 7] = [
            (Vec::new(), tonic::Code::Internal),
            (vec![0, 0, 0], tonic::Code::Internal),
            (frame(1, &payload), tonic::Code::Internal),
            (frame(7, &payload), tonic::Code::Internal),
            (frame(0, &payload)[..8].to_vec(), tonic::Code::Internal),
            (
                [frame(0, &payload), frame(0, &payload)].concat(),
                tonic::Code::Internal,
            ),
            (frame(0, &[0xff; 2000]), tonic::Code::OutOfRange),
        ];
        for (body, code) in cases {
            let err = decode_frame::<v1::GetTaskRequest>(&body, 1024).expect_err("refused");
            assert_eq!(err.code(), code, "{body:?}: {}", err.message());
        }
        // Bytes that are not the message: a field with a truncated length.
        let err = decode_frame::<v1::GetTaskRequest>(&frame(0, &[0x0a, 0x10, b'x']), 1024)
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::Internal);
    }

    #[tokio::test]
    async fn the_answer_is_one_frame_then_grpc_status_zero() {
        let msg = v1::Task {
            id: "t-1".into(),
            ..Default::default()
        };
        let response = respond(&msg);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/grpc");
        let collected = response.into_body().collect().await.expect("body");
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        let bytes = collected.to_bytes();
        let back: v1::Task = decode_frame(&bytes, 1024).expect("decodes");
        assert_eq!(back, msg);
    }
}
