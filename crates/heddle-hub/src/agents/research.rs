//! The delegation demo: `research` hands its work on to `writer` and
//! `summarizer`, its siblings on the same hub, through
//! [`A2aClient::delegate`], so the chain, the hop limit, the deadline and a
//! cancel reach them.
//!
//! research (notes) ──► writer (report; asks who it is for) ──► back
//!                  ──► summarizer (summary of the report)
//!
//! The writer's question is the caller's to answer: research asks it as
//! its own INPUT_REQUIRED, and hands the answer to the writer's waiting
//! task (the policy "the parent asks"; an agent that knows the answer can
//! reply to the child itself instead, with the same call).

use async_trait::async_trait;
use heddle_client::{A2aClient, ClientError, ClientOptions, Delegate, SendReply};
use heddle_core::v1;
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents, delegation};

/// Where a hub's agents are served, under which each agent's id follows.
const AGENTS_PATH: &str = "/api/v1/agents/";

/// Gathers notes on a topic, has the writer write them up and the
/// summarizer sum the report up; completes with the report and the summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct Research;

/// Sums a text up: its first sentence, and its length.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summarizer;

/// The URL of agent `id` on the hub that serves the agent at `me` (an
/// interface URL of the form `…/api/v1/agents/{me}[/…]`).
fn sibling(me: &str, id: &str) -> Option<String> {
    let at = me.find(AGENTS_PATH)?;
    Some(format!("{}{AGENTS_PATH}{id}", &me[..at]))
}

fn failed(what: &str) -> impl FnOnce(ClientError) -> AgentError + '_ {
    move |e| AgentError::new(format!("{what}: {e}"))
}

/// A client of sibling `id`, for calls made for `ctx`'s task.
async fn delegate_to(
    id: &str,
    ctx: &RequestContext,
    events: &TaskEvents,
) -> Result<Delegate, AgentError> {
    let url = sibling(&ctx.agent, id)
        .ok_or_else(|| AgentError::new(format!("{} is not a hub agent's URL", ctx.agent)))?;
    let client = A2aClient::discover(&url, ClientOptions::default())
        .await
        .map_err(|e| AgentError::new(format!("finding the {id}: {e}")))?;
    client.delegate(ctx, events).map_err(failed("delegating"))
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
}

fn said(t: &v1::Task) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .unwrap_or_default()
}

fn artifact_text(t: &v1::Task) -> String {
    t.artifacts
        .iter()
        .flat_map(|a| a.parts.iter())
        .filter_map(v1::Part::as_text)
        .collect()
}

/// The task a reply made, or why there is none.
fn task(reply: SendReply, who: &str) -> Result<v1::Task, AgentError> {
    match reply {
        SendReply::Task(t) => Ok(t),
        SendReply::Message(m) => Err(AgentError::new(format!(
            "the {who} answered with a message, not a task: {}",
            m.text()
        ))),
    }
}

impl Research {
    /// First turn: notes, then the writer, whose question is asked back.
    async fn start(&self, ctx: &RequestContext, events: &TaskEvents) -> Result<(), AgentError> {
        let topic = ctx.text();
        events
            .working(Some(&format!("Gathering notes on {topic}.")))
            .await?;
        let notes = format!(
            "- what {topic} is, and where it comes from\n\
             - who it matters to, and why now\n\
             - the open questions about {topic}"
        );
        let writer = delegate_to("writer", ctx, events).await?;
        let draft = writer
            .send_text(&format!(
                "Write a report on {topic} from these notes:\n{notes}"
            ))
            .await;
        let draft = match draft {
            Err(ClientError::Canceled) => return Ok(()),
            other => task(other.map_err(failed("the writer"))?, "writer")?,
        };
        match state(&draft) {
            v1::TaskState::InputRequired => {
                events.input_required(&said(&draft)).await?;
                Ok(())
            }
            v1::TaskState::Completed => self.finish(ctx, events, &draft).await,
            s => Err(AgentError::new(format!(
                "the writer's task ended {}: {}",
                s.as_str_name(),
                said(&draft)
            ))),
        }
    }

