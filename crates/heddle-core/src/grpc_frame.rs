//! gRPC message framing: on the wire each protobuf message is a
//! length-prefixed message, one compressed-flag byte and a big-endian `u32`
//! length before the bytes. The gRPC binding reads a unary request as one
//! such frame ([`decode_one`]) and writes its answer as one ([`encode`]).
//!
//! The error texts are tonic's, so a call refused here reads the same as one
//! refused by tonic's own codec.

use prost::Message;

/// Length of a frame's header: the compressed flag and the length.
pub const FRAME_HEADER: usize = 5;

/// Why a request body is not one well-formed, uncompressed message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The body is empty.
    #[error("Missing request message.")]
    Missing,
    /// The body ends inside the header or the message.
    #[error("Unexpected EOF decoding stream.")]
    Truncated,
    /// The flag says compressed, but the call declared no `grpc-encoding`.
    #[error(
        "protocol error: received message with compressed-flag but no grpc-encoding was specified"
    )]
    CompressedWithoutEncoding,
    /// The flag is neither 0 nor 1.
    #[error(
        "protocol error: received message with invalid compression flag: {0} (valid flags are 0 and 1)"
    )]
    BadFlag(u8),
    /// The header announces a message over the limit.
    #[error(
        "Error, decoded message length too large: found {len} bytes, the limit is: {limit} bytes"
    )]
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Bytes follow the message: a unary call carries exactly one.
    #[error("a unary call takes exactly one request message")]
    Trailing,
    /// The bytes are not the expected message.
    #[error(transparent)]
    Decode(#[from] prost::DecodeError),
}

impl FrameError {
    /// Whether the gRPC status is `OUT_OF_RANGE` (a size limit) rather than
    /// `INTERNAL` (a malformed frame), as tonic reports them.
    pub fn is_size_limit(&self) -> bool {
        matches!(self, Self::TooLarge { .. })
    }
}

/// The one message of a unary call's body, refused past `max_message_bytes`.
pub fn decode_one<M: Message + Default>(
    body: &[u8],
    max_message_bytes: usize,
) -> Result<M, FrameError> {
    let Some((head, rest)) = body.split_first_chunk::<FRAME_HEADER>() else {
        return Err(if body.is_empty() {
            FrameError::Missing
        } else {
            FrameError::Truncated
        });
    };
    let [flag, len @ ..] = *head;
    match flag {
        0 => {}
        1 => return Err(FrameError::CompressedWithoutEncoding),
        f => return Err(FrameError::BadFlag(f)),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max_message_bytes {
        return Err(FrameError::TooLarge {
            len,
            limit: max_message_bytes,
        });
    }
    match rest.len().cmp(&len) {
        std::cmp::Ordering::Less => Err(FrameError::Truncated),
        std::cmp::Ordering::Greater => Err(FrameError::Trailing),
        std::cmp::Ordering::Equal => Ok(M::decode(rest)?),
    }
}

/// `message` as one uncompressed frame; `None` if it is longer than a frame
/// can announce (4 GiB).
pub fn encode<M: Message>(message: &M) -> Option<Vec<u8>> {
    let len = message.encoded_len();
    let prefix = u32::try_from(len).ok()?;
    let mut buf = Vec::with_capacity(FRAME_HEADER + len);
    buf.push(0);
    buf.extend_from_slice(&prefix.to_be_bytes());
    message.encode_raw(&mut buf);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1;

    fn get(id: &str) -> v1::GetTaskRequest {
        v1::GetTaskRequest {
            id: id.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_message_round_trips_through_one_frame() {
        let frame = encode(&get("t-1")).expect("small");
        assert_eq!(frame[0], 0);
        assert_eq!(
            u32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize,
            frame.len() - FRAME_HEADER
        );
        let back: v1::GetTaskRequest = decode_one(&frame, 1024).expect("decodes");
        assert_eq!(back, get("t-1"));
        // An empty message is a frame of five bytes, and still one message.
        let empty = encode(&v1::GetTaskRequest::default()).expect("small");
        assert_eq!(empty, [0, 0, 0, 0, 0]);
        assert!(decode_one::<v1::GetTaskRequest>(&empty, 0).is_ok());
    }

    #[test]
    fn malformed_bodies_say_what_is_wrong() {
        let frame = encode(&get("t-1")).expect("small");
        let mut compressed = frame.clone();
        compressed[0] = 1;
        let mut flagged = frame.clone();
        flagged[0] = 7;
        type Check = fn(&FrameError) -> bool;
        let cases: [(Vec<u8>, Check); 7] = [
            (Vec::new(), |e| matches!(e, FrameError::Missing)),
            (vec![0, 0, 0], |e| matches!(e, FrameError::Truncated)),
            (frame[..frame.len() - 1].to_vec(), |e| {
                matches!(e, FrameError::Truncated)
            }),
            (compressed, |e| {
                matches!(e, FrameError::CompressedWithoutEncoding)
            }),
            (flagged, |e| matches!(e, FrameError::BadFlag(7))),
            ([frame.clone(), frame.clone()].concat(), |e| {
                matches!(e, FrameError::Trailing)
            }),
            (vec![0, 0x7f, 0xff, 0xff, 0xff], |e| {
                matches!(e, FrameError::TooLarge { limit: 1024, .. }) && e.is_size_limit()
            }),
        ];
        for (body, expected) in cases {
            let err = decode_one::<v1::GetTaskRequest>(&body, 1024).expect_err("refused");
            assert!(expected(&err), "{body:?}: {err}");
            assert!(!err.to_string().is_empty());
        }
        // A field whose length runs past the message.
        let err = decode_one::<v1::GetTaskRequest>(&[0, 0, 0, 0, 3, 0x0a, 0x10, b'x'], 1024)
            .expect_err("refused");
        assert!(matches!(err, FrameError::Decode(_)), "{err}");
    }
}
