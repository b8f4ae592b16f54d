//! Heddle's [`EventBus`] on NATS JetStream.
//!
//! * Every applied task event is published on the task's own subject,
//!   `heddle.task.<agent>.<task>` (each id base64url-encoded, so any id is
//!   one valid subject token), as the protobuf `StreamResponse` with its
//!   generation in the `Heddle-Generation` header. One stream keeps them
//!   (file storage, a retention age, a cap per task); `Nats-Msg-Id` is
//!   `<agent>.<task>.<generation>`, so a publish retried within the
//!   duplicate window is kept once.
//! * Following a task reads its subject from the start with an ordered
//!   consumer (JetStream redelivers in order, with no gap, or starts again)
//!   and drops what is at or before the generation the follower holds.
//! * Cancels go to a replica on `heddle.control.<replica>.cancel` as core
//!   NATS requests: a replica that is gone has no subscriber, and the
//!   request fails at once with "no responders".
//! * A push config made for a task another replica runs is told to that
//!   replica on `heddle.control.<replica>.push`, a core NATS request it
//!   answers once it has taken note.

use std::{sync::Arc, time::Duration};

use async_nats::{
    HeaderMap,
    jetstream::{self, consumer::pull::OrderedConfig, stream},
};
use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use heddle_core::{A2aError, jsonrpc::ErrorObject, v1};
use heddle_server::{
    Event,
    cluster::{BusError, Control, EventBus, EventFeed},
};
use heddle_store::Scope;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

/// The header holding an event's generation.
const GENERATION: &str = "Heddle-Generation";

/// How long a cancel waits for the replica running the task.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the replica that stored a push config waits for the one running
/// the task to take note of it (only a map insert there).
const PUSH_NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest control request read (ids and a little JSON).
const MAX_CONTROL: usize = 16 * 1024;

/// How the stream keeps events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsOptions {
    /// The JetStream stream's name (default `HEDDLE_EVENTS`).
    pub stream: String,
    /// The subject prefix of every subject (default `heddle`).
    pub prefix: String,
    /// How long an event is kept: a client may resume a stream this long
    /// after it dropped (default one day).
    pub max_age: Duration,
    /// Most events kept per task (default 100 000); older ones go first.
    pub max_per_task: i64,
}

impl Default for NatsOptions {
    fn default() -> Self {
        Self {
            stream: "HEDDLE_EVENTS".into(),
            prefix: "heddle".into(),
            max_age: Duration::from_secs(24 * 3600),
            max_per_task: 100_000,
        }
    }
}

