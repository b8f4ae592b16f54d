//! Response heads: how an answer's body is delimited, and the head's bytes.

use std::{cell::RefCell, time::SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode, Version, header};

/// The end of a chunked body: the last chunk and an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// How an answer's body goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body bytes at all (HEAD, 1xx, 204, 304).
    NoBody,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked` (length unknown, HTTP/1.1).
    Chunked,
    /// Until the connection closes (length unknown, HTTP/1.0).
    UntilClose,
}

/// The framing decided for an answer and whether the connection stays open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// How the body is delimited.
    pub framing: ResponseFraming,
    /// Whether another request may follow on the connection.
    pub keep_alive: bool,
}

impl ResponseHead {
    /// Decides the framing of an answer to a request of `version` (`head`:
    /// the request was HEAD) and appends the head's bytes to `out`.
    /// `body_len` is the body's length when known up front. The framing
    /// headers are the server's to set: a `Transfer-Encoding` the
    /// application set is dropped (and `chunked` set when the length is
    /// unknown); its `Content-Length` is replaced by `body_len` when that is
    /// known, used when it is a single well-formed value and the length is
    /// not known otherwise, and dropped when the answer is chunked or has no
    /// body by its status. HEAD and 304 answers keep the application's
    /// `Content-Length` (it describes the body a GET would get). A `Date` is
    /// added when missing.
    pub fn encode(
        out: &mut Vec<u8>,
        version: Version,
        head: bool,
        keep_alive: bool,
        status: StatusCode,
        headers: &mut HeaderMap,
        body_len: Option<u64>,
    ) -> Self {
        let http11 = version == Version::HTTP_11;
        let mut keep_alive = keep_alive && !closes(headers);
        headers.remove(header::TRANSFER_ENCODING);
        let framing = if status.is_informational() || status == StatusCode::NO_CONTENT {
            headers.remove(header::CONTENT_LENGTH);
            ResponseFraming::NoBody
        } else if head || status == StatusCode::NOT_MODIFIED {
            ResponseFraming::NoBody
        } else if let Some(n) = body_len {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            ResponseFraming::Length(n)
        } else if let Some(n) = declared_length(headers) {
            ResponseFraming::Length(n)
        } else if http11 {
            // Never both (RFC 9112 §6.2): a reader could frame on either.
            headers.remove(header::CONTENT_LENGTH);
            headers.insert(
                header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
            ResponseFraming::Chunked
        } else {
            headers.remove(header::CONTENT_LENGTH);
            keep_alive = false;
            ResponseFraming::UntilClose
        };
        if !keep_alive {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        } else if !http11 {
            headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        }

        out.extend_from_slice(if http11 { b"HTTP/1.1 " } else { b"HTTP/1.0 " });
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
        if !headers.contains_key(header::DATE) {
            out.extend_from_slice(b"date: ");
            with_date(|d| out.extend_from_slice(d));
            out.extend_from_slice(b"\r\n");
        }
        for (name, value) in headers.iter() {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Self {
            framing,
            keep_alive,
        }
    }
}

/// Appends the size line of a chunk of `len` bytes.
pub fn encode_chunk_header(out: &mut Vec<u8>, len: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(HEX[(len >> (i * 4)) & 0xf]);
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether the application's `Connection` header asks to close.
fn closes(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| crate::request::trim(t).eq_ignore_ascii_case(b"close"))
    })
}

/// A single, well-formed `Content-Length` the application set.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    crate::request::decimal(first.as_bytes())
}

/// Runs `f` on the current `Date` value (RFC 9110 §5.6.7), formatted at most
/// once a second per thread.
fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    thread_local! {
        static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
    }
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache.0 != secs {
            let text = httpdate::fmt_http_date(now);
            if text.len() == 29 {
                cache.1.copy_from_slice(text.as_bytes());
                cache.0 = secs;
            }
        }
        f(&cache.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(
        version: Version,
        head: bool,
        status: StatusCode,
        headers: &[(&'static str, &'static str)],
        len: Option<u64>,
    ) -> (String, ResponseHead) {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(*k, HeaderValue::from_static(v));
        }
        let mut out = Vec::new();
        let h = ResponseHead::encode(&mut out, version, head, true, status, &mut map, len);
        (String::from_utf8(out).expect("ascii"), h)
    }

    #[test]
    fn a_known_length_becomes_content_length() {
        let (text, h) = encode(
            Version::HTTP_11,
            false,
            StatusCode::OK,
            &[("content-type", "application/json")],
            Some(42),
        );
        assert!(text.starts_with("HTTP/1.1 200 OK\r\ndate: "), "{text}");
        assert!(text.contains("\r\ncontent-type: application/json\r\ncontent-length: 42\r\n\r\n"));
        assert_eq!(h.framing, ResponseFraming::Length(42));
        assert!(h.keep_alive);
        assert!(!text.contains("connection"));
    }

    #[test]
    fn an_unknown_length_is_chunked_on_11_and_closes_on_10() {
        let (text, h) = encode(
            Version::HTTP_11,
            false,
            StatusCode::OK,
            &[("transfer-encoding", "gzip")],
            None,
        );
        assert!(text.contains("transfer-encoding: chunked\r\n"));
        assert!(!text.contains("gzip"));
        assert_eq!(h.framing, ResponseFraming::Chunked);
        let (text, h) = encode(Version::HTTP_10, false, StatusCode::OK, &[], None);
        assert!(text.starts_with("HTTP/1.0 200 OK\r\n"));
        assert!(text.contains("connection: close\r\n"));
        assert_eq!(h.framing, ResponseFraming::UntilClose);
        assert!(!h.keep_alive);
    }

    #[test]
    fn bodiless_answers_have_no_framing() {
        let (text, h) = encode(
            Version::HTTP_11,
            false,
            StatusCode::NO_CONTENT,
            &[("content-length", "0")],
            Some(0),
        );
        assert!(!text.contains("content-length"));
        assert_eq!(h.framing, ResponseFraming::NoBody);
        let (text, h) = encode(
            Version::HTTP_11,
            true,
            StatusCode::OK,
            &[("content-length", "7")],
            Some(0),
        );
        assert!(text.contains("content-length: 7\r\n"));
        assert_eq!(h.framing, ResponseFraming::NoBody);
    }

    #[test]
    fn the_application_can_close_and_10_clients_can_keep_alive() {
        let (text, h) = encode(
            Version::HTTP_11,
            false,
            StatusCode::OK,
            &[("connection", "Close")],
            Some(1),
        );
        assert!(!h.keep_alive);
        assert!(text.contains("connection: close\r\n"));
        let (text, h) = encode(Version::HTTP_10, false, StatusCode::OK, &[], Some(1));
        assert!(h.keep_alive);
        assert!(text.contains("connection: keep-alive\r\n"));
        let (_, h) = encode(
            Version::HTTP_11,
            false,
            StatusCode::OK,
            &[("content-length", "5")],
            None,
        );
        assert_eq!(h.framing, ResponseFraming::Length(5));
    }

    #[test]
    fn a_length_the_application_got_wrong_never_goes_out_beside_chunked() {
        for bad in [
            &[("content-length", "+5")][..],
            &[("content-length", "5"), ("content-length", "5")],
            &[("content-length", "five")],
        ] {
            let (text, h) = encode(Version::HTTP_11, false, StatusCode::OK, bad, None);
            assert_eq!(h.framing, ResponseFraming::Chunked);
            assert!(!text.contains("content-length"), "{text}");
        }
    }

    #[test]
    fn chunk_sizes_are_lowercase_hex() {
        for (n, want) in [
            (0, "0\r\n"),
            (1, "1\r\n"),
            (255, "ff\r\n"),
            (4096, "1000\r\n"),
        ] {
            let mut out = Vec::new();
            encode_chunk_header(&mut out, n);
            assert_eq!(out, want.as_bytes());
        }
    }

    #[test]
    fn the_date_is_an_imf_fixdate() {
        let d = with_date(<[u8]>::to_vec);
        let text = String::from_utf8(d).expect("ascii");
        assert!(httpdate::parse_http_date(&text).is_ok(), "{text}");
    }
}
