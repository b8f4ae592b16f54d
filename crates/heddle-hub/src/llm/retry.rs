//! When to try a rate-limited call again without a `Retry-After`
//! ([`heddle_client::retry_after`] reads that): an exponential backoff.

use std::time::Duration;

/// 0.5 s, doubling, at most 8 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64 << attempt.saturating_sub(1).min(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_8_s() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(9), Duration::from_secs(8));
    }
}
