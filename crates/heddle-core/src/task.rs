//! Applying stream events to a task, the same way on both sides of the wire:
//! the server's task manager and the client's artifact accumulator.

use heddle_proto::v1::{self, stream_response::Payload};

/// Applies an artifact update: `append` extends the parts of the artifact
/// with the same id (creating it if absent); otherwise it replaces or adds.
pub fn apply_artifact(artifacts: &mut Vec<v1::Artifact>, update: &v1::Artifact, append: bool) {
    match artifacts
        .iter_mut()
        .find(|a| a.artifact_id == update.artifact_id)
    {
        Some(existing) if append => {
            existing.parts.extend(update.parts.iter().cloned());
            if !update.name.is_empty() {
                existing.name.clone_from(&update.name);
            }
            if update.metadata.is_some() {
                existing.metadata.clone_from(&update.metadata);
            }
        }
        Some(existing) => *existing = update.clone(),
        None => artifacts.push(update.clone()),
    }
}

/// Builds a task from a stream: a `task` event replaces it, status events
/// set its status, artifact chunks accumulate (`append`/`lastChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskAccumulator {
    /// The task so far (`None` until the first task event, or for a message reply).
    pub task: Option<v1::Task>,
    /// A direct message reply, if the agent answered with one.
    pub message: Option<v1::Message>,
}

impl TaskAccumulator {
    /// Applies one event.
    pub fn apply(&mut self, event: &v1::StreamResponse) {
        match &event.payload {
            Some(Payload::Task(t)) => self.task = Some(t.clone()),
            Some(Payload::Message(m)) => self.message = Some(m.clone()),
            Some(Payload::StatusUpdate(u)) => {
                let task = self.task.get_or_insert_with(|| v1::Task {
                    id: u.task_id.clone(),
                    context_id: u.context_id.clone(),
                    ..Default::default()
                });
                if let Some(old) = task.status.as_mut().and_then(|s| s.message.take()) {
                    task.history.push(old);
                }
                task.status.clone_from(&u.status);
            }
            Some(Payload::ArtifactUpdate(u)) => {
                let task = self.task.get_or_insert_with(|| v1::Task {
                    id: u.task_id.clone(),
                    context_id: u.context_id.clone(),
                    ..Default::default()
                });
                if let Some(a) = &u.artifact {
                    apply_artifact(&mut task.artifacts, a, u.append);
                }
            }
            None => {}
        }
    }

    /// The task's state, if known.
    pub fn state(&self) -> Option<v1::TaskState> {
        self.task
            .as_ref()
            .and_then(|t| t.status.as_ref())
            .map(|s| s.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(t: &str, append: bool) -> v1::StreamResponse {
        v1::StreamResponse {
            payload: Some(Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: "t".into(),
                artifact: Some(v1::Artifact {
                    artifact_id: "a".into(),
                    parts: vec![v1::Part::text(t)],
                    ..Default::default()
                }),
                append,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn chunks_accumulate_and_a_fresh_artifact_replaces() {
        let mut acc = TaskAccumulator::default();
        for (t, a) in [("one ", false), ("two ", true), ("three", true)] {
            acc.apply(&chunk(t, a));
        }
        let task = acc.task.clone().expect("task");
        assert_eq!(task.artifacts[0].text(), "one \ntwo \nthree");
        assert_eq!(
            task.artifacts[0]
                .parts
                .iter()
                .filter_map(|p| p.as_text())
                .collect::<String>(),
            "one two three"
        );
        acc.apply(&chunk("fresh", false));
        assert_eq!(acc.task.expect("task").artifacts[0].parts.len(), 1);
    }
}
