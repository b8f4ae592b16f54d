//! ListTasks ordering and the opaque page token both stores share, so a token
//! means the same thing whichever store issued it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use heddle_core::v1;

use crate::StoreError;

/// Version prefix inside the token, so the format can change without old
/// tokens being misread.
const TOKEN_PREFIX: &str = "v1:";

/// Longest token accepted by [`PageToken::decode`]; anything longer was not
/// issued by us, and the cap keeps a hostile token from costing a large
/// allocation.
const MAX_TOKEN_LEN: usize = 4096;

/// The ListTasks ordering key: (status timestamp in ms, or 0 without one; task
/// id). Pages list tasks by this key descending: newest first, ties broken by
/// id descending so the order is total and paging never skips or repeats.
pub fn sort_key(task: &v1::Task) -> (i64, String) {
    (status_ms(task), task.id.clone())
}

/// The status timestamp in ms since the epoch, 0 when the task has none.
pub(crate) fn status_ms(task: &v1::Task) -> i64 {
    task.status
        .as_ref()
        .and_then(|s| s.timestamp.as_ref())
        .map_or(0, |t| t.as_millis())
}

/// Where the next page starts: strictly after (below, in descending order)
/// the task with this sort key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageToken {
    /// Status timestamp (ms) of the last task on the previous page.
    pub ts_ms: i64,
    /// Id of the last task on the previous page.
    pub id: String,
}

impl PageToken {
    /// The token that continues after `task`.
    pub fn after(task: &v1::Task) -> Self {
        let (ts_ms, id) = sort_key(task);
        Self { ts_ms, id }
    }

    /// The opaque string handed to clients (URL-safe, no padding).
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{TOKEN_PREFIX}{}:{}", self.ts_ms, self.id))
    }

    /// Parses a token from [`encode`](Self::encode). Anything else is
    /// [`StoreError::InvalidPageToken`].
    pub fn decode(token: &str) -> Result<Self, StoreError> {
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Err(StoreError::InvalidPageToken);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| StoreError::InvalidPageToken)?;
        let text = String::from_utf8(bytes).map_err(|_| StoreError::InvalidPageToken)?;
        let rest = text
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(StoreError::InvalidPageToken)?;
        // The timestamp never contains ':', the id may.
        let (ts, id) = rest.split_once(':').ok_or(StoreError::InvalidPageToken)?;
        // `i64::from_str` accepts a leading '+', which encode never writes.
        if ts.starts_with('+') {
            return Err(StoreError::InvalidPageToken);
        }
        let ts_ms = ts.parse().map_err(|_| StoreError::InvalidPageToken)?;
        Ok(Self {
            ts_ms,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use heddle_core::wkt::Timestamp;

    fn task(id: &str, ms: Option<i64>) -> v1::Task {
        v1::Task {
            id: id.into(),
            status: ms.map(|ms| v1::TaskStatus {
                state: v1::TaskState::Working as i32,
                message: None,
                timestamp: Some(Timestamp::from_millis(ms)),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn sort_key_uses_status_timestamp_or_zero() {
        assert_eq!(sort_key(&task("a", Some(1234))), (1234, "a".into()));
        assert_eq!(sort_key(&task("b", None)), (0, "b".into()));
        let mut no_ts = task("c", Some(5));
        if let Some(s) = no_ts.status.as_mut() {
            s.timestamp = None;
        }
        assert_eq!(sort_key(&no_ts), (0, "c".into()));
    }

    #[test]
    fn token_round_trips() {
        for t in [
            PageToken {
                ts_ms: 0,
                id: String::new(),
            },
            PageToken {
                ts_ms: 1_700_000_000_123,
                id: "task-1".into(),
            },
            PageToken {
                ts_ms: -5,
                id: "with:colons:and ünïcode/+=".into(),
            },
            PageToken {
                ts_ms: i64::MAX,
                id: "x".into(),
            },
            PageToken {
                ts_ms: i64::MIN,
                id: "y".into(),
            },
        ] {
            let s = t.encode();
            assert!(
                s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            );
            assert_eq!(PageToken::decode(&s).unwrap(), t);
        }
        assert_eq!(
            PageToken::after(&task("q", Some(9))),
            PageToken {
                ts_ms: 9,
                id: "q".into()
            }
        );
    }

    #[test]
    fn malformed_tokens_are_rejected() {
        let enc = |s: &[u8]| URL_SAFE_NO_PAD.encode(s);
        for bad in [
            String::new(),
            "!!!".into(),
            "abc=".into(),
            enc(b"v2:1:a"),
            enc(b"v1:"),
            enc(b"v1:12"),
            enc(b"v1:x:a"),
            enc(b"v1:+1:a"),
            enc(b"v1::a"),
            enc(b"v1:99999999999999999999:a"),
            enc(&[0x76, 0x31, 0x3a, 0x31, 0x3a, 0xff]),
            "A".repeat(MAX_TOKEN_LEN + 1),
        ] {
            assert!(
                matches!(PageToken::decode(&bad), Err(StoreError::InvalidPageToken)),
                "{bad:?} accepted"
            );
        }
    }
}
