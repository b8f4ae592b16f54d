//! Any bytes, in any chunking, through the client's SSE decoder and then as
//! A2A stream events of both versions. Nothing may panic, and memory stays
//! bounded by the decoder's event limit.
#![no_main]

use heddle_core::{compat::v03, jsonrpc::ClientResponse, sse::SseDecoder, v1};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let cut = usize::from(split).min(rest.len());
    let mut decoder = SseDecoder::new(4096);
    for chunk in [&rest[..cut], &rest[cut..]] {
        let Ok(events) = decoder.push(chunk) else { return };
        for e in events {
            let _ = serde_json::from_str::<v1::StreamResponse>(&e);
            if let Ok(r) = serde_json::from_str::<ClientResponse<'_>>(&e)
                && let Some(result) = r.result
                && let Ok(ev) = serde_json::from_str::<v03::StreamEvent>(result.get())
            {
                let _ = ev.to_v1();
            }
        }
    }
});
