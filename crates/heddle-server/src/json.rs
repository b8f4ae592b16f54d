//! JSON encoding of answers and events into a buffer sized for them.
//!
//! The bytes are serde_json's; `heddle_core::json` writes them faster.
//! `serde_json::to_vec` starts at 128 bytes and grows three or four times
//! for a task (about 1 KB); starting at 1 KB saves those copies on every
//! answer (SSE events: `crate::sse`).

use serde::Serialize;

const TYPICAL_ANSWER: usize = 1024;

/// `serde_json::to_vec`'s bytes, with room for a typical answer from the
/// start, written by [`heddle_core::json`] (strings copied whole when they
/// need no escaping).
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    heddle_core::json::to_vec_with_capacity(value, TYPICAL_ANSWER)
}
