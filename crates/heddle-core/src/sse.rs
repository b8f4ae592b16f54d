//! A Server-Sent Events parser for A2A streams (WHATWG HTML §9.2, the parts
//! A2A uses): a line ends at CRLF, LF or a lone CR; events are separated by
//! a blank line; `data:` lines are joined with `\n`; comment lines (`:`) and
//! other fields are ignored. Feed it bytes as they arrive; it returns each
//! complete event's data.
//!
//! Each byte is examined once however the stream is chunked (an unfinished
//! line is not rescanned when more of it arrives), and one line or one
//! event's data larger than the decoder's limit is an [`EventTooLarge`].

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes not yet consumed: the start of an unfinished line.
    buf: Vec<u8>,
    /// How much of `buf` has been searched for a line end without finding one.
    scanned: usize,
    /// The last line ended with a CR that closed a chunk: an LF starting the
    /// next chunk belongs to that line end, not to an empty line.
    after_cr: bool,
    /// The data of the event being assembled, lines joined with `\n`.
    data: Vec<u8>,
    /// Whether the event being assembled has had a `data` field (its data
    /// may be empty).
    has_data: bool,
    /// Largest event (or line) accepted, in bytes.
    max_event: usize,
    /// Bytes examined for line ends, in all (to test that it is linear).
    #[cfg(test)]
    examined: usize,
}

/// An event too large for the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server-sent event larger than {0} bytes")]
pub struct EventTooLarge(pub usize);

impl SseDecoder {
    /// A decoder that refuses events (and lines) over `max_event` bytes; 0
    /// means 16 MiB.
    pub fn new(max_event: usize) -> Self {
        Self {
            max_event,
            ..Self::default()
        }
    }

    /// Adds bytes; returns the data of every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        let mut bytes = bytes;
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        self.buf.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.buf);
        let read = self.lines(&buf);
        self.buf = buf;
        let (events, consumed) = match read {
            Ok(r) => r,
            Err(e) => {
                self.reset();
                return Err(e);
            }
        };
        if consumed > 0 {
            self.buf.drain(..consumed);
        }
        // What is left is one unfinished line, searched already.
        self.scanned = self.buf.len();
        if self.buf.len() > self.max_limit() {
            self.reset();
            return Err(EventTooLarge(self.max_limit()));
        }
        Ok(events)
    }

    /// Reads the complete lines of `buf`; returns the events they complete
    /// and how many bytes they took.
    fn lines(&mut self, buf: &[u8]) -> Result<(Vec<String>, usize), EventTooLarge> {
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(i) = buf[from..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = from + i;
            #[cfg(test)]
            {
                self.examined += i + 1;
            }
            let line = &buf[start..end];
            start = end + 1;
            if buf[end] == b'\r' {
                match buf.get(start) {
                    Some(b'\n') => start += 1,
                    Some(_) => {}
                    // The LF, if any, comes with the next chunk.
                    None => self.after_cr = true,
                }
            }
            from = start;
            if let Some(event) = self.line(line)? {
                events.push(event);
            }
        }
        #[cfg(test)]
        {
            self.examined += buf.len() - from;
        }
        Ok((events, start))
    }

    /// Interprets one line; returns an event's data when the line ends one.
    fn line(&mut self, line: &[u8]) -> Result<Option<String>, EventTooLarge> {
        if line.is_empty() {
            let event = self
                .has_data
                .then(|| String::from_utf8_lossy(&self.data).into_owned());
            self.data.clear();
            self.has_data = false;
            return Ok(event);
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            // `data` never holds more than the limit, so this cannot underflow.
            let room = self.max_limit() - self.data.len();
            if value.len() + usize::from(self.has_data) > room {
                return Err(EventTooLarge(self.max_limit()));
            }
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        Ok(None)
    }

    /// Forgets the stream so far (after an event too large).
    fn reset(&mut self) {
        self.buf.clear();
        self.scanned = 0;
        self.after_cr = false;
        self.data.clear();
        self.has_data = false;
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

    /// Every event `text` holds, fed to a decoder `chunk` bytes at a time.
    fn decode_in_chunks(text: &[u8], chunk: usize) -> Vec<String> {
        let mut d = SseDecoder::new(1024);
        let mut out = Vec::new();
        for c in text.chunks(chunk) {
            out.extend(d.push(c).expect("small"));
        }
        out
    }

    #[test]
    fn events_split_on_blank_lines_in_any_chunking() {
        let text = b": keep-alive\n\ndata: {\"a\":1}\n\ndata: one\ndata: two\r\n\r\nevent: x\ndata:three\n\n";
        for chunk in [1, 2, 3, 7, text.len()] {
            assert_eq!(
                decode_in_chunks(text, chunk),
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
    #[test]
    fn line_ends_are_crlf_lf_or_a_lone_cr_in_any_chunking() {
        let text = b"data: cr\rdata: only\r\r: note\r\ndata: crlf\r\n\r\ndata: lf\n\ndata: mixed\r\ndata: two\n\r";
        for chunk in 1..=text.len() {
            assert_eq!(
                decode_in_chunks(text, chunk),
                ["cr\nonly", "crlf", "lf", "mixed\ntwo"],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        // The LF after a chunk-final CR is not an empty line (which would
        // end the event early).
        let mut d = SseDecoder::new(1024);
        let mut out = Vec::new();
        for c in [
            &b"data: a\r"[..],
            b"\ndata: b\r",
            b"\rdata: c\r",
            b"data: d\r",
            b"\n\r",
            b"\n",
        ] {
            out.extend(d.push(c).expect("small"));
        }
        assert_eq!(out, ["a\nb", "c\nd"]);
    }

    #[test]
    fn a_long_line_in_one_byte_chunks_is_scanned_once() {
        let len = 4 << 20;
        let mut d = SseDecoder::new(8 << 20);
        let mut out = Vec::new();
        out.extend(d.push(b"data: ").expect("small"));
        for _ in 0..len {
            out.extend(d.push(b"x").expect("within the limit"));
        }
        out.extend(d.push(b"\n\n").expect("small"));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), len);
        // Every byte looked at once (a rescan from the line's start on each
        // chunk would look at about len²/2).
        assert!(d.examined <= len + 8, "examined {} bytes", d.examined);
    }

    #[test]
    fn many_empty_data_lines_are_bounded_too() {
        // Each `data` line adds a `\n` to the event even when its value is empty.
        let mut d = SseDecoder::new(8);
        assert!(d.push(&b"data\n".repeat(100)).is_err());
        // The decoder starts afresh after refusing.
        assert_eq!(d.push(b"data: ok\n\n").expect("small"), ["ok"]);
    }
}
