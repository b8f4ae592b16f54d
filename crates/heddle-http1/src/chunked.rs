//! `Transfer-Encoding: chunked` request bodies (RFC 9112 §7.1).
//!
//! Lines must end in CRLF: a bare LF inside chunk framing is refused, not
//! tolerated, because a front proxy that reads it differently would see a
//! different body end. (Request heads accept a bare LF as a line end, as
//! httparse and hyper do and RFC 9112 §2.2 allows: there it moves no
//! boundary a proxy could disagree on, since the head ends at the first
//! empty line either way.)

use bytes::{Buf, BytesMut};

/// The longest chunk-size line (size, extensions, CRLF) accepted.
const MAX_LINE: usize = 4096;
/// The most trailer bytes accepted (trailers are read and dropped).
const MAX_TRAILERS: usize = 16 << 10;

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The decoded body would pass the limit it was decoded under.
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    /// A chunk-size line that is not hex digits and extensions, too long,
    /// or not ended by CRLF.
    #[error("invalid chunk size line")]
    InvalidSize,
    /// Chunk data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    MissingCrlf,
    /// Trailer lines past the limit or not ended by CRLF.
    #[error("invalid or oversized trailer section")]
    Trailers,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers(usize),
    Done,
}

/// Decodes a chunked body incrementally: feed it what has been read, as
/// often as bytes arrive, until it says the body is complete.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
    max_body: usize,
}

impl ChunkedDecoder {
    /// A decoder that refuses bodies over `max_body` decoded bytes.
    pub fn new(max_body: usize) -> Self {
        Self {
            state: State::Size,
            max_body,
        }
    }

    /// Whether the last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Takes what it can from the front of `input`, appending chunk data to
    /// `body`. Returns `Ok(true)` once the body is complete (what follows it
    /// stays in `input`), `Ok(false)` when it needs more bytes.
    pub fn decode(
        &mut self,
        input: &mut BytesMut,
        body: &mut BytesMut,
    ) -> Result<bool, ChunkError> {
        loop {
            match self.state {
                State::Done => return Ok(true),
                State::Size => {
                    let Some(line) =
                        take_line(input, MAX_LINE).map_err(|()| ChunkError::InvalidSize)?
                    else {
                        return Ok(false);
                    };
                    let size = parse_size(&line)?;
                    if size > (self.max_body - body.len()) as u64 {
                        return Err(ChunkError::TooLarge(self.max_body));
                    }
                    self.state = if size == 0 {
                        State::Trailers(0)
                    } else {
                        State::Data(size)
                    };
                }
                State::Data(left) => {
                    if input.is_empty() {
                        return Ok(false);
                    }
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    body.extend_from_slice(&input[..n]);
                    input.advance(n);
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                }
                State::DataEnd => {
                    if input.len() < 2 {
                        // A lone byte can already be told wrong.
                        if input.first().is_some_and(|&b| b != b'\r') {
                            return Err(ChunkError::MissingCrlf);
                        }
                        return Ok(false);
                    }
                    if &input[..2] != b"\r\n" {
                        return Err(ChunkError::MissingCrlf);
                    }
                    input.advance(2);
                    self.state = State::Size;
                }
                State::Trailers(seen) => {
                    let room = MAX_TRAILERS - seen;
                    let Some(line) = take_line(input, room).map_err(|()| ChunkError::Trailers)?
                    else {
                        return Ok(false);
                    };
                    // Dropped, but not unchecked: no control bytes.
                    let text = &line[..line.len() - 2];
                    if text.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f) {
                        return Err(ChunkError::Trailers);
                    }
                    self.state = if line.len() == 2 {
                        State::Done
                    } else {
                        State::Trailers(seen + line.len())
                    };
                }
            }
        }
    }
}

/// The next CRLF-ended line off the front of `input` (CRLF included), or
/// `None` if it has not all arrived. Errors on a bare LF or a line longer
/// than `max`.
fn take_line(input: &mut BytesMut, max: usize) -> Result<Option<BytesMut>, ()> {
    match input.iter().take(max).position(|&b| b == b'\n') {
        Some(i) if i == 0 || input[i - 1] != b'\r' => Err(()),
        Some(i) => Ok(Some(input.split_to(i + 1))),
        None if input.len() >= max => Err(()),
        None => Ok(None),
    }
}

