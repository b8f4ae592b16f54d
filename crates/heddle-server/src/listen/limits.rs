//! The connection-level bounds of [`super::serve_with`] and its TLS twin.

use std::time::Duration;

/// What one client may make a listener hold, and for how long. Each field
/// has a `heddle serve` flag of the same name (`--max-connections`, …).
///
/// The defaults suit a server on a public network: a client that connects
/// and stays silent, dribbles a request head, or keeps an idle connection
/// open is cut off within seconds, and no one address can take every
/// connection slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once. At the cap the listener stops accepting
    /// until one closes; new clients wait in the kernel's backlog, and the
    /// clients being served are not affected. (The process needs a file
    /// descriptor limit above it.)
    pub max_connections: usize,
    /// Connections open at once from one IP address; past it a new one is
    /// closed at once. Behind a proxy every client shares the proxy's
    /// address: raise this to [`Self::max_connections`] there.
    pub max_connections_per_ip: usize,
    /// How long a new plain-TCP connection may stay silent before its first
    /// byte. (Over TLS the handshake timeout, then the idle timeout, stand
    /// for it.)
    pub first_byte_timeout: Duration,
    /// How long a request head (request line and header fields) may take
    /// over HTTP/1.1, counted from when the connection is ready for a
    /// request: its first byte on a new connection, the end of the last
    /// answer on a kept-alive one (hyper's header timeout).
    pub header_timeout: Duration,
    /// How long a connection with no request in flight that receives
    /// nothing is kept open. Keep it below [`Self::header_timeout`], which
    /// also runs while an HTTP/1.1 connection waits between requests.
    /// Over HTTP/2 only requests count: a client sending PINGs or other
    /// frames and no request is closed (GOAWAY) after this long.
    pub idle_timeout: Duration,
    /// How long a request body may take to arrive, in all, from the moment
    /// its head did. A body still arriving then fails, and the route
    /// answers with an error.
    pub body_timeout: Duration,
    /// How long a client gets to finish the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// How long a write may wait on a client that takes nothing; then the
    /// connection is closed (a stream on it detaches, its task goes on).
    pub write_timeout: Duration,
    /// The kernel send buffer of each connection, fixed (`None`: the
    /// kernel's own, which grows to megabytes for a client that stops
    /// reading).
    pub send_buffer_bytes: Option<usize>,
    /// Largest request head, in bytes (HTTP/1.1: request line and fields,
    /// answered with 431 past it; HTTP/2: the decoded header list). At
    /// least 8192.
    pub max_head_bytes: usize,
    /// Most header fields in one HTTP/1.1 request (431 past it).
    pub max_headers: usize,
    /// How long open connections get to finish after the shutdown signal.
    pub drain_timeout: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections: 16_384,
            max_connections_per_ip: 4_096,
            first_byte_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            tls_handshake_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            send_buffer_bytes: Some(256 << 10),
            max_head_bytes: 64 << 10,
            max_headers: 100,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl ConnLimits {
    /// `max_head_bytes` for HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub(crate) fn max_head_bytes_u32(&self) -> u32 {
        u32::try_from(self.max_head_bytes).unwrap_or(u32::MAX)
    }

    /// `max_head_bytes` raised to the least hyper takes (8 KiB), the
    /// connection counts to at least one, and every timeout to at most a
    /// day (deadlines are now + timeout), so that no setting panics.
    #[must_use]
    pub(crate) fn sane(mut self) -> Self {
        const DAY: Duration = Duration::from_secs(24 * 3600);
        for t in [
            &mut self.first_byte_timeout,
            &mut self.header_timeout,
            &mut self.idle_timeout,
            &mut self.body_timeout,
            &mut self.tls_handshake_timeout,
            &mut self.write_timeout,
            &mut self.drain_timeout,
        ] {
            *t = (*t).min(DAY);
        }
        self.max_head_bytes = self.max_head_bytes.max(8192);
        self.max_connections = self.max_connections.max(1);
        self.max_connections_per_ip = self.max_connections_per_ip.max(1);
        self
    }
}
