//! An agent's own limits, from its manifest's `rate_limit`: `max_rps` as
//! its handler's [`AgentRate`] (all callers together, every binding) and
//! `max_concurrent` as its [`Concurrency`], the waiters ordered by the
//! priority callers ask for ([`crate::market::options`]). The hub's
//! per-caller limits apply as well.
//!
//! A rebuilt agent (a changed card or description, an mcp agent's new
//! tools) keeps the rate and the places of the handler it replaces when
//! its numbers are the same, so a rebuild neither refills the burst nor
//! lets a second set of executions run beside the first.

use std::{
    num::{NonZeroU32, NonZeroUsize},
    sync::Arc,
};

use heddle_server::{
    Concurrency, MessageCheck, Priority, RequestContext, RequestHandler, limit::AgentRate,
};

use crate::{manifest::RateLimit, market::options};

/// Waiting places per running place: enough to absorb a burst, few enough
/// that a caller at the back of the queue does not wait for ages.
const QUEUED_PER_RUNNING: usize = 16;

/// The most waiting places of one agent, whatever its `max_concurrent`:
/// each holds a task in memory.
const MAX_QUEUED: usize = 1024;

/// The rate `limit` asks for, if any: `max_rps` a second in bursts of as
/// many (a manifest says at least 1; 0 is read as 1, and more than
/// `u32::MAX` as `u32::MAX`). The `previous` handler's own when it has the
/// same rate.
pub(crate) fn rate(limit: &RateLimit, previous: Option<&RequestHandler>) -> Option<AgentRate> {
    let asked = limit.max_rps?;
    let per_second =
        NonZeroU32::new(u32::try_from(asked).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN);
    match previous.and_then(RequestHandler::agent_rate) {
        Some(kept) if kept.per_second() == per_second => Some(kept.clone()),
        _ => Some(AgentRate::new(per_second)),
    }
}

/// The places `limit` asks for, if any: `max_concurrent` running (read
/// like `max_rps`) and [`QUEUED_PER_RUNNING`] waiting for each, at most
/// [`MAX_QUEUED`]; waiters ordered by the caller's priority. The
/// `previous` handler's own when its numbers are the same.
pub(crate) fn concurrency(
    limit: &RateLimit,
    previous: Option<&RequestHandler>,
) -> Option<Concurrency> {
    let asked = limit.max_concurrent?;
    let max_running = NonZeroUsize::new(usize::try_from(asked).unwrap_or(usize::MAX))
        .unwrap_or(NonZeroUsize::MIN);
    let max_queued = max_running
        .get()
        .saturating_mul(QUEUED_PER_RUNNING)
        .min(MAX_QUEUED);
    match previous.and_then(RequestHandler::concurrency) {
        Some(kept)
            if kept.max_running() == max_running.get() && kept.max_queued() == max_queued =>
        {
            Some(kept.clone())
        }
        _ => Some(
            Concurrency::new(max_running, max_queued).with_priority(Arc::new(waiting_priority)),
        ),
    }
}

/// Refuses a message whose metadata asks for a priority that is not one of
/// the three (InvalidParams naming the field), before a task is made. The
/// request's metadata is not a message check's to see: a bad priority
/// there is read as normal.
pub(crate) fn priority_check() -> MessageCheck {
    Arc::new(|message| {
        options::priority(None, message.metadata.as_ref())
            .map(drop)
            .map_err(Into::into)
    })
}

/// The priority a waiting execution asked for in its request's or its
/// message's metadata (normal when it asked for none; a bad one in the
/// request's metadata, which no check saw, is passed over for the
/// message's).
fn waiting_priority(ctx: &RequestContext) -> Priority {
    let asked = options::priority(ctx.metadata.as_ref(), ctx.message.metadata.as_ref())
        .or_else(|_| options::priority(None, ctx.message.metadata.as_ref()));
    asked.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use heddle_core::v1;
    use heddle_store::MemoryStore;

    use super::*;

    fn handler(limit: &RateLimit, previous: Option<&RequestHandler>) -> RequestHandler {
        let mut b = RequestHandler::builder(
            "a",
            v1::AgentCard::default(),
            Arc::new(crate::agents::Echo),
            Arc::new(MemoryStore::default()),
        );
        if let Some(r) = rate(limit, previous) {
            b = b.agent_rate(r);
        }
        if let Some(c) = concurrency(limit, previous) {
            b = b.concurrency(c);
        }
        b.build()
    }

    fn limit(max_rps: u64, max_concurrent: u64) -> RateLimit {
        RateLimit {
            max_rps: Some(max_rps),
            max_concurrent: Some(max_concurrent),
        }
    }

    /// Spends the whole burst of `h`'s rate; whether one more passes.
    fn drained(h: &RequestHandler) -> bool {
        let rate = h.agent_rate().expect("a rate");
        while rate.check().is_ok() {}
        rate.check().is_err()
    }

    #[test]
    fn a_rebuild_with_the_same_numbers_keeps_the_count_and_a_change_starts_afresh() {
        let first = handler(&limit(3, 2), None);
        assert!(drained(&first));
        let same = handler(&limit(3, 2), Some(&first));
        assert!(
            same.agent_rate().expect("rate").check().is_err(),
            "the burst is not refilled by a rebuild"
        );
        let kept = same.concurrency().expect("places");
        assert_eq!((kept.max_running(), kept.max_queued()), (2, 32));
        let changed = handler(&limit(4, 3), Some(&first));
        assert!(changed.agent_rate().expect("rate").check().is_ok());
        assert_eq!(changed.concurrency().expect("places").max_running(), 3);
    }

    #[test]
    fn numbers_a_manifest_cannot_hold_are_clamped() {
        let h = handler(&limit(u64::MAX, 0), None);
        assert_eq!(h.agent_rate().expect("rate").per_second().get(), u32::MAX);
        let c = h.concurrency().expect("places");
        assert_eq!((c.max_running(), c.max_queued()), (1, 16));
        let big = handler(&limit(0, u64::MAX), None);
        assert_eq!(big.agent_rate().expect("rate").per_second().get(), 1);
        assert_eq!(big.concurrency().expect("places").max_queued(), MAX_QUEUED);
    }
}
