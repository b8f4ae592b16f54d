//! [`TaskEvents`]: how an executor reports on its task.
//!
//! Every call applies one event to the task under its lock: the state machine
//! is checked first (an illegal transition is refused and the task is left as
//! it was), the new state is persisted when the status changed, and only then
//! is the event broadcast. Artifact chunks ride along with the next save.

use std::sync::Arc;

use heddle_core::{
    v1::{self, stream_response::Payload},
    wkt::Timestamp,
};
use heddle_store::StoreError;

use crate::{
    lifecycle::{IllegalTransition, check_transition},
    live::{LiveState, LiveTask},
};

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
    /// The store refused the new state; the task is unchanged.
    #[error("could not persist the task: {0}")]
    Store(#[from] StoreError),
}

/// The sink an executor publishes to. Cheap to clone; every clone feeds the
/// same task.
#[derive(Clone, Debug)]
pub struct TaskEvents {
    pub(crate) live: Arc<LiveTask>,
    pub(crate) context_id: String,
}

impl TaskEvents {
    pub(crate) fn new(live: Arc<LiveTask>, context_id: String) -> Self {
        Self { live, context_id }
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.live.id
    }

    /// The context id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// An agent message with a fresh id, bound to this task and context.
    pub fn agent_message(&self, parts: Vec<v1::Part>) -> v1::Message {
        let mut m = v1::Message::new(crate::new_id(), v1::Role::Agent, parts);
        m.task_id = self.live.id.clone();
        m.context_id = self.context_id.clone();
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
        // Boxed, like `artifact`: the persisting and fan-out state would
        // otherwise sit inside every agent's future for its whole life
        // (3 KB per idle stream), not just while an event is applied.
        Box::pin(async move {
            let mut st = self.live.state.lock().await;
            self.apply_status(&mut st, state, message).await
        })
        .await
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
        Box::pin(async move {
            let mut st = self.live.state.lock().await;
            self.ensure_open(&st)?;
            self.create_if_needed(&mut st).await?;
            heddle_core::task::apply_artifact(&mut st.task.artifacts, &artifact, append);
            st.dirty = true;
            self.live
                .emit(&st.task, || {
                    Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                        task_id: self.live.id.clone(),
                        context_id: self.context_id.clone(),
                        artifact: Some(artifact),
                        append,
                        last_chunk,
                        metadata: None,
                    })
                })
                .await;
            Ok(())
        })
        .await
    }

    /// A complete one-part text artifact with a fresh id.
    pub async fn artifact_text(
        &self,
        name: &str,
        text: impl Into<String>,
    ) -> Result<(), EventError> {
        let artifact = v1::Artifact {
            artifact_id: crate::new_id(),
            name: name.to_owned(),
            parts: vec![v1::Part::text(text)],
            ..Default::default()
        };
        self.artifact(artifact, false, true).await
    }

    /// Answers with a direct message instead of a task. Only as the first and
    /// only event; when the caller already holds a task (a non-blocking send),
    /// the task completes with this message instead.
    pub async fn reply(&self, mut message: v1::Message) -> Result<(), EventError> {
        let mut st = self.live.state.lock().await;
        self.ensure_open(&st)?;
        if st.created {
            if st.task.history.len() > 1 || current_state(&st) != v1::TaskState::Submitted {
                return Err(EventError::TaskExists);
            }
            return self
                .apply_status(&mut st, v1::TaskState::Completed, Some(message))
                .await;
        }
        if message.context_id.is_empty() {
            message.context_id = self.context_id.clone();
        }
        message.task_id.clear();
        st.replied = true;
        st.reply = Some(Box::new(message.clone()));
        st.settled_gen += 1;
        self.live.publish(|| Payload::Message(message));
        self.live.settled.notify_waiters();
        Ok(())
    }

    fn ensure_open(&self, st: &LiveState) -> Result<(), EventError> {
        if st.replied {
            Err(EventError::AlreadyReplied)
        } else {
            Ok(())
        }
    }

    /// Announces the task to subscribers (and persists it for streams) on its first event.
    async fn create_if_needed(&self, st: &mut LiveState) -> Result<(), EventError> {
        if st.created {
            return Ok(());
        }
        if st.persist_on_create {
            self.live.store.save(&self.live.scope, &st.task).await?;
        }
        st.created = true;
        self.live
            .emit(&st.task, || Payload::Task(st.task.clone()))
            .await;
        Ok(())
    }

    pub(crate) async fn apply_status(
        &self,
        st: &mut LiveState,
        state: v1::TaskState,
        message: Option<v1::Message>,
    ) -> Result<(), EventError> {
        self.ensure_open(st)?;
        let from = if st.created {
            current_state(st)
        } else {
            v1::TaskState::Unspecified
        };
        // A brand-new task may start by restating SUBMITTED; that is its creation.
        if !(from == v1::TaskState::Unspecified && state == v1::TaskState::Submitted) {
            check_transition(
                if from == v1::TaskState::Unspecified {
                    v1::TaskState::Submitted
                } else {
                    from
                },
                state,
            )?;
        }
        self.create_if_needed(st).await?;
        if state == v1::TaskState::Submitted {
            return Ok(());
        }
        // Applied in place, and undone if the store refuses it: no copy of the task.
        let new_status = v1::TaskStatus {
            state: state as i32,
            message,
            timestamp: Some(Timestamp::now()),
        };
        let mut old_status = st.task.status.replace(new_status);
        let moved = old_status.as_mut().and_then(|s| s.message.take());
        let pushed = moved.is_some();
        if let Some(m) = moved {
            st.task.history.push(m);
        }
        // Saved with the push deliveries of this event, when there are any.
        let saved = self
            .live
            .save_and_emit(&st.task, || {
                Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
                    task_id: self.live.id.clone(),
                    context_id: self.context_id.clone(),
                    status: st.task.status.clone(),
                    metadata: None,
                })
            })
            .await;
        if let Err(e) = saved {
            if let Some(old) = old_status.as_mut()
                && pushed
            {
                old.message = st.task.history.pop();
            }
            st.task.status = old_status;
            return Err(e.into());
        }
        st.dirty = false;
        if state.is_terminal() || state.is_interrupted() {
            st.settled_gen += 1;
            self.live.settled.notify_waiters();
        }
        Ok(())
    }
}

pub(crate) fn current_state(st: &LiveState) -> v1::TaskState {
    st.task
        .status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}
