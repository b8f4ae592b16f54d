//! The gRPC floor: hyper's HTTP/2 server and prost, doing the least a gRPC
//! A2A echo must do. It decodes the length-prefixed `SendMessageRequest`,
//! builds the same completed echo task Heddle answers (history, one
//! artifact, fresh UUID v7 ids), and answers one DATA frame and the
//! `grpc-status: 0` trailer. No routing table, no task engine, no store,
//! no validation: what is left is HTTP/2 itself.

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::{BufMut, Bytes, BytesMut};
use heddle_proto::{v1, wkt};
use http_body_util::BodyExt;
use hyper::{
    HeaderMap, Request, Response,
    body::{Body, Frame, Incoming},
    header::{CONTENT_TYPE, HeaderValue},
    server::conn::http2,
    service::service_fn,
};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;

/// Accepts HTTP/2 (prior knowledge) connections for ever.
pub async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors and the like: back off, go on.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service_fn(send_message))
                .await;
        });
    }
}

/// A unary gRPC answer: one message, then the trailers.
pub struct Unary {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for Unary {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

fn status(code: &'static str) -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static(code));
    trailers
}

fn answer(data: Option<Bytes>, code: &'static str) -> Response<Unary> {
    let mut resp = Response::new(Unary {
        data,
        trailers: Some(status(code)),
    });
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    resp
}

fn text(id: uuid::Uuid) -> String {
    id.hyphenated().to_string()
}

async fn send_message(req: Request<Incoming>) -> Result<Response<Unary>, Infallible> {
    if req.uri().path() != "/lf.a2a.v1.A2AService/SendMessage" {
        return Ok(answer(None, "12")); // UNIMPLEMENTED
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(answer(None, "13")); // INTERNAL
    };
    // The 5-byte prefix: compressed flag and big-endian length.
    let request = body
        .get(5..)
        .and_then(|m| v1::SendMessageRequest::decode(m).ok());
    let Some(mut user) = request.and_then(|r| r.message) else {
        return Ok(answer(None, "3")); // INVALID_ARGUMENT
    };
    let (task_id, context_id) = (text(uuid::Uuid::now_v7()), text(uuid::Uuid::now_v7()));
    user.task_id.clone_from(&task_id);
    user.context_id.clone_from(&context_id);
    let task = v1::Task {
        id: task_id,
        context_id,
        status: Some(v1::TaskStatus {
            state: v1::TaskState::Completed as i32,
            message: None,
            timestamp: Some(wkt::Timestamp {
                seconds: 1_796_036_372,
                nanos: 916_000_000,
            }),
        }),
        artifacts: vec![v1::Artifact {
            artifact_id: text(uuid::Uuid::now_v7()),
            name: "echo".into(),
            parts: user.parts.clone(),
            ..Default::default()
        }],
        history: vec![user],
        metadata: None,
    };
    let response = v1::SendMessageResponse {
        payload: Some(v1::send_message_response::Payload::Task(task)),
    };
    let len = response.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    if response.encode(&mut out).is_err() {
        return Ok(answer(None, "13"));
    }
    Ok(answer(Some(out.freeze()), "0"))
}
