//! Request heads: bytes to [`http::request::Parts`] and a body framing.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version};

/// The most header fields a request may carry (hyper's default too).
pub const MAX_HEADERS: usize = 100;

/// Bounds on a request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLimits {
    /// The request line and header fields together, terminating blank line
    /// included.
    pub max_head_bytes: usize,
    /// Header fields, at most [`MAX_HEADERS`].
    pub max_headers: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: 64 << 10,
            max_headers: MAX_HEADERS,
        }
    }
}

/// How the request's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body: neither `Content-Length` nor `Transfer-Encoding`.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub struct RequestHead {
    /// Method, target, version and header fields; extensions empty.
    pub parts: http::request::Parts,
    /// Where the body ends.
    pub body: BodyFraming,
    /// Whether the client lets the connection carry another request after
    /// this one (`Connection: close`, or HTTP/1.0 without `keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1: the client waits for an interim
    /// `100 Continue` before it sends the body.
    pub expect_continue: bool,
}

/// Why a request head was refused. Each maps to the answer the connection
/// gives before closing ([`HeadError::status`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// The head outgrew [`HeadLimits::max_head_bytes`].
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    /// More header fields than [`HeadLimits::max_headers`].
    #[error("more than {0} header fields")]
    TooManyHeaders(usize),
    /// Not an HTTP/1.0 or HTTP/1.1 request.
    #[error("unsupported HTTP version")]
    Version,
    /// A transfer coding other than `chunked` alone.
    #[error("unsupported transfer coding")]
    TransferCoding,
    /// Anything else that is not a well-formed request head.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
}

impl HeadError {
    /// The status of the answer to a request refused for this reason.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooLarge(_) | Self::TooManyHeaders(_) => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            Self::Version => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            Self::TransferCoding => StatusCode::NOT_IMPLEMENTED,
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Where each piece of a head lies in the buffer, so that the pieces can
/// become slices of one frozen [`Bytes`] once `httparse`'s borrow ends.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn of(base: &[u8], part: &[u8]) -> Self {
        // `part` is a sub-slice of `base` (httparse hands back slices of its
        // input), so the address difference is its offset.
        let start = part.as_ptr() as usize - base.as_ptr() as usize;
        Self {
            start,
            end: start + part.len(),
        }
    }
}

/// Parses the request head at the start of `buf`. `Ok(None)`: the head is
/// not complete yet (read more and call again). `Ok(Some(_))`: the head's
/// bytes have been taken off `buf`, which now starts with the body (or the
/// next request). Header values and the target share one allocation with
/// no copies.
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &HeadLimits,
) -> Result<Option<RequestHead>, HeadError> {
    let max_headers = limits.max_headers.min(MAX_HEADERS);
    // Uninitialised: zeroing 100 fields a request cost more than parsing.
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let status = req
        .parse_with_uninit_headers(buf, &mut fields[..max_headers])
        .map_err(|e| match e {
            httparse::Error::TooManyHeaders => HeadError::TooManyHeaders(max_headers),
            httparse::Error::Version => HeadError::Version,
            httparse::Error::Token => HeadError::Malformed("invalid method or field name"),
            httparse::Error::HeaderName => HeadError::Malformed("invalid header field name"),
            httparse::Error::HeaderValue => HeadError::Malformed("invalid header field value"),
            httparse::Error::NewLine => HeadError::Malformed("invalid line ending"),
            httparse::Error::Status => HeadError::Malformed("invalid request line"),
        })?;
    let head_len = match status {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => {
            return if buf.len() >= limits.max_head_bytes {
                Err(HeadError::TooLarge(limits.max_head_bytes))
            } else {
                Ok(None)
            };
        }
    };
    if head_len > limits.max_head_bytes {
        return Err(HeadError::TooLarge(limits.max_head_bytes));
    }
    let method = req.method.ok_or(HeadError::Malformed("no method"))?;
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| HeadError::Malformed("invalid method"))?;
    let target = Span::of(
        buf,
        req.path
            .ok_or(HeadError::Malformed("no target"))?
            .as_bytes(),
    );
    let version = match req.version {
        Some(0) => Version::HTTP_10,
        Some(1) => Version::HTTP_11,
        _ => return Err(HeadError::Version),
    };
    let spans: Vec<(Span, Span)> = req
        .headers
        .iter()
        .map(|field| {
            (
                Span::of(buf, field.name.as_bytes()),
                Span::of(buf, field.value),
            )
        })
        .collect();
    let head = buf.split_to(head_len).freeze();

    let uri = Uri::from_maybe_shared(head.slice(target.start..target.end))
        .map_err(|_| HeadError::Malformed("invalid request target"))?;
    let mut headers = HeaderMap::with_capacity(spans.len());
    let mut framing = Framing::default();
    for (name, value) in &spans {
        let name = HeaderName::from_bytes(&head[name.start..name.end])
            .map_err(|_| HeadError::Malformed("invalid header field name"))?;
        let value = head.slice(value.start..value.end);
        framing.note(&name, &value)?;
        let value = HeaderValue::from_maybe_shared(value)
            .map_err(|_| HeadError::Malformed("invalid header field value"))?;
        headers.append(name, value);
    }
    let (body, keep_alive, expect_continue) = framing.decide(version)?;

    let (mut parts, ()) = Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = version;
    parts.headers = headers;
    Ok(Some(RequestHead {
        parts,
        body,
        keep_alive,
        expect_continue,
    }))
}

