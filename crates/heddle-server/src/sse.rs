//! Server-sent events for the three HTTP bindings: one `data:` line of JSON
//! per event, and a `:` comment after 15 quiet seconds so that proxies keep
//! the stream open.
//!
//! axum's `Sse` takes each event as a `String`, which it scans for line
//! breaks and copies into a buffer of its own: about 1.5k instructions an
//! event, a tenth of a stream's cost. An event here is written once,
//! `data: ` and the JSON and the blank line, into the buffer that becomes the
//! body frame. JSON text never holds a raw line break (control characters
//! are escaped), so one `data:` line carries it whole.

use std::{
    io::Write as _,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{
    body::Body,
    http::{HeaderValue, header},
    response::Response,
};
use bytes::Bytes;
use futures::Stream;
use hyper::body::Frame;
use serde::Serialize;
use tokio::time::{Instant, Sleep};

/// How long a stream may stay silent before a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The keep-alive comment.
const COMMENT: &[u8] = b":\n\n";

/// One event: `value`'s JSON as a `data:` line. A value that cannot be
/// serialized (none of the model's can fail) leaves an empty event rather
/// than ending the stream.
pub(crate) fn event<T: Serialize + ?Sized>(value: &T) -> Bytes {
    // 1 KB: a typical event, so the buffer is not grown while writing.
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"data: ");
    if serde_json::to_writer(&mut out, value).is_err() {
        out.truncate(b"data: ".len());
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A task event: [`event`] with an `id:` line holding the task's
/// `generation` (none for 0), which a client that reconnects sends back as
/// `Last-Event-ID` to resume after it.
pub(crate) fn task_event<T: Serialize + ?Sized>(generation: u64, value: &T) -> Bytes {
    if generation == 0 {
        return event(value);
    }
    let mut out = Vec::with_capacity(1024);
    // Writing to a Vec cannot fail.
    let _ = write!(out, "id: {generation}\ndata: ");
    let start = out.len();
    if serde_json::to_writer(&mut out, value).is_err() {
        out.truncate(start);
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The streaming response for `events`, each already framed by [`event`].
pub(crate) fn response<S>(events: S) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let body = SseBody {
        events: Box::pin(events),
        alive: Box::pin(tokio::time::sleep(KEEP_ALIVE)),
    };
    // The header map sized for its two headers: axum's `([(k, v)], body)`
    // grows an empty map to room for six, 624 bytes held for the stream's
    // life. (A JSON answer keeps axum's: it gets `content-length` too, and
    // hyper reuses an answer's map for the connection's next request.)
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.reserve(2);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The body: the events as they come, a comment whenever the timer runs out
/// first; each event and comment starts the timer again.
struct SseBody<S> {
    events: Pin<Box<S>>,
    alive: Pin<Box<Sleep>>,
}

impl<S> hyper::body::Body for SseBody<S>
where
    S: Stream<Item = Bytes>,
{
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match self.events.as_mut().poll_next(cx) {
            Poll::Ready(Some(event)) => event,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {
                ready!(self.alive.as_mut().poll(cx));
                Bytes::from_static(COMMENT)
            }
        };
        self.alive.as_mut().reset(Instant::now() + KEEP_ALIVE);
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn an_event_is_one_data_line_of_json() {
        let e = event(&serde_json::json!({"text": "two\nlines \"quoted\""}));
        assert_eq!(
            &e[..],
            b"data: {\"text\":\"two\\nlines \\\"quoted\\\"\"}\n\n".as_slice()
        );
    }

    #[test]
    fn a_task_event_names_its_generation_as_the_event_id() {
        let e = task_event(42, &serde_json::json!({"a": 1}));
        assert_eq!(&e[..], b"id: 42\ndata: {\"a\":1}\n\n".as_slice());
        let none = task_event(0, &serde_json::json!({"a": 1}));
        assert_eq!(&none[..], b"data: {\"a\":1}\n\n".as_slice());
    }

    #[tokio::test]
    async fn a_stream_response_holds_a_header_map_sized_for_its_headers() {
        let response = response(futures::stream::empty());
        assert_eq!(response.status(), axum::http::StatusCode::OK);
        assert_eq!(response.headers().len(), 2);
        // axum's tuple form would leave room for six entries.
        assert!(
            response.headers().capacity() < 6,
            "{}",
            response.headers().capacity()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_stream_gets_a_comment_every_fifteen_seconds() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
        let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        let response = response(events);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache");
        let mut body = response.into_body();
        tx.send(event(&1)).expect("open");
        let first = body.frame().await.expect("a frame").expect("ok");
        assert_eq!(first.into_data().expect("data"), "data: 1\n\n");
        // Nothing for 15 s: a comment, then again 15 s later.
        let start = Instant::now();
        let comment = body.frame().await.expect("a frame").expect("ok");
        assert_eq!(comment.into_data().expect("data"), ":\n\n");
        assert_eq!(start.elapsed(), KEEP_ALIVE);
        let comment = body.frame().await.expect("a frame").expect("ok");
        assert_eq!(comment.into_data().expect("data"), ":\n\n");
        assert_eq!(start.elapsed(), 2 * KEEP_ALIVE);
        // An event resets the timer; the end of the events ends the body.
        tokio::time::advance(Duration::from_secs(10)).await;
        tx.send(event(&2)).expect("open");
        let second = body.frame().await.expect("a frame").expect("ok");
        assert_eq!(second.into_data().expect("data"), "data: 2\n\n");
        drop(tx);
        assert!(body.frame().await.is_none());
    }
}
