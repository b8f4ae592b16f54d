//! Facts about an agent carried on each of its answers, as AgentWeave's
//! hosted agents do (seed `000`: "the result carries an AgentWeave metadata
//! object: model, task type, supported file types"), declared as a Heddle
//! extension in the card so a client knows to look for them.
//!
//! A registration's `answer_metadata` table turns it on. Every message the
//! agent publishes (status messages, direct replies) and every artifact then
//! carries, in its `metadata`, the key [`EXTENSION_URI`] with
//! `{"model", "taskType", "supportedFileTypes"}`. Keying by the extension's
//! URI is how A2A extensions place data in `metadata`; a client that does
//! not know the extension sees an ordinary answer.

use std::sync::Arc;

use async_trait::async_trait;
use heddle_core::{v1, wkt::Struct};
use heddle_server::agent::{
    AgentError, AgentExecutor, EventError, RequestContext, TaskEvents, TaskSink,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The extension's URI, in the card and as the key in answers' metadata.
pub const EXTENSION_URI: &str = "https://heddle.dev/extensions/answer-metadata/v1";

/// What every answer of the agent says about it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerMetadata {
    /// The model behind the agent (`gemini-2.5-flash`, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What kind of task it does (`chat`, `rag`, `image-generation`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    /// Media types of the files it accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_types: Vec<String>,
}

impl AnswerMetadata {
    /// The object answers carry.
    pub fn object(&self) -> Value {
        let mut o = Map::new();
        if let Some(m) = &self.model {
            o.insert("model".into(), json!(m));
        }
        if let Some(t) = &self.task_type {
            o.insert("taskType".into(), json!(t));
        }
        o.insert("supportedFileTypes".into(), json!(self.file_types));
        Value::Object(o)
    }

    /// The card's declaration of the extension, its params the same object.
    pub fn extension(&self) -> v1::AgentExtension {
        v1::AgentExtension {
            uri: EXTENSION_URI.to_owned(),
            description: "Each answer's metadata carries, under this URI, the model, task type and supported file types".to_owned(),
            required: false,
            params: Struct::try_from(self.object()).ok(),
        }
    }

    /// `executor`, with every answer stamped.
    pub fn wrap(&self, executor: Arc<dyn AgentExecutor>) -> Arc<dyn AgentExecutor> {
        Arc::new(Stamped {
            inner: executor,
            object: self.object(),
        })
    }
}

/// An executor whose answers carry the metadata object.
struct Stamped {
    inner: Arc<dyn AgentExecutor>,
    object: Value,
}

impl Stamped {
    fn events(&self, events: &TaskEvents) -> TaskEvents {
        let sink = Arc::new(StampSink {
            inner: events.sink().clone(),
            object: self.object.clone(),
        });
        TaskEvents::new(sink, events.context_id().to_owned())
    }
}

#[async_trait]
impl AgentExecutor for Stamped {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let events = self.events(&events);
        self.inner.execute(ctx, events).await
    }

    async fn cancel(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let events = self.events(&events);
        self.inner.cancel(ctx, events).await
    }
    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
}

/// Adds the object to each message and artifact on its way to the task.
struct StampSink {
    inner: Arc<dyn TaskSink>,
    object: Value,
}

impl StampSink {
    fn stamp(&self, metadata: &mut Option<Struct>) {
        metadata
            .get_or_insert_with(Struct::default)
            .0
            .insert(EXTENSION_URI.to_owned(), self.object.clone());
    }
}

#[async_trait]
impl TaskSink for StampSink {
    fn task_id(&self) -> &str {
        self.inner.task_id()
    }

    fn new_id(&self) -> String {
        self.inner.new_id()
    }

    async fn status(
        &self,
        context_id: &str,
        state: v1::TaskState,
        mut message: Option<v1::Message>,
    ) -> Result<(), EventError> {
        if let Some(m) = message.as_mut() {
            self.stamp(&mut m.metadata);
        }
        self.inner.status(context_id, state, message).await
    }

    async fn artifact(
        &self,
        context_id: &str,
        mut artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), EventError> {
        self.stamp(&mut artifact.metadata);
        self.inner
            .artifact(context_id, artifact, append, last_chunk)
            .await
    }

    async fn reply(&self, context_id: &str, mut message: v1::Message) -> Result<(), EventError> {
        self.stamp(&mut message.metadata);
        self.inner.reply(context_id, message).await
    }

    async fn task_metadata(&self, fields: Struct) -> Result<(), EventError> {
        self.inner.task_metadata(fields).await
    }

    async fn add_child(&self, child: heddle_server::delegation::Hop) -> Result<(), EventError> {
        self.inner.add_child(child).await
    }
}
