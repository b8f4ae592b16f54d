//! Per-caller limits: how many requests a caller may make per second, and
//! how many of its tasks may run at once. One [`CallerLimits`] is shared by
//! every agent of a server, so the limits hold for the server, not per agent.
//!
//! The request rate is checked by a layer on each binding's routes
//! ([`CallerLimits::layer`]), after authentication, so it knows the caller:
//! an authenticated caller is counted by its id, an anonymous one by its IP
//! address. A caller past its rate gets ResourceExhausted in its binding's
//! form: JSON-RPC -32029 and REST both with HTTP 429 and `Retry-After`, gRPC
//! `RESOURCE_EXHAUSTED`. Running tasks are counted by the handler
//! ([`crate::HandlerBuilder::caller_limits`]): a send that would start one
//! past the caller's share is refused the same way.
//!
//! [`AgentRate`] is the other side: a request rate for one agent, whoever
//! calls, so that all callers together cannot push it past what it takes
//! ([`crate::HandlerBuilder::agent_rate`]).

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    num::NonZeroU32,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    extract::{ConnectInfo, Request, State},
    middleware::Next,
    response::Response,
};
use governor::{
    DefaultDirectRateLimiter, DefaultKeyedRateLimiter, InsufficientCapacity, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};
use heddle_core::error::A2aError;

use crate::Caller;

pub use crate::binding::Binding;

/// The per-caller limits of a server; cheap to clone, clones share them.
#[derive(Clone, Debug)]
pub struct CallerLimits {
    inner: Arc<Inner>,
}

struct Inner {
    rate: Option<DefaultKeyedRateLimiter<CallerKey>>,
    clock: DefaultClock,
    max_running: usize,
    running: Mutex<HashMap<CallerKey, usize>>,
    /// Checks since the rate table was last pruned.
    checks: AtomicU32,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerLimits")
            .field("rate", &self.rate.is_some())
            .field("max_running", &self.max_running)
            .finish_non_exhaustive()
    }
}

/// Checks between two prunings of callers not seen for a while.
const PRUNE_EVERY: u32 = 4096;

/// One running task's place in its caller's share, given back when dropped.
#[derive(Debug)]
pub(crate) struct RunningSlot {
    inner: Arc<Inner>,
    key: CallerKey,
}

impl CallerLimits {
    /// `per_second` requests a second for each caller, in bursts of up to
    /// `burst` (`None`: no rate limit), and at most `max_running` of one
    /// caller's tasks running at once.
    pub fn new(per_second: Option<NonZeroU32>, burst: NonZeroU32, max_running: usize) -> Self {
        let rate = per_second.map(|r| RateLimiter::keyed(Quota::per_second(r).allow_burst(burst)));
        Self {
            inner: Arc::new(Inner {
                rate,
                clock: DefaultClock::default(),
                max_running,
                running: Mutex::new(HashMap::new()),
                checks: AtomicU32::new(0),
            }),
        }
    }

    /// No rate limit and no cap on running tasks.
    pub fn unlimited() -> Self {
        Self::new(None, NonZeroU32::MIN, usize::MAX)
    }

    /// How many tasks run (or wait for a place to run) now, every caller's
    /// together: what a server that is stopping waits for.
    pub fn running(&self) -> usize {
        self.inner
            .lock()
            .values()
            .fold(0, |all, n| all.saturating_add(*n))
    }

    /// Counts one request of `key`; ResourceExhausted past the rate.
    pub fn check_rate(&self, key: CallerKey) -> Result<(), A2aError> {
        self.check_rate_n(key, 1)
    }

