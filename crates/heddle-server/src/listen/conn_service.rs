//! What every request on a served connection passes through before the
//! router: the client's address and TLS identity into its extensions, a
//! total deadline on its body, and the bookkeeping that tells the
//! connection's supervisor whether it is idle.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{body::Body, extract::ConnectInfo};
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use pin_project_lite::pin_project;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};
use tower::{ServiceExt as _, util::Oneshot};

/// The address of the client a request came from, as
/// [`axum::extract::ConnectInfo`] (what `axum::serve` would give).
pub type PeerAddr = ConnectInfo<SocketAddr>;

/// Whether a connection is busy: requests in flight, and when it last
/// finished an answer or (HTTP/1.1) received a byte.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `start`.
    last: AtomicU64,
    /// Whether bytes received count as activity. Over HTTP/1.1 they are a
    /// request on its way (hyper's header timeout bounds it). Over HTTP/2
    /// only requests count: PING, WINDOW_UPDATE or SETTINGS frames with no
    /// request would otherwise keep a connection open for ever.
    reads_count: bool,
}

impl Activity {
    pub(crate) fn new(reads_count: bool) -> Self {
        Self {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            reads_count,
        }
    }

    fn stamp(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    /// When the connection turns idle for `idle`, or `None` while a request
    /// is in flight.
    pub(crate) fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        Some(self.start + last + idle)
    }

    /// `io`, with every read that brings bytes noted, and writes that make
    /// no progress for `write_timeout` failed.
    pub(crate) fn watch<I>(self: &Arc<Self>, io: I, write_timeout: Duration) -> Watched<I> {
        Watched {
            io,
            activity: self.clone(),
            write_timeout,
            stalled: None,
        }
    }
}

/// Counts one request in flight until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.stamp();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A transport whose reads are noted in its connection's [`Activity`], and
/// whose writes fail once the peer has taken nothing for the write timeout:
/// a client that stops reading a stream is let go (the stream detaches; its
/// task goes on) instead of holding the answer's buffers for ever.
pub(crate) struct Watched<I> {
    io: I,
    activity: Arc<Activity>,
    write_timeout: Duration,
    /// Set while a write waits on the peer: when it fires, the write fails.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<I> Watched<I> {
    /// Turns a write's `Pending` into an error once it has lasted the write
    /// timeout; any progress starts the clock again.
    fn judge<T>(&mut self, cx: &mut Context<'_>, out: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if out.is_ready() {
            self.stalled = None;
            return out;
        }
        let timeout = self.write_timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let out = Pin::new(&mut self.io).poll_read(cx, buf);
        if self.activity.reads_count && buf.filled().len() > before {
            self.activity.stamp();
        }
        out
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let out = Pin::new(&mut self.io).poll_write(cx, buf);
        self.judge(cx, out)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let out = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.judge(cx, out)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let out = Pin::new(&mut self.io).poll_flush(cx);
        self.judge(cx, out)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The per-connection service hyper calls: see the module docs.
#[derive(Clone)]
pub(crate) struct ConnService<S, T> {
    app: S,
    peer: PeerAddr,
    stamp: Option<T>,
    body_timeout: Duration,
    activity: Arc<Activity>,
}

impl<S, T> ConnService<S, T> {
    pub(crate) fn new(
        app: S,
        peer: PeerAddr,
        stamp: Option<T>,
        body_timeout: Duration,
        activity: Arc<Activity>,
    ) -> Self {
        Self {
            app,
            peer,
            stamp,
            body_timeout,
            activity,
        }
    }
}

/// hyper's own service trait, not tower's through `TowerToHyperService`:
/// that adapter's future holds the service and the request until it is
/// first polled, and hyper keeps a slot of that size for the whole life of
/// an HTTP/1 connection.
impl<S, T> hyper::service::Service<Request<Incoming>> for ConnService<S, T>
where
    S: super::Served,
    T: Clone + Send + Sync + 'static,
{
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = ConnFuture<Oneshot<S, Request<Body>>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(&self.activity);
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(self.peer);
        if let Some(stamp) = &self.stamp {
            parts.extensions.insert(stamp.clone());
        }
        let body = Body::new(Deadline {
            body,
            at: Instant::now() + self.body_timeout,
            sleep: None,
        });
        // `oneshot` waits for the service to be ready before calling it, as
        // tower's contract asks (a router always is; a layer may not be).
        ConnFuture {
            inner: Box::pin(self.app.clone().oneshot(Request::from_parts(parts, body))),
            guard: Some(guard),
        }
    }
}

/// The service's answer, with its body counted in flight until sent.
///
/// The service's future is boxed: hyper keeps a slot of this future's size
/// for the whole life of an HTTP/1 connection, and an idle connection or a
/// waiting stream should not pay for the few hundred bytes of a request
/// being routed.
pub(crate) struct ConnFuture<F> {
    inner: Pin<Box<F>>,
    guard: Option<InFlight>,
}

impl<F> Future for ConnFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Tracked>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let response = match ready!(this.inner.as_mut().poll(cx)) {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let guard = this.guard.take();
        Poll::Ready(Ok(response.map(|body| Tracked {
            body,
            _guard: guard,
        })))
    }
}

pin_project! {
    /// An answer's body; the request counts as in flight until hyper has
    /// sent it (or the client left) and dropped it.
    pub(crate) struct Tracked {
        #[pin]
        body: Body,
        _guard: Option<InFlight>,
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that did not arrive in full by its deadline
/// ([`super::ConnLimits::body_timeout`]).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the time allowed")]
pub struct BodyTimedOut;

pin_project! {
    /// A request body that fails once its deadline passes. The timer is
    /// made only if the body is not all there when first asked for.
    struct Deadline {
        #[pin]
        body: Incoming,
        at: Instant,
        sleep: Option<Pin<Box<Sleep>>>,
    }
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.body.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(*this.at)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