/// What the framing-relevant fields said, gathered field by field.
#[derive(Default)]
struct Framing {
    length: Option<u64>,
    chunked: bool,
    transfer_encoding: bool,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
}

impl Framing {
    fn note(&mut self, name: &HeaderName, value: &Bytes) -> Result<(), HeadError> {
        if name == http::header::CONTENT_LENGTH {
            for item in value.split(|&b| b == b',') {
                let n =
                    decimal(trim(item)).ok_or(HeadError::Malformed("invalid Content-Length"))?;
                if self.length.is_some_and(|m| m != n) {
                    return Err(HeadError::Malformed("differing Content-Length values"));
                }
                self.length = Some(n);
            }
        } else if name == http::header::TRANSFER_ENCODING {
            self.transfer_encoding = true;
            for coding in value.split(|&b| b == b',').map(trim) {
                if coding.is_empty() {
                    continue;
                }
                // `chunked` must come last, once; any other coding (or a
                // coding after `chunked`) is one this server cannot undo.
                if self.chunked {
                    return Err(HeadError::Malformed("a transfer coding after chunked"));
                }
                if !coding.eq_ignore_ascii_case(b"chunked") {
                    return Err(HeadError::TransferCoding);
                }
                self.chunked = true;
            }
        } else if name == http::header::CONNECTION {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    self.keep_alive = true;
                }
            }
        } else if name == http::header::EXPECT && trim(value).eq_ignore_ascii_case(b"100-continue")
        {
            self.expect_continue = true;
        }
        Ok(())
    }

    fn decide(self, version: Version) -> Result<(BodyFraming, bool, bool), HeadError> {
        let http11 = version == Version::HTTP_11;
        let body = match (self.transfer_encoding, self.length) {
            // RFC 9112 §6.1: a server MAY refuse both; refusing closes the
            // gap a proxy reading the other one would open.
            (true, Some(_)) => {
                return Err(HeadError::Malformed(
                    "both Content-Length and Transfer-Encoding",
                ));
            }
            (true, None) if !http11 => {
                return Err(HeadError::Malformed("Transfer-Encoding on HTTP/1.0"));
            }
            (true, None) if !self.chunked => {
                return Err(HeadError::Malformed("Transfer-Encoding without a coding"));
            }
            (true, None) => BodyFraming::Chunked,
            (false, Some(0)) | (false, None) => BodyFraming::Empty,
            (false, Some(n)) => BodyFraming::Length(n),
        };
        let keep_alive = !self.close && (http11 || self.keep_alive);
        let expect_continue = http11 && self.expect_continue && body != BodyFraming::Empty;
        Ok((body, keep_alive, expect_continue))
    }
}