    /// Second turn: the caller's answer goes to the writer's waiting task.
    async fn answer(
        &self,
        ctx: &RequestContext,
        events: &TaskEvents,
        prior: &v1::Task,
    ) -> Result<(), AgentError> {
        let Some(waiting) = delegation::children_of(prior.metadata.as_ref())
            .into_iter()
            .next_back()
        else {
            return Err(AgentError::new("no writer task is waiting for this answer"));
        };
        events.working(Some("Passing your answer on.")).await?;
        let writer = delegate_to("writer", ctx, events).await?;
        let mut message = A2aClient::user_message(vec![v1::Part::text(ctx.text())]);
        message.task_id = waiting.task_id;
        let req = v1::SendMessageRequest {
            message: Some(message),
            ..Default::default()
        };
        let report = match writer.send(req).await {
            Err(ClientError::Canceled) => return Ok(()),
            other => task(other.map_err(failed("the writer"))?, "writer")?,
        };
        if state(&report) != v1::TaskState::Completed {
            return Err(AgentError::new(format!(
                "the writer's task ended {}: {}",
                state(&report).as_str_name(),
                said(&report)
            )));
        }
        self.finish(ctx, events, &report).await
    }

    /// The report, summed up by the summarizer; both are the artifacts.
    async fn finish(
        &self,
        ctx: &RequestContext,
        events: &TaskEvents,
        report: &v1::Task,
    ) -> Result<(), AgentError> {
        let report = artifact_text(report);
        events.working(Some("Summing the report up.")).await?;
        let summarizer = delegate_to("summarizer", ctx, events).await?;
        let summary = match summarizer.send_text(&report).await {
            Err(ClientError::Canceled) => return Ok(()),
            other => task(other.map_err(failed("the summarizer"))?, "summarizer")?,
        };
        if state(&summary) != v1::TaskState::Completed {
            return Err(AgentError::new(format!(
                "the summarizer's task ended {}",
                state(&summary).as_str_name()
            )));
        }
        events.artifact_text("report", report).await?;
        events
            .artifact_text("summary", artifact_text(&summary))
            .await?;
        events
            .complete(Some("The report and its summary are ready."))
            .await?;
        Ok(())
    }
}

#[async_trait]
impl AgentExecutor for Research {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        match ctx.task.as_deref() {
            None => self.start(&ctx, &events).await,
            Some(prior) => self.answer(&ctx, &events, prior).await,
        }
    }

    /// Cancels the siblings' tasks this one made, then itself. A run going
    /// on has its calls' tasks canceled by its delegates already; a task
    /// waiting for its caller (the writer's question asked back) has none,
    /// so its recorded children are canceled here.
    async fn cancel(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let children =
            delegation::children_of(ctx.task.as_deref().and_then(|t| t.metadata.as_ref()));
        for child in children {
            // `…/api/v1/agents/{id}[/…]`, or `host:port#{id}` over gRPC.
            let id = match child.agent.split_once(AGENTS_PATH) {
                Some((_, rest)) => rest.split(['/', '#']).next(),
                None => child.agent.rsplit_once('#').map(|(_, tenant)| tenant),
            };
            let Some(id) = id.filter(|id| !id.is_empty()) else {
                continue;
            };
            let Some(url) = sibling(&ctx.agent, id) else {
                continue;
            };
            let canceled = async {
                let client = A2aClient::discover(&url, ClientOptions::default()).await?;
                client.cancel_task(&child.task_id).await
            };
            match canceled.await {
                // Ended already (TaskNotCancelable) is as good.
                Ok(_) | Err(ClientError::A2a(_)) => {}
                Err(e) => {
                    tracing::warn!(task = %ctx.task_id, child = %child.task_id, error = %e, "could not cancel a delegated task");
                }
            }
        }
        match events.cancel(None).await {
            Ok(()) | Err(heddle_server::EventError::IllegalTransition(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl AgentExecutor for Summarizer {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let text = ctx.text();
        let words = text.split_whitespace().count();
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default();
        let first = first
            .split_inclusive(". ")
            .next()
            .unwrap_or(first)
            .trim_end();
        events
            .artifact_text("summary", format!("{first} ({words} words in all)"))
            .await?;
        events.complete(None).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::sibling;

    #[test]
    fn a_sibling_is_found_from_any_interface_url() {
        assert_eq!(
            sibling("http://h:1/api/v1/agents/research/a2a", "writer").as_deref(),
            Some("http://h:1/api/v1/agents/writer")
        );
        assert_eq!(
            sibling("http://h:1/x/api/v1/agents/research", "summarizer").as_deref(),
            Some("http://h:1/x/api/v1/agents/summarizer")
        );
        assert_eq!(sibling("http://h:1/a2a", "writer"), None);
    }
}
