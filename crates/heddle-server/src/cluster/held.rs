//! The leases this replica holds, as far as it knows, and the fence every
//! event of a leased run passes.
//!
//! A lease is renewed every third of its time to live. Until a lease's time
//! after the last renewal that named it has passed (by this process's
//! monotonic clock, which runs on while the process is stopped), no other
//! replica can have claimed it, and the run's events go through at once.
//! Past that (the process was paused, or the store could not be reached),
//! an event waits for a renewal to say whether the lease is still held: a
//! lease the renewal does not name was claimed by another replica, which
//! ends or resumes the task, and the run here is stopped before anything
//! more of it is saved, published or sent.

use std::{sync::Mutex, time::Duration};

use foldhash::HashMap;
use heddle_store::{HeldLease, Scope};
use tokio::{sync::Notify, time::Instant};

/// How long an event waits for one renewal before it asks again.
const RENEWAL_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Held {
    scope: Scope,
    /// When the lease was taken (its row is committed by then): only a
    /// renewal that began after this can be expected to name it.
    leased_at: Instant,
    /// Until when no other replica can have claimed it.
    sure_until: Instant,
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
            sure_until: asked + ttl,
        };
        self.lock().insert(task_id.to_owned(), held);
    }

    /// Forgets the lease on a task whose run ended here.
    pub fn forget(&self, agent: &str, task_id: &str) {
        let mut map = self.lock();
        if map.get(task_id).is_some_and(|h| h.scope.agent == agent) {
            map.remove(task_id);
        }
    }

    /// Forgets every lease (they were handed over); how many there were.
    pub fn clear(&self) -> usize {
        let mut map = self.lock();
        let n = map.len();
        map.clear();
        n
    }

    /// Takes in a renewal that began at `asked`, for `ttl`, and named
    /// `kept`: those are sure for another `ttl`; the leases taken before it
    /// began that it did not name were claimed by other replicas, and are
    /// forgotten and returned, each with its scope.
    pub fn renewed(
        &self,
        asked: Instant,
        ttl: Duration,
        kept: Vec<HeldLease>,
    ) -> Vec<(Scope, String)> {
        let kept: HashMap<String, String> =
            kept.into_iter().map(|h| (h.task_id, h.agent)).collect();
        let mut lost = Vec::new();
        self.lock().retain(|task_id, held| {
            if kept.get(task_id) == Some(&held.scope.agent) {
                held.sure_until = held.sure_until.max(asked + ttl);
                true
            } else if held.leased_at <= asked {
                lost.push((held.scope.clone(), task_id.clone()));
                false
            } else {
                true
            }
        });
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

    /// Returns once the lease on the task is surely this replica's (at once
    /// while its last renewal is recent), or the task is no longer leased
    /// here: not leased at all (its store could not be reached when the run
    /// began), ended, or lost, which the caller learns from the task itself
    /// (the renewal that finds a lease lost stops the task's run before it
    /// wakes anyone here).
    pub async fn fence(&self, agent: &str, task_id: &str) {
        loop {
            let renewed = self.renewed.notified();
            tokio::pin!(renewed);
            renewed.as_mut().enable();
            if self.is_sure(agent, task_id) {
                return;
            }
            self.renew_now.notify_one();
            let _ = tokio::time::timeout(RENEWAL_WAIT, renewed).await;
        }
    }

    /// Whether the task's events may go out now: it has no lease recorded
    /// here, or the lease is sure. The fast path of [`fence`](Self::fence).
    pub fn is_sure(&self, agent: &str, task_id: &str) -> bool {
        match self.lock().get(task_id) {
            Some(held) if held.scope.agent == agent => Instant::now() < held.sure_until,
            _ => true,
        }
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
        assert!(held.is_sure("a", "t1"));
        assert!(held.is_sure("a", "t3"));
        // The next renewal must name t3.
        let asked = Instant::now();
        let lost = held.renewed(asked, TTL, vec![lease("a", "t1")]);
        assert_eq!(lost, [(scope, "t3".to_owned())]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_after_a_pause_past_the_lease_waits_for_a_renewal() {
        let held = Arc::new(HeldLeases::default());
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), TTL);
        // Fresh: through at once.
        tokio::time::timeout(Duration::from_millis(1), held.fence("a", "t1"))
            .await
            .expect("a fresh lease lets events through");
        // Past its time with no renewal: the event waits, and asks for one.
        tokio::time::advance(TTL).await;
        assert!(!held.is_sure("a", "t1"));
        let waiting = tokio::spawn({
            let held = held.clone();
            async move { held.fence("a", "t1").await }
        });
        tokio::time::timeout(Duration::from_millis(100), held.asked_to_renew())
            .await
            .expect("the waiting event asked for a renewal");
        assert!(!waiting.is_finished());
        // A renewal that keeps it lets the event through.
        let asked = Instant::now();
        assert!(held.renewed(asked, TTL, vec![lease("a", "t1")]).is_empty());
        held.signal();
        tokio::time::timeout(Duration::from_millis(100), waiting)
            .await
            .expect("through once renewed")
            .expect("no panic");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_of_a_lost_lease_is_let_go_once_the_renewal_told_the_task() {
        let held = Arc::new(HeldLeases::default());
        let scope = Scope::new("a", "alice");
        held.hold(&scope, "t1", Instant::now(), TTL);
        tokio::time::advance(TTL * 3).await;
        let waiting = tokio::spawn({
            let held = held.clone();
            async move { held.fence("a", "t1").await }
        });
        tokio::task::yield_now().await;
        let lost = held.renewed(Instant::now(), TTL, Vec::new());
        assert_eq!(lost.len(), 1);
        held.signal();
        tokio::time::timeout(Duration::from_millis(100), waiting)
            .await
            .expect("let go")
            .expect("no panic");
        assert!(held.is_sure("a", "t1"), "no longer leased here");
    }
}
