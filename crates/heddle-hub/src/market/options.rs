//! What a caller asks of the marketplace, in the metadata of its request or
//! of its message under [`MARKET_EXT`]: here, the priority its task waits
//! at while the agent runs as many as it takes at once.
//!
//! ```json
//! "metadata": { "https://heddle.dev/extensions/market/v1": { "priority": "high" } }
//! ```
//!
//! The request's metadata wins over the message's; without either, the
//! priority is normal. A priority that is present but not `high`,
//! `normal` or `low` is an error naming the field, so a typo is not
//! silently served at normal.

use heddle_core::{A2aError, wkt::Struct};
use serde_json::Value;

pub use super::MARKET_EXT;

/// The member of the options object naming the priority.
pub const PRIORITY: &str = "priority";

/// How soon a task starts when the agent is at its concurrency limit
/// (the SDK's queue order): high before normal before low.
pub use heddle_server::Priority;

/// A marketplace option the caller got wrong, naming where it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct OptionError {
    /// The field at fault, e.g.
    /// `message.metadata["https://heddle.dev/extensions/market/v1"].priority`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl From<OptionError> for A2aError {
    fn from(e: OptionError) -> Self {
        A2aError::invalid_field(e.field, e.problem)
    }
}

/// The priority asked for in the `request` metadata, else in the `message`
/// metadata, else normal; an error for a value that is there but not one
/// of the three, or options that are not an object.
pub fn priority(
    request: Option<&Struct>,
    message: Option<&Struct>,
) -> Result<Priority, OptionError> {
    for (metadata, at) in [(request, "metadata"), (message, "message.metadata")] {
        if let Some(found) = priority_in(metadata, at)? {
            return Ok(found);
        }
    }
    Ok(Priority::Normal)
}

/// The priority in one metadata object, when it names one; `at` is where
/// that object is, for the error.
fn priority_in(metadata: Option<&Struct>, at: &str) -> Result<Option<Priority>, OptionError> {
    let Some(options) = metadata.and_then(|m| m.0.get(MARKET_EXT)) else {
        return Ok(None);
    };
    let Value::Object(options) = options else {
        return Err(OptionError {
            field: format!("{at}[\"{MARKET_EXT}\"]"),
            problem: "must be an object".into(),
        });
    };
    let Some(value) = options.get(PRIORITY) else {
        return Ok(None);
    };
    value
        .as_str()
        .and_then(Priority::from_name)
        .map(Some)
        .ok_or_else(|| OptionError {
            field: format!("{at}[\"{MARKET_EXT}\"].{PRIORITY}"),
            problem: "must be \"high\", \"normal\" or \"low\"".into(),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(v: Value) -> Struct {
        serde_json::from_value(v).expect("an object")
    }

    fn with_priority(p: &str) -> Struct {
        meta(json!({ MARKET_EXT: { "priority": p } }))
    }

    #[test]
    fn each_priority_is_read_and_none_is_normal() {
        for p in Priority::ALL {
            assert_eq!(priority(None, Some(&with_priority(p.as_str()))), Ok(p));
        }
        assert_eq!(priority(None, None), Ok(Priority::Normal));
        let other = meta(json!({"trace": 1, MARKET_EXT: {"budget": {}}}));
        assert_eq!(priority(Some(&other), Some(&other)), Ok(Priority::Normal));
    }

    #[test]
    fn the_request_wins_over_the_message() {
        let (high, low) = (with_priority("high"), with_priority("low"));
        assert_eq!(priority(Some(&high), Some(&low)), Ok(Priority::High));
        let silent = meta(json!({ MARKET_EXT: {} }));
        assert_eq!(priority(Some(&silent), Some(&low)), Ok(Priority::Low));
    }

    #[test]
    fn a_bad_value_is_refused_naming_its_field() {
        let e = priority(None, Some(&with_priority("urgent"))).expect_err("refused");
        assert_eq!(
            e.field,
            format!("message.metadata[\"{MARKET_EXT}\"].priority")
        );
        let e = priority(Some(&meta(json!({ MARKET_EXT: {"priority": 1} }))), None)
            .expect_err("refused");
        assert_eq!(e.field, format!("metadata[\"{MARKET_EXT}\"].priority"));
        let e = priority(None, Some(&meta(json!({ MARKET_EXT: "high" })))).expect_err("refused");
        assert_eq!(e.field, format!("message.metadata[\"{MARKET_EXT}\"]"));
        let a2a = A2aError::from(e);
        assert_eq!(a2a.code, heddle_core::ErrorCode::InvalidParams);
    }
}