/// The bus: a NATS connection and the events stream.
pub struct NatsBus {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: stream::Stream,
    prefix: String,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn bus_err(doing: &str, e: impl std::fmt::Display) -> BusError {
    BusError(format!("{doing}: {e}"))
}

fn token(id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

impl NatsBus {
    /// Connects to the NATS server at `url` and makes (or reuses) the
    /// events stream.
    pub async fn connect(url: &str, options: NatsOptions) -> Result<Self, BusError> {
        let client = async_nats::connect(url)
            .await
            .map_err(|e| bus_err("connecting to NATS", e))?;
        let js = jetstream::new(client.clone());
        let stream = js
            .get_or_create_stream(stream::Config {
                name: options.stream.clone(),
                subjects: vec![format!("{}.task.>", options.prefix)],
                storage: stream::StorageType::File,
                max_age: options.max_age,
                max_messages_per_subject: options.max_per_task,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .map_err(|e| bus_err("opening the events stream", e))?;
        Ok(Self {
            client,
            js,
            stream,
            prefix: options.prefix,
        })
    }

    fn subject(&self, scope: &Scope, task_id: &str) -> String {
        format!(
            "{}.task.{}.{}",
            self.prefix,
            token(&scope.agent),
            token(task_id)
        )
    }

    fn control_subject(&self, replica: &str) -> String {
        format!("{}.control.{}.cancel", self.prefix, token(replica))
    }

    /// Where a replica hears of push configs made elsewhere for its tasks:
    /// a subject of its own beside the cancels', so a replica that does not
    /// know it has no responder (and cannot take it for a cancel).
    fn push_subject(&self, replica: &str) -> String {
        format!("{}.control.{}.push", self.prefix, token(replica))
    }

    /// Takes note of a push config another replica made, then says so.
    async fn answer_push(&self, control: &dyn Control, told: async_nats::Message) {
        if told.payload.len() > MAX_CONTROL {
            return;
        }
        let Ok(request) = serde_json::from_slice::<TaskRequest>(&told.payload) else {
            tracing::warn!("unreadable push config notice from another replica");
            return;
        };
        control.push_config_made(&Scope::new(request.agent, request.owner), &request.task);
        if let Some(reply) = told.reply
            && let Err(e) = self.client.publish(reply, "{}".into()).await
        {
            tracing::warn!(error = %e, "could not answer a push config notice");
        }
    }
}

fn generation_of(headers: Option<&HeaderMap>) -> Option<u64> {
    headers?.get(GENERATION)?.as_str().parse().ok()
}

fn decode_event(headers: Option<&HeaderMap>, payload: &[u8]) -> Result<Event, BusError> {
    let generation =
        generation_of(headers).ok_or_else(|| BusError("an event without a generation".into()))?;
    let response =
        v1::StreamResponse::decode(payload).map_err(|e| bus_err("decoding an event", e))?;
    Ok(Event {
        generation,
        response,
    })
}

/// The task a control request between replicas is about (a cancel, or a
/// push config made for it), each on a subject of its own.
#[derive(serde::Serialize, serde::Deserialize)]
struct TaskRequest {
    agent: String,
    owner: String,
    task: String,
}

impl TaskRequest {
    /// The request about `task_id` in `scope`, encoded.
    fn body(scope: &Scope, task_id: &str) -> Result<Vec<u8>, BusError> {
        serde_json::to_vec(&Self {
            agent: scope.agent.clone(),
            owner: scope.owner.clone(),
            task: task_id.to_owned(),
        })
        .map_err(|e| bus_err("encoding a control request", e))
    }
}

/// Its answer: the canceled task (protobuf, base64) or the A2A error.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum CancelAnswer {
    Task(String),
    Error(ErrorObject),
    /// The replica does not run the task (any more).
    NotHere,
}

#[async_trait]
impl EventBus for NatsBus {
    async fn publish(&self, scope: &Scope, task_id: &str, event: &Event) -> Result<(), BusError> {
        let mut headers = HeaderMap::new();
        let generation = event.generation.to_string();
        headers.insert(GENERATION, generation.as_str());
        headers.insert(
            "Nats-Msg-Id",
            format!("{}.{}.{generation}", token(&scope.agent), token(task_id)).as_str(),
        );
        let ack = self
            .js
            .publish_with_headers(
                self.subject(scope, task_id),
                headers,
                Bytes::from(event.response.encode_to_vec()),
            )
            .await
            .map_err(|e| bus_err("publishing a task event", e))?;
        // The publish is on the wire, in order; the stream's ack comes later.
        let task = task_id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = ack.await {
                tracing::warn!(task = %task, error = %e, "the events stream did not keep a task event");
            }
        });
        Ok(())
    }

    async fn last_generation(&self, scope: &Scope, task_id: &str) -> Result<u64, BusError> {
        use async_nats::jetstream::stream::LastRawMessageErrorKind;
        match self
            .stream
            .get_last_raw_message_by_subject(&self.subject(scope, task_id))
            .await
        {
            Ok(message) => Ok(generation_of(Some(&message.headers)).unwrap_or(0)),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(e) => Err(bus_err("reading a task's last event", e)),
        }
    }

    async fn follow(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
    ) -> Result<EventFeed, BusError> {
        let consumer = self
            .stream
            .create_consumer(OrderedConfig {
                filter_subject: self.subject(scope, task_id),
                deliver_policy: jetstream::consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| bus_err("following a task's events", e))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| bus_err("following a task's events", e))?;
        let feed = messages.filter_map(move |message| async move {
            match message {
                Ok(m) => match decode_event(m.headers.as_ref(), &m.payload) {
                    Ok(event) if event.generation <= after => None,
                    other => Some(other),
                },
                Err(e) => Some(Err(bus_err("reading a task's events", e))),
            }
        });
        Ok(Box::pin(feed))
    }

    async fn serve_control(
        &self,
        replica: &str,
        control: Arc<dyn Control>,
        stop: CancellationToken,
    ) -> Result<(), BusError> {
        let mut requests = self
            .client
            .subscribe(self.control_subject(replica))
            .await
            .map_err(|e| bus_err("subscribing to control requests", e))?;
        let mut pushes = self
            .client
            .subscribe(self.push_subject(replica))
            .await
            .map_err(|e| bus_err("subscribing to control requests", e))?;
        loop {
            let request = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                r = requests.next() => r,
                p = pushes.next() => {
                    let Some(told) = p else {
                        return Err(BusError("the control subscription closed".into()));
                    };
                    self.answer_push(&*control, told).await;
                    continue;
                }
            };
            let Some(request) = request else {
                return Err(BusError("the control subscription closed".into()));
            };
            let Some(reply) = request.reply.clone() else {
                continue;
            };
            let control = control.clone();
            let client = self.client.clone();
            tokio::spawn(async move {
                let answer = answer_cancel(&*control, &request.payload).await;
                let body = serde_json::to_vec(&answer).unwrap_or_default();
                if let Err(e) = client.publish(reply, body.into()).await {
                    tracing::warn!(error = %e, "could not answer a relayed cancel");
                }
            });
        }
    }

