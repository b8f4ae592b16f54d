//! The skills schema: one JSON Schema (draft 2020-12) document for the
//! structured (`data` part) inputs and outputs of an agent's skills.
//!
//! Its root validates a `data` part a caller sends the agent: any one of
//! the skills' input schemas. That is the shape the hub enforces (a
//! manifest's `input_schema` is checked against every `data` part before
//! the agent sees it), so the root can be handed to the hub as it is. Each
//! skill's own schemas sit in `$defs` as `{id}.input` and `{id}.output`;
//! the output side goes to the hub as `output_schema` ([`output_schema`]).

use serde_json::{Map, Value, json};

use super::spec::{AgentSpec, SkillSpec};

/// The JSON Schema dialect every schema here is written in.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Whether a skill takes or gives JSON data: it lists a JSON media type
/// or has a schema for it.
fn is_json(modes: &[String]) -> bool {
    modes
        .iter()
        .any(|m| m == "application/json" || m.ends_with("+json"))
}

/// The schema of a skill's data input: the one given, else any JSON
/// object when the skill accepts JSON; `None` when it takes no data.
fn input_of(s: &SkillSpec) -> Option<Value> {
    s.input_schema
        .clone()
        .or_else(|| is_json(&s.input_modes).then(|| json!({"type": "object"})))
}

/// Likewise for what a skill answers with.
fn output_of(s: &SkillSpec) -> Option<Value> {
    s.output_schema
        .clone()
        .or_else(|| is_json(&s.output_modes).then(|| json!({"type": "object"})))
}

/// `$defs` with each skill's input and output schemas, without their own
/// `$schema` (the document names the dialect once). Each is its own schema
/// resource, with an `$id` (`urn:heddle:skill:{id}:input`, unless it names
/// one already), so the `#/$defs/…` references written inside it resolve in
/// it rather than in the skills schema around it.
fn defs(spec: &AgentSpec) -> Map<String, Value> {
    let mut defs = Map::new();
    let resource = |mut v: Value, id: String| {
        if let Value::Object(o) = &mut v {
            o.remove("$schema");
            o.entry("$id").or_insert(id.into());
        }
        v
    };
    for s in &spec.skills {
        for (side, schema) in [("input", input_of(s)), ("output", output_of(s))] {
            if let Some(v) = schema {
                let id = format!("urn:heddle:skill:{}:{side}", s.id);
                defs.insert(format!("{}.{side}", s.id), resource(v, id));
            }
        }
    }
    defs
}

/// A root that accepts any one of the `$defs` entries ending in `suffix`,
/// or nothing when there is none.
fn root(spec: &AgentSpec, suffix: &str, title: String, description: &str) -> Value {
    let defs = defs(spec);
    let refs: Vec<Value> = defs
        .keys()
        .filter(|k| k.ends_with(suffix))
        .map(|k| json!({"$ref": format!("#/$defs/{}", pointer_escape(k))}))
        .collect();
    let mut doc = Map::new();
    doc.insert("$schema".into(), DIALECT.into());
    doc.insert("title".into(), title.into());
    doc.insert("description".into(), description.into());
    if refs.is_empty() {
        // No skill takes (or gives) data: no data part is valid.
        doc.insert("not".into(), json!({}));
    } else {
        doc.insert("anyOf".into(), Value::Array(refs));
    }
    doc.insert("$defs".into(), Value::Object(defs));
    Value::Object(doc)
}

/// Escapes a `$defs` key for a JSON pointer (RFC 6901).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The skills schema file: the root validates a `data` part sent to the agent.
pub fn skills_schema(spec: &AgentSpec) -> Value {
    root(
        spec,
        ".input",
        format!("{}: skill data", spec.name),
        "The root validates a data part sent to the agent (any one skill's input); \
         $defs holds each skill's input and output schemas as {skill id}.input and .output.",
    )
}

/// What the agent answers with in `data` parts (the hub's `output_schema`).
pub fn output_schema(spec: &AgentSpec) -> Value {
    root(
        spec,
        ".output",
        format!("{}: skill results", spec.name),
        "A data part the agent answers with (any one skill's output).",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::new::spec::{Bindings, Security};

    fn spec(skills: Vec<SkillSpec>) -> AgentSpec {
        AgentSpec {
            name: "A".into(),
            description: "d".into(),
            version: "1.0.0".into(),
            provider: None,
            skills,
            streaming: true,
            push: false,
            bindings: Bindings {
                jsonrpc: true,
                rest: false,
                grpc: false,
            },
            v03: false,
            security: Security::None,
            base_url: "http://localhost:1".into(),
            grpc_addr: String::new(),
        }
    }

    #[test]
    fn the_root_takes_any_skill_input_and_nothing_when_no_skill_takes_data() {
        let with = spec(vec![SkillSpec {
            id: "q".into(),
            input_modes: vec!["text/plain".into()],
            input_schema: Some(json!({"type": "object", "required": ["city"]})),
            ..Default::default()
        }]);
        let doc = skills_schema(&with);
        assert_eq!(doc["anyOf"][0]["$ref"], "#/$defs/q.input");
        assert_eq!(doc["$defs"]["q.input"]["required"][0], "city");
        let without = spec(vec![SkillSpec {
            id: "t".into(),
            input_modes: vec!["text/plain".into()],
            ..Default::default()
        }]);
        assert_eq!(skills_schema(&without)["not"], json!({}));
    }

    #[test]
    fn a_skill_schema_keeps_its_local_refs() {
        let local = json!({
            "$defs": {"city": {"type": "string"}},
            "type": "object",
            "required": ["city"],
            "properties": {"city": {"$ref": "#/$defs/city"}}
        });
        let with = spec(vec![SkillSpec {
            id: "q".into(),
            input_schema: Some(local),
            ..Default::default()
        }]);
        let doc = skills_schema(&with);
        assert_eq!(doc["$defs"]["q.input"]["$id"], "urn:heddle:skill:q:input");
        let check = heddle_hub::manifest::InputCheck::from_schema(&doc).expect("compiles");
        let message = |data: Value| -> heddle_core::v1::Message {
            serde_json::from_value(json!({"messageId": "m", "role": "ROLE_USER",
                "parts": [{"data": data}]}))
            .expect("a message")
        };
        assert!(check.check(&message(json!({"city": "Paris"}))).is_ok());
        assert!(check.check(&message(json!({"city": 5}))).is_err());
    }
}