    /// Counts `n` requests of `key` at once (the calls of a JSON-RPC batch
    /// beyond the one its HTTP request was counted as); ResourceExhausted
    /// past the rate, or for a batch larger than the caller's burst, which
    /// could never pass.
    pub fn check_rate_n(&self, key: CallerKey, n: u32) -> Result<(), A2aError> {
        let (Some(rate), Some(n)) = (&self.inner.rate, NonZeroU32::new(n)) else {
            return Ok(());
        };
        if self.inner.checks.fetch_add(1, Ordering::Relaxed) >= PRUNE_EVERY {
            self.inner.checks.store(0, Ordering::Relaxed);
            rate.retain_recent();
        }
        match rate.check_key_n(&key, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(self.inner.clock.now());
                Err(A2aError::exhausted(
                    "too many requests from this caller; slow down",
                    wait.max(Duration::from_millis(1)),
                ))
            }
            Err(InsufficientCapacity(burst)) => Err(A2aError::exhausted(
                format!(
                    "{n} calls at once are more than this caller's burst of {burst}; send fewer"
                ),
                Duration::from_secs(1),
            )),
        }
    }

    /// A place for one more running task of the caller keyed `key`
    /// ([`crate::CallContext`]'s limit key).
    pub(crate) fn take_running(&self, key: CallerKey) -> Result<RunningSlot, A2aError> {
        let mut running = self.inner.lock();
        let n = running.entry(key.clone()).or_insert(0);
        if *n >= self.inner.max_running {
            let n = *n;
            return Err(A2aError::exhausted(
                format!("you have {n} tasks running, the most one caller may; retry when one ends"),
                Duration::from_secs(1),
            ));
        }
        *n += 1;
        drop(running);
        Ok(RunningSlot {
            inner: self.inner.clone(),
            key,
        })
    }

    /// `router` (one binding's routes) behind the request-rate check,
    /// refusing in `binding`'s form. Put it inside the authentication
    /// layer, so the caller is known.
    pub fn layer(&self, router: Router, binding: Binding) -> Router {
        if self.inner.rate.is_none() {
            return router;
        }
        router.layer(axum::middleware::from_fn_with_state(
            (self.clone(), binding),
            check,
        ))
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CallerKey, usize>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for RunningSlot {
    fn drop(&mut self) {
        let mut running = self.inner.lock();
        if let Some(n) = running.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.key);
            }
        }
    }
}

/// A request rate for one agent, all its callers together: GCRA, at most
/// `per_second` requests a second in bursts of up to `per_second`. It
/// protects the agent; the per-caller limits ([`CallerLimits`]) keep
/// protecting the server from one caller. Checked by the handler on every
/// call but the extended card (so on every binding, gRPC included); a call
/// past the rate is ResourceExhausted with the wait until the next one may
/// pass.
///
/// Cheap to clone; clones share the rate, so a server that rebuilds an
/// agent's handler without changing its rate can keep counting where it was.
#[derive(Clone)]
pub struct AgentRate {
    inner: Arc<RateInner>,
}

struct RateInner {
    limiter: DefaultDirectRateLimiter,
    per_second: NonZeroU32,
    clock: DefaultClock,
}

impl std::fmt::Debug for AgentRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRate")
            .field("per_second", &self.inner.per_second)
            .finish_non_exhaustive()
    }
}

impl AgentRate {
    /// At most `per_second` requests a second, in bursts of as many: a
    /// burst of a hundred at 10 a second lets 10 through at once, then one
    /// every 100 ms.
    pub fn new(per_second: NonZeroU32) -> Self {
        Self {
            inner: Arc::new(RateInner {
                limiter: RateLimiter::direct(Quota::per_second(per_second)),
                per_second,
                clock: DefaultClock::default(),
            }),
        }
    }

    /// The requests a second allowed (and the burst).
    pub fn per_second(&self) -> NonZeroU32 {
        self.inner.per_second
    }

    /// Counts one request; ResourceExhausted, with the wait until one more
    /// may pass (rounded up to a whole second), past the rate.
    pub fn check(&self) -> Result<(), A2aError> {
        self.inner.limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(self.inner.clock.now());
            A2aError::exhausted(
                format!(
                    "this agent takes at most {} requests a second from all its callers; slow down",
                    self.inner.per_second
                ),
                wait.max(Duration::from_millis(1)),
            )
        })
    }
}

