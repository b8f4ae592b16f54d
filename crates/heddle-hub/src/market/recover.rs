//! At start: the reservations a stopped hub left open are settled from
//! their tasks as the store has them, so no money stays held for a task
//! that will never end. It runs after the store has failed the tasks the
//! stopped process left running, so each task is found terminal (settled
//! by the price table; a run's minutes are not known any more and count as
//! none), still waiting for its caller (kept), or missing (released: the
//! process stopped before the task was saved).

use std::{collections::HashMap, sync::Arc, time::Duration};

use heddle_store::{LedgerStore, Scope, StoreError, TaskStore};
use serde_json::Value;

use super::price::{Price, Usage, reported_tokens};

/// How many open reservations are looked at per pass.
const BATCH: usize = 500;

/// What [`settle_open`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Settled from a finished task.
    pub settled: usize,
    /// Released: the task was never saved, or its reference is unreadable.
    pub released: usize,
    /// Kept: the task waits for its caller.
    pub kept: usize,
}

/// Settles every open reservation whose task is over (module docs);
/// `prices` are the agents' current prices (an agent gone or free now
/// charges nothing).
pub async fn settle_open(
    ledger: &dyn LedgerStore,
    tasks: &dyn TaskStore,
    prices: &HashMap<String, Price>,
) -> Result<Recovered, StoreError> {
    let mut done = Recovered::default();
    let mut seen = std::collections::HashSet::new();
    loop {
        // Those kept (tasks waiting for their callers) stay open and come
        // first again: each pass reads past what was seen.
        let open = ledger
            .open_reservations(seen.len().saturating_add(BATCH))
            .await?;
        let fresh: Vec<_> = open
            .into_iter()
            .filter(|r| seen.insert(r.id.clone()))
            .collect();
        if fresh.is_empty() {
            return Ok(done);
        }
        for r in fresh {
            let Some((agent, owner, task_id)) = parse_ref(&r.task) else {
                ledger.settle(&r.id, 0).await?;
                done.released += 1;
                continue;
            };
            let task = tasks
                .load(&Scope::new(agent.clone(), owner), &task_id)
                .await?;
            let Some(task) = task else {
                ledger.settle(&r.id, 0).await?;
                done.released += 1;
                continue;
            };
            let state = task
                .status
                .as_ref()
                .map_or(heddle_core::v1::TaskState::Failed, |s| s.state());
            if !state.is_terminal() {
                done.kept += 1;
                continue;
            }
            let skill = skill_of(&r.task);
            let charge = prices.get(&agent).map_or(0, |p| {
                p.for_skill(skill.as_deref())
                    .charge(Usage {
                        state,
                        tokens: reported_tokens(&task),
                        worked: Duration::ZERO,
                    })
                    .minor
            });
            ledger.settle(&r.id, charge).await?;
            done.settled += 1;
        }
    }
}

/// Settles what [`settle_open`] finds, logging the outcome; for a hub's
/// start, where a failure must not stop the hub.
pub async fn at_start(
    ledger: Arc<dyn LedgerStore>,
    tasks: Arc<dyn TaskStore>,
    prices: HashMap<String, Price>,
) {
    match settle_open(ledger.as_ref(), tasks.as_ref(), &prices).await {
        Ok(r) if r == Recovered::default() => {}
        Ok(r) => tracing::info!(
            settled = r.settled,
            released = r.released,
            kept = r.kept,
            "settled the reservations a stopped hub left open"
        ),
        Err(e) => tracing::error!(error = %e, "could not settle open reservations"),
    }
}

/// The skill whose price a reservation's task pays, when it has one.
pub fn skill_of(task: &str) -> Option<String> {
    let v: Value = serde_json::from_str(task).ok()?;
    v.get("skill")?.as_str().map(str::to_owned)
}

fn parse_ref(task: &str) -> Option<(String, String, String)> {
    let v: Value = serde_json::from_str(task).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((s("agent")?, s("owner")?, s("task")?))
}
