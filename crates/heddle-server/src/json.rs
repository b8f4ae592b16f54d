//! JSON encoding of answers and events into a buffer sized for them.
//!
//! The bytes are serde_json's; `heddle_core::json` writes them faster.
//! `serde_json::to_vec` starts at 128 bytes and grows three or four times
//! for a task (about 1 KB); starting at 1 KB saves those copies on every
//! answer and SSE event.

use serde::{Serialize, ser::Error as _};

const TYPICAL_ANSWER: usize = 1024;

/// `serde_json::to_vec`'s bytes, with room for a typical answer from the
/// start, written by [`heddle_core::json`] (strings copied whole when they
/// need no escaping).
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    heddle_core::json::to_vec_with_capacity(value, TYPICAL_ANSWER)
}

/// `serde_json::to_string`, with room for a typical answer from the start.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    // serde_json writes UTF-8 only; the check is a formality.
    String::from_utf8(to_vec(value)?).map_err(serde_json::Error::custom)
}
