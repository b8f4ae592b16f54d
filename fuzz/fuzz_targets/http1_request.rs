//! Any bytes, in any chunking, as a client's side of an HTTP/1.1 connection:
//! request heads parsed, bodies skipped by their length or decoded from
//! chunks, as `heddle_server::listen`'s driver consumes them. Nothing may
//! panic, a parsed head is taken off the front of the buffer exactly, and a
//! decoded body stays within its limit.
#![no_main]

use bytes::BytesMut;
use heddle_http1::{BodyFraming, ChunkedDecoder, HeadLimits, parse_request};
use libfuzzer_sys::fuzz_target;

const MAX_BODY: usize = 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let cut = usize::from(split).min(rest.len());
    let limits = HeadLimits { max_head_bytes: 2048, max_headers: 16 };
    let mut buf = BytesMut::new();
    let mut body = None::<(ChunkedDecoder, BytesMut)>;
    let mut skip = 0usize;
    for chunk in [&rest[..cut], &rest[cut..]] {
        buf.extend_from_slice(chunk);
        loop {
            if skip > 0 {
                let n = skip.min(buf.len());
                let _ = buf.split_to(n);
                skip -= n;
                if skip > 0 {
                    break;
                }
            }
            if let Some((decoder, out)) = &mut body {
                match decoder.decode(&mut buf, out) {
                    Ok(true) => {
                        assert!(out.len() <= MAX_BODY);
                        body = None;
                    }
                    Ok(false) => break,
                    Err(_) => return,
                }
            }
            let before = buf.len();
            match parse_request(&mut buf, &limits) {
                Ok(Some(head)) => {
                    assert!(buf.len() < before);
                    match head.body {
                        BodyFraming::Empty => {}
                        BodyFraming::Length(n) => match usize::try_from(n) {
                            Ok(n) if n <= MAX_BODY => skip = n,
                            _ => return,
                        },
                        BodyFraming::Chunked => {
                            body = Some((ChunkedDecoder::new(MAX_BODY), BytesMut::new()));
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
