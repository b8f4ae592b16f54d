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
        let mut found = Violations::default();
        for (i, part) in msg.parts.iter().enumerate() {
            let Some(Content::Data(data)) = &part.content else {
                continue;
            };
            found.collect(&self.validator, &data.0, &format!("/parts/{i}/data"));
        }
        found.into_result("the data does not match the agent's input schema")
    }

    /// This check as the hook a handler runs on every message
    /// ([`heddle_server::HandlerBuilder::message_check`],
    /// [`crate::HubBuilder::message_check`]).
    pub fn into_message_check(self) -> heddle_server::MessageCheck {
        Arc::new(move |msg| self.check(msg))
    }
}

/// The violations of a schema found in a message, at most
/// [`MAX_VIOLATIONS`] kept (the rest counted): the caller's data decides
/// how many there are, and the error must stay small.
#[derive(Debug, Default)]
pub(crate) struct Violations {
    kept: Vec<FieldViolation>,
    more: usize,
}

impl Violations {
    /// Adds the violations of `instance`, each named by its pointer under `at`.
    pub(crate) fn collect(
        &mut self,
        validator: &jsonschema::Validator,
        instance: &Value,
        at: &str,
    ) {
        for e in validator.iter_errors(instance) {
            if self.kept.len() == MAX_VIOLATIONS {
                self.more = self.more.saturating_add(1);
                continue;
            }
            self.kept.push(FieldViolation {
                field: format!("{at}{}", e.instance_path().as_str()),
                description: shortened(e.to_string()),
            });
        }
    }

    /// `Ok` when none were found; else InvalidParams saying `what`, then
    /// each violation.
    pub(crate) fn into_result(self, what: &str) -> Result<(), A2aError> {
        if self.kept.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = self
            .kept
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect();
        let mut message = format!("{what}: {}", listed.join("; "));
        if self.more > 0 {
            message.push_str(&format!(" (and {} more)", self.more));
        }
        let mut err = A2aError::new(ErrorCode::InvalidParams, message);
        err.violations = self.kept;
        Err(err)
    }
}