    async fn request_cancel(
        &self,
        replica: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<Result<v1::Task, A2aError>>, BusError> {
        use async_nats::RequestErrorKind;
        let body = TaskRequest::body(scope, task_id)?;
        let asked = tokio::time::timeout(
            CANCEL_TIMEOUT,
            self.client
                .request(self.control_subject(replica), body.into()),
        )
        .await;
        // Only "no responders" means the replica is gone; one that is slow
        // may still be canceling.
        let message = match asked {
            Err(_) => {
                return Err(BusError(
                    "the replica did not answer a cancel in time".into(),
                ));
            }
            Ok(Err(e)) if matches!(e.kind(), RequestErrorKind::NoResponders) => return Ok(None),
            Ok(Err(e)) => return Err(bus_err("relaying a cancel", e)),
            Ok(Ok(message)) => message,
        };
        let answer: CancelAnswer = serde_json::from_slice(&message.payload)
            .map_err(|e| bus_err("reading a cancel's answer", e))?;
        Ok(match answer {
            CancelAnswer::NotHere => None,
            CancelAnswer::Error(e) => Some(Err(A2aError::from_jsonrpc(&e))),
            CancelAnswer::Task(b64) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| bus_err("reading a cancel's answer", e))?;
                let task = v1::Task::decode(bytes.as_slice())
                    .map_err(|e| bus_err("reading a cancel's answer", e))?;
                Some(Ok(task))
            }
        })
    }

    async fn tell_push_config(
        &self,
        replica: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<bool, BusError> {
        use async_nats::RequestErrorKind;
        let body = TaskRequest::body(scope, task_id)?;
        let asked = tokio::time::timeout(
            PUSH_NOTICE_TIMEOUT,
            self.client.request(self.push_subject(replica), body.into()),
        )
        .await;
        match asked {
            Err(_) => Err(BusError(
                "the replica did not take note of a push config in time".into(),
            )),
            Ok(Err(e)) if matches!(e.kind(), RequestErrorKind::NoResponders) => Ok(false),
            Ok(Err(e)) => Err(bus_err("telling a replica of a push config", e)),
            Ok(Ok(_)) => Ok(true),
        }
    }
}

async fn answer_cancel(control: &dyn Control, payload: &[u8]) -> CancelAnswer {
    if payload.len() > MAX_CONTROL {
        return CancelAnswer::Error(A2aError::internal("control request too large").to_jsonrpc());
    }
    let Ok(request) = serde_json::from_slice::<TaskRequest>(payload) else {
        return CancelAnswer::Error(A2aError::internal("unreadable control request").to_jsonrpc());
    };
    match control
        .cancel(Scope::new(request.agent, request.owner), request.task)
        .await
    {
        None => CancelAnswer::NotHere,
        Some(Ok(task)) => CancelAnswer::Task(
            base64::engine::general_purpose::STANDARD.encode(task.encode_to_vec()),
        ),
        Some(Err(e)) => CancelAnswer::Error(e.to_jsonrpc()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_id_is_one_subject_token() {
        for id in ["a.b", "*", ">", "with space", "é", ""] {
            let t = token(id);
            assert!(
                t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{id:?} -> {t:?}"
            );
        }
    }

    #[test]
    fn an_event_without_a_generation_is_refused() {
        assert!(decode_event(None, &[]).is_err());
        let mut headers = HeaderMap::new();
        headers.insert(GENERATION, "7");
        let event = decode_event(Some(&headers), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(event.generation, 7);
    }
}
