//! The unary RPCs of both A2A services without tonic's per-call codec.
//!
//! tonic serves a unary call as a one-message stream: a streaming decoder
//! over the request body, a boxed service future, and an encoding body that
//! the HTTP/2 server polls message by message. For A2A's small unary messages
//! that machinery cost more than the call itself (callgrind: about 12k
//! instructions of an echo `SendMessage`'s 84k). A unary request is one
//! length-prefixed message, so [`Unary`] reads the body whole, decodes the
//! message ([`heddle_core::grpc_frame`]), calls the very same
//! [`V1Service`] / [`V03Service`] method tonic would call, and answers with
//! one DATA frame and the `grpc-status` trailer.
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

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, header::CONTENT_TYPE};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use prost::Message;
use tonic::{Request, Response, Status, body::Body as TonicBody, server::NamedService};
use tower::Service;

use heddle_core::{
    ProtocolVersion,
    grpc_frame::{self, FrameError},
    method::{METHODS, Method},
};
use heddle_proto::{v1::a2a_service_server as v1_server, v03::a2a_service_server as v03_server};

use super::{V1Service, V03Service};

/// `Content-Type` of every gRPC answer.
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

type HttpRequest = http::Request<TonicBody>;
type HttpResponse = http::Response<TonicBody>;
/// What every [`Unary`] call returns.
pub type BoxFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

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

/// How a unary RPC is answered: the service, the request, the message limit.
type Answer<Svc> = fn(Svc, HttpRequest, usize) -> BoxFuture;

/// One A2A service's unary RPCs. Their names come from the core method
/// table ([`heddle_core::method::METHODS`]); this says only how each
/// operation is answered.
pub trait UnaryRpcs: Clone + Send + 'static {
    /// The full service name, whose methods are `/{NAME}/{method}`.
    const NAME: &'static str;
    /// The protocol version the service speaks (which names it uses).
    const VERSION: ProtocolVersion;
    /// How `method` is answered, if it is one of the service's unary RPCs.
    fn answer(method: Method) -> Option<Answer<Self>>;

    /// The gRPC names of the unary RPCs [`answer`](Self::answer) serves.
    fn methods() -> impl Iterator<Item = &'static str> {
        METHODS
            .iter()
            .filter(|n| !n.streaming && Self::answer(n.method).is_some())
            .filter_map(|n| n.method.grpc_name(Self::VERSION))
    }
}

/// An [`Answer`] that runs trait method `$method` of `$trait`.
macro_rules! answer {
    ($trait:path, $method:ident) => {
        Some(|service, req, max| {
            Box::pin(call(req, max, move |r| async move {
                <_ as $trait>::$method(&service, r).await
            }))
        })
    };
}

/// `answer` of a service: operation, trait method.
macro_rules! unary_rpcs {
    ($trait:path { $($op:ident => $method:ident,)* }) => {
        fn answer(method: Method) -> Option<Answer<Self>> {
            use $trait as A;
            match method {
                $(Method::$op => answer!(A, $method),)*
                _ => None,
            }
        }
    };
}

impl UnaryRpcs for V1Service {
    const NAME: &'static str = super::V1_SERVICE;
    const VERSION: ProtocolVersion = ProtocolVersion::V1_0;

    unary_rpcs!(v1_server::A2aService {
        SendMessage => send_message,
        GetTask => get_task,
        ListTasks => list_tasks,
        CancelTask => cancel_task,
        CreatePushConfig => create_task_push_notification_config,
        GetPushConfig => get_task_push_notification_config,
        ListPushConfigs => list_task_push_notification_configs,
        DeletePushConfig => delete_task_push_notification_config,
        GetExtendedAgentCard => get_extended_agent_card,
    });
}

impl UnaryRpcs for V03Service {
    const NAME: &'static str = super::V03_SERVICE;
    const VERSION: ProtocolVersion = ProtocolVersion::V0_3;

    unary_rpcs!(v03_server::A2aService {
        SendMessage => send_message,
        GetTask => get_task,
        CancelTask => cancel_task,
        CreatePushConfig => create_task_push_notification_config,
        GetPushConfig => get_task_push_notification_config,
        ListPushConfigs => list_task_push_notification_config,
        DeletePushConfig => delete_task_push_notification_config,
        GetExtendedAgentCard => get_agent_card,
    });
}

impl<Svc: UnaryRpcs, S> NamedService for Unary<Svc, S> {
    const NAME: &'static str = Svc::NAME;
}

