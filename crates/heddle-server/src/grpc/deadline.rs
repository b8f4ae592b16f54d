//! The caller's deadline (`grpc-timeout`), honoured by every RPC: a unary
//! call past it answers `DEADLINE_EXCEEDED` ([`super::unary`]), and a server
//! stream past it ends with that status, the task going on without it (as
//! when any stream's client goes away).

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures::Stream;
use http::HeaderMap;
use tokio::time::{Instant, Sleep};
use tonic::{Status, metadata::MetadataMap};

/// The `grpc-timeout` header (or metadata) key.
const KEY: &str = "grpc-timeout";

/// The status a call past its deadline gets.
pub(crate) fn exceeded() -> Status {
    Status::deadline_exceeded("the call's grpc-timeout passed")
}

/// The client's timeout from a request's headers.
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Duration> {
    parse(headers.get(KEY)?.to_str().ok()?)
}

/// When a call whose metadata is `meta`, started now, must be done.
pub(crate) fn from_metadata(meta: &MetadataMap) -> Option<Instant> {
    let timeout = parse(meta.get(KEY)?.to_str().ok()?)?;
    Instant::now().checked_add(timeout)
}

/// A `grpc-timeout` value: at most eight digits and a unit, `H`, `M`, `S`,
/// `m`, `u` or `n` (gRPC over HTTP/2). A malformed value is ignored, as the
/// protocol says.
fn parse(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

pin_project_lite::pin_project! {
    /// A server stream that ends with `DEADLINE_EXCEEDED` once its deadline
    /// passes, if it has not ended before.
    pub(crate) struct Bounded<S> {
        #[pin]
        inner: S,
        #[pin]
        deadline: Sleep,
        done: bool,
    }
}

impl<S> Bounded<S> {
    pub(crate) fn new(inner: S, deadline: Instant) -> Self {
        Self {
            inner,
            deadline: tokio::time::sleep_until(deadline),
            done: false,
        }
    }
}

impl<S, T> Stream for Bounded<S>
where
    S: Stream<Item = Result<T, Status>>,
{
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        // What is ready before the deadline still goes out.
        if let Poll::Ready(item) = this.inner.poll_next(cx) {
            *this.done = item.is_none();
            return Poll::Ready(item);
        }
        match this.deadline.poll(cx) {
            Poll::Ready(()) => {
                *this.done = true;
                Poll::Ready(Some(Err(exceeded())))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    #[test]
    fn timeouts_are_read_as_the_protocol_writes_them() {
        assert_eq!(parse("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "5", "123456789S", "5s", "-5S", "5 S", "1.5S"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_past_its_deadline_ends_with_deadline_exceeded() {
        let ticks = futures::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Ok::<_, Status>(n), n + 1))
        });
        let bounded = Bounded::new(ticks, Instant::now() + Duration::from_millis(350));
        let items: Vec<_> = bounded.collect().await;
        assert_eq!(items.len(), 4, "three ticks, then the status");
        assert!(items[..3].iter().all(Result::is_ok));
        let last = items[3].as_ref().expect_err("the last item is the status");
        assert_eq!(last.code(), tonic::Code::DeadlineExceeded);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_ends_in_time_ends_as_it_would() {
        let items = futures::stream::iter([Ok::<_, Status>(1), Ok(2)]);
        let bounded = Bounded::new(items, Instant::now() + Duration::from_secs(1));
        let got: Vec<_> = bounded.collect().await;
        assert_eq!(got.len(), 2);
    }
}
