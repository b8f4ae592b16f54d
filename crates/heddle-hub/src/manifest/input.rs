//! The check a hub runs on what callers send an agent with an input schema.

use std::sync::Arc;

use heddle_core::{A2aError, ErrorCode, error::FieldViolation, v1, v1::part::Content};
use serde_json::Value;

use super::{Manifest, schema_options, shortened};

/// Most violations one refusal lists: the caller's data decides how many
/// there are, and the error must stay small.
const MAX_VIOLATIONS: usize = 32;

/// Why an [`InputCheck`] cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum InputCheckError {
    /// The schema does not compile (for a validated manifest it always
    /// does: [`super::validate`] compiles it too).
    #[error("the input schema cannot be compiled: {0}")]
    Schema(String),
}

/// Validates every `data` part of a message against an agent's input
/// schema, compiled once. Install it on the agent's handler with
/// [`InputCheck::into_message_check`], so every binding runs it.
#[derive(Clone, Debug)]
pub struct InputCheck {
    validator: Arc<jsonschema::Validator>,
}

impl InputCheck {
    /// The check of `manifest`'s `input_schema`.
    pub fn new(manifest: &Manifest) -> Result<Self, InputCheckError> {
        Self::from_schema(&manifest.input_schema)
    }

    /// The check of any draft 2020-12 `schema`.
    pub fn from_schema(schema: &Value) -> Result<Self, InputCheckError> {
        let validator = schema_options()
            .build(schema)
            .map_err(|e| InputCheckError::Schema(e.to_string()))?;
        Ok(Self {
            validator: Arc::new(validator),
        })
    }

    /// `Ok` when every data part of `msg` matches the schema (a message
    /// without data parts does); else InvalidParams naming each violation
    /// by its pointer in the message, e.g. `/parts/0/data/amount`.
    pub fn check(&self, msg: &v1::Message) -> Result<(), A2aError> {
        let mut violations = Vec::new();
        let mut more = 0usize;
        for (i, part) in msg.parts.iter().enumerate() {
            let Some(Content::Data(data)) = &part.content else {
                continue;
            };
            for e in self.validator.iter_errors(&data.0) {
                if violations.len() == MAX_VIOLATIONS {
                    more += 1;
                    continue;
                }
                violations.push(FieldViolation {
                    field: format!("/parts/{i}/data{}", e.instance_path().as_str()),
                    description: shortened(e.to_string()),
                });
            }
        }
        if violations.is_empty() {
            return Ok(());
        }
        let mut message = String::from("the data does not match the agent's input schema: ");
        let listed: Vec<String> = violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect();
        message.push_str(&listed.join("; "));
        if more > 0 {
            message.push_str(&format!(" (and {more} more)"));
        }
        let mut err = A2aError::new(ErrorCode::InvalidParams, message);
        err.violations = violations;
        Err(err)
    }

    /// This check as the hook a handler runs on every message
    /// ([`heddle_server::HandlerBuilder::message_check`],
    /// [`crate::HubBuilder::message_check`]).
    pub fn into_message_check(self) -> heddle_server::MessageCheck {
        Arc::new(move |msg| self.check(msg))
    }
}