impl<Svc, S> Service<HttpRequest> for Unary<Svc, S>
where
    Svc: UnaryRpcs,
    S: Service<HttpRequest, Response = HttpResponse, Error = Infallible, Future = BoxFuture>,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> BoxFuture {
        let answer = req
            .uri()
            .path()
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(Svc::NAME))
            .and_then(|p| p.strip_prefix('/'))
            .and_then(|name| Method::from_grpc(name, Svc::VERSION))
            .and_then(Svc::answer)
            .filter(|_| !compressed(&req));
        match answer {
            Some(answer) => answer(self.service.clone(), req, self.max_message_bytes),
            None => self.generated.call(req),
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
    let deadline = super::deadline::from_headers(req.headers());
    let work = async {
        match read_request(req, max_message_bytes).await {
            Ok(request) => method(request).await,
            Err(status) => Err(status),
        }
    };
    let answer = match deadline {
        Some(d) => tokio::time::timeout(d, work)
            .await
            .unwrap_or_else(|_| Err(super::deadline::exceeded())),
        None => work.await,
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
    let (mut parts, mut body) = req.into_parts();
    let limit = max_message_bytes.saturating_add(grpc_frame::FRAME_HEADER);
    // A unary request is almost always one DATA frame: kept as it came,
    // copied only when more follow.
    let mut first = Bytes::new();
    let mut more: Option<BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let frame = match frame.into_data() {
            Ok(data) => {
                // `more`, once there is one, already holds `first`.
                let len = more.as_ref().map_or(first.len(), BytesMut::len) + data.len();
                if len > limit {
                    return Err(Status::out_of_range(format!(
                        "the request is larger than the message limit of {max_message_bytes} bytes"
                    )));
                }
                match &mut more {
                    None if first.is_empty() => first = data,
                    None => {
                        let mut buf = BytesMut::with_capacity(len);
                        buf.extend_from_slice(&std::mem::take(&mut first));
                        buf.extend_from_slice(&data);
                        more = Some(buf);
                    }
                    Some(buf) => buf.extend_from_slice(&data),
                }
                continue;
            }
            Err(frame) => frame,
        };
        if let Ok(trailers) = frame.into_trailers() {
            parts.headers.extend(trailers);
        }
    }
    let bytes = more.map_or(first, BytesMut::freeze);
    let message =
        grpc_frame::decode_one(&bytes, max_message_bytes).map_err(|e| frame_status(&e))?;
    Ok(Request::from_http(http::Request::from_parts(
        parts, message,
    )))
}

/// A framing error as tonic reports it.
fn frame_status(e: &FrameError) -> Status {
    if e.is_size_limit() {
        Status::out_of_range(e.to_string())
    } else {
        Status::internal(e.to_string())
    }
}

/// A successful answer: `message` in one frame, then `grpc-status: 0`.
fn respond<M: Message>(message: &M) -> HttpResponse {
    let Some(frame) = grpc_frame::encode(message) else {
        return Status::resource_exhausted("the answer is larger than a gRPC message can be")
            .into_http();
    };
    let mut response = http::Response::new(TonicBody::new(OneMessage {
        data: Some(Bytes::from(frame)),
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

    // No exact `size_hint`: hyper would turn it into a `content-length`
    // header, which gRPC does not use and HPACK never indexes, so both ends
    // would encode and decode it on every call.
}

#[cfg(test)]
mod tests {
    use super::*;
    use heddle_core::v1;

    /// `METHODS` is what gets an exact route; `answer` is what serves it.
    #[test]
    fn every_unary_operation_of_the_table_is_answered_and_streams_are_not() {
        fn check<S: UnaryRpcs>() -> usize {
            for n in METHODS {
                let served = S::answer(n.method).is_some();
                let unary_here = !n.streaming && n.method.grpc_name(S::VERSION).is_some();
                assert_eq!(served, unary_here, "{}/{:?}", S::NAME, n.method);
            }
            S::methods().count()
        }
        assert_eq!(check::<V1Service>(), 9);
        assert_eq!(check::<V03Service>(), 8);
        assert!(V03Service::methods().any(|m| m == "GetAgentCard"));
    }

    #[test]
    fn size_limits_are_out_of_range_and_bad_frames_internal() {
        let big = FrameError::TooLarge { len: 10, limit: 5 };
        assert_eq!(frame_status(&big).code(), tonic::Code::OutOfRange);
        assert_eq!(
            frame_status(&FrameError::Missing).code(),
            tonic::Code::Internal
        );
        assert_eq!(
            frame_status(&FrameError::Missing).message(),
            "Missing request message."
        );
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
        let back: v1::Task = grpc_frame::decode_one(&collected.to_bytes(), 1024).expect("decodes");
        assert_eq!(back, msg);
    }
}
