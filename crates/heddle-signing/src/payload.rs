//! The bytes a card signature covers (v1 §8.4.1): the card JSON without
//! `signatures`, with the presence rules applied, in RFC 8785 form.
//!
//! The card arrives as the JSON that is served, so "set" means "present in
//! that JSON": a `false` or `0` that the server wrote is kept (ProtoJSON
//! writes those only for `optional` fields). What the presence rules remove
//! is what ProtoJSON never writes for an unset field: `null`, and empty
//! strings, lists and objects, except where the field is REQUIRED.
//!
//! The official Python SDK (a2a-sdk 1.3.0, `a2a.utils.signing`) removes
//! empty values even from REQUIRED fields (a card with `"skills": []`).
//! [`PayloadForm::DropAllEmpty`] is that form; verifiers accept either, and
//! the two are equal for any card whose REQUIRED fields are all non-empty.

use serde_json::{Map, Value};

use crate::{SigningError, jcs::canonicalize};

/// Which presence rules make the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadForm {
    /// The spec's rules (v1 §8.4.1): REQUIRED fields stay even when empty.
    Spec,
    /// Every empty string, list and object removed, REQUIRED or not, as the
    /// official Python SDK 1.3.0 does.
    DropAllEmpty,
}

/// Where an object sits in the card, for its REQUIRED members.
#[derive(Clone, Copy)]
enum Place {
    Card,
    Skill,
    Interface,
    LegacyInterface,
    Provider,
    Other,
}

impl Place {
    fn required(self, key: &str) -> bool {
        match self {
            // v1.0 REQUIRED fields, and the v0.3 ones a dual card also carries.
            Place::Card => matches!(
                key,
                "name"
                    | "description"
                    | "supportedInterfaces"
                    | "version"
                    | "capabilities"
                    | "defaultInputModes"
                    | "defaultOutputModes"
                    | "skills"
                    | "url"
                    | "protocolVersion"
            ),
            Place::Skill => matches!(key, "id" | "name" | "description" | "tags"),
            Place::Interface => matches!(key, "url" | "protocolBinding" | "protocolVersion"),
            Place::LegacyInterface => matches!(key, "url" | "transport"),
            Place::Provider => matches!(key, "url" | "organization"),
            Place::Other => false,
        }
    }

    /// The place of the objects under `key` of an object at `self`.
    fn child(self, key: &str) -> Place {
        match (self, key) {
            (Place::Card, "skills") => Place::Skill,
            (Place::Card, "supportedInterfaces") => Place::Interface,
            (Place::Card, "additionalInterfaces") => Place::LegacyInterface,
            (Place::Card, "provider") => Place::Provider,
            _ => Place::Other,
        }
    }
}

/// The canonical payload of `card` (an Agent Card JSON object) in `form`.
pub fn card_payload(card: &Value, form: PayloadForm) -> Result<String, SigningError> {
    let Value::Object(map) = card else {
        return Err(SigningError::NotACard(
            "the card is not a JSON object".into(),
        ));
    };
    let mut map = map.clone();
    map.remove("signatures");
    let cleaned = clean_object(map, Place::Card, form);
    canonicalize(&Value::Object(cleaned))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

fn clean_object(map: Map<String, Value>, place: Place, form: PayloadForm) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in map {
        let child = place.child(&k);
        let v = clean_value(v, child, form);
        let keep =
            !is_empty(&v) || (form == PayloadForm::Spec && place.required(&k) && !v.is_null());
        if keep {
            out.insert(k, v);
        }
    }
    out
}

fn clean_value(v: Value, place: Place, form: PayloadForm) -> Value {
    match v {
        Value::Object(o) => Value::Object(clean_object(o, place, form)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|i| clean_value(i, place, form))
                .filter(|i| !is_empty(i))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The v1 §8.4.1 example: REQUIRED `description: ""` and `skills: []`
    /// stay, the empty non-required `extensions` goes, explicit `false`s stay.
    #[test]
    fn spec_example_of_default_value_removal() {
        let card = json!({
            "name": "Example Agent",
            "description": "",
            "capabilities": {"streaming": false, "pushNotifications": false, "extensions": []},
            "skills": []
        });
        assert_eq!(
            card_payload(&card, PayloadForm::Spec).expect("payload"),
            r#"{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}"#
        );
        assert_eq!(
            card_payload(&card, PayloadForm::DropAllEmpty).expect("payload"),
            r#"{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}"#
        );
    }

    #[test]
    fn signatures_and_nulls_are_excluded() {
        let card = json!({"name": "a", "iconUrl": null, "signatures": [{"protected": "x", "signature": "y"}],
            "skills": [{"id": "s", "name": "n", "description": "", "tags": [], "examples": []}]});
        assert_eq!(
            card_payload(&card, PayloadForm::Spec).expect("payload"),
            r#"{"name":"a","skills":[{"description":"","id":"s","name":"n","tags":[]}]}"#
        );
    }

    #[test]
    fn a_non_object_is_not_a_card() {
        assert!(card_payload(&json!([1]), PayloadForm::Spec).is_err());
    }
}
