//! Write coalescing for HTTP/2 connections.
//!
//! h2 writes its frames into a 16 KB buffer and flushes it with one write,
//! except that on a transport that says it has vectored writes, a DATA
//! payload of 256 bytes or more is not copied but chained, and nothing else
//! is buffered until that frame is on the wire. A unary gRPC answer is one
//! such DATA frame, so under load every answer took a `writev` of its own:
//! 64 concurrent calls on one connection, 64 system calls, each waking the
//! peer.
//!
//! [`Coalesce`] says it has no vectored writes, so h2 copies payloads under
//! 1 KB into its buffer and answers leave many to a write; and it buffers
//! what h2 writes until h2 flushes, so that a larger, chained payload leaves
//! in the same write as the frames before it instead of in a second one.
//! (h2 still flushes after each chained payload, so answers of 1 KB or more
//! keep a write each, now with a copy.) A connection holds at most 64 KiB
//! here besides h2's own 16 KB, and no more than 32 KiB once drained.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll, ready},
};

use hyper::rt::{Read, ReadBufCursor, Write};

/// Writes smaller than this are gathered until a flush; a larger one, with
/// nothing gathered before it, goes straight to the transport.
const GATHER: usize = 64 * 1024;

/// A buffer that grew past this is let go once drained, so that a
/// connection idle after a burst does not keep the burst's memory. Above
/// one full DATA frame (16 KiB and its header), so that a stream of large
/// frames reuses one buffer.
const KEEP: usize = 32 * 1024;

/// A transport whose writes are held until a flush (see the module docs).
#[derive(Debug)]
pub(crate) struct Coalesce<I> {
    io: I,
    /// Bytes taken from `poll_write` and not yet on the transport.
    buf: Vec<u8>,
    /// How much of `buf` is already written.
    written: usize,
}

impl<I> Coalesce<I> {
    pub(crate) fn new(io: I) -> Self {
        Self {
            io,
            buf: Vec::new(),
            written: 0,
        }
    }
}

impl<I: Write + Unpin> Coalesce<I> {
    /// Writes out everything gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        if self.buf.capacity() > KEEP {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<I: Read + Unpin> Read for Coalesce<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: Write + Unpin> Write for Coalesce<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.buf.len() + data.len() > GATHER {
            ready!(this.poll_drain(cx))?;
        }
        if data.len() >= GATHER {
            return Pin::new(&mut this.io).poll_write(cx, data);
        }
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    /// The point of the wrapper: h2 copies small payloads only when this is false.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    /// A writer that takes at most `chunk` bytes a call, counting the calls.
    struct Trickle {
        out: Vec<u8>,
        chunk: usize,
        writes: usize,
        pending_first: bool,
    }

    impl Write for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            if std::mem::take(&mut self.pending_first) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = data.len().min(self.chunk);
            self.out.extend_from_slice(&data[..n]);
            self.writes += 1;
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    async fn write(w: &mut Coalesce<Trickle>, data: &[u8]) -> usize {
        std::future::poll_fn(|cx| Pin::new(&mut *w).poll_write(cx, data))
            .await
            .expect("write")
    }

    async fn flush(w: &mut Coalesce<Trickle>) {
        std::future::poll_fn(|cx| Pin::new(&mut *w).poll_flush(cx))
            .await
            .expect("flush");
    }

    fn trickle(chunk: usize) -> Coalesce<Trickle> {
        Coalesce::new(Trickle {
            out: Vec::new(),
            chunk,
            writes: 0,
            pending_first: true,
        })
    }

    #[tokio::test]
    async fn small_writes_wait_for_the_flush_and_leave_together_in_order() {
        let mut w = trickle(usize::MAX);
        for part in [&b"one "[..], b"two ", b"three"] {
            assert_eq!(write(&mut w, part).await, part.len());
        }
        assert_eq!(w.io.writes, 0, "nothing written before the flush");
        flush(&mut w).await;
        assert_eq!(
            (w.io.out.as_slice(), w.io.writes),
            (&b"one two three"[..], 1)
        );
        // The buffer is reused, and a flush with nothing gathered writes nothing.
        flush(&mut w).await;
        assert_eq!(w.io.writes, 1);
        write(&mut w, b"four").await;
        flush(&mut w).await;
        assert_eq!(
            (w.io.out.as_slice(), w.io.writes),
            (&b"one two threefour"[..], 2)
        );
    }

    #[tokio::test]
    async fn short_writes_and_pending_transports_lose_nothing() {
        let mut w = trickle(3);
        let data: Vec<u8> = (0..=255).collect();
        write(&mut w, &data).await;
        flush(&mut w).await;
        assert_eq!(w.io.out, data);
        assert_eq!(w.io.writes, data.len().div_ceil(3));
    }

    #[tokio::test]
    async fn a_large_write_drains_what_came_before_then_goes_straight_through() {
        let mut w = trickle(usize::MAX);
        write(&mut w, b"head").await;
        let big = vec![7u8; GATHER];
        assert_eq!(write(&mut w, &big).await, GATHER);
        assert_eq!(
            w.io.writes, 2,
            "the gathered bytes first, then the large write"
        );
        assert_eq!(&w.io.out[..4], b"head");
        assert_eq!(w.io.out.len(), 4 + GATHER);
        // Filling past the limit drains first, so the order holds.
        let almost = vec![1u8; GATHER - 10];
        write(&mut w, &almost).await;
        write(&mut w, &[2u8; 20]).await;
        flush(&mut w).await;
        let tail = &w.io.out[4 + GATHER..];
        assert_eq!(tail.len(), GATHER + 10);
        assert!(tail[..GATHER - 10].iter().all(|&b| b == 1));
        assert!(tail[GATHER - 10..].iter().all(|&b| b == 2));
        assert!(w.buf.capacity() <= KEEP, "a burst's buffer is not kept");
    }

    #[tokio::test]
    async fn reads_and_shutdown_reach_the_transport() {
        let (a, mut b) = duplex(64);
        let mut w = Coalesce::new(TokioIo::new(a));
        b.write_all(b"ping").await.expect("peer writes");
        let mut got = [0u8; 4];
        let mut filled = 0;
        while filled < 4 {
            let mut buf = hyper::rt::ReadBuf::new(&mut got[filled..]);
            std::future::poll_fn(|cx| Pin::new(&mut w).poll_read(cx, buf.unfilled()))
                .await
                .expect("read");
            filled += buf.filled().len();
        }
        assert_eq!(&got, b"ping");
        std::future::poll_fn(|cx| Pin::new(&mut w).poll_write(cx, b"pong"))
            .await
            .expect("write");
        std::future::poll_fn(|cx| Pin::new(&mut w).poll_shutdown(cx))
            .await
            .expect("shutdown flushes first");
        let mut back = Vec::new();
        b.read_to_end(&mut back).await.expect("peer reads to EOF");
        assert_eq!(back, b"pong");
        assert!(!w.is_write_vectored());
    }
}
