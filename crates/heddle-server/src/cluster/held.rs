//! The leases this replica holds, as far as it knows, and the fence every
//! event of a leased run passes.
//!
//! A lease is renewed every third of its time to live. Until a lease's time
//! after the last renewal that named it has passed, by this process's
//! monotonic clock, no other replica can have claimed it, and the run's
//! events go through at once. Past that (the process was stopped, or the
//! store could not be reached), an event waits for a renewal to say whether
//! the lease is still held. A lease the renewal does not name was claimed by
//! another replica, which ends or resumes the task: it is marked lost here
//! before anyone waiting is woken, so the run's events are refused from then
//! on, and the run is stopped. The monotonic clock runs on while the process
//! is stopped (SIGSTOP, a long stall), but not while the whole machine is
//! suspended; a suspended machine's replica may publish one event per run
//! before its first renewal after it wakes.
//!
//! The check and the write it guards are not one step: a pause of more than
//! a lease time between an event passing the fence and its save still lets
//! that one event through, where the store refuses what it can (an ended
//! task never moves, an older generation is refused).

use std::{sync::Mutex, time::Duration};

use foldhash::HashMap;
use heddle_store::{HeldLease, Scope};
use tokio::{sync::Notify, time::Instant};

/// How long an event waits for one renewal before it asks again.
const RENEWAL_WAIT: Duration = Duration::from_secs(1);

/// The longest a lease is taken to be sure for (a time to live past it is
/// treated as this; `Instant` arithmetic must not overflow).
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug)]
struct Held {
    scope: Scope,
    /// When the lease was taken (its row is committed by then): only a
    /// renewal that began after this can be expected to name it.
    leased_at: Instant,
    /// Until when no other replica can have claimed it.
    sure_until: Instant,
    /// A renewal did not name it: another replica has the task.
    lost: bool,
}

/// What [`HeldLeases::fence`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fence {
    /// The event may go out.
    Open,
    /// Another replica took the task over; the run here must stop.
    Lost,
}

/// The leases of the tasks this replica runs, by task id (the server makes
/// task ids, unique across agents; the agent is checked too).
#[derive(Debug, Default)]
pub(crate) struct HeldLeases {
    map: Mutex<HashMap<String, Held>>,
    /// Wakes the renewal loop before its next tick.
    renew_now: Notify,
    /// Told after every renewal, whatever its outcome.
    renewed: Notify,
}

/// `at` plus `ttl`, capped.
fn after(at: Instant, ttl: Duration) -> Instant {
    at.checked_add(ttl.min(LONGEST)).unwrap_or(at)
}

