//! The server's side of [`TaskEvents`]: the [`TaskSink`] of a live task,
//! which is where an executor's events are applied.
//!
//! Every call applies one event to the task under its lock: the state machine
//! is checked first (an illegal transition is refused and the task is left as
//! it was), the new state is persisted when the status changed, and only then
//! is the event broadcast. Artifact chunks ride along with the next save.
//! `TaskEvents` itself (the agent's handle) lives in `heddle-api`, so agents
//! build without the server; it reaches this code through the sink trait.

use async_trait::async_trait;
use heddle_core::{
    v1::{self, stream_response::Payload},
    wkt::{Struct, Timestamp},
};

use heddle_api::TaskSink;
pub use heddle_api::{EventError, TaskEvents};

use crate::{
    cluster::Fence,
    lifecycle::check_transition,
    live::{LiveState, LiveTask},
    observe::TaskStateEvent,
};

#[async_trait]
impl TaskSink for LiveTask {
    fn task_id(&self) -> &str {
        &self.id
    }

    fn new_id(&self) -> String {
        crate::new_id()
    }

    async fn status(
        &self,
        context_id: &str,
        state: v1::TaskState,
        message: Option<v1::Message>,
    ) -> Result<(), EventError> {
        self.fence().await?;
        let mut st = self.state.lock().await;
        self.apply_status(&mut st, context_id, state, message).await
    }

    async fn artifact(
        &self,
        context_id: &str,
        artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), EventError> {
        self.fence().await?;
        let mut st = self.state.lock().await;
        ensure_open(&st)?;
        self.create_if_needed(&mut st).await?;
        heddle_core::task::apply_artifact(&mut st.task.artifacts, &artifact, append);
        st.dirty = true;
        st.generation = st.generation.saturating_add(1);
        self.emit(&st.task, st.generation, || {
            Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: self.id.clone(),
                context_id: context_id.to_owned(),
                artifact: Some(artifact),
                append,
                last_chunk,
                metadata: None,
            })
        })
        .await;
        Ok(())
    }

    async fn reply(&self, context_id: &str, mut message: v1::Message) -> Result<(), EventError> {
        self.fence().await?;
        let mut st = self.state.lock().await;
        ensure_open(&st)?;
        if st.created {
            if st.task.history.len() > 1 || current_state(&st) != v1::TaskState::Submitted {
                return Err(EventError::TaskExists);
            }
            return self
                .apply_status(&mut st, context_id, v1::TaskState::Completed, Some(message))
                .await;
        }
        if message.context_id.is_empty() {
            context_id.clone_into(&mut message.context_id);
        }
        message.task_id.clear();
        st.replied = true;
        st.reply = Some(Box::new(message.clone()));
        st.settled_gen += 1;
        // Not a task event: no generation, and nothing for other replicas
        // (the caller waiting for it is on this one).
        self.publish(0, || Payload::Message(message));
        self.settled.notify_waiters();
        Ok(())
    }

    async fn task_metadata(&self, fields: Struct) -> Result<(), EventError> {
        self.fence().await?;
        let mut st = self.state.lock().await;
        ensure_open(&st)?;
        self.create_if_needed(&mut st).await?;
        st.task
            .metadata
            .get_or_insert_with(Struct::default)
            .0
            .extend(fields.0);
        st.dirty = true;
        Ok(())
    }

    async fn add_child(&self, child: heddle_api::delegation::Hop) -> Result<(), EventError> {
        self.fence().await?;
        let mut st = self.state.lock().await;
        ensure_open(&st)?;
        self.create_if_needed(&mut st).await?;
        if heddle_api::delegation::add_child(&mut st.task.metadata, child) {
            st.dirty = true;
        }
        Ok(())
    }
}

fn ensure_open(st: &LiveState) -> Result<(), EventError> {
    if st.lost {
        Err(EventError::LeaseLost)
    } else if st.replied {
        Err(EventError::AlreadyReplied)
    } else {
        Ok(())
    }
}

impl LiveTask {
    /// In a cluster, waits until this replica surely still holds the
    /// task's lease (see [`Cluster::fence`](crate::cluster::Cluster)):
    /// before the agent's event takes the task's lock, so a replica woken
    /// from a pause publishes nothing of a task it lost.
    async fn fence(&self) -> Result<(), EventError> {
        match &self.cluster {
            Some(cluster) if cluster.fence(&self.scope, &self.id).await == Fence::Lost => {
                Err(EventError::LeaseLost)
            }
            _ => Ok(()),
        }
    }

    /// Announces the task to subscribers (and persists it for streams) on its first event.
    pub(crate) async fn create_if_needed(&self, st: &mut LiveState) -> Result<(), EventError> {
        if st.created {
            return Ok(());
        }
        let generation = st.generation.saturating_add(1);
        if st.persist_on_create {
            self.store
                .save_at(&self.scope, &st.task, generation)
                .await?;
        }
        st.generation = generation;
        st.created = true;
        self.observe_created(st);
        self.emit(&st.task, generation, || Payload::Task(st.task.clone()))
            .await;
        Ok(())
    }

    /// Tells the observer, if any, that the task now exists.
    pub(crate) fn observe_created(&self, st: &LiveState) {
        if let Some(observer) = &self.observer {
            observer.task_state(&TaskStateEvent {
                agent_id: &self.scope.agent,
                task_id: &self.id,
                from: None,
                from_since: None,
                to: current_state(st),
            });
        }
    }

    /// Applies a status event to the task, whose lock the caller holds as
    /// `st`: the agent's events come through [`TaskSink::status`], the
    /// server's own (failing an abandoned task, canceling) straight here.
    pub(crate) async fn apply_status(
        &self,
        st: &mut LiveState,
        context_id: &str,
        state: v1::TaskState,
        message: Option<v1::Message>,
    ) -> Result<(), EventError> {
        ensure_open(st)?;
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
        let generation = st.generation.saturating_add(1);
        let saved = self
            .save_and_emit(&st.task, generation, || {
                Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
                    task_id: self.id.clone(),
                    context_id: context_id.to_owned(),
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
        st.generation = generation;
        st.dirty = false;
        if let Some(observer) = &self.observer {
            let old = old_status.as_ref();
            observer.task_state(&TaskStateEvent {
                agent_id: &self.scope.agent,
                task_id: &self.id,
                from: Some(old.map_or(v1::TaskState::Submitted, v1::TaskStatus::state)),
                from_since: crate::observe::since(old),
                to: state,
            });
        }
        if state.is_terminal() || state.is_interrupted() {
            st.settled_gen += 1;
            self.settled.notify_waiters();
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
