//! Heddle's HTTP/1.1 server connection (framing in `heddle-http1`).
//!
//! Why not hyper's: hyper gives every HTTP/1 connection an 8 KiB read
//! buffer and an 8 KiB write buffer and keeps both for the connection's
//! life, and an A2A server spends most of its connections on SSE streams
//! that wait minutes between events: with 10,000 of them the two buffers
//! were more memory than everything else Heddle keeps for a stream. Here
//! the read buffer goes with the request body it was read into (unless the
//! client sent more behind it, or the application keeps a header value,
//! which shares its allocation), and the write buffer is given back after
//! every flush, so a waiting stream holds neither. A keep-alive connection
//! waiting for its next request holds a 4 KiB read buffer.
//!
//! One request at a time: the head is read (within 30 s of its first byte),
//! then the whole body (up to [`ConnLimits::max_body_bytes`], with room
//! reserved as bytes arrive, not as the length claims, and 30 s at most
//! between bytes; the bindings read whole bodies anyway), then the service
//! runs, and its answer is written with everything the body has ready
//! gathered into one write. `100 Continue` goes out before routing, once the
//! length is within the limit. While the service runs and while a streamed
//! answer waits for its next frame, the socket is watched, so a client that
//! leaves drops its request (as with hyper). Bytes a client sends ahead
//! (pipelining) are kept and served next. A refusal (400, 413, 431, 501,
//! 505) closes the connection after reading what the client still sends for
//! up to 2 s. Writes have no timeout, as with hyper: a client that stops
//! reading holds its connection until it closes.

use std::{convert::Infallible, io, time::Duration};

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures::FutureExt as _;
use heddle_http1::{
    BodyFraming, ChunkedDecoder, HeadLimits, LAST_CHUNK, RequestHead, ResponseFraming,
    ResponseHead, encode_chunk_header, parse_request,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version, header};
use http_body_util::BodyExt as _;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _},
    sync::watch,
    time::Instant,
};
use tower::Service;

/// How long a request head may take from its first byte to its last.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request body may go without a byte arriving.
const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a body read reserves ahead of what has arrived: a declared
/// length is a claim, and memory follows the bytes, not the claim.
const BODY_RESERVE: usize = 64 << 10;
/// After refusing a request whose body was not read, how long and how much
/// of it is read and dropped before closing, so that the refusal is not lost
/// to the reset a close with unread data sends.
const LINGER: (Duration, usize) = (Duration::from_secs(2), 64 << 10);
/// What a read asks room for: a whole A2A request, head and body, usually.
const READ_CHUNK: usize = 4096;
/// An answer gathered past this is written before more is gathered.
const WRITE_HIGH: usize = 64 << 10;

/// Bounds on what one HTTP/1.1 request may make the server hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Request line and header fields.
    pub head: HeadLimits,
    /// A request body, read whole before the request is routed; a larger one
    /// gets `413 Payload Too Large` and the connection closes. Routes may set
    /// a lower limit of their own (`crate::Limits::max_body_bytes`); a route
    /// limit above this one is capped by it, on HTTP/1.1 only, so serve with
    /// at least the largest (as `heddle serve` does with `--max-body-bytes`).
    pub max_body_bytes: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            head: HeadLimits::default(),
            max_body_bytes: crate::Limits::default().max_body_bytes,
        }
    }
}

/// Why a request body could not be read.
enum BodyError {
    /// Past the limit: answer 413.
    TooLarge,
    /// Bad chunked framing: answer 400.
    Framing,
    /// The connection failed or closed: nothing to answer.
    Gone,
}

/// One connection's state between requests.
struct Conn<I> {
    io: I,
    /// Bytes read and not yet parsed. Empty (no allocation) while nothing is
    /// pending.
    rd: BytesMut,
    /// Bytes of an answer not yet written. Empty (no allocation) between
    /// writes.
    wr: Vec<u8>,
    limits: ConnLimits,
    drain: watch::Receiver<bool>,
}

