//! What a remote caller may read of an internal failure: a generic message
//! and a correlation id. The detail (a store's text, a reply's debug form)
//! goes to the log under the same id, where an operator finds it.

use std::borrow::Cow;

use heddle_core::error::{A2aError, ErrorCode};

/// The `ErrorInfo.metadata` key of an internal error's correlation id.
pub const CORRELATION_KEY: &str = "correlationId";

/// `err` as a caller may see it: an Internal error is logged and replaced
/// by one that names only its correlation id; every other error is the
/// caller's business and passes as it is.
pub(crate) fn for_caller(err: &A2aError) -> Cow<'_, A2aError> {
    if err.code != ErrorCode::Internal || err.metadata.contains_key(CORRELATION_KEY) {
        return Cow::Borrowed(err);
    }
    let id = crate::new_id();
    tracing::error!(correlation_id = %id, detail = %err.message, "internal error");
    Cow::Owned(
        A2aError::new(
            ErrorCode::Internal,
            format!("internal error (correlation id {id}: the server's log has the detail)"),
        )
        .with_meta(CORRELATION_KEY, id),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_is_replaced_by_a_correlation_id() {
        let leak = A2aError::internal("task store: database is locked at /srv/secret/heddle.db");
        let shown = for_caller(&leak);
        assert!(!shown.message.contains("secret"), "{}", shown.message);
        let id = shown
            .metadata
            .get(CORRELATION_KEY)
            .cloned()
            .unwrap_or_default();
        assert!(
            shown.message.contains(&id) && id.len() == 36,
            "{}",
            shown.message
        );
        // Already redacted: left alone, so the id stays the one logged.
        assert_eq!(for_caller(&shown).metadata.get(CORRELATION_KEY), Some(&id));
    }

    #[test]
    fn caller_errors_pass_as_they_are() {
        let e = A2aError::task_not_found("t1");
        assert_eq!(*for_caller(&e), e);
    }
}
