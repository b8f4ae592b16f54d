use std::time::Duration;

use async_trait::async_trait;
use heddle_core::{ProtocolVersion, v1};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use serde_json::json;

use crate::AgentProfile;

/// The agent public A2A conformance suites (the TCKs) drive: its behaviour is
/// chosen by the prefix of the user message's `messageId` (longest first), as
/// `shared/reference/CONFORMANCE-AGENT.md` describes. Requests in v0.3 get
/// the v0.3 suite's behaviour: the task stays open (WORKING, then
/// INPUT_REQUIRED), across any number of follow-ups, until the suite cancels it.
#[derive(Clone, Copy, Debug)]
pub struct Conformance {
    /// How long `test-resubscribe-message-id` stays WORKING.
    pub resubscribe_window: Duration,
    /// The v0.3 pause between WORKING and INPUT_REQUIRED.
    pub v03_pause: Duration,
}

impl Default for Conformance {
    fn default() -> Self {
        Self {
            resubscribe_window: Duration::from_secs(10),
            v03_pause: Duration::from_millis(1500),
        }
    }
}

/// What a message id asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// COMPLETED with "Hello from TCK".
    CompleteTask,
    /// Stays INPUT_REQUIRED.
    InputRequired,
    /// A text artifact.
    ArtifactText,
    /// A raw file artifact.
    ArtifactFile,
    /// A URL file artifact.
    ArtifactFileUrl,
    /// A data artifact.
    ArtifactData,
    /// A direct message, no task.
    MessageResponse,
    /// WORKING, a text artifact, COMPLETED.
    StreamWorkArtifactComplete,
    /// COMPLETED only.
    StreamCompleteOnly,
    /// A streamed text artifact.
    StreamArtifactText,
    /// A streamed file artifact.
    StreamArtifactFile,
    /// A streamed artifact in chunks.
    StreamArtifactChunked,
    /// REJECTED.
    Reject,
    /// WORKING long enough to be resubscribed, then COMPLETED.
    Resubscribe,
    /// Anything else: complete.
    Ordinary,
}

/// Prefixes and their behaviour; matched longest first.
const PREFIXES: &[(&str, Behaviour)] = &[
    ("tck-complete-task", Behaviour::CompleteTask),
    ("tck-input-required", Behaviour::InputRequired),
    ("tck-artifact-text", Behaviour::ArtifactText),
    ("tck-artifact-file-url", Behaviour::ArtifactFileUrl),
    ("tck-artifact-file", Behaviour::ArtifactFile),
    ("tck-artifact-data", Behaviour::ArtifactData),
    ("tck-message-response", Behaviour::MessageResponse),
    (
        "tck-stream-ordering-001",
        Behaviour::StreamWorkArtifactComplete,
    ),
    ("tck-stream-001", Behaviour::StreamWorkArtifactComplete),
    ("tck-stream-003", Behaviour::StreamWorkArtifactComplete),
    ("tck-stream-002", Behaviour::StreamCompleteOnly),
    ("tck-stream-artifact-text", Behaviour::StreamArtifactText),
    ("tck-stream-artifact-file", Behaviour::StreamArtifactFile),
    (
        "tck-stream-artifact-chunked",
        Behaviour::StreamArtifactChunked,
    ),
    ("tck-reject-task", Behaviour::Reject),
    ("test-resubscribe-message-id", Behaviour::Resubscribe),
];

/// The behaviour for a message id.
pub fn behaviour(message_id: &str) -> Behaviour {
    PREFIXES
        .iter()
        .filter(|(p, _)| message_id.starts_with(p))
        .max_by_key(|(p, _)| p.len())
        .map_or(Behaviour::Ordinary, |(_, b)| *b)
}

fn artifact(name: &str, part: v1::Part) -> v1::Artifact {
    v1::Artifact {
        artifact_id: format!("{name}-artifact"),
        name: name.into(),
        parts: vec![part],
        ..Default::default()
    }
}

