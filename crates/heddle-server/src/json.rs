//! JSON encoding of answers and events into a buffer sized for them.
//!
//! `serde_json::to_vec` starts at 128 bytes and grows three or four times
//! for a task (about 1 KB); starting at 1 KB saves those copies on every
//! answer and SSE event.

use serde::{Serialize, ser::Error as _};

const TYPICAL_ANSWER: usize = 1024;

/// `serde_json::to_vec`, with room for a typical answer from the start.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(TYPICAL_ANSWER);
    serde_json::to_writer(&mut buf, value)?;
    Ok(buf)
}

/// `serde_json::to_string`, with room for a typical answer from the start.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    // serde_json writes UTF-8 only; the check is a formality.
    String::from_utf8(to_vec(value)?).map_err(serde_json::Error::custom)
}
