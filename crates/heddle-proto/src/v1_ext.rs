//! Ergonomic constructors and predicates for the generated v1.0 types, so
//! agent code reads `Part::text("hi")` rather than nested oneof literals.

use crate::{
    v1::{Artifact, Message, Part, Role, TaskState, TaskStatus, part::Content},
    wkt::{Timestamp, Value},
};

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Some(Content::Text(text.into())),
            ..Default::default()
        }
    }

    /// A file part carrying its bytes (`raw`, base64 in JSON).
    pub fn raw(
        bytes: impl Into<Vec<u8>>,
        media_type: impl Into<String>,
        filename: impl Into<String>,
    ) -> Self {
        Self {
            content: Some(Content::Raw(bytes.into())),
            media_type: media_type.into(),
            filename: filename.into(),
            ..Default::default()
        }
    }

    /// A file part pointing at a URL.
    pub fn url(url: impl Into<String>, media_type: impl Into<String>) -> Self {
        Self {
            content: Some(Content::Url(url.into())),
            media_type: media_type.into(),
            ..Default::default()
        }
    }

    /// A structured data part holding any JSON value.
    pub fn data(value: serde_json::Value) -> Self {
        Self {
            content: Some(Content::Data(Value(value))),
            ..Default::default()
        }
    }

    /// The text, if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            Some(Content::Text(t)) => Some(t),
            _ => None,
        }
    }
}

impl Message {
    /// A message with the given id, role and parts.
    pub fn new(message_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        Self {
            message_id: message_id.into(),
            role: role as i32,
            parts,
            ..Default::default()
        }
    }

    /// All text parts joined by newlines.
    pub fn text(&self) -> String {
        join_text(&self.parts)
    }
}

impl Artifact {
    /// All text parts joined by newlines.
    pub fn text(&self) -> String {
        join_text(&self.parts)
    }
}

fn join_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

impl TaskState {
    /// COMPLETED, FAILED, CANCELED or REJECTED: nothing leaves these states.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// INPUT_REQUIRED or AUTH_REQUIRED: the task waits for the caller.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

impl TaskStatus {
    /// A status in `state`, stamped now.
    pub fn now(state: TaskState, message: Option<Message>) -> Self {
        Self {
            state: state as i32,
            message,
            timestamp: Some(Timestamp::now()),
        }
    }
}
