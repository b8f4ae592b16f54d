//! A Server-Sent Events parser for A2A streams (WHATWG HTML §9.2, the parts
//! A2A uses): events are separated by a blank line; `data:` lines are joined
//! with `\n`; comment lines (`:`) and other fields are ignored. Feed it bytes
//! as they arrive; it returns each complete event's data.

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Vec<String>,
    /// Bytes of the event being assembled, to bound memory.
    pending: usize,
    /// Largest event accepted, in bytes.
    max_event: usize,
}

/// An event too large for the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server-sent event larger than {0} bytes")]
pub struct EventTooLarge(pub usize);

impl SseDecoder {
    /// A decoder that refuses events over `max_event` bytes.
    pub fn new(max_event: usize) -> Self {
        Self {
            max_event,
            ..Self::default()
        }
    }

    /// Adds bytes; returns the data of every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        self.buf.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.buf[start..start + nl];
            start += nl + 1;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(std::mem::take(&mut self.data).join("\n"));
                }
                self.pending = 0;
                continue;
            }
            if line[0] == b':' {
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            if field == b"data" {
                self.pending += value.len();
                if self.pending > self.max_limit() {
                    self.buf.clear();
                    self.data.clear();
                    self.pending = 0;
                    return Err(EventTooLarge(self.max_limit()));
                }
                self.data.push(String::from_utf8_lossy(value).into_owned());
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > self.max_limit() {
            self.buf.clear();
            return Err(EventTooLarge(self.max_limit()));
        }
        Ok(events)
    }

    fn max_limit(&self) -> usize {
        if self.max_event == 0 {
            16 << 20
        } else {
            self.max_event
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_in_any_chunking() {
        let text = b": keep-alive\n\ndata: {\"a\":1}\n\ndata: one\ndata: two\r\n\r\nevent: x\ndata:three\n\n";
        for chunk in [1, 2, 3, 7, text.len()] {
            let mut d = SseDecoder::new(1024);
            let mut out = Vec::new();
            for c in text.chunks(chunk) {
                out.extend(d.push(c).expect("small"));
            }
            assert_eq!(
                out,
                ["{\"a\":1}", "one\ntwo", "three"],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut d = SseDecoder::new(8);
        assert!(d.push(b"data: 0123456789\n").is_err());
        let mut d = SseDecoder::new(8);
        assert!(
            d.push(&[b'x'; 64]).is_err(),
            "a line with no end is bounded too"
        );
    }
}
