//! A task's deadline: the a2ahub form's `options.timeout_ms`, kept in the
//! request metadata under [`MARKET_EXT`] as `deadlineMs` (milliseconds
//! since the Unix epoch, set by the hub when it accepted the task). An A2A
//! caller may give `timeoutMs` there instead, counted from when the agent
//! starts. A task still running at its deadline is stopped and ends FAILED
//! with the reason, which releases what it held (a failed task pays
//! nothing).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use serde_json::Value;

use super::{MARKET_EXT, now_ms};

/// `inner`, stopped at the deadline its requests carry.
pub fn wrap(inner: Arc<dyn AgentExecutor>) -> Arc<dyn AgentExecutor> {
    Arc::new(Deadline { inner })
}

struct Deadline {
    inner: Arc<dyn AgentExecutor>,
}

/// How long the run may take, and the timeout the caller gave (for the
/// reason), when the request says.
fn budget_of(ctx: &RequestContext) -> Option<(Duration, u64)> {
    let ext = ctx.metadata.as_ref()?.0.get(MARKET_EXT)?;
    let timeout = ext.get("timeoutMs").and_then(Value::as_u64);
    if let Some(at) = ext.get("deadlineMs").and_then(Value::as_i64) {
        let left = at.saturating_sub(now_ms()).max(0);
        let left = u64::try_from(left).unwrap_or(0);
        return Some((Duration::from_millis(left), timeout.unwrap_or(left)));
    }
    timeout.map(|t| (Duration::from_millis(t), t))
}

#[async_trait]
impl AgentExecutor for Deadline {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let Some((left, timeout)) = budget_of(&ctx) else {
            return self.inner.execute(ctx, events).await;
        };
        let run = self.inner.execute(ctx, events.clone());
        match tokio::time::timeout(left, run).await {
            Ok(result) => result,
            Err(_) => {
                let reason =
                    format!("the task ran past its timeout ({timeout} ms) and was stopped");
                events.fail(&reason).await?;
                Ok(())
            }
        }
    }

    async fn cancel(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        self.inner.cancel(ctx, events).await
    }
    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
}
