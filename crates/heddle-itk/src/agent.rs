//! What the interop kit's agent does with an instruction: answer, run
//! steps, or call the next agent with Heddle's own client, then report the
//! outputs as the task's final status message.

use std::time::Duration;

use futures::{StreamExt as _, future::BoxFuture};
use heddle_client::{A2aClient, Binding, ClientError, ClientOptions, SendReply};
use heddle_core::{
    ErrorCode,
    v1::{self, stream_response::Payload},
};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};

use crate::instruction::{Behavior, CallAgent, Instruction, Step};

/// Why a node could not be carried out: the text the task fails with.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A node with no step set.
    #[error("an instruction node names no step")]
    EmptyNode,
    /// A call whose transport is none the kit names.
    #[error("unknown transport {0:?}: use jsonrpc, grpc or http_json")]
    UnknownTransport(String),
    /// A call with nothing for the callee to do.
    #[error("the call to {0} names no instruction for the callee")]
    NoInstruction(String),
    /// The callee failed, or could not be reached.
    #[error("calling {uri}: {source}")]
    Client {
        /// The callee's card URI.
        uri: String,
        /// What went wrong.
        source: Box<ClientError>,
    },
    /// A resubscribe call whose stream named no task.
    #[error("calling {0}: the stream named no task before it ended")]
    NoTask(String),
    /// A call that took longer than the agent's bound on calls.
    #[error("calling {uri}: no answer within {after:?}")]
    TimedOut {
        /// The callee's card URI.
        uri: String,
        /// The bound.
        after: Duration,
    },
    /// A resubscribed task that ended without its held answer.
    #[error("calling {uri}: task {task} ended without a {FINISHED:?} line")]
    NotFinished {
        /// The callee's card URI.
        uri: String,
        /// The task.
        task: String,
    },
}

/// The line a held task's answer ends with: what a resubscribing caller
/// reads up to.
pub const FINISHED: &str = "task-finished";
/// The token the push behaviour registers with the callee.
pub const PUSH_TOKEN: &str = "itk-token";
/// How long a held task stays WORKING after answering: five updates, this
/// far apart, then COMPLETED.
const HOLD_TICK: Duration = Duration::from_secs(2);
const HOLD_TICKS: u32 = 5;

/// The kit's agent.
pub struct ItkAgent {
    /// Bound on each call to another agent.
    pub call_timeout: Duration,
}

#[async_trait::async_trait]
impl AgentExecutor for ItkAgent {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(None).await?;
        let Some(instruction) = Instruction::find_in(&ctx.message) else {
            events
                .fail("no instruction: the message has no part holding an itk.Instruction")
                .await?;
            return Ok(());
        };
        // A cancel stops the calls in flight too (the server marks the task).
        let run = tokio::select! {
            run = self.run(&instruction) => run,
            () = ctx.cancel.cancelled() => return Ok(()),
        };
        let outputs = match run {
            Ok(outputs) => outputs,
            Err(e) => {
                tracing::warn!(task = %ctx.task_id, error = %e, "instruction failed");
                events.fail(&e.to_string()).await?;
                return Ok(());
            }
        };
        let answer = outputs.join("\n");
        if !instruction.holds_task() {
            events.complete(Some(&answer)).await?;
            return Ok(());
        }
        // Answered, but held open for a caller that resubscribes; a cancel
        // ends it (the server marks it CANCELED).
        events
            .working(Some(&format!("{answer}\n{FINISHED}")))
            .await?;
        for _ in 0..HOLD_TICKS {
            tokio::select! {
                () = ctx.cancel.cancelled() => return Ok(()),
                () = tokio::time::sleep(HOLD_TICK) => {}
            }
            events.working(None).await?;
        }
        events.complete(Some(&answer)).await?;
        Ok(())
    }
}

