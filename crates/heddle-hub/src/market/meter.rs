//! A per_minute task stopped when its hold runs out: the agent is stopped
//! when the time its budget pays for has passed, and the task waits for
//! its caller (INPUT_REQUIRED, with a status message saying what it has
//! used and how to go on) or, when the caller asked for no top-up
//! (`"topUp": false` beside the budget), ends FAILED. A reply carrying a
//! larger budget raises the hold and the agent runs again, with the time
//! the raise pays for. Per-token prices are charged when the agent
//! reports its tokens, at the end of a turn, so they are capped at the
//! hold rather than stopped.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use serde_json::Value;

use super::{MARKET_EXT, gate::MarketGate};

/// `inner`, stopped when the task's hold at `gate`'s per-minute price runs out.
pub fn wrap(inner: Arc<dyn AgentExecutor>, gate: Arc<MarketGate>) -> Arc<dyn AgentExecutor> {
    Arc::new(Metered { inner, gate })
}

struct Metered {
    inner: Arc<dyn AgentExecutor>,
    gate: Arc<MarketGate>,
}

/// Whether the caller takes a question instead of a failure when the
/// budget runs out (the default).
fn top_up(ctx: &RequestContext) -> bool {
    [ctx.metadata.as_ref(), ctx.message.metadata.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|m| m.0.get(MARKET_EXT)?.get("topUp").and_then(Value::as_bool))
        .unwrap_or(true)
}

#[async_trait]
impl AgentExecutor for Metered {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let Some((left, hold)) = self.gate.allowance(&ctx.task_id).await else {
            return self.inner.execute(ctx, events).await;
        };
        let asks = top_up(&ctx);
        let task_id = ctx.task_id.clone();
        let run = self.inner.execute(ctx, events.clone());
        match tokio::time::timeout(left.max(Duration::from_millis(1)), run).await {
            Ok(result) => result,
            Err(_) if asks => {
                let question = format!(
                    "The budget is used up: {} pays for the work so far. Reply to this task \
                     with a larger budget (metadata \"{MARKET_EXT}\": {{\"budget\": …}}) to go on.",
                    hold.display()
                );
                events.input_required(&question).await?;
                Ok(())
            }
            Err(_) => {
                self.gate.ran_out(&task_id);
                let reason = format!(
                    "the budget ran out: {} paid for the work done, and no top-up was allowed",
                    hold.display()
                );
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
