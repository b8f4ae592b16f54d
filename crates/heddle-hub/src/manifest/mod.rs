//! a2ahub agent manifests: checked against a JSON Schema (draft 2020-12),
//! read into a typed [`Manifest`], turned into an A2A card
//! ([`Manifest::profile`]) and into a check of what callers send the agent
//! ([`InputCheck`]).
//!
//! ```
//! use heddle_hub::manifest;
//! use serde_json::json;
//!
//! let doc = json!({
//!     "agent_name": "Invoice reader",
//!     "endpoint": "https://agents.example.com/invoices",
//!     "skills": ["read-invoice"],
//!     "input_schema": {"type": "object", "required": ["url"]},
//!     "output_schema": {"type": "object"},
//!     "pricing": {"model": "per_task", "rate": 0.02, "currency": "USD"}
//! });
//! let m = manifest::validate(&doc).expect("a valid manifest");
//! assert_eq!(m.agent_name, "Invoice reader");
//!
//! let errors = manifest::validate(&json!({"agent_name": "x"})).unwrap_err();
//! assert!(errors.iter().any(|v| v.pointer == "/agent_name"));
//! ```
//!
//! Every violation is reported at once, each with the JSON pointer of the
//! member at fault ("" for the manifest itself, e.g. a missing required
//! member), including those inside `input_schema` and `output_schema`,
//! which must themselves be valid draft 2020-12 schemas.

use std::sync::LazyLock;

use axum::http::StatusCode;
use serde_json::{Value, json};

mod card;
mod input;
mod model;

pub use card::EXTENSION_URI;
pub(crate) use input::Violations;
pub use input::{InputCheck, InputCheckError};
pub use model::{Auth, AuthKind, Manifest, Pricing, PricingModel, RateLimit};

/// The manifest's JSON Schema (draft 2020-12), as embedded in the hub.
pub const SCHEMA: &str = include_str!("manifest.schema.json");

/// The `type` of the problem body [`problem`] builds.
pub const PROBLEM_TYPE: &str = "https://heddle.dev/problems/invalid-manifest";

/// The media type of a [`problem`] body (RFC 9457).
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Longest message kept per violation: a message quotes the offending
/// value, which may be a whole sub-document or a caller's long string.
const MAX_MESSAGE_CHARS: usize = 300;

/// One way a document breaks the manifest schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer (RFC 6901) of the member at fault; "" for the manifest
    /// itself.
    pub pointer: String,
    /// What is wrong, for people.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

impl std::error::Error for Violation {}

impl Violation {
    fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: shortened(message.into()),
        }
    }
}

/// `message`, cut to [`MAX_MESSAGE_CHARS`] characters.
pub(crate) fn shortened(mut message: String) -> String {
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// The compiled manifest schema, or why it would not compile (a bug in the
/// embedded file, which the tests rule out; reported, not panicked on).
static VALIDATOR: LazyLock<Result<jsonschema::Validator, String>> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(SCHEMA).map_err(|e| e.to_string())?;
    schema_options().build(&schema).map_err(|e| e.to_string())
});

/// Draft 2020-12 with `format` asserted (`uri`, and `regex` inside the
/// meta-schema), which the draft otherwise leaves as an annotation.
/// Without the crate's resolver features a `$ref` to anything outside the
/// document and the bundled meta-schemas fails to compile: validation
/// never reaches the network or the file system.
pub(crate) fn schema_options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::draft202012::options().should_validate_formats(true)
}

/// Checks `doc` against the manifest schema and reads it into a
/// [`Manifest`]; on failure, every violation found, in pointer order.
pub fn validate(doc: &Value) -> Result<Manifest, Vec<Violation>> {
    let validator = VALIDATOR.as_ref().map_err(|e| {
        vec![Violation::new(
            "",
            format!("the manifest schema is broken: {e}"),
        )]
    })?;
    let mut found: Vec<Violation> = validator
        .iter_errors(doc)
        .map(|e| Violation::new(e.instance_path().as_str(), e.to_string()))
        .collect();
    // The meta-schema says what a schema looks like, not whether it can be
    // used: a `$ref` that resolves nowhere passes it. Compiling tells; only
    // schemas the meta-schema accepted, so a fault is not reported twice.
    for member in ["input_schema", "output_schema"] {
        let at = format!("/{member}");
        let Some(schema) = doc.get(member) else {
            continue;
        };
        if found
            .iter()
            .any(|v| v.pointer == at || v.pointer.starts_with(&format!("{at}/")))
        {
            continue;
        }
        if let Err(e) = schema_options().build(schema) {
            found.push(Violation::new(
                format!("{at}{}", e.instance_path().as_str()),
                format!("not a usable JSON Schema: {e}"),
            ));
        }
    }
    if !found.is_empty() {
        // Stable: messages at one pointer keep the validator's order.
        found.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        found.dedup();
        return Err(found);
    }
    let mut manifest: Manifest = serde_json::from_value(doc.clone())
        .map_err(|e| vec![Violation::new("", format!("cannot read the manifest: {e}"))])?;
    manifest.json = doc.clone();
    Ok(manifest)
}

/// The HTTP answer to a refused manifest: 422 and an RFC 9457 problem body
/// (to be sent as [`PROBLEM_CONTENT_TYPE`]) listing every violation as
/// `errors: [{pointer, detail}]`.
pub fn problem(violations: &[Violation]) -> (StatusCode, Value) {
    let status = StatusCode::UNPROCESSABLE_ENTITY;
    let detail = match violations.len() {
        1 => "the manifest breaks 1 rule of the a2ahub manifest schema".to_owned(),
        n => format!("the manifest breaks {n} rules of the a2ahub manifest schema"),
    };
    let errors: Vec<Value> = violations
        .iter()
        .map(|v| json!({"pointer": v.pointer, "detail": v.message}))
        .collect();
    (
        status,
        json!({
            "type": PROBLEM_TYPE,
            "title": "Invalid agent manifest",
            "status": status.as_u16(),
            "detail": detail,
            "errors": errors,
        }),
    )
}
