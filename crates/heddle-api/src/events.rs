//! [`TaskEvents`]: how an executor reports on its task, and [`TaskSink`],
//! what stands behind it.
//!
//! The handle is the agent's side; the sink is the server's. The server's
//! sink applies each event to the task under the task's lock: the state
//! machine is checked first (an illegal transition is refused and the task
//! is left as it was), the new state is persisted when the status changed,
//! and only then is the event broadcast. Artifact chunks ride along with the
//! next save. Keeping that logic behind a trait object is what lets this
//! crate stay free of the server.

use std::sync::Arc;

use async_trait::async_trait;
use heddle_core::{v1, wkt::Struct};

use crate::store::StoreError;

/// A transition the task state machine refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("illegal task transition {} -> {}", .from.as_str_name(), .to.as_str_name())]
pub struct IllegalTransition {
    /// Current state (`UNSPECIFIED` for a task not yet created).
    pub from: v1::TaskState,
    /// Requested state.
    pub to: v1::TaskState,
}

/// Why an event was refused.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The state machine refuses the transition (e.g. out of a terminal state).
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
    /// The agent already answered with a direct message; the exchange is over.
    #[error("the agent already replied with a message; no further events are accepted")]
    AlreadyReplied,
    /// A direct message reply after task events.
    #[error("a task already exists; send agent messages in status updates instead")]
    TaskExists,
    /// An artifact update without an artifact id.
    #[error("artifact needs an artifactId")]
    MissingArtifactId,
    /// This server replica no longer runs the task: it stopped renewing its
    /// lease in time (paused, or cut off from the store) and another
    /// replica took the task over. The run here must stop.
    #[error("this server replica lost the task to another one; the run here stops")]
    LeaseLost,
    /// The store refused the new state; the task is unchanged.
    #[error("could not persist the task: {0}")]
    Store(#[from] StoreError),
}

/// Where a [`TaskEvents`] handle sends its events: one task's single writer.
///
/// The server implements this for every task it runs; agents never call it
/// directly. Implement it yourself to run an executor without a server, for
/// example in a unit test that records what the agent published. Each event
/// method applies the event whole or refuses it with the task unchanged,
/// and events of one task are applied in the order they arrive.
#[async_trait]
pub trait TaskSink: Send + Sync + 'static {
    /// The task's id.
    fn task_id(&self) -> &str;

    /// A fresh id for a message or artifact the handle makes on the agent's
    /// behalf (the server's are time-ordered UUIDs).
    fn new_id(&self) -> String;

    /// Moves the task to `state`, with an optional agent message, in the
    /// conversation `context_id`. See [`TaskEvents::status`].
    async fn status(
        &self,
        context_id: &str,
        state: v1::TaskState,
        message: Option<v1::Message>,
    ) -> Result<(), EventError>;

    /// Adds an artifact or a chunk of one. The handle has already checked
    /// that it has an id. See [`TaskEvents::artifact`].
    async fn artifact(
        &self,
        context_id: &str,
        artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), EventError>;

    /// Answers with a direct message instead of a task. See
    /// [`TaskEvents::reply`].
    async fn reply(&self, context_id: &str, message: v1::Message) -> Result<(), EventError>;

    /// Merges `fields` into the task's `metadata` (a key already there is
    /// replaced), saved with the task's next status change. See
    /// [`TaskEvents::task_metadata`]. The default ignores them, for sinks
    /// that keep no task (a test recorder); a wrapping sink must forward.
    async fn task_metadata(&self, _fields: Struct) -> Result<(), EventError> {
        Ok(())
    }

    /// Records `child`, a task a call made for this one, among the task's
    /// delegation children (see [`crate::delegation::children_of`]): merged
    /// with those already there, under the task's lock, so calls made
    /// together or in earlier turns are all kept. The default ignores it,
    /// as for [`TaskSink::task_metadata`]; a wrapping sink must forward.
    async fn add_child(&self, _child: crate::delegation::Hop) -> Result<(), EventError> {
        Ok(())
    }
}

/// The sink an executor publishes to. Cheap to clone; every clone feeds the
/// same task.
#[derive(Clone)]
pub struct TaskEvents {
    sink: Arc<dyn TaskSink>,
    context_id: String,
}

