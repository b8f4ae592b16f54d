//! Publishing an upstream task's events on the hub's task, one by one as
//! they arrive.
//!
//! The upstream speaks of its own task and context ids; the hub's task has
//! its own. Messages are rebound to the hub's ids; artifacts keep theirs
//! (ids are unique within a task). Events that say nothing new for the hub
//! task (a SUBMITTED after creation, a repeated state without a message, an
//! artifact a snapshot already gave) are skipped, so snapshots (a unary
//! answer, polling) and events (a stream) can be mixed.

use std::collections::HashMap;

use heddle_core::v1::{self, stream_response::Payload};
use heddle_server::{EventError, TaskEvents};

/// The hub task as the relay last left it.
pub(crate) struct Relay<'a> {
    events: &'a TaskEvents,
    /// The hub task's state (SUBMITTED for a task not yet created).
    pub(crate) state: v1::TaskState,
    /// Whether the hub task exists (a continuation's does).
    created: bool,
    /// Whether this execution has moved the task (a continuation starts
    /// out waiting for input, which must not count as settled).
    moved: bool,
    /// Parts published per artifact id, to publish only what a snapshot adds.
    artifacts: HashMap<String, usize>,
}

/// What the upstream answer said about where its task is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upstream {
    pub(crate) task_id: String,
    pub(crate) context_id: String,
}

impl<'a> Relay<'a> {
    /// A relay onto `events`, for a hub task that is `prior` (a
    /// continuation) or new.
    pub(crate) fn new(events: &'a TaskEvents, prior: Option<&v1::Task>) -> Self {
        let state = prior
            .and_then(|t| t.status.as_ref())
            .map_or(v1::TaskState::Submitted, v1::TaskStatus::state);
        let artifacts = prior
            .map(|t| {
                t.artifacts
                    .iter()
                    .map(|a| (a.artifact_id.clone(), a.parts.len()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            events,
            state,
            created: prior.is_some(),
            moved: false,
            artifacts,
        }
    }

    /// Whether the hub task is finished for this execution: terminal, or
    /// waiting for the caller.
    pub(crate) fn settled(&self) -> bool {
        self.moved && (self.state.is_terminal() || self.state.is_interrupted())
    }

    /// The upstream task an event names, if any.
    pub(crate) fn upstream_of(ev: &v1::StreamResponse) -> Option<Upstream> {
        let (task_id, context_id) = match ev.payload.as_ref()? {
            Payload::Task(t) => (&t.id, &t.context_id),
            Payload::StatusUpdate(u) => (&u.task_id, &u.context_id),
            Payload::ArtifactUpdate(a) => (&a.task_id, &a.context_id),
            Payload::Message(_) => return None,
        };
        (!task_id.is_empty()).then(|| Upstream {
            task_id: task_id.clone(),
            context_id: context_id.clone(),
        })
    }

    /// Publishes what `ev` adds to the hub task. An event the hub's state
    /// machine refuses, or a malformed one, is an error for the person
    /// reading the failed task.
    pub(crate) async fn apply(&mut self, ev: v1::StreamResponse) -> Result<(), String> {
        match ev.payload {
            None => Err("the remote agent sent an empty event".into()),
            Some(Payload::Task(t)) => self.snapshot(t).await,
            Some(Payload::Message(m)) => self.message(m).await,
            Some(Payload::StatusUpdate(u)) => {
                let status = u
                    .status
                    .ok_or("the remote agent sent a status update without a status")?;
                self.status(status).await
            }
            Some(Payload::ArtifactUpdate(a)) => {
                let artifact = a
                    .artifact
                    .ok_or("the remote agent sent an artifact update without an artifact")?;
                self.artifact(artifact, a.append, a.last_chunk).await
            }
        }
    }

    /// A task snapshot: the artifacts (or parts) not yet published, then the
    /// status if its state changed (a snapshot repeating the state is not
    /// news, whatever its message: a continuation's first snapshot still
    /// shows the question).
    pub(crate) async fn snapshot(&mut self, t: v1::Task) -> Result<(), String> {
        for mut a in t.artifacts {
            let done = self.artifacts.get(&a.artifact_id).copied();
            match done {
                Some(n) if n >= a.parts.len() => {}
                Some(n) => {
                    a.parts.drain(..n);
                    self.artifact(a, true, false).await?;
                }
                None => self.artifact(a, false, true).await?,
            }
        }
        match t.status {
            Some(status) if self.created && status.state() == self.state => Ok(()),
            Some(status) => self.status(status).await,
            None => Err("the remote agent sent a task without a status".into()),
        }
    }

    async fn status(&mut self, status: v1::TaskStatus) -> Result<(), String> {
        let state = status.state();
        if state == v1::TaskState::Unspecified {
            return Err("the remote agent sent a status without a state".into());
        }
        let message = status.message.map(|m| self.rebind(m));
        // Nothing new: SUBMITTED once the task exists, a state repeated
        // without a message.
        if (state == v1::TaskState::Submitted && self.created)
            || (state == self.state && message.is_none() && self.created)
        {
            return Ok(());
        }
        self.events
            .status(state, message)
            .await
            .map_err(|e| refused(&e))?;
        self.state = state;
        self.created = true;
        self.moved = true;
        Ok(())
    }

    async fn artifact(
        &mut self,
        artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), String> {
        if artifact.artifact_id.is_empty() {
            return Err("the remote agent sent an artifact without an id".into());
        }
        let parts = artifact.parts.len();
        let id = artifact.artifact_id.clone();
        self.events
            .artifact(artifact, append, last_chunk)
            .await
            .map_err(|e| refused(&e))?;
        let seen = self.artifacts.entry(id).or_default();
        *seen = if append { *seen + parts } else { parts };
        self.created = true;
        Ok(())
    }

    /// A direct message: the answer itself for a new exchange; for a task
    /// that exists already, its closing message.
    async fn message(&mut self, m: v1::Message) -> Result<(), String> {
        let mut m = self.rebind(m);
        m.task_id.clear();
        match self.events.reply(m.clone()).await {
            Ok(()) => {
                self.state = v1::TaskState::Completed;
                self.moved = true;
                Ok(())
            }
            Err(EventError::TaskExists) => {
                self.events.task_id().clone_into(&mut m.task_id);
                self.events
                    .status(v1::TaskState::Completed, Some(m))
                    .await
                    .map_err(|e| refused(&e))?;
                self.state = v1::TaskState::Completed;
                self.moved = true;
                Ok(())
            }
            Err(e) => Err(refused(&e)),
        }
    }

    /// The upstream's message as the hub task's: its ids, not the upstream's.
    fn rebind(&self, mut m: v1::Message) -> v1::Message {
        self.events.task_id().clone_into(&mut m.task_id);
        self.events.context_id().clone_into(&mut m.context_id);
        m
    }
}

fn refused(e: &EventError) -> String {
    format!("the remote agent's answer does not fit the task: {e}")
}