/// Serves HTTP/1.1 requests on `io` with `app` until the client closes, a
/// request or answer says close, an error, or (between requests) `drain`
/// turns true. `stamp`, when set, goes into every request's extensions (the
/// TLS client identity).
pub(crate) async fn serve<I, S, T>(
    io: I,
    mut service: S,
    stamp: Option<T>,
    limits: ConnLimits,
    drain: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin,
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    T: Clone + Send + Sync + 'static,
{
    let mut conn = Conn {
        io,
        rd: BytesMut::new(),
        wr: Vec::new(),
        limits,
        drain,
    };
    if let Err(e) = conn.run(&mut service, stamp.as_ref()).await {
        tracing::debug!("http/1.1 connection: {e}");
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Conn<I> {
    async fn run<S, T>(&mut self, service: &mut S, stamp: Option<&T>) -> io::Result<()>
    where
        S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
        T: Clone + Send + Sync + 'static,
    {
        loop {
            let head = match self.read_head().await {
                Ok(Some(head)) => head,
                // Closed, timed out or drained: close our side too (over TLS,
                // that sends close_notify).
                Ok(None) => return self.io.shutdown().await,
                Err(e) => return self.refuse(e.status(), &e.to_string()).await,
            };
            let RequestHead {
                mut parts,
                body,
                keep_alive,
                expect_continue,
            } = head;
            let body = match self.read_body(body, expect_continue).await {
                Ok(body) => body,
                Err(BodyError::TooLarge) => {
                    let limit = self.limits.max_body_bytes;
                    let text = format!("request body larger than {limit} bytes");
                    return self.refuse(StatusCode::PAYLOAD_TOO_LARGE, &text).await;
                }
                Err(BodyError::Framing) => {
                    return self
                        .refuse(StatusCode::BAD_REQUEST, "malformed chunked body")
                        .await;
                }
                Err(BodyError::Gone) => return Ok(()),
            };
            if self.rd.is_empty() {
                // Let the allocation the request came in go with its body.
                self.rd = BytesMut::new();
            }
            let version = parts.version;
            let head_only = parts.method == Method::HEAD;
            if let Some(stamp) = stamp {
                parts.extensions.insert(stamp.clone());
            }
            let request = Request::from_parts(parts, Body::from(body));

            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap_or_else(|never| match never {});
            let call = service.call(request);
            let limit = self.limits.head.max_head_bytes;
            let answer = tokio::select! {
                biased;
                answer = call => answer.unwrap_or_else(|never| match never {}),
                () = watch_peer(&mut self.io, &mut self.rd, limit) => return Ok(()),
            };
            let keep_alive = keep_alive && !*self.drain.borrow();
            if !self
                .write_answer(answer, version, head_only, keep_alive)
                .await?
            {
                return self.io.shutdown().await;
            }
        }
    }

    /// The next request head; `None` when the client closed, the head timed
    /// out, or the server is draining and nothing is pending.
    async fn read_head(&mut self) -> Result<Option<RequestHead>, heddle_http1::HeadError> {
        let mut deadline = None;
        // Whether the bytes read last could have completed the head: a head
        // ends with a line feed, so a read without one is not parsed again
        // (a client dribbling a byte at a time would otherwise make parsing
        // quadratic in the head's length).
        let mut fresh = true;
        loop {
            if !self.rd.is_empty() {
                if fresh {
                    if let Some(head) = parse_request(&mut self.rd, &self.limits.head)? {
                        return Ok(Some(head));
                    }
                } else if self.rd.len() >= self.limits.head.max_head_bytes {
                    let limit = self.limits.head.max_head_bytes;
                    return Err(heddle_http1::HeadError::TooLarge(limit));
                }
                deadline.get_or_insert_with(|| Instant::now() + HEAD_TIMEOUT);
            }
            self.make_room();
            let before = self.rd.len();
            let read = match deadline {
                // Idle between requests: wait for a byte or the drain.
                None => {
                    let drained = self.drain.wait_for(|d| *d);
                    tokio::select! {
                        biased;
                        read = self.io.read_buf(&mut self.rd) => read,
                        _ = drained => return Ok(None),
                    }
                }
                Some(at) => match tokio::time::timeout_at(at, self.io.read_buf(&mut self.rd)).await
                {
                    Ok(read) => read,
                    Err(_) => return Ok(None),
                },
            };
            match read {
                Ok(0) | Err(_) => return Ok(None),
                Ok(_) => fresh = self.rd[before..].contains(&b'\n'),
            }
        }
    }

    /// The whole request body, as its framing delimits it.
    async fn read_body(
        &mut self,
        framing: BodyFraming,
        expect_continue: bool,
    ) -> Result<Bytes, BodyError> {
        let max = self.limits.max_body_bytes;
        match framing {
            BodyFraming::Empty => Ok(Bytes::new()),
            BodyFraming::Length(n) => {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= max)
                    .ok_or(BodyError::TooLarge)?;
                if self.rd.len() < n && expect_continue {
                    self.continue_().await?;
                }
                while self.rd.len() < n {
                    self.rd.reserve((n - self.rd.len()).min(BODY_RESERVE));
                    self.read_more().await?;
                }
                Ok(self.rd.split_to(n).freeze())
            }
            BodyFraming::Chunked => {
                if expect_continue {
                    self.continue_().await?;
                }
                let mut decoder = ChunkedDecoder::new(max);
                let mut body = BytesMut::new();
                loop {
                    match decoder.decode(&mut self.rd, &mut body) {
                        Ok(true) => return Ok(body.freeze()),
                        Ok(false) => {}
                        Err(heddle_http1::ChunkError::TooLarge(_)) => {
                            return Err(BodyError::TooLarge);
                        }
                        Err(_) => return Err(BodyError::Framing),
                    }
                    self.make_room();
                    self.read_more().await?;
                }
            }
        }
    }

    /// Room in `rd` for a read of a head or of chunks.
    fn make_room(&mut self) {
        if self.rd.capacity() - self.rd.len() < READ_CHUNK / 4 {
            self.rd.reserve(READ_CHUNK);
        }
    }

    /// Reads more of a body into `rd`: gone if the client closes or sends
    /// nothing for [`BODY_IDLE_TIMEOUT`].
    async fn read_more(&mut self) -> Result<(), BodyError> {
        match tokio::time::timeout(BODY_IDLE_TIMEOUT, self.io.read_buf(&mut self.rd)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            _ => Err(BodyError::Gone),
        }
    }

    /// The interim answer a client that sent `Expect: 100-continue` waits
    /// for before its body.
    async fn continue_(&mut self) -> Result<(), BodyError> {
        let sent = async {
            self.io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            self.io.flush().await
        };
        sent.await.map_err(|_| BodyError::Gone)
    }

    /// Writes `answer`; says whether the connection can carry another
    /// request.
    async fn write_answer(
        &mut self,
        answer: Response<Body>,
        version: Version,
        head_only: bool,
        keep_alive: bool,
    ) -> io::Result<bool> {
        use axum::body::HttpBody as _;
        let (mut parts, mut body) = answer.into_parts();
        let len = body.size_hint().exact();
        self.wr.reserve(1024);
        let head = ResponseHead::encode(
            &mut self.wr,
            version,
            head_only,
            keep_alive,
            parts.status,
            &mut parts.headers,
            len,
        );
        let mut left = match head.framing {
            ResponseFraming::NoBody => {
                self.flush().await?;
                return Ok(head.keep_alive);
            }
            ResponseFraming::Length(n) => n,
            ResponseFraming::Chunked | ResponseFraming::UntilClose => u64::MAX,
        };
        let limit = self.limits.head.max_head_bytes;
        loop {
            // Everything the body has ready goes out in one write.
            let frame = match body.frame().now_or_never() {
                Some(frame) => frame,
                None => {
                    self.flush().await?;
                    tokio::select! {
                        biased;
                        frame = body.frame() => frame,
                        () = watch_peer(&mut self.io, &mut self.rd, limit) => return Ok(false),
                    }
                }
            };
            let data = match frame {
                None => break,
                Some(Err(e)) => {
                    // Cut short: closing without the body's end tells the
                    // client it did not get all of it.
                    tracing::debug!("answer body failed: {e}");
                    self.flush().await?;
                    return Ok(false);
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    // HTTP/1.1 trailers would need `TE: trailers`; dropped.
                    Err(_) => continue,
                },
            };
            if data.is_empty() {
                continue;
            }
            match head.framing {
                ResponseFraming::Chunked => {
                    encode_chunk_header(&mut self.wr, data.len());
                    self.put(&data).await?;
                    self.wr.extend_from_slice(b"\r\n");
                }
                _ => {
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                    self.put(&data[..take]).await?;
                    left -= take as u64;
                    if take < data.len() {
                        tracing::debug!("answer body longer than its content-length");
                        self.flush().await?;
                        return Ok(false);
                    }
                }
            }
            if self.wr.len() >= WRITE_HIGH {
                self.flush().await?;
            }
        }
        let complete = match head.framing {
            ResponseFraming::Chunked => {
                self.wr.extend_from_slice(LAST_CHUNK);
                true
            }
            ResponseFraming::Length(_) => left == 0,
            _ => false,
        };
        self.flush().await?;
        Ok(head.keep_alive && complete)
    }

    /// Queues `data` for writing: copied behind what is gathered when small,
    /// written straight after it when large.
    async fn put(&mut self, data: &[u8]) -> io::Result<()> {
        if data.len() < WRITE_HIGH {
            self.wr.extend_from_slice(data);
            return Ok(());
        }
        self.flush().await?;
        self.io.write_all(data).await
    }

    /// Writes what is gathered and lets the buffer go.
    async fn flush(&mut self) -> io::Result<()> {
        let wr = std::mem::take(&mut self.wr);
        if !wr.is_empty() {
            self.io.write_all(&wr).await?;
        }
        self.io.flush().await
    }

    /// Answers a request that cannot be served with `status` and a short
    /// text, then closes.
    async fn refuse(&mut self, status: StatusCode, text: &str) -> io::Result<()> {
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        ResponseHead::encode(
            &mut self.wr,
            Version::HTTP_11,
            false,
            false,
            status,
            &mut headers,
            Some(text.len() as u64),
        );
        self.wr.extend_from_slice(text.as_bytes());
        self.flush().await?;
        self.io.shutdown().await?;
        // Lingering close: read (and drop) what the client is still sending,
        // for a while, so that our answer reaches it before the socket closes.
        let (time, bytes) = LINGER;
        let mut sink = [0u8; 1024];
        let drained = async {
            let mut total = 0;
            while total < bytes {
                match self.io.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
        };
        let _ = tokio::time::timeout(time, drained).await;
        Ok(())
    }
}

/// Completes when the peer closes the connection or it fails; meanwhile
/// keeps what the peer sends ahead in `rd`, up to about `limit` bytes, and
/// past that stops reading (TCP's window then holds the client back). A
/// peer that closes its side with requests already sent ahead (a half
/// close) is not gone: those get their answers.
async fn watch_peer<I: AsyncRead + Unpin>(io: &mut I, rd: &mut BytesMut, limit: usize) {
    let mut probe = [0u8; 64];
    loop {
        if rd.len() >= limit {
            return std::future::pending().await;
        }
        match io.read(&mut probe).await {
            Ok(0) if !rd.is_empty() => return std::future::pending().await,
            Ok(0) | Err(_) => return,
            Ok(n) => rd.extend_from_slice(&probe[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::{Router, routing::post};
    use tokio::io::DuplexStream;

    fn app() -> Router {
        Router::new()
            .route("/echo", post(|body: Bytes| async move { body }))
            .route(
                "/stream",
                axum::routing::get(|| async {
                    let chunks = futures::stream::iter(["one", "two"].map(Ok::<_, Infallible>));
                    Body::from_stream(chunks)
                }),
            )
    }

    /// Runs a connection over an in-memory pipe; returns the client end.
    fn connect(limits: ConnLimits) -> (DuplexStream, watch::Sender<bool>) {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve(server, app(), None::<()>, limits, rx));
        (client, tx)
    }

    async fn read_all(client: &mut DuplexStream) -> String {
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.expect("read");
        String::from_utf8(out).expect("utf-8")
    }

    #[tokio::test]
    async fn pipelined_requests_are_answered_in_order() {
        let (mut c, _drain) = connect(ConnLimits::default());
        c.write_all(b"POST /echo HTTP/1.1\r\ncontent-length: 5\r\n\r\nfirstPOST /echo HTTP/1.1\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n")
            .await
            .expect("write");
        let text = read_all(&mut c).await;
        let first = text.find("first").expect("first answer");
        let second = text.find("second").expect("second answer");
        assert!(first < second, "{text}");
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert!(text.contains("connection: close"), "{text}");
    }

    #[tokio::test]
    async fn a_streamed_answer_is_chunked() {
        let (mut c, _drain) = connect(ConnLimits::default());
        c.write_all(b"GET /stream HTTP/1.1\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let text = read_all(&mut c).await;
        assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\n3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn bodies_over_the_limit_get_413_and_a_close() {
        let limits = ConnLimits {
            max_body_bytes: 10,
            ..ConnLimits::default()
        };
        let (mut c, _drain) = connect(limits);
        c.write_all(b"POST /echo HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 11\r\n\r\n")
            .await
            .expect("write");
        let text = read_all(&mut c).await;
        assert!(
            text.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
            "{text}"
        );
        assert!(!text.contains("100 Continue"), "{text}");
        let (mut c, _drain) = connect(limits);
        c.write_all(b"POST /echo HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n")
            .await
            .expect("write");
        assert!(read_all(&mut c).await.starts_with("HTTP/1.1 413 "));
    }

    #[tokio::test]
    async fn expect_continue_gets_the_interim_answer_before_the_body_is_sent() {
        let (mut c, _drain) = connect(ConnLimits::default());
        c.write_all(b"POST /echo HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 4\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut interim = [0u8; 25];
        c.read_exact(&mut interim).await.expect("interim");
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        c.write_all(b"body").await.expect("body");
        let text = read_all(&mut c).await;
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n") && text.ends_with("\r\n\r\nbody"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn malformed_requests_get_their_status_and_a_close() {
        for (wire, status) in [
            (&b"GET / HTTP/1.1\r\nbad\r\n\r\n"[..], "400"),
            (
                b"POST /echo HTTP/1.1\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n",
                "400",
            ),
            (
                b"POST /echo HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
                "501",
            ),
            (
                b"POST /echo HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                "400",
            ),
        ] {
            let (mut c, _drain) = connect(ConnLimits::default());
            c.write_all(wire).await.expect("write");
            let text = read_all(&mut c).await;
            assert!(text.starts_with(&format!("HTTP/1.1 {status} ")), "{text}");
            assert!(text.contains("connection: close\r\n"), "{text}");
        }
    }

    #[tokio::test]
    async fn an_idle_connection_closes_when_the_server_drains() {
        let (mut c, drain) = connect(ConnLimits::default());
        c.write_all(b"POST /echo HTTP/1.1\r\ncontent-length: 2\r\n\r\nhi")
            .await
            .expect("write");
        let mut answer = vec![0u8; 256];
        let n = c.read(&mut answer).await.expect("answer");
        assert!(String::from_utf8_lossy(&answer[..n]).ends_with("\r\n\r\nhi"));
        drain.send_replace(true);
        assert_eq!(read_all(&mut c).await, "", "closed without another byte");
    }

    #[tokio::test]
    async fn a_client_that_half_closes_after_pipelining_still_gets_its_answers() {
        let (mut c, _drain) = connect(ConnLimits::default());
        c.write_all(b"POST /echo HTTP/1.1\r\ncontent-length: 1\r\n\r\naPOST /echo HTTP/1.1\r\ncontent-length: 1\r\n\r\nb")
            .await
            .expect("write");
        c.shutdown().await.expect("half close");
        let text = read_all(&mut c).await;
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert!(text.ends_with("\r\n\r\nb"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_is_dropped_after_the_idle_timeout() {
        let (mut c, _drain) = connect(ConnLimits::default());
        // Claims 8 MB, sends 4 bytes: memory follows the bytes, and after
        // 30 s of silence the connection is let go.
        c.write_all(b"POST /echo HTTP/1.1\r\ncontent-length: 8000000\r\n\r\nabcd")
            .await
            .expect("write");
        let wait = BODY_IDLE_TIMEOUT + Duration::from_secs(1);
        let closed = tokio::time::timeout(wait, read_all(&mut c)).await;
        assert_eq!(closed.expect("closed by the server"), "");
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_never_ends_is_dropped_after_the_timeout() {
        let (mut c, _drain) = connect(ConnLimits::default());
        c.write_all(b"GET / HTTP/1.1\r\nx-slow: ")
            .await
            .expect("write");
        let closed =
            tokio::time::timeout(HEAD_TIMEOUT + Duration::from_secs(1), read_all(&mut c)).await;
        assert_eq!(closed.expect("closed by the server"), "");
    }
}