impl std::fmt::Debug for TaskEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEvents")
            .field("task_id", &self.sink.task_id())
            .field("context_id", &self.context_id)
            .finish_non_exhaustive()
    }
}

impl TaskEvents {
    /// A handle publishing to `sink` for the conversation `context_id`. The
    /// server makes one per execution; a test can make one over a sink of
    /// its own.
    pub fn new(sink: Arc<dyn TaskSink>, context_id: String) -> Self {
        Self { sink, context_id }
    }

    /// The sink this handle publishes to: for a wrapper executor that adds
    /// to what its agent publishes (a [`TaskSink`] of its own around this
    /// one, in a new handle).
    pub fn sink(&self) -> &Arc<dyn TaskSink> {
        &self.sink
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        self.sink.task_id()
    }

    /// The context id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// An agent message with a fresh id, bound to this task and context.
    pub fn agent_message(&self, parts: Vec<v1::Part>) -> v1::Message {
        let mut m = v1::Message::new(self.sink.new_id(), v1::Role::Agent, parts);
        self.sink.task_id().clone_into(&mut m.task_id);
        m.context_id.clone_from(&self.context_id);
        m
    }

    fn text_message(&self, text: Option<&str>) -> Option<v1::Message> {
        text.map(|t| self.agent_message(vec![v1::Part::text(t)]))
    }

    /// Moves the task to `state`, with an optional agent message.
    pub async fn status(
        &self,
        state: v1::TaskState,
        message: Option<v1::Message>,
    ) -> Result<(), EventError> {
        // The sink's future is boxed (async_trait): the persisting and
        // fan-out state does not sit inside every agent's future for its
        // whole life, only while an event is applied.
        self.sink.status(&self.context_id, state, message).await
    }

    /// WORKING, optionally saying what is happening.
    pub async fn working(&self, text: Option<&str>) -> Result<(), EventError> {
        self.status(v1::TaskState::Working, self.text_message(text))
            .await
    }

    /// INPUT_REQUIRED with the question for the caller.
    pub async fn input_required(&self, question: &str) -> Result<(), EventError> {
        self.status(
            v1::TaskState::InputRequired,
            self.text_message(Some(question)),
        )
        .await
    }

    /// AUTH_REQUIRED, explaining what credential is needed.
    pub async fn auth_required(&self, explanation: &str) -> Result<(), EventError> {
        self.status(
            v1::TaskState::AuthRequired,
            self.text_message(Some(explanation)),
        )
        .await
    }

    /// COMPLETED, optionally with a closing message.
    pub async fn complete(&self, text: Option<&str>) -> Result<(), EventError> {
        self.status(v1::TaskState::Completed, self.text_message(text))
            .await
    }

    /// FAILED with the reason.
    pub async fn fail(&self, reason: &str) -> Result<(), EventError> {
        self.status(v1::TaskState::Failed, self.text_message(Some(reason)))
            .await
    }

    /// REJECTED with the reason.
    pub async fn reject(&self, reason: &str) -> Result<(), EventError> {
        self.status(v1::TaskState::Rejected, self.text_message(Some(reason)))
            .await
    }

    /// CANCELED.
    pub async fn cancel(&self, text: Option<&str>) -> Result<(), EventError> {
        self.status(v1::TaskState::Canceled, self.text_message(text))
            .await
    }

    /// Publishes an artifact or a chunk of one: `append` adds the parts to the
    /// artifact with the same id, `last_chunk` marks its end.
    pub async fn artifact(
        &self,
        artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), EventError> {
        if artifact.artifact_id.is_empty() {
            return Err(EventError::MissingArtifactId);
        }
        self.sink
            .artifact(&self.context_id, artifact, append, last_chunk)
            .await
    }

    /// A complete one-part text artifact with a fresh id.
    pub async fn artifact_text(
        &self,
        name: &str,
        text: impl Into<String>,
    ) -> Result<(), EventError> {
        let artifact = v1::Artifact {
            artifact_id: self.sink.new_id(),
            name: name.to_owned(),
            parts: vec![v1::Part::text(text)],
            ..Default::default()
        };
        self.artifact(artifact, false, true).await
    }

    /// Answers with a direct message instead of a task. Only as the first and
    /// only event; when the caller already holds a task (a non-blocking send),
    /// the task completes with this message instead.
    pub async fn reply(&self, message: v1::Message) -> Result<(), EventError> {
        self.sink.reply(&self.context_id, message).await
    }

