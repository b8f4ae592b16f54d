//! Polling in place of streaming, for agents whose card says they do not
//! stream, and [`A2aClient::wait`] for a task a send left unfinished.
//!
//! A polled stream has the same type as a streamed one: it yields the task
//! as a snapshot (a `task` event) whenever a poll finds it changed, and ends
//! after the snapshot in which the task is finished (terminal, or waiting
//! for input or credentials). A [`crate::TaskAccumulator`] takes snapshots
//! as they come, so callers need not know which they got.

use std::time::Duration;

use futures::StreamExt;
use heddle_core::v1::{self, stream_response::Payload};
use tokio::time::Instant;

use crate::{A2aClient, ClientError, SendReply, client::send_reply, transport::EventStream};

/// Whether a task will not change without the caller: terminal, or
/// interrupted (it needs input or credentials).
fn finished(state: v1::TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

fn state_of(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

fn event(payload: Payload) -> v1::StreamResponse {
    v1::StreamResponse {
        payload: Some(payload),
    }
}

/// Where a polled stream is.
struct Polled {
    client: A2aClient,
    id: String,
    /// The task to yield before polling, if any.
    first: Option<v1::Task>,
    /// The last snapshot yielded.
    last: Option<v1::Task>,
    interval: Duration,
    deadline: Instant,
    done: bool,
}

impl Polled {
    /// The next event: the first task, then each changed snapshot; `None`
    /// once the task is finished or polling failed.
    async fn next(&mut self) -> Option<Result<v1::StreamResponse, ClientError>> {
        if let Some(t) = self.first.take() {
            return Some(Ok(self.yielded(t)));
        }
        while !self.done {
            let now = Instant::now();
            if now >= self.deadline {
                self.done = true;
                let state = self
                    .last
                    .as_ref()
                    .map_or(v1::TaskState::Unspecified, state_of);
                return Some(Err(ClientError::Transport(format!(
                    "stopped polling task {} after {:?}: it is still {}",
                    self.id,
                    self.client.opts.polling.max_wait,
                    state.as_str_name()
                ))));
            }
            tokio::time::sleep(self.interval.min(self.deadline - now)).await;
            let max = self.client.opts.polling.max_interval;
            self.interval = (self.interval + self.interval / 2).min(max);
            match self.client.get_task(&self.id, None).await {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(t) if self.last.as_ref() == Some(&t) => {}
                Ok(t) => return Some(Ok(self.yielded(t))),
            }
        }
        None
    }

    /// Records `t` as the latest snapshot and makes it an event.
    fn yielded(&mut self, t: v1::Task) -> v1::StreamResponse {
        self.done = finished(state_of(&t));
        self.last = Some(t.clone());
        event(Payload::Task(t))
    }
}

impl A2aClient {
    /// Whether to stream: unless the card says the agent does not. A card
    /// that does not say is taken to stream, as most agents do.
    pub(crate) fn streams(&self) -> bool {
        self.card().capabilities.as_ref().and_then(|c| c.streaming) != Some(false)
    }

    /// The polled stream of a task, starting with `first`.
    fn polled(&self, first: v1::Task) -> EventStream {
        let polling = self.opts.polling;
        let state = Polled {
            client: self.clone(),
            id: first.id.clone(),
            first: Some(first),
            last: None,
            interval: polling.initial_interval,
            deadline: Instant::now() + polling.max_wait,
            done: false,
        };
        Box::pin(futures::stream::unfold(state, |mut s| async move {
            s.next().await.map(|ev| (ev, s))
        }))
    }

    /// SendStreamingMessage without a stream: the message is sent without
    /// waiting for the task, which is then polled.
    pub(crate) async fn poll_send(
        &self,
        mut req: v1::SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        req.configuration
            .get_or_insert_with(Default::default)
            .return_immediately = true;
        match send_reply(self.transport.send(req).await?)? {
            SendReply::Task(t) => Ok(self.polled(t)),
            SendReply::Message(m) => Ok(Box::pin(futures::stream::iter([Ok(event(
                Payload::Message(m),
            ))]))),
        }
    }

    /// SubscribeToTask without a stream: the task, polled.
    pub(crate) async fn poll_task(&self, id: &str) -> Result<EventStream, ClientError> {
        let first = self.get_task(id, None).await?;
        Ok(self.polled(first))
    }

    /// Waits until `task` (as a send returned it) is terminal or needs input
    /// or credentials, and returns it as it then is. A finished task is
    /// returned as it is. Otherwise the task is followed with SubscribeToTask
    /// where the agent streams (falling back to polling if the stream is
    /// refused or ends early), and polled where it does not; the final task
    /// is read with GetTask, so it is whole whichever way it was followed.
    pub async fn wait(&self, task: v1::Task) -> Result<v1::Task, ClientError> {
        if finished(state_of(&task)) {
            return Ok(task);
        }
        if self.streams() {
            match self.subscribe(&task.id).await {
                Ok(events) => {
                    if until_finished(events).await? {
                        return self.get_task(&task.id, None).await;
                    }
                }
                // Refused (the task may have finished since the send): poll.
                Err(ClientError::A2a(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let polled = self.poll_task(&task.id).await?;
        if until_finished(polled).await? {
            return self.get_task(&task.id, None).await;
        }
        Err(ClientError::InvalidResponse(format!(
            "polling task {} ended before it finished",
            task.id
        )))
    }
}

/// Reads `events` until the task they describe is finished (`true`) or the
/// stream ends first (`false`).
async fn until_finished(mut events: EventStream) -> Result<bool, ClientError> {
    let mut acc = crate::TaskAccumulator::default();
    while let Some(ev) = events.next().await {
        acc.apply(&ev?);
        if acc.message.is_some() || acc.state().is_some_and(finished) {
            return Ok(true);
        }
    }
    Ok(false)
}
