//! How many executions of a handler run at once, and the order in which
//! the others wait ([`Concurrency`], set with
//! [`HandlerBuilder::concurrency`](super::HandlerBuilder::concurrency)).
//!
//! A send takes its place before any task is made for it: a running place
//! when one is free and nobody waits, else a place in the queue, else it is
//! refused (ResourceExhausted). A queued execution's task exists meanwhile
//! (SUBMITTED, or still INPUT_REQUIRED for a reply), so callers can read,
//! follow and cancel it. When a running execution ends, however it ends,
//! its [`Slot`] is dropped and the first waiter, high priority before
//! normal before low and in arrival order within one, takes its place.

use std::{
    cmp::Reverse,
    collections::BTreeMap,
    num::NonZeroUsize,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use heddle_core::A2aError;
use tokio::sync::oneshot;

use crate::agent::RequestContext;

/// How urgent an execution is when it has to wait for a place: the queue
/// starts high before normal before low, and within one priority in the
/// order the sends arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// After every other waiting execution.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Before every normal and low one.
    High,
}

impl Priority {
    /// Every priority, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Normal, Priority::High];

    /// Its name: `"low"`, `"normal"` or `"high"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
        }
    }

    /// The priority named `name` (as [`Priority::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// Reads an execution's priority from its request (its metadata, say); run
/// only for an execution that has to wait.
pub type PriorityFn = Arc<dyn Fn(&RequestContext) -> Priority + Send + Sync>;

/// The longest `Retry-After` a full queue answers with.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// At most `max_running` executions of a handler at once, `max_queued`
/// more waiting in priority order, and any beyond refused.
///
/// Cheap to clone; clones share the places and the queue, like
/// [`crate::StreamSlots`]: a server that rebuilds an agent's handler (a
/// new card, the same limits) gives the new one the old one's
/// `Concurrency`, so executions the old handler started still count.
#[derive(Clone)]
pub struct Concurrency {
    gate: Arc<Gate>,
    priority: Option<PriorityFn>,
}

impl std::fmt::Debug for Concurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Concurrency")
            .field("max_running", &self.gate.max_running)
            .field("max_queued", &self.gate.max_queued)
            .field("priority", &self.priority.is_some())
            .finish_non_exhaustive()
    }
}

impl Concurrency {
    /// At most `max_running` executions at once and `max_queued` waiting
    /// (0: none wait; a send finding every place taken is refused); every
    /// waiter normal until [`with_priority`](Self::with_priority).
    pub fn new(max_running: NonZeroUsize, max_queued: usize) -> Self {
        Self {
            gate: Arc::new(Gate {
                max_running: max_running.get(),
                max_queued,
                state: Mutex::new(GateState::default()),
            }),
            priority: None,
        }
    }

    /// Orders waiters by `priority`, read from each waiting execution's
    /// request.
    #[must_use]
    pub fn with_priority(mut self, priority: PriorityFn) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The most executions running at once.
    pub fn max_running(&self) -> usize {
        self.gate.max_running
    }

    /// The most executions waiting.
    pub fn max_queued(&self) -> usize {
        self.gate.max_queued
    }

    /// Executions running now.
    pub fn running(&self) -> usize {
        self.gate.lock().running
    }

    /// Executions waiting now (those about to, included).
    pub fn queued(&self) -> usize {
        self.gate.lock().queued
    }

    /// The priority of an execution that has to wait.
    pub(crate) fn priority_of(&self, ctx: &RequestContext) -> Priority {
        self.priority.as_ref().map_or(Priority::Normal, |f| f(ctx))
    }

