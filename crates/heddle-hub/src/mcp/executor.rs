//! [`McpAgent`]: the executor that answers a hub task with one MCP tool
//! call.

use std::{sync::Arc, time::Duration};

use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use rmcp::{
    RoleClient, ServiceError,
    model::{ProgressNotificationParam, RequestId, ServerResult},
    service::Peer,
};
use tokio::time::Instant;

use super::{
    result::{self, Outcome},
    server::McpServer,
};

/// How long, in all, progress sent before a call's answer may trail it.
const PROGRESS_GRACE: Duration = Duration::from_millis(50);

/// An MCP server's tools as a hub executor.
///
/// * The message names the call ([`super::tools`]); the handler's message
///   check has refused any that does not fit before a task was made.
/// * While the tool runs, each progress notification is a WORKING status
///   message (`message`, else `progress N of M`).
/// * The result is one artifact named after the tool; an error result
///   fails the task with the tool's message, as does a JSON-RPC error, a
///   timeout (`call_timeout_secs`) or the server exiting mid-call (which
///   also starts it again, after a backoff, on the next call).
/// * A cancel sends `notifications/cancelled` for the call at once.
#[derive(Debug)]
pub struct McpAgent {
    server: Arc<McpServer>,
}

impl McpAgent {
    pub(crate) fn new(server: Arc<McpServer>) -> Self {
        Self { server }
    }

    async fn run(&self, ctx: &RequestContext, events: &TaskEvents) -> Result<(), String> {
        let tools = self.server.tools();
        let call = tools.resolve(&ctx.message).map_err(|e| e.message)?;
        let tool = call.tool.clone();
        let timeout = Duration::from_secs(self.server.settings().call_timeout_secs);
        let deadline = Instant::now() + timeout;
        events
            .working(Some(&format!("calling the MCP tool {tool:?}")))
            .await
            .map_err(|e| e.to_string())?;
        let mut pending = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Ok(()),
            p = self.server.start_call(call, deadline) => p?,
        };
        let conn = pending.connection();
        // Dropped before the answer (a cancel, a timeout, the task's
        // future dropped): the server is told the call is abandoned.
        let mut abandon = Abandon {
            server: self.server.clone(),
            peer: Some(pending.peer()),
            id: pending.id(),
            reason: "canceled by the A2A caller",
        };
        let response = &mut pending.handle.rx;
        let progress = &mut pending.progress;
        let mut unfinished = false;
        let answer = loop {
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Ok(()),
                // Before the answer: progress sent before it is shown first.
                Some(p) = progress.recv() => {
                    unfinished = p.total.is_none_or(|t| p.progress < t);
                    working(events, &p).await?;
                }
                r = &mut *response => break r,
                () = tokio::time::sleep_until(deadline) => {
                    abandon.reason = "timed out";
                    return Err(format!(
                        "the MCP tool {tool:?} did not answer within {} s",
                        timeout.as_secs()
                    ));
                }
            }
        };
        abandon.peer = None;
        // rmcp hands each notification to a task of its own and the answer
        // straight to the caller, so progress sent just before the answer
        // may land just after it: once a call has reported progress that
        // did not reach its total, such stragglers are awaited briefly
        // (at most PROGRESS_GRACE in all, never past the deadline).
        let grace_end = (Instant::now() + PROGRESS_GRACE).min(deadline);
        while unfinished {
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Ok(()),
                next = tokio::time::timeout_at(grace_end, progress.recv()) => match next {
                    Ok(Some(p)) => {
                        unfinished = p.total.is_none_or(|t| p.progress < t);
                        working(events, &p).await?;
                    }
                    Ok(None) | Err(_) => break,
                },
            }
        }
        let result = match answer {
            Ok(Ok(ServerResult::CallToolResult(r))) => serde_json::to_value(&r)
                .map_err(|e| format!("the tool's result cannot be read: {e}"))?,
            Ok(Ok(ServerResult::InputRequiredResult(_))) => {
                return Err(format!(
                    "the MCP tool {tool:?} asked for input, which the hub does not relay to A2A callers"
                ));
            }
            Ok(Ok(_)) => {
                return Err(format!(
                    "the MCP tool {tool:?} answered with something other than a tool result"
                ));
            }
            Ok(Err(ServiceError::McpError(e))) => {
                let message: String = e.message.chars().take(1000).collect();
                return Err(self
                    .server
                    .scrub(&format!("the MCP tool {tool:?} failed: {message}")));
            }
            Ok(Err(ServiceError::TransportClosed)) | Err(_) => {
                return Err(self.server.lost_call(&conn));
            }
            Ok(Err(e)) => {
                return Err(self
                    .server
                    .scrub(&format!("the MCP tool {tool:?} failed: {e}")));
            }
        };
        self.server.succeeded().await;
        match result::outcome(&result) {
            Outcome::ToolError(reason) => Err(cut(&self.server.scrub(&reason))),
            Outcome::Parts(parts) => {
                let artifact = heddle_core::v1::Artifact {
                    artifact_id: format!("{}-result", ctx.task_id),
                    name: tool,
                    parts,
                    ..Default::default()
                };
                events
                    .artifact(artifact, false, true)
                    .await
                    .map_err(|e| e.to_string())?;
                events.complete(None).await.map_err(|e| e.to_string())
            }
        }
    }
}

/// Longest failure reason or progress message, in characters: cut after
/// secrets are scrubbed, so no part of one survives the cut.
const MAX_REASON: usize = 1000;

fn cut(text: &str) -> String {
    text.chars().take(MAX_REASON).collect()
}

/// A progress notification as a WORKING status message.
async fn working(events: &TaskEvents, p: &ProgressNotificationParam) -> Result<(), String> {
    let text = match (&p.message, p.total) {
        (Some(m), _) if !m.is_empty() => cut(m),
        (_, Some(total)) => format!("progress {} of {}", p.progress, total),
        _ => format!("progress {}", p.progress),
    };
    events.working(Some(&text)).await.map_err(|e| e.to_string())
}

/// Sends `notifications/cancelled` for a call when dropped armed (`peer`
/// set): whichever way the wait for its answer ends early.
struct Abandon {
    server: Arc<McpServer>,
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
    reason: &'static str,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let (server, id, reason) = (self.server.clone(), self.id.clone(), self.reason);
            tokio::spawn(async move { server.cancel_call(&peer, id, reason).await });
        }
    }
}

#[async_trait::async_trait]
impl AgentExecutor for McpAgent {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if let Err(reason) = self.run(&ctx, &events).await {
            events.fail(&reason).await?;
        }
        Ok(())
    }
}