/// A chunk-size line: hex digits, then optionally whitespace and
/// `;`-extensions (ignored), then CRLF.
fn parse_size(line: &[u8]) -> Result<u64, ChunkError> {
    let line = &line[..line.len() - 2];
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    // Leading zeros do not count toward the 16 digits a u64 holds.
    let zeros = line[..digits].iter().take_while(|&&b| b == b'0').count();
    if digits == 0 || digits - zeros > 16 {
        return Err(ChunkError::InvalidSize);
    }
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count()..];
    if !(rest.is_empty() || rest[0] == b';')
        || rest.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f)
    {
        return Err(ChunkError::InvalidSize);
    }
    let mut n = 0u64;
    for &d in &line[..digits] {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        n = (n << 4) | u64::from(v);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(wire: &[u8], max: usize) -> Result<(Vec<u8>, Vec<u8>), ChunkError> {
        let mut d = ChunkedDecoder::new(max);
        let mut input = BytesMut::from(wire);
        let mut body = BytesMut::new();
        assert!(d.decode(&mut input, &mut body)?, "incomplete");
        Ok((body.to_vec(), input.to_vec()))
    }

    #[test]
    fn chunks_extensions_and_trailers_decode_to_the_body() {
        let wire = b"5\r\nhello\r\n1;name=val\r\n \r\nA \r\n0123456789\r\n0\r\nx-t: 1\r\n\r\nNEXT";
        let (body, rest) = decode_all(wire, 100).expect("valid");
        assert_eq!(body, b"hello 0123456789");
        assert_eq!(rest, b"NEXT");
    }

    #[test]
    fn a_body_fed_one_byte_at_a_time_decodes_the_same() {
        let wire = b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n";
        let mut d = ChunkedDecoder::new(1 << 10);
        let mut input = BytesMut::new();
        let mut body = BytesMut::new();
        for (i, &b) in wire.iter().enumerate() {
            input.extend_from_slice(&[b]);
            let done = d.decode(&mut input, &mut body).expect("valid");
            assert_eq!(done, i == wire.len() - 1, "at byte {i}");
        }
        assert_eq!(&body[..], b"abc0123456789abcdef");
    }

    #[test]
    fn bad_framing_is_refused() {
        for (wire, want) in [
            (&b"5\nhello\r\n0\r\n\r\n"[..], ChunkError::InvalidSize),
            (b"x\r\n", ChunkError::InvalidSize),
            (b"-1\r\n", ChunkError::InvalidSize),
            (b"5 x\r\n", ChunkError::InvalidSize),
            (b"11111111111111111\r\n", ChunkError::InvalidSize),
            (b"5\r\nhelloXX", ChunkError::MissingCrlf),
            (b"5\r\nhelloX", ChunkError::MissingCrlf),
            (b"0\r\nx: y\n\r\n", ChunkError::Trailers),
            (b"0\r\nx: a\rb\r\n\r\n", ChunkError::Trailers),
            (b"0\r\nx: a\x00\r\n\r\n", ChunkError::Trailers),
            (b"ff\r\n", ChunkError::TooLarge(100)),
        ] {
            let mut d = ChunkedDecoder::new(100);
            let mut input = BytesMut::from(wire);
            let mut body = BytesMut::new();
            assert_eq!(
                d.decode(&mut input, &mut body),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn leading_zeros_do_not_make_a_size_too_long() {
        let wire = b"000000000000000000003\r\nabc\r\n0\r\n\r\n";
        let (body, _) = decode_all(wire, 10).expect("valid");
        assert_eq!(body, b"abc");
    }

    #[test]
    fn the_limit_counts_the_whole_body() {
        assert!(decode_all(b"32\r\n", 49).is_err());
        let ok = b"19\r\naaaaaaaaaaaaaaaaaaaaaaaaa\r\n19\r\naaaaaaaaaaaaaaaaaaaaaaaaa\r\n0\r\n\r\n";
        assert_eq!(decode_all(ok, 50).expect("at the limit").0.len(), 50);
        assert_eq!(decode_all(ok, 49), Err(ChunkError::TooLarge(49)));
    }

    #[test]
    fn endless_size_lines_and_trailers_are_cut_off() {
        let mut d = ChunkedDecoder::new(100);
        let mut body = BytesMut::new();
        let mut input = BytesMut::from(&[b'0'; MAX_LINE][..]);
        assert_eq!(
            d.decode(&mut input, &mut body),
            Err(ChunkError::InvalidSize)
        );
        let mut d = ChunkedDecoder::new(100);
        let mut input = BytesMut::from("0\r\n");
        for _ in 0..(MAX_TRAILERS / 8 + 1) {
            input.extend_from_slice(b"x: 1234\r\n");
        }
        assert_eq!(d.decode(&mut input, &mut body), Err(ChunkError::Trailers));
    }

    proptest::proptest! {
        /// Any body, cut into any chunks, decodes back to itself.
        #[test]
        fn any_chunking_round_trips(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300), cuts in proptest::collection::vec(1usize..40, 1..20)) {
            let mut wire = Vec::new();
            let mut rest = &data[..];
            let mut cut = cuts.iter().cycle();
            while !rest.is_empty() {
                let n = (*cut.next().unwrap_or(&1)).min(rest.len());
                wire.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                wire.extend_from_slice(&rest[..n]);
                wire.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let (body, left) = decode_all(&wire, 1 << 20).expect("valid");
            proptest::prop_assert_eq!(body, data);
            proptest::prop_assert!(left.is_empty());
        }

        /// Whatever the bytes, decoding returns without panicking.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut d = ChunkedDecoder::new(64);
            let mut input = BytesMut::from(&bytes[..]);
            let mut body = BytesMut::new();
            let _ = d.decode(&mut input, &mut body);
            proptest::prop_assert!(body.len() <= 64);
        }
    }
}