/// A `Content-Length` value: decimal digits only (no sign, no spaces
/// inside), fitting a `u64`.
pub(crate) fn decimal(item: &[u8]) -> Option<u64> {
    if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
        return None;
    }
    item.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// `s` without leading and trailing spaces and tabs (RFC 9110's OWS).
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = s.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(a), Some(b)) => &s[a..=b],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<RequestHead>, HeadError> {
        let mut buf = BytesMut::from(text);
        parse_request(&mut buf, &HeadLimits::default())
    }

    fn head(text: &str) -> RequestHead {
        parse(text).expect("valid").expect("complete")
    }

    #[test]
    fn a_post_with_a_length_leaves_its_body_in_the_buffer() {
        let mut buf = BytesMut::from(
            "POST /a2a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}GET",
        );
        let h = parse_request(&mut buf, &HeadLimits::default())
            .expect("valid")
            .expect("complete");
        assert_eq!(h.parts.method, Method::POST);
        assert_eq!(h.parts.uri.path(), "/a2a");
        assert_eq!(h.parts.uri.query(), Some("x=1"));
        assert_eq!(h.parts.version, Version::HTTP_11);
        assert_eq!(h.parts.headers["content-type"], "application/json");
        assert_eq!(h.body, BodyFraming::Length(2));
        assert!(h.keep_alive);
        assert!(!h.expect_continue);
        assert_eq!(&buf[..], b"{}GET");
    }

    #[test]
    fn an_incomplete_head_asks_for_more_and_takes_nothing() {
        let mut buf = BytesMut::from("GET / HTTP/1.1\r\nHost: h\r\n");
        assert!(matches!(
            parse_request(&mut buf, &HeadLimits::default()),
            Ok(None)
        ));
        assert_eq!(buf.len(), 25);
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_tokens() {
        assert!(head("GET / HTTP/1.1\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
    }

    #[test]
    fn chunked_alone_is_the_one_transfer_coding_accepted() {
        let h = head("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(h.body, BodyFraming::Chunked);
        assert_eq!(
            parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
                .expect_err("refused"),
            HeadError::TransferCoding
        );
        assert_eq!(
            parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn ambiguous_lengths_are_refused() {
        for text in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 0x3\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{text}");
        }
        // The same length twice is one length.
        let h = head("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3, 3\r\n\r\n");
        assert_eq!(h.body, BodyFraming::Length(3));
        assert_eq!(
            head("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").body,
            BodyFraming::Empty
        );
    }

    #[test]
    fn expect_continue_counts_on_http11_with_a_body_only() {
        let with = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n";
        assert!(head(with).expect_continue);
        assert!(!head("POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expect_continue);
        assert!(
            !head("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
                .expect_continue
        );
    }

    #[test]
    fn oversized_heads_and_too_many_fields_get_431() {
        let limits = HeadLimits {
            max_head_bytes: 64,
            max_headers: 2,
        };
        let mut long = BytesMut::from(format!("GET /{} HTTP/1.1\r\n", "a".repeat(80)).as_str());
        assert_eq!(
            parse_request(&mut long, &limits).expect_err("refused"),
            HeadError::TooLarge(64)
        );
        let mut many = BytesMut::from("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n");
        let e = parse_request(&mut many, &limits).expect_err("refused");
        assert_eq!(e, HeadError::TooManyHeaders(2));
        assert_eq!(e.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn garbage_and_other_versions_are_refused_with_the_right_status() {
        assert_eq!(
            parse("GET / HTTP/2.0\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::HTTP_VERSION_NOT_SUPPORTED
        );
        assert_eq!(
            parse("G(T / HTTP/1.1\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse("GET / HTTP/1.1\r\nbad header\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse("GET / HTTP/1.1\r\nx: a\x01b\r\n\r\n")
                .expect_err("refused")
                .status(),
            StatusCode::BAD_REQUEST
        );
    }

    proptest::proptest! {
        /// Whatever the bytes, parsing returns; and a head it accepts was
        /// taken off the front of the buffer exactly.
        #[test]
        fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut buf = BytesMut::from(&bytes[..]);
            if let Ok(Some(_)) = parse_request(&mut buf, &HeadLimits::default()) {
                proptest::prop_assert!(bytes.ends_with(&buf));
            }
        }
    }
}