#[async_trait]
impl AgentExecutor for Conformance {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let b = behaviour(&ctx.message.message_id);
        if ctx.protocol_version == ProtocolVersion::V0_3 && b != Behaviour::MessageResponse {
            return self.v03(&ctx, &events, b).await;
        }
        match b {
            Behaviour::CompleteTask => {
                let msg = events.agent_message(vec![v1::Part::text("Hello from TCK")]);
                events.status(v1::TaskState::Completed, Some(msg)).await?;
            }
            Behaviour::InputRequired => events.input_required("More input is required.").await?,
            Behaviour::ArtifactText | Behaviour::StreamArtifactText => {
                events
                    .artifact(
                        artifact("text", v1::Part::text("Generated text content")),
                        false,
                        true,
                    )
                    .await?;
                events.complete(None).await?;
            }
            Behaviour::ArtifactFile | Behaviour::StreamArtifactFile => {
                let part = v1::Part::raw(b"file content".to_vec(), "text/plain", "output.txt");
                events.artifact(artifact("file", part), false, true).await?;
                events.complete(None).await?;
            }
            Behaviour::ArtifactFileUrl => {
                let mut part = v1::Part::url("https://example.com/output.txt", "text/plain");
                part.filename = "output.txt".into();
                events
                    .artifact(artifact("file-url", part), false, true)
                    .await?;
                events.complete(None).await?;
            }
            Behaviour::ArtifactData => {
                events
                    .artifact(
                        artifact("data", v1::Part::data(json!({"key": "value", "count": 42}))),
                        false,
                        true,
                    )
                    .await?;
                events.complete(None).await?;
            }
            Behaviour::MessageResponse => {
                let mut m = events.agent_message(vec![v1::Part::text("Direct message response")]);
                m.task_id.clear();
                events.reply(m).await?;
            }
            Behaviour::StreamWorkArtifactComplete => {
                events.working(None).await?;
                events
                    .artifact(
                        artifact("stream", v1::Part::text("Streamed content")),
                        false,
                        true,
                    )
                    .await?;
                events.complete(None).await?;
            }
            Behaviour::StreamCompleteOnly => events.complete(None).await?,
            Behaviour::StreamArtifactChunked => {
                let chunks = ["chunk one ", "chunk two ", "chunk three"];
                for (i, c) in chunks.iter().enumerate() {
                    events
                        .artifact(
                            artifact("chunked", v1::Part::text(*c)),
                            i > 0,
                            i == chunks.len() - 1,
                        )
                        .await?;
                }
                events.complete(None).await?;
            }
            Behaviour::Reject => {
                events
                    .reject("Task rejected by the conformance agent.")
                    .await?
            }
            Behaviour::Resubscribe => {
                events
                    .working(Some("Working; subscribe to follow along."))
                    .await?;
                tokio::select! {
                    () = tokio::time::sleep(self.resubscribe_window) => events.complete(Some("Done.")).await?,
                    () = ctx.cancel.cancelled() => {}
                }
            }
            Behaviour::Ordinary => {
                events
                    .artifact(
                        artifact(
                            "response",
                            v1::Part::text(format!("Received: {}", ctx.text())),
                        ),
                        false,
                        true,
                    )
                    .await?;
                events.complete(None).await?;
            }
        }
        Ok(())
    }
}

impl Conformance {
    /// v0.3 suites: keep the task open so it can be continued or canceled.
    /// Every follow-up is answered (its text echoed in the status message)
    /// and the task returns to INPUT_REQUIRED: v0.3 suites send several
    /// follow-ups to one task, and the client ends it by canceling.
    async fn v03(
        &self,
        ctx: &RequestContext,
        events: &TaskEvents,
        b: Behaviour,
    ) -> Result<(), AgentError> {
        events.working(None).await?;
        let window = if b == Behaviour::Resubscribe {
            self.resubscribe_window
        } else {
            self.v03_pause
        };
        tokio::select! {
            () = tokio::time::sleep(window) => {}
            () = ctx.cancel.cancelled() => return Ok(()),
        }
        let reply = if ctx.is_continuation() {
            format!(
                "Received: {}. Send more input, or cancel the task to end it.",
                ctx.text()
            )
        } else {
            "Please provide more input.".to_owned()
        };
        events.input_required(&reply).await?;
        Ok(())
    }
}

/// The extension the conformance agent can declare as required
/// ([`conformance_profile`]), so the ExtensionSupportRequired path is reachable.
pub const REQUIRED_EXTENSION: &str = "urn:a2a:tck:required-extension";

/// How `heddle serve` sets the conformance agent's card up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConformanceCard {
    /// Declare [`REQUIRED_EXTENSION`] with `required: true`: every call
    /// without it is refused with ExtensionSupportRequired.
    pub required_extension: bool,
    /// Declare streaming (default); without it streaming calls are
    /// UnsupportedOperation.
    pub streaming: bool,
}

impl Default for ConformanceCard {
    fn default() -> Self {
        Self {
            required_extension: false,
            streaming: true,
        }
    }
}

/// The conformance agent's profile, as `card` asks.
pub fn conformance_profile(card: ConformanceCard) -> AgentProfile {
    let mut p = AgentProfile {
        input_modes: vec!["text/plain".into(), "application/json".into()],
        output_modes: vec!["text/plain".into(), "application/json".into()],
        ..AgentProfile::new(
            "conformance",
            "Conformance agent",
            "Behaves as the public A2A conformance suites expect, steered by the message id.",
            &["conformance", "tck"],
        )
    };
    p.streaming = card.streaming;
    if card.required_extension {
        p.extensions.push(v1::AgentExtension {
            uri: REQUIRED_EXTENSION.into(),
            description: "Required by the conformance agent when asked to be (heddle serve --conformance-required-extension)".into(),
            required: true,
            params: None,
        });
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(
            behaviour("tck-artifact-file-url-123"),
            Behaviour::ArtifactFileUrl
        );
        assert_eq!(behaviour("tck-artifact-file-9"), Behaviour::ArtifactFile);
        assert_eq!(
            behaviour("tck-stream-artifact-chunked-x"),
            Behaviour::StreamArtifactChunked
        );
        assert_eq!(
            behaviour("tck-stream-001-a"),
            Behaviour::StreamWorkArtifactComplete
        );
        assert_eq!(behaviour("anything"), Behaviour::Ordinary);
    }
}
