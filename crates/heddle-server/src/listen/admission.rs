//! Which connections the accept loop takes: a cap on all of them, a cap per
//! client address, and a calm reaction to accept errors.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ConnLimits;

/// The connection caps of one listener.
pub(super) struct Admission {
    slots: Arc<Semaphore>,
    per_ip: Arc<PerIp>,
}

struct PerIp {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// Held for as long as an admitted connection is open.
pub(super) struct Ticket {
    _slot: OwnedSemaphorePermit,
    ip: IpAddr,
    per_ip: Arc<PerIp>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.per_ip.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    pub(super) fn new(limits: &ConnLimits) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            per_ip: Arc::new(PerIp {
                max: limits.max_connections_per_ip,
                open: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Waits for a free connection slot.
    pub(super) async fn slot(&self) -> OwnedSemaphorePermit {
        match self.slots.clone().acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed; wait forever rather than spin.
            Err(_) => std::future::pending().await,
        }
    }

    /// Admits a connection from `ip` into `slot`, unless that address has
    /// its share open already.
    pub(super) fn admit(&self, slot: OwnedSemaphorePermit, ip: IpAddr) -> Option<Ticket> {
        let mut open = self.per_ip.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.per_ip.max {
            return None;
        }
        *n += 1;
        drop(open);
        Some(Ticket {
            _slot: slot,
            ip,
            per_ip: self.per_ip.clone(),
        })
    }
}

/// Backs off after failed accepts (out of file descriptors, mostly) from
/// 5 ms up to 1 s, and logs one warning every 10 s at most, with the count.
#[derive(Debug, Default)]
pub(super) struct AcceptBackoff {
    pause: Option<Duration>,
    last_warned: Option<tokio::time::Instant>,
    unreported: u64,
}

const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);
const WARN_EVERY: Duration = Duration::from_secs(10);

impl AcceptBackoff {
    pub(super) async fn failed(&mut self, error: &std::io::Error) {
        self.unreported = self.unreported.saturating_add(1);
        let now = tokio::time::Instant::now();
        if self.last_warned.is_none_or(|at| now - at >= WARN_EVERY) {
            tracing::warn!(
                failures = self.unreported,
                "accept failed: {error} (backing off; repeats are logged every 10 s)"
            );
            self.last_warned = Some(now);
            self.unreported = 0;
        }
        let pause = self
            .pause
            .map_or(FIRST_PAUSE, |p| (p * 2).min(LONGEST_PAUSE));
        self.pause = Some(pause);
        tokio::time::sleep(pause).await;
    }

    pub(super) fn succeeded(&mut self) {
        self.pause = None;
    }

    #[cfg(test)]
    fn pause(&self) -> Option<Duration> {
        self.pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_address_past_its_share_is_refused_and_others_are_not() {
        let limits = ConnLimits {
            max_connections: 10,
            max_connections_per_ip: 2,
            ..ConnLimits::default()
        };
        let a = Admission::new(&limits);
        let one = IpAddr::from([127, 0, 0, 1]);
        let two: IpAddr = IpAddr::from([127, 0, 0, 2]);
        let t1 = a.admit(a.slot().await, one);
        let t2 = a.admit(a.slot().await, one);
        assert!(t1.is_some() && t2.is_some());
        assert!(
            a.admit(a.slot().await, one).is_none(),
            "third from one address"
        );
        assert!(a.admit(a.slot().await, two).is_some(), "another address");
        drop(t1);
        assert!(
            a.admit(a.slot().await, one).is_some(),
            "a slot freed by a close"
        );
    }

    #[tokio::test]
    async fn at_the_cap_the_next_slot_waits_for_a_close() {
        let limits = ConnLimits {
            max_connections: 1,
            ..ConnLimits::default()
        };
        let a = Admission::new(&limits);
        let held = a.admit(a.slot().await, IpAddr::from([127, 0, 0, 1]));
        let waiting = tokio::time::timeout(Duration::from_millis(50), a.slot()).await;
        assert!(waiting.is_err(), "a second slot while the first is held");
        drop(held);
        let freed = tokio::time::timeout(Duration::from_millis(50), a.slot()).await;
        assert!(freed.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn accept_failures_back_off_to_a_second_and_reset_on_success() {
        let mut b = AcceptBackoff::default();
        let e = std::io::Error::other("EMFILE");
        for _ in 0..12 {
            b.failed(&e).await;
        }
        assert_eq!(b.pause(), Some(LONGEST_PAUSE));
        b.succeeded();
        assert_eq!(b.pause(), None);
    }
}
