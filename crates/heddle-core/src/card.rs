//! Agent Cards in the three forms a server publishes or a client reads:
//! v1.0 (ProtoJSON of `AgentCard`), v0.3 ([`crate::compat::v03::AgentCard`]),
//! and the dual form one well-known URL can serve to both kinds of client.
//!
//! The dual form is the v1.0 card with the v0.3 members beside it
//! (`protocolVersion`, `url`, `preferredTransport`, `additionalInterfaces`,
//! `security`, `supportsAuthenticatedExtendedCard`), and each security scheme
//! carrying both its v1.0 wrapper member and the v0.3 `type`-tagged members.
//! v1.0 clients ignore the v0.3 members as unknown fields; v0.3 clients ignore
//! `supportedInterfaces` and the wrappers. Skills carry `security` beside
//! `securityRequirements` the same way.

use heddle_proto::v1;
use serde_json::{Map, Value};

use crate::compat::v03;

/// Which form of card a document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardForm {
    /// Only v1.0 members.
    V1,
    /// Only v0.3 members.
    V03,
    /// Both (a dual-version card).
    Dual,
}

/// Tells the form of a card document by its members.
pub fn card_form(doc: &Value) -> CardForm {
    let v1 = doc.get("supportedInterfaces").is_some();
    let v03 = doc.get("url").is_some() || doc.get("protocolVersion").is_some();
    match (v1, v03) {
        (true, true) => CardForm::Dual,
        (false, true) => CardForm::V03,
        _ => CardForm::V1,
    }
}

/// Reads any form of card into the v1.0 model. A dual card is read by its
/// v1.0 members; a v0.3 card is upgraded.
pub fn parse_card(doc: &Value) -> Result<v1::AgentCard, crate::error::A2aError> {
    match card_form(doc) {
        CardForm::V03 => {
            crate::validate::from_value::<v03::AgentCard>(doc.clone()).map(|c| c.to_v1())
        }
        _ => crate::validate::from_value::<v1::AgentCard>(doc.clone()),
    }
}

/// The dual-version JSON of `card`. With no 0.3 interface on the card, this is
/// the plain v1.0 JSON.
pub fn dual_card_json(card: &v1::AgentCard) -> Value {
    let mut doc = serde_json::to_value(card).unwrap_or(Value::Null);
    let Some(old) = v03::AgentCard::from_v1(card) else {
        return doc;
    };
    let Ok(Value::Object(old)) = serde_json::to_value(&old) else {
        return doc;
    };
    let Value::Object(obj) = &mut doc else {
        return doc;
    };
    for key in [
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "security",
        "supportsAuthenticatedExtendedCard",
    ] {
        if let Some(v) = old.get(key) {
            obj.insert(key.to_owned(), v.clone());
        }
    }
    merge_objects(obj, "securitySchemes", old.get("securitySchemes"));
    if let (Some(Value::Array(new_skills)), Some(Value::Array(old_skills))) =
        (obj.get_mut("skills"), old.get("skills"))
    {
        for (n, o) in new_skills.iter_mut().zip(old_skills) {
            if let (Value::Object(n), Some(sec)) = (n, o.get("security")) {
                n.insert("security".into(), sec.clone());
            }
        }
    }
    doc
}

/// For each named entry of `obj[key]`, adds the members of `extra[name]` beside the existing ones.
fn merge_objects(obj: &mut Map<String, Value>, key: &str, extra: Option<&Value>) {
    let (Some(Value::Object(target)), Some(Value::Object(extra))) = (obj.get_mut(key), extra)
    else {
        return;
    };
    for (name, members) in extra {
        if let (Some(Value::Object(t)), Value::Object(m)) = (target.get_mut(name), members) {
            for (k, v) in m {
                t.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card() -> v1::AgentCard {
        serde_json::from_value(json!({
            "name": "echo", "description": "Echoes", "version": "1.0.0",
            "supportedInterfaces": [
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"}
            ],
            "capabilities": {"streaming": true},
            "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "api-key"}}},
            "securityRequirements": [{"schemes": {"key": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]
        }))
        .expect("card")
    }

    #[test]
    fn dual_card_reads_back_identically_in_both_versions() {
        let c = card();
        let doc = dual_card_json(&c);
        assert_eq!(card_form(&doc), CardForm::Dual);
        assert_eq!(doc["protocolVersion"], "0.3.0");
        assert_eq!(doc["url"], "http://h/a2a");
        assert!(
            doc.get("preferredTransport").is_none(),
            "JSONRPC is the default"
        );
        assert_eq!(
            doc["additionalInterfaces"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(doc["security"], json!([{"key": []}]));
        assert_eq!(doc["securitySchemes"]["key"]["type"], "apiKey");
        assert_eq!(doc["securitySchemes"]["key"]["in"], "header");
        // A v1.0 client sees the v1.0 card.
        let as_v1: v1::AgentCard = serde_json::from_value(doc.clone()).expect("v1 reads dual");
        assert_eq!(as_v1, c);
        // A v0.3 client sees the 0.3 card.
        let as_v03: v03::AgentCard = serde_json::from_value(doc).expect("v0.3 reads dual");
        assert_eq!(Some(as_v03), v03::AgentCard::from_v1(&c));
    }
}