    /// A place for one more execution: to run now, to wait in the queue,
    /// or ResourceExhausted when the queue is full.
    pub(crate) fn admit(&self) -> Result<Admission, A2aError> {
        let gate = &self.gate;
        let mut st = gate.lock();
        // Nobody jumps the queue: with waiters, a newcomer waits too (it is
        // granted at once if a place is free by the time it queues).
        if st.running < gate.max_running && st.queued == 0 {
            st.running += 1;
            return Ok(Admission::Run(Slot {
                gate: gate.clone(),
                started: Instant::now(),
            }));
        }
        if st.queued < gate.max_queued {
            st.queued += 1;
            let seq = st.next_seq;
            st.next_seq = st.next_seq.wrapping_add(1);
            return Ok(Admission::Wait(Place {
                gate: gate.clone(),
                seq,
                state: PlaceState::Reserved,
            }));
        }
        let wait = st.retry_after(gate.max_running);
        drop(st);
        Err(A2aError::exhausted(
            format!(
                "this agent runs {} tasks at once and has {} waiting, the most it queues; retry later",
                gate.max_running, gate.max_queued
            ),
            wait,
        ))
    }
}

/// Where an admitted execution stands.
pub(crate) enum Admission {
    /// It runs now, holding this place.
    Run(Slot),
    /// It waits for a running place.
    Wait(Place),
}

struct Gate {
    max_running: usize,
    max_queued: usize,
    state: Mutex<GateState>,
}

/// A waiter's position: priority first (high first), then arrival.
type Key = (Reverse<Priority>, u64);

#[derive(Default)]
struct GateState {
    running: usize,
    /// Places taken in the queue: waiting there, or about to.
    queued: usize,
    /// The next arrival's number (FIFO within a priority).
    next_seq: u64,
    /// Who waits, first to start first; each is told through its sender.
    waiters: BTreeMap<Key, oneshot::Sender<()>>,
    /// How long executions run, as a moving average (1/8 of each new one).
    mean_run: Option<Duration>,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Every change is a few counter and map updates made whole under
        // the lock; a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl GateState {
    /// Gives free running places to the first waiters.
    fn dispatch(&mut self, max_running: usize) {
        while self.running < max_running {
            let Some((_, tell)) = self.waiters.pop_first() else {
                return;
            };
            // Counted as running whether or not the waiter still listens:
            // its place's drop, which finds it gone from `waiters`, gives
            // the running place back.
            let _ = tell.send(());
            self.running += 1;
            self.queued = self.queued.saturating_sub(1);
        }
    }

    /// When a queue place is likely to free: a waiter starts each time an
    /// execution ends, about every mean run time divided by the running
    /// places; one second before any execution has ended, at most a minute.
    fn retry_after(&self, max_running: usize) -> Duration {
        let divisor = u32::try_from(max_running).unwrap_or(u32::MAX).max(1);
        self.mean_run
            .map_or(Duration::from_secs(1), |mean| mean / divisor)
            .clamp(Duration::from_secs(1), MAX_RETRY_AFTER)
    }
}

/// A running place, given back (and to the first waiter) when dropped: at
/// the end of the execution, whether the agent finished, failed, panicked
/// or was aborted.
pub(crate) struct Slot {
    gate: Arc<Gate>,
    started: Instant,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let ran = self.started.elapsed();
        let mut st = self.gate.lock();
        st.running = st.running.saturating_sub(1);
        st.mean_run = Some(match st.mean_run {
            None => ran,
            Some(mean) => (mean.saturating_mul(7).saturating_add(ran)) / 8,
        });
        st.dispatch(self.gate.max_running);
    }
}

/// A place in the queue, given back when dropped unless it became a
/// running [`Slot`].
pub(crate) struct Place {
    gate: Arc<Gate>,
    seq: u64,
    state: PlaceState,
}

enum PlaceState {
    /// Counted in the queue, not yet in its order.
    Reserved,
    /// In the order under this key, told through the receiver.
    Waiting(Key, oneshot::Receiver<()>),
    /// Became a running slot.
    Done,
}

impl Place {
    /// Takes its turn in the queue at `priority`, at once (so a place that
    /// frees from now on goes to the first waiter in order, this one
    /// included); granted at once if a running place is free.
    pub(crate) fn enqueue(&mut self, priority: Priority) {
        if !matches!(self.state, PlaceState::Reserved) {
            return;
        }
        let key = (Reverse(priority), self.seq);
        let (tell, told) = oneshot::channel();
        let mut st = self.gate.lock();
        st.waiters.insert(key, tell);
        self.state = PlaceState::Waiting(key, told);
        // A place may have freed between admission and now.
        st.dispatch(self.gate.max_running);
    }

