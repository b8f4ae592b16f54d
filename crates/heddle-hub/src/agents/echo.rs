use async_trait::async_trait;
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};

/// Completes at once with an artifact holding the caller's text.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

#[async_trait]
impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.artifact_text("echo", ctx.text()).await?;
        events.complete(None).await?;
        Ok(())
    }
}
