//! HTTP/1.1 server framing with no I/O: what `heddle-server`'s connection
//! driver (`heddle_server::listen`) needs to read requests and write answers,
//! kept apart so that it can be tested and fuzzed on bytes alone.
//!
//! Why Heddle has its own HTTP/1.1 connection at all: hyper keeps an 8 KiB
//! read buffer and an 8 KiB write buffer on every connection for the
//! connection's life. An A2A server holds thousands of SSE streams that sit
//! idle for minutes; those two buffers were most of their memory. Heddle's
//! driver reads into a buffer it lets go of while a stream waits, and writes
//! from one it gives back once the bytes are out.
//!
//! What is here:
//! - [`parse_request`]: a request head (request line and header fields, by
//!   `httparse`) into [`http::request::Parts`], with the body's framing
//!   decided by RFC 9112 §6 and the ambiguous cases refused (both
//!   `Content-Length` and `Transfer-Encoding`, differing lengths, codings
//!   other than `chunked`), since two readers disagreeing about where a body
//!   ends is how requests get smuggled.
//! - [`ChunkedDecoder`]: a `chunked` request body, byte by byte if need be.
//! - [`ResponseHead`]: the framing of an answer and its head's bytes.

mod chunked;
mod request;
mod response;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use request::{BodyFraming, HeadError, HeadLimits, MAX_HEADERS, RequestHead, parse_request};
pub use response::{LAST_CHUNK, ResponseFraming, ResponseHead, encode_chunk_header};