/// Whom a caller limit counts: a caller with an id, or by its address a
/// caller without one. Built without formatting, hashed as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CallerKey {
    /// An identified caller (`key:ID`, `jwt:ISS#SUB`, `mtls:NAME`).
    Id(String),
    /// An anonymous caller, by its client address (IPv4-mapped IPv6
    /// addresses as IPv4).
    Addr(IpAddr),
    /// An anonymous caller whose address is unknown.
    Anonymous,
}

impl CallerKey {
    /// The key of `caller`, or of the address `peer` for a caller with no id.
    pub fn of(caller: Option<&Caller>, peer: Option<IpAddr>) -> Self {
        match (caller, peer) {
            (Some(c), _) if !c.id.is_empty() => Self::Id(c.id.clone()),
            (_, Some(ip)) => Self::Addr(ip.to_canonical()),
            (_, None) => Self::Anonymous,
        }
    }
}

impl From<&str> for CallerKey {
    fn from(id: &str) -> Self {
        Self::Id(id.to_owned())
    }
}

/// The key a request is counted under: the caller's id, or for an anonymous
/// caller its address.
fn key_of(req: &Request) -> CallerKey {
    let extensions = req.extensions();
    CallerKey::of(
        extensions.get::<Caller>(),
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip()),
    )
}

async fn check(
    State((limits, binding)): State<(CallerLimits, Binding)>,
    req: Request,
    next: Next,
) -> Response {
    match limits.check_rate(key_of(&req)) {
        Ok(()) => next.run(req).await,
        Err(e) => crate::binding::refusal(binding, &e),
    }
}

#[cfg(test)]
mod tests {
    use heddle_core::error::ErrorCode;

    use super::*;

    #[test]
    fn a_caller_past_its_rate_is_told_when_to_retry_and_others_are_not() {
        let limits = CallerLimits::new(NonZeroU32::new(1), NonZeroU32::MIN.saturating_add(1), 10);
        assert!(limits.check_rate("key:a".into()).is_ok());
        assert!(limits.check_rate("key:a".into()).is_ok());
        let e = limits
            .check_rate("key:a".into())
            .expect_err("past the burst");
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        assert_eq!(e.retry_after_secs(), Some(1));
        assert!(limits.check_rate("key:b".into()).is_ok(), "another caller");
    }

    #[test]
    fn running_tasks_are_counted_per_caller() {
        let limits = CallerLimits::new(None, NonZeroU32::MIN, 1);
        let a = || CallerKey::of(Some(&Caller::authenticated("key:a")), None);
        let slot = limits.take_running(a()).expect("first");
        assert!(limits.take_running(a()).is_err());
        assert!(limits.take_running("key:b".into()).is_ok());
        drop(slot);
        assert!(limits.take_running(a()).is_ok());
    }

    #[test]
    fn an_agent_rate_lets_a_burst_of_its_rate_through_then_refuses_with_a_wait() {
        let rate = AgentRate::new(NonZeroU32::new(10).expect("ten"));
        let passed = (0..100).filter(|_| rate.check().is_ok()).count();
        // All in well under the 100 ms one more token takes.
        assert!((10..=11).contains(&passed), "{passed} passed");
        let e = rate.check().expect_err("past the burst");
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        assert_eq!(e.retry_after_secs(), Some(1), "100 ms, rounded up");
        // Clones share the count.
        assert!(rate.clone().check().is_err());
    }

    #[test]
    fn anonymous_callers_are_counted_by_address() {
        let mut req = Request::new(axum::body::Body::empty());
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 5000))));
        assert_eq!(key_of(&req), CallerKey::Addr([192, 0, 2, 7].into()));
        req.extensions_mut().insert(Caller::authenticated("key:k"));
        assert_eq!(key_of(&req), CallerKey::from("key:k"));
    }
}
