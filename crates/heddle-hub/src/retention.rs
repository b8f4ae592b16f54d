//! Retention: ended tasks and their push configs deleted once they are old
//! enough, so a long-running hub's store does not grow without bound.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use heddle_store::StoreError;

use crate::Shared;

/// How long the hub keeps what ended (see [`HubBuilder::retention`](crate::HubBuilder::retention)).
/// Age is counted from the task's last status time: when it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Ended tasks (COMPLETED, FAILED, CANCELED, REJECTED) older than this
    /// are deleted with their push configs and links; `None` keeps them.
    pub tasks: Option<Duration>,
    /// The push configs of tasks that ended longer ago than this are
    /// deleted (the task stays); an ended task sends nothing more.
    /// `None` keeps them.
    pub push_configs: Option<Duration>,
    /// How often the hub looks.
    pub every: Duration,
}

impl Default for Retention {
    /// Tasks kept; push configs kept a week after their task ended; a look
    /// every ten minutes.
    fn default() -> Self {
        Self {
            tasks: None,
            push_configs: Some(Duration::from_secs(7 * 24 * 3600)),
            every: Duration::from_secs(600),
        }
    }
}

/// Deletions per statement: a pass removes a large backlog in batches, so
/// no one transaction holds the store for long.
const BATCH: usize = 500;

impl Retention {
    /// Whether there is anything to delete, ever.
    pub(crate) fn is_on(&self) -> bool {
        self.tasks.is_some() || self.push_configs.is_some()
    }

    /// Runs a pass every `every` until the hub is gone.
    pub(crate) fn spawn(self, shared: Weak<Shared>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.every.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if let Err(e) = self.pass(&shared).await {
                    tracing::warn!(error = %e, "retention: could not delete what ended");
                }
            }
        });
    }

    /// One pass: configs first (a task deleted next takes its own), then
    /// tasks.
    async fn pass(&self, shared: &Arc<Shared>) -> Result<(), StoreError> {
        let now = crate::market::now_ms();
        if let (Some(keep), Some(push)) = (self.push_configs, shared.store.clone().push_store()) {
            let before = cut_off(now, keep);
            let total = in_batches(|| push.purge_finished_configs(before, BATCH)).await?;
            if total > 0 {
                tracing::info!(
                    tasks = total,
                    "retention: deleted the push configs of ended tasks"
                );
            }
        }
        if let Some(keep) = self.tasks {
            let before = cut_off(now, keep);
            let total = in_batches(|| shared.store.purge_finished(before, BATCH)).await?;
            if total > 0 {
                tracing::info!(tasks = total, "retention: deleted ended tasks");
            }
        }
        Ok(())
    }
}

/// Runs `purge` (a batch of at most [`BATCH`]) until a batch comes back
/// short; how many went in all.
async fn in_batches<F, Fut>(mut purge: F) -> Result<u64, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, StoreError>>,
{
    let mut total = 0u64;
    loop {
        let n = purge().await?;
        total = total.saturating_add(n);
        if n < BATCH as u64 {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// `now_ms` less `keep`, saturating.
fn cut_off(now_ms: i64, keep: Duration) -> i64 {
    now_ms.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX))
}