    /// Sets keys of the task's own `metadata` (what GetTask and the final
    /// Task show), replacing those already there: facts about the whole
    /// task, such as the tokens a model used for it. Saved with the next
    /// status change, so publish it before the status that ends the turn.
    pub async fn task_metadata(&self, fields: Struct) -> Result<(), EventError> {
        self.sink.task_metadata(fields).await
    }

    /// Records a task a call made for this one (what
    /// `heddle_client::Delegate` does for each call); see
    /// [`TaskSink::add_child`].
    pub async fn add_child(&self, child: crate::delegation::Hop) -> Result<(), EventError> {
        self.sink.add_child(child).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// What an executor published, as a test sink sees it.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Status(String, v1::TaskState, Option<String>),
        Artifact(String, String, bool, bool),
        Reply(String, String),
    }

    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<Seen>>,
        ids: std::sync::atomic::AtomicU32,
    }

    #[async_trait]
    impl TaskSink for Recorder {
        fn task_id(&self) -> &str {
            "task-1"
        }

        fn new_id(&self) -> String {
            let n = self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            format!("id-{n}")
        }

        async fn status(
            &self,
            context_id: &str,
            state: v1::TaskState,
            message: Option<v1::Message>,
        ) -> Result<(), EventError> {
            if state == v1::TaskState::Unspecified {
                return Err(IllegalTransition {
                    from: v1::TaskState::Working,
                    to: state,
                }
                .into());
            }
            let text = message.map(|m| format!("{}/{}/{}", m.message_id, m.task_id, m.text()));
            let seen = Seen::Status(context_id.to_owned(), state, text);
            self.seen.lock().unwrap().push(seen);
            Ok(())
        }

        async fn artifact(
            &self,
            context_id: &str,
            artifact: v1::Artifact,
            append: bool,
            last_chunk: bool,
        ) -> Result<(), EventError> {
            let seen = Seen::Artifact(
                context_id.to_owned(),
                artifact.artifact_id,
                append,
                last_chunk,
            );
            self.seen.lock().unwrap().push(seen);
            Ok(())
        }

        async fn reply(&self, context_id: &str, message: v1::Message) -> Result<(), EventError> {
            let seen = Seen::Reply(context_id.to_owned(), message.text());
            self.seen.lock().unwrap().push(seen);
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_handle_forwards_every_event_to_its_sink() {
        let sink = Arc::new(Recorder::default());
        let events = TaskEvents::new(sink.clone(), "ctx".into());
        assert_eq!((events.task_id(), events.context_id()), ("task-1", "ctx"));

        events.working(Some("busy")).await.unwrap();
        events.artifact_text("out", "hello").await.unwrap();
        events.clone().complete(None).await.unwrap();
        events
            .reply(v1::Message::new("m", v1::Role::Agent, vec![]))
            .await
            .unwrap();
        let refused = events.status(v1::TaskState::Unspecified, None).await;
        assert!(matches!(refused, Err(EventError::IllegalTransition(_))));
        let nameless = events.artifact(v1::Artifact::default(), false, true).await;
        assert!(matches!(nameless, Err(EventError::MissingArtifactId)));

        let ctx = || "ctx".to_owned();
        assert_eq!(
            *sink.seen.lock().unwrap(),
            [
                Seen::Status(
                    ctx(),
                    v1::TaskState::Working,
                    Some("id-0/task-1/busy".into())
                ),
                Seen::Artifact(ctx(), "id-1".into(), false, true),
                Seen::Status(ctx(), v1::TaskState::Completed, None),
                Seen::Reply(ctx(), String::new()),
            ]
        );
    }

    #[test]
    fn agent_messages_are_bound_to_the_task_and_context() {
        let events = TaskEvents::new(Arc::new(Recorder::default()), "ctx".into());
        let m = events.agent_message(vec![v1::Part::text("hi")]);
        assert_eq!(
            (
                m.message_id.as_str(),
                m.task_id.as_str(),
                m.context_id.as_str()
            ),
            ("id-0", "task-1", "ctx")
        );
        assert_eq!(m.role, v1::Role::Agent as i32);
        assert!(format!("{events:?}").contains("task-1"));
    }
}