impl HeldLeases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the lease on `task_id`, taken by a call that began at
    /// `asked` for `ttl`.
    pub fn hold(&self, scope: &Scope, task_id: &str, asked: Instant, ttl: Duration) {
        let held = Held {
            scope: scope.clone(),
            leased_at: Instant::now(),
            sure_until: after(asked, ttl),
            lost: false,
        };
        self.lock().insert(task_id.to_owned(), held);
    }

    /// Forgets the lease on a task whose run ended here, or was stopped.
    pub fn forget(&self, agent: &str, task_id: &str) {
        let mut map = self.lock();
        if map.get(task_id).is_some_and(|h| h.scope.agent == agent) {
            map.remove(task_id);
        }
    }

    /// Marks every lease lost: they are being handed over to the other
    /// replicas, so a run still going here publishes nothing more.
    pub fn give_up_all(&self) {
        for held in self.lock().values_mut() {
            held.lost = true;
        }
    }

    /// Takes in a renewal that began at `asked`, for `ttl`, and named
    /// `kept`: those are sure for another `ttl`; the leases taken before it
    /// began that it did not name were claimed by other replicas. Those are
    /// marked lost (their events are refused until the run's stop forgets
    /// them) and returned, each with its scope.
    pub fn renewed(
        &self,
        asked: Instant,
        ttl: Duration,
        kept: Vec<HeldLease>,
    ) -> Vec<(Scope, String)> {
        let kept: HashMap<String, String> =
            kept.into_iter().map(|h| (h.task_id, h.agent)).collect();
        let mut lost = Vec::new();
        for (task_id, held) in self.lock().iter_mut() {
            if held.lost {
                continue;
            }
            if kept.get(task_id) == Some(&held.scope.agent) {
                held.sure_until = held.sure_until.max(after(asked, ttl));
            } else if held.leased_at <= asked {
                held.lost = true;
                lost.push((held.scope.clone(), task_id.clone()));
            }
        }
        lost
    }

    /// Wakes whoever waits in [`fence`](Self::fence): a renewal ended, or
    /// failed.
    pub fn signal(&self) {
        self.renewed.notify_waiters();
    }

    /// The renewal loop waits here between ticks.
    pub async fn asked_to_renew(&self) {
        self.renew_now.notified().await;
    }

    /// Whether the task's events may go out now (`Some`), or must wait for
    /// a renewal (`None`).
    fn check(&self, agent: &str, task_id: &str) -> Option<Fence> {
        match self.lock().get(task_id) {
            Some(held) if held.scope.agent == agent => {
                if held.lost {
                    Some(Fence::Lost)
                } else if Instant::now() < held.sure_until {
                    Some(Fence::Open)
                } else {
                    None
                }
            }
            // Not leased here: never leased (the store could not be reached
            // when the run began), or its run ended or was stopped.
            _ => Some(Fence::Open),
        }
    }

    /// Returns once the lease on the task is surely this replica's (at once
    /// while its last renewal is recent) or known to be lost.
    pub async fn fence(&self, agent: &str, task_id: &str) -> Fence {
        loop {
            let renewed = self.renewed.notified();
            tokio::pin!(renewed);
            renewed.as_mut().enable();
            if let Some(fence) = self.check(agent, task_id) {
                return fence;
            }
            self.renew_now.notify_one();
            let _ = tokio::time::timeout(RENEWAL_WAIT, renewed).await;
        }
    }

    /// The fast path of [`fence`](Self::fence): `Some` when it need not
    /// wait.
    pub fn now(&self, agent: &str, task_id: &str) -> Option<Fence> {
        self.check(agent, task_id)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const TTL: Duration = Duration::from_secs(2);

    fn lease(agent: &str, task: &str) -> HeldLease {
        HeldLease {
            agent: agent.into(),
            task_id: task.into(),
        }
    }

    /// An event of task `t1` of agent `a` waiting at the fence.
    fn fence_t1(held: &Arc<HeldLeases>) -> tokio::task::JoinHandle<Fence> {
        let held = held.clone();
        tokio::spawn(async move { held.fence("a", "t1").await })
    }

    /// What the waiting event found, once it is let go.
    async fn settled(waiting: tokio::task::JoinHandle<Fence>) -> Fence {
        tokio::time::timeout(Duration::from_millis(100), waiting)
            .await
            .expect("let go")
            .expect("no panic")
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_does_not_name_a_lease_taken_before_it_reports_it_lost() {
        let held = HeldLeases::default();
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), TTL);
        held.hold(&scope, "t2", Instant::now(), TTL);
        tokio::time::advance(Duration::from_millis(10)).await;
        let asked = Instant::now();
        // Leased while the renewal ran: its row may not have been visible.
        tokio::time::advance(Duration::from_millis(1)).await;
        held.hold(&scope, "t3", asked, TTL);
        let lost = held.renewed(asked, TTL, vec![lease("a", "t1")]);
        assert_eq!(lost, [(scope.clone(), "t2".to_owned())]);
        assert_eq!(held.now("a", "t1"), Some(Fence::Open));
        assert_eq!(held.now("a", "t3"), Some(Fence::Open));
        // Lost until its run's stop forgets it, and reported once.
        assert_eq!(held.now("a", "t2"), Some(Fence::Lost));
        // The next renewal must name t3.
        let asked = Instant::now();
        let lost = held.renewed(asked, TTL, vec![lease("a", "t1")]);
        assert_eq!(lost, [(scope, "t3".to_owned())]);
        held.forget("a", "t2");
        assert_eq!(
            held.now("a", "t2"),
            Some(Fence::Open),
            "no longer leased here"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_after_a_pause_past_the_lease_waits_for_a_renewal() {
        let held = Arc::new(HeldLeases::default());
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), TTL);
        // Fresh: through at once.
        let fresh = tokio::time::timeout(Duration::from_millis(1), held.fence("a", "t1")).await;
        assert_eq!(fresh.ok(), Some(Fence::Open));
        // Past its time with no renewal: the event waits, and asks for one.
        tokio::time::advance(TTL).await;
        assert_eq!(held.now("a", "t1"), None);
        let waiting = fence_t1(&held);
        tokio::time::timeout(Duration::from_millis(100), held.asked_to_renew())
            .await
            .expect("the waiting event asked for a renewal");
        assert!(!waiting.is_finished());
        // A renewal that keeps it lets the event through.
        let asked = Instant::now();
        assert!(held.renewed(asked, TTL, vec![lease("a", "t1")]).is_empty());
        held.signal();
        assert_eq!(settled(waiting).await, Fence::Open, "through once renewed");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_of_a_lost_lease_is_refused_from_the_renewal_on() {
        let held = Arc::new(HeldLeases::default());
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), TTL);
        tokio::time::advance(TTL * 3).await;
        let waiting = fence_t1(&held);
        tokio::task::yield_now().await;
        let lost = held.renewed(Instant::now(), TTL, Vec::new());
        assert_eq!(lost.len(), 1);
        held.signal();
        assert_eq!(settled(waiting).await, Fence::Lost);
        // A later event too, without waiting.
        assert_eq!(held.now("a", "t1"), Some(Fence::Lost));
    }

    #[test]
    fn a_huge_time_to_live_does_not_overflow() {
        let held = HeldLeases::default();
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), Duration::MAX);
        assert!(
            held.renewed(Instant::now(), Duration::MAX, vec![lease("a", "t1")])
                .is_empty()
        );
        assert_eq!(held.now("a", "t1"), Some(Fence::Open));
    }
}
