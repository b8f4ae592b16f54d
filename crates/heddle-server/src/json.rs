//! JSON encoding of answers and events into a buffer sized for them.
//!
//! The bytes are serde_json's (Heddle has no JSON writer of its own: one
//! would write invalid JSON the day a crate in a user's build turned on
//! `serde_json/arbitrary_precision`). `serde_json::to_vec` starts at 128
//! bytes and grows three or four times for a task (about 1 KB); starting
//! at 1 KB saves those copies on every answer (SSE events: `crate::sse`).

use serde::Serialize;

const TYPICAL_ANSWER: usize = 1024;

/// `serde_json::to_vec`, with room for a typical answer from the start.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(TYPICAL_ANSWER);
    serde_json::to_writer(&mut out, value)?;
    Ok(out)
}
