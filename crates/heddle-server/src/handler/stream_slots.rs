//! Open streams (SSE and gRPC server streams), counted across every agent
//! that shares one [`StreamSlots`], with a share per caller.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use heddle_core::error::A2aError;

use crate::limit::CallerKey;

/// How long a refused client is told to wait before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The stream slots of a server: at most `total` open at once, at most
/// `per_caller` of them held by one caller (keyed by
/// `CallContext`'s limit key: the caller's id, or for an anonymous caller
/// its address). Cheap to clone; clones share the slots.
#[derive(Clone, Debug)]
pub struct StreamSlots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    total: usize,
    per_caller: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    all: usize,
    by_caller: HashMap<CallerKey, usize>,
}

/// One open stream's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    inner: Arc<Inner>,
    caller: CallerKey,
}

impl StreamSlots {
    /// Slots for `total` streams, `per_caller` of them to one caller.
    pub fn new(total: usize, per_caller: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                total,
                per_caller,
                open: Mutex::new(Open::default()),
            }),
        }
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.inner.lock().all
    }

    /// A slot for `caller`, or ResourceExhausted (retryable, with its wait).
    pub(crate) fn take(&self, caller: CallerKey) -> Result<StreamSlot, A2aError> {
        let mut open = self.inner.lock();
        if open.all >= self.inner.total {
            return Err(A2aError::exhausted(
                format!(
                    "this server has {} streams open, its limit; retry later",
                    self.inner.total
                ),
                RETRY_AFTER,
            ));
        }
        let mine = open.by_caller.get(&caller).copied().unwrap_or(0);
        if mine >= self.inner.per_caller {
            return Err(A2aError::exhausted(
                format!(
                    "you have {mine} streams open, the most one caller may; close one or retry later"
                ),
                RETRY_AFTER,
            ));
        }
        open.all += 1;
        *open.by_caller.entry(caller.clone()).or_insert(0) += 1;
        Ok(StreamSlot {
            inner: self.inner.clone(),
            caller: caller.to_owned(),
        })
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.inner.lock();
        open.all = open.all.saturating_sub(1);
        if let Some(n) = open.by_caller.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_caller.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use heddle_core::error::ErrorCode;

    use super::*;

    #[test]
    fn one_caller_gets_its_share_and_the_server_its_total() {
        let slots = StreamSlots::new(3, 2);
        let a1 = slots.take("key:a".into());
        let a2 = slots.take("key:a".into());
        assert!(a1.is_ok() && a2.is_ok());
        let refused = slots.take("key:a".into()).expect_err("past the share");
        assert_eq!(refused.code, ErrorCode::ResourceExhausted);
        assert_eq!(refused.retry_after_secs(), Some(1));
        let b = slots.take("key:b".into()).expect("another caller");
        let full = slots.take("key:c".into()).expect_err("past the total");
        assert!(full.message.contains("3 streams"), "{}", full.message);
        drop(b);
        assert!(slots.take("key:c".into()).is_ok());
        drop(a1);
        assert_eq!(slots.open(), 1);
    }

    #[test]
    fn clones_share_the_slots() {
        let one = StreamSlots::new(1, 1);
        let other = one.clone();
        let _held = one.take("x".into()).expect("slot");
        assert!(other.take("y".into()).is_err());
    }
}