    /// Waits until its turn comes (after [`enqueue`](Self::enqueue), which
    /// it does at normal priority if not done yet). Dropped while it waits
    /// (a cancel), the place leaves the queue.
    pub(crate) async fn wait(&mut self) -> Slot {
        self.enqueue(Priority::Normal);
        if let PlaceState::Waiting(_, told) = &mut self.state {
            // The sender is only dropped after it sent: `dispatch` takes it
            // out, or this place's own drop, which cannot run meanwhile.
            let _ = told.await;
        }
        self.state = PlaceState::Done;
        Slot {
            gate: self.gate.clone(),
            started: Instant::now(),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut st = self.gate.lock();
        match std::mem::replace(&mut self.state, PlaceState::Done) {
            PlaceState::Done => {}
            PlaceState::Reserved => st.queued = st.queued.saturating_sub(1),
            PlaceState::Waiting(key, _) => {
                if st.waiters.remove(&key).is_some() {
                    st.queued = st.queued.saturating_sub(1);
                } else {
                    // Given a running place it never took: pass it on.
                    st.running = st.running.saturating_sub(1);
                    st.dispatch(self.gate.max_running);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn poll_once<F: std::future::Future>(
        mut f: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await
    }

    fn two_running_one_queued() -> Concurrency {
        Concurrency::new(NonZeroUsize::MIN.saturating_add(1), 1)
    }

    #[test]
    fn places_run_then_queue_then_are_refused_with_a_retry_after() {
        let c = two_running_one_queued();
        let a = c.admit().expect("first");
        let b = c.admit().expect("second");
        assert!(matches!((&a, &b), (Admission::Run(_), Admission::Run(_))));
        let q = c.admit().expect("queued");
        assert!(matches!(q, Admission::Wait(_)));
        assert_eq!((c.running(), c.queued()), (2, 1));
        let refused = c.admit().err().expect("full");
        assert_eq!(refused.retry_after_secs(), Some(1));
        drop(q);
        assert_eq!(c.queued(), 0, "an unqueued place is given back");
        drop((a, b));
        assert_eq!(c.running(), 0);
    }

    #[tokio::test]
    async fn a_waiter_dropped_after_it_was_given_a_place_passes_it_on() {
        let c = Concurrency::new(NonZeroUsize::MIN, 2);
        let Ok(Admission::Run(running)) = c.admit() else {
            panic!("runs")
        };
        let Ok(Admission::Wait(mut first)) = c.admit() else {
            panic!("waits")
        };
        let Ok(Admission::Wait(mut second)) = c.admit() else {
            panic!("waits")
        };
        // Both queue, then the running one ends: the first is given its
        // place, but is dropped before it takes it (a cancel).
        first.enqueue(Priority::Normal);
        let mut w1 = Box::pin(first.wait());
        assert!(poll_once(w1.as_mut()).await.is_pending());
        second.enqueue(Priority::Normal);
        let mut w2 = Box::pin(second.wait());
        assert!(poll_once(w2.as_mut()).await.is_pending());
        drop(running);
        drop(w1);
        drop(first);
        let slot = tokio::time::timeout(Duration::from_secs(1), w2)
            .await
            .expect("the second is given the place");
        assert_eq!((c.running(), c.queued()), (1, 0));
        drop(slot);
        drop(second);
        assert_eq!(c.running(), 0);
    }

    #[test]
    fn a_full_queue_asks_for_the_mean_run_time_per_running_place() {
        let st = GateState {
            mean_run: Some(Duration::from_secs(20)),
            ..GateState::default()
        };
        assert_eq!(st.retry_after(4), Duration::from_secs(5));
        assert_eq!(st.retry_after(100), Duration::from_secs(1), "at least 1 s");
        let slow = GateState {
            mean_run: Some(Duration::from_secs(3600)),
            ..GateState::default()
        };
        assert_eq!(slow.retry_after(1), MAX_RETRY_AFTER);
    }
}