impl ItkAgent {
    /// The outputs of `instruction`, in order.
    fn run<'a>(
        &'a self,
        instruction: &'a Instruction,
    ) -> BoxFuture<'a, Result<Vec<String>, CallError>> {
        Box::pin(async move {
            match &instruction.step {
                Some(Step::ReturnResponse(r)) => Ok(vec![r.response.clone()]),
                Some(Step::Steps(steps)) => {
                    let mut outputs = Vec::new();
                    for step in &steps.instructions {
                        outputs.extend(self.run(step).await?);
                    }
                    Ok(outputs)
                }
                // The whole call, streams included, within the bound.
                Some(Step::CallAgent(call)) => {
                    tokio::time::timeout(self.call_timeout, self.call(call))
                        .await
                        .unwrap_or_else(|_| {
                            Err(CallError::TimedOut {
                                uri: call.agent_card_uri.clone(),
                                after: self.call_timeout,
                            })
                        })
                }
                None => Err(CallError::EmptyNode),
            }
        })
    }

    /// Calls the agent `call` names and returns every text its answer holds.
    ///
    /// The call is an ordinary request, not a delegation
    /// ([`A2aClient::delegate`]): the kit's traversals come back to the same
    /// agent (A→B→A→C→A), which a delegation chain refuses as a loop.
    async fn call(&self, call: &CallAgent) -> Result<Vec<String>, CallError> {
        let uri = &call.agent_card_uri;
        let binding = binding(&call.transport)?;
        let nested = call
            .instruction
            .as_deref()
            .ok_or_else(|| CallError::NoInstruction(uri.clone()))?;
        let failed = |e: ClientError| CallError::Client {
            uri: uri.clone(),
            source: Box::new(e),
        };
        let opts = ClientOptions {
            bindings: vec![binding],
            timeout: self.call_timeout,
            ..ClientOptions::default()
        };
        let callee = A2aClient::discover(uri, opts).await.map_err(failed)?;
        let mut request = v1::SendMessageRequest {
            message: Some(A2aClient::user_message(vec![nested.to_part()])),
            ..Default::default()
        };
        if let Some(Behavior::PushNotification(push)) = &call.behavior {
            let base = if push.url.contains("://") {
                push.url.clone()
            } else {
                format!("http://{}", push.url)
            };
            request.configuration = Some(v1::SendMessageConfiguration {
                task_push_notification_config: Some(v1::TaskPushNotificationConfig {
                    url: format!("{}/notifications", base.trim_end_matches('/')),
                    token: PUSH_TOKEN.into(),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        match &call.behavior {
            Some(Behavior::Resubscribe(_)) => resubscribe(&callee, request, uri).await,
            _ if call.streaming => {
                let mut stream = callee.send_streaming(request).await.map_err(failed)?;
                let mut texts = Vec::new();
                while let Some(event) = stream.next().await {
                    texts.extend(event_texts(&event.map_err(failed)?));
                }
                Ok(texts)
            }
            _ => Ok(match callee.send(request).await.map_err(failed)? {
                SendReply::Message(m) => message_texts(&m),
                SendReply::Task(t) => task_texts(&t),
            }),
        }
    }
}

/// The binding a call's `transport` names.
fn binding(transport: &str) -> Result<Binding, CallError> {
    match transport.to_ascii_lowercase().as_str() {
        "http_json" | "http-json" => Ok(Binding::Rest),
        other => Binding::parse(other).ok_or_else(|| CallError::UnknownTransport(transport.into())),
    }
}

/// Streams the send until the task is named, leaves, resubscribes and reads
/// until the held answer arrives, then cancels the task if still open.
async fn resubscribe(
    client: &A2aClient,
    request: v1::SendMessageRequest,
    uri: &str,
) -> Result<Vec<String>, CallError> {
    let failed = |e: ClientError| CallError::Client {
        uri: uri.to_owned(),
        source: Box::new(e),
    };
    let task_id = {
        let mut stream = client.send_streaming(request).await.map_err(failed)?;
        let first = stream.next().await.transpose().map_err(failed)?;
        first
            .as_ref()
            .and_then(task_id)
            .ok_or_else(|| CallError::NoTask(uri.to_owned()))?
            .to_owned()
        // The stream is dropped here: the caller disconnects.
    };
    let mut events = client.subscribe(&task_id).await.map_err(failed)?;
    let mut texts = Vec::new();
    let mut finished = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(failed)?;
        let mut found = event_texts(&event);
        if let Some(Payload::Task(task)) = &event.payload {
            found.extend(
                task.history
                    .iter()
                    .filter(|m| m.role() == v1::Role::Agent)
                    .flat_map(message_texts),
            );
        }
        for text in found {
            if text.contains(FINISHED) {
                finished = true;
                texts.push(without_marker(&text));
            } else if !finished {
                texts.push(text);
            }
        }
        if finished {
            break;
        }
    }
    drop(events);
    if !finished {
        return Err(CallError::NotFinished {
            uri: uri.to_owned(),
            task: task_id,
        });
    }
    match client.cancel_task(&task_id).await {
        Ok(_) => {}
        // It finished on its own in the meantime.
        Err(ClientError::A2a(e)) if e.code == ErrorCode::TaskNotCancelable => {}
        Err(e) => return Err(failed(e)),
    }
    Ok(texts)
}

/// `text` without its `task-finished` line.
fn without_marker(text: &str) -> String {
    text.lines()
        .filter(|l| l.trim() != FINISHED)
        .collect::<Vec<_>>()
        .join("\n")
}

fn task_id(event: &v1::StreamResponse) -> Option<&str> {
    let id = match event.payload.as_ref()? {
        Payload::Task(t) => &t.id,
        Payload::StatusUpdate(u) => &u.task_id,
        Payload::ArtifactUpdate(u) => &u.task_id,
        Payload::Message(m) => &m.task_id,
    };
    (!id.is_empty()).then_some(id)
}

/// The texts of an event: a message's parts, a task's or a status
/// update's status message.
fn event_texts(event: &v1::StreamResponse) -> Vec<String> {
    match &event.payload {
        Some(Payload::Message(m)) => message_texts(m),
        Some(Payload::Task(t)) => task_texts(t),
        Some(Payload::StatusUpdate(u)) => u
            .status
            .as_ref()
            .and_then(|s| s.message.as_ref())
            .map(message_texts)
            .unwrap_or_default(),
        Some(Payload::ArtifactUpdate(_)) | None => Vec::new(),
    }
}

fn task_texts(task: &v1::Task) -> Vec<String> {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(message_texts)
        .unwrap_or_default()
}

fn message_texts(message: &v1::Message) -> Vec<String> {
    message
        .parts
        .iter()
        .filter_map(|p| p.as_text())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_are_named_as_the_kit_names_them() {
        for (name, want) in [
            ("jsonrpc", Binding::JsonRpc),
            ("JSONRPC", Binding::JsonRpc),
            ("grpc", Binding::Grpc),
            ("GRPC", Binding::Grpc),
            ("http_json", Binding::Rest),
            ("HTTP_JSON", Binding::Rest),
            ("HTTP+JSON", Binding::Rest),
        ] {
            assert_eq!(binding(name).ok(), Some(want), "{name}");
        }
        assert!(matches!(
            binding("carrier-pigeon"),
            Err(CallError::UnknownTransport(_))
        ));
    }

    #[test]
    fn the_marker_line_is_dropped_and_the_answer_kept() {
        assert_eq!(without_marker("a\nb\ntask-finished"), "a\nb");
        assert_eq!(without_marker("task-finished"), "");
    }
}
