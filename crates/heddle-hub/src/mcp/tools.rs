//! An MCP server's tools as an A2A agent's skills, and which tool a
//! message calls.
//!
//! A message calls a tool one of two ways:
//! * a `data` part `{"tool": NAME, "arguments": {…}}` calls NAME (the
//!   arguments may be left out when the tool needs none);
//! * a message of text only, to an agent whose only tool takes a single
//!   string argument, calls that tool with the text as that argument.
//!
//! Anything else is refused with InvalidParams before a task is made, as
//! are arguments that break the tool's input schema (each violation named
//! by its pointer, `/parts/0/data/arguments/…`).

use std::{collections::BTreeMap, sync::Arc};

use heddle_core::{A2aError, ErrorCode, v1, v1::part::Content};
use serde_json::{Map, Value, json};

use super::TOOLS_EXTENSION;

/// Most tools that become skills: a server that lists more is cut here.
pub(crate) const MAX_TOOLS: usize = 256;
/// Longest tool description kept on the card, in characters.
const MAX_DESCRIPTION: usize = 4000;
/// Longest tool title kept, in characters.
const MAX_TITLE: usize = 200;
/// Largest input schema, as JSON: a tool with a larger one is left out.
const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// The annotations kept (the MCP spec's hints); any other key is dropped.
const ANNOTATIONS: [&str; 5] = [
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// One tool, as listed by the server.
#[derive(Debug)]
pub(crate) struct Tool {
    name: String,
    title: Option<String>,
    description: String,
    input_schema: Value,
    annotations: Option<Value>,
    /// The input schema compiled (a tool whose schema does not compile is
    /// left out: its calls could not be checked).
    validator: jsonschema::Validator,
    /// The argument a text message fills: the schema's one property, a
    /// string (`None` when the tool takes anything else).
    text_argument: Option<String>,
}

/// The tools behind an agent's skills, by name.
#[derive(Debug, Default)]
pub(crate) struct ToolSet {
    tools: BTreeMap<String, Tool>,
}

/// One tool call a message asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Call {
    pub(crate) tool: String,
    pub(crate) arguments: Map<String, Value>,
}

impl ToolSet {
    /// The tools in a `tools/list` answer (each a JSON tool object), only
    /// those in `only` when given, at most [`MAX_TOOLS`]. A tool without a
    /// usable name is left out.
    pub(crate) fn new(listed: Vec<Value>, only: Option<&[String]>) -> Self {
        let mut tools = BTreeMap::new();
        for t in listed {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            if name.is_empty() || name.len() > 128 || tools.contains_key(name) {
                continue;
            }
            if only.is_some_and(|o| !o.iter().any(|n| n == name)) {
                continue;
            }
            if tools.len() == MAX_TOOLS {
                tracing::warn!(
                    max = MAX_TOOLS,
                    "an MCP server lists more tools than are served"
                );
                break;
            }
            let input_schema = t
                .get("inputSchema")
                .filter(|s| s.is_object())
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            if serde_json::to_vec(&input_schema).map_or(true, |b| b.len() > MAX_SCHEMA_BYTES) {
                tracing::warn!(
                    tool = name,
                    max = MAX_SCHEMA_BYTES,
                    "an MCP tool's input schema is too large; the tool is not served"
                );
                continue;
            }
            // The schema's own `$schema` picks the draft (MCP servers often
            // send draft-07); nothing is fetched for a `$ref`.
            let validator = match jsonschema::options()
                .should_validate_formats(true)
                .build(&input_schema)
            {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(tool = name, error = %e, "an MCP tool's input schema does not compile; the tool is not served");
                    continue;
                }
            };
            let text = |v: &Value, key: &str, max: usize| {
                v.get(key)
                    .and_then(Value::as_str)
                    .map(|s| s.chars().take(max).collect::<String>())
            };
            let annotations = t.get("annotations").and_then(Value::as_object).map(|a| {
                Value::Object(
                    a.iter()
                        .filter(|(k, v)| {
                            ANNOTATIONS.contains(&k.as_str()) && (v.is_boolean() || v.is_string())
                        })
                        .map(|(k, v)| match v {
                            Value::String(s) => (
                                k.clone(),
                                Value::String(s.chars().take(MAX_TITLE).collect()),
                            ),
                            other => (k.clone(), other.clone()),
                        })
                        .collect(),
                )
            });
            let title = text(&t, "title", MAX_TITLE).or_else(|| {
                annotations
                    .as_ref()
                    .and_then(|a| text(a, "title", MAX_TITLE))
            });
            tools.insert(
                name.to_owned(),
                Tool {
                    name: name.to_owned(),
                    title,
                    description: text(&t, "description", MAX_DESCRIPTION).unwrap_or_default(),
                    text_argument: text_argument(&input_schema),
                    input_schema,
                    annotations,
                    validator,
                },
            );
        }
        Self { tools }
    }

    /// Whether a text message calls a tool (the only one, taking one string).
    pub(crate) fn takes_text(&self) -> bool {
        self.tools.len() == 1 && self.tools.values().all(|t| t.text_argument.is_some())
    }

    /// How many tools there are.
    pub(crate) fn len(&self) -> usize {
        self.tools.len()
    }

    /// The tools' names, in order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// One skill per tool: id and name from the tool (its title when it
    /// has one), its description, and tags from its annotations.
    pub(crate) fn skills(&self) -> Vec<v1::AgentSkill> {
        self.tools
            .values()
            .map(|t| {
                let mut tags = vec!["mcp".to_owned()];
                let hint = |key: &str| {
                    t.annotations
                        .as_ref()
                        .and_then(|a| a.get(key))
                        .and_then(Value::as_bool)
                };
                for (key, yes, no) in [
                    ("readOnlyHint", Some("read-only"), None),
                    (
                        "destructiveHint",
                        Some("destructive"),
                        Some("non-destructive"),
                    ),
                    ("idempotentHint", Some("idempotent"), None),
                    ("openWorldHint", Some("open-world"), Some("closed-world")),
                ] {
                    match hint(key) {
                        Some(true) => tags.extend(yes.map(str::to_owned)),
                        Some(false) => tags.extend(no.map(str::to_owned)),
                        None => {}
                    }
                }
                let mut input_modes = vec!["application/json".to_owned()];
                if self.takes_text() {
                    input_modes.push("text/plain".to_owned());
                }
                v1::AgentSkill {
                    id: t.name.clone(),
                    name: t.title.clone().unwrap_or_else(|| t.name.clone()),
                    description: t.description.clone(),
                    tags,
                    examples: vec![
                        json!({"tool": t.name, "arguments": example_arguments(&t.input_schema)})
                            .to_string(),
                    ],
                    input_modes,
                    ..Default::default()
                }
            })
            .collect()
    }

    /// The card extension listing each tool's input schema and annotations.
    pub(crate) fn extension(&self) -> v1::AgentExtension {
        let tools: Vec<Value> = self
            .tools
            .values()
            .map(|t| {
                let mut o = json!({"name": t.name, "inputSchema": t.input_schema});
                if let (Some(a), Some(map)) = (&t.annotations, o.as_object_mut()) {
                    map.insert("annotations".into(), a.clone());
                }
                o
            })
            .collect();
        let params = match json!({ "tools": tools }) {
            Value::Object(m) => Some(heddle_core::wkt::Struct(m)),
            _ => None,
        };
        v1::AgentExtension {
            uri: TOOLS_EXTENSION.to_owned(),
            description: "The MCP tools behind this agent's skills: send a data part \
                          {\"tool\": NAME, \"arguments\": {…}} matching the tool's inputSchema"
                .to_owned(),
            required: false,
            params,
        }
    }

    /// The call `msg` asks for, its arguments checked against the tool's
    /// input schema; else InvalidParams saying what would fit.
    pub(crate) fn resolve(&self, msg: &v1::Message) -> Result<Call, A2aError> {
        let data = msg
            .parts
            .iter()
            .enumerate()
            .find_map(|(i, p)| match &p.content {
                Some(Content::Data(d)) => Some((i, &d.0)),
                _ => None,
            });
        let Some((index, data)) = data else {
            return self.text_call(msg);
        };
        let Some(tool) = data.get("tool").and_then(Value::as_str) else {
            return Err(self.refusal(format!(
                "/parts/{index}/data/tool: name the tool to call: {{\"tool\": NAME, \"arguments\": {{…}}}}"
            )));
        };
        let Some(t) = self.tools.get(tool) else {
            return Err(self.refusal(format!("/parts/{index}/data/tool: no tool {tool:?}")));
        };
        let arguments = match data.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(A2aError::new(
                    ErrorCode::InvalidParams,
                    format!("/parts/{index}/data/arguments: must be an object"),
                ));
            }
        };
        t.check(&arguments, &format!("/parts/{index}/data/arguments"))?;
        Ok(Call {
            tool: t.name.clone(),
            arguments,
        })
    }

    /// A text-only message: the only tool, when it takes one string.
    fn text_call(&self, msg: &v1::Message) -> Result<Call, A2aError> {
        if let Some(i) = msg
            .parts
            .iter()
            .position(|p| !matches!(p.content, Some(Content::Text(_))))
        {
            return Err(self.refusal(format!(
                "/parts/{i}: a tool call is a data part {{\"tool\": NAME, \"arguments\": {{…}}}}, or text alone"
            )));
        }
        let only = (self.tools.len() == 1)
            .then(|| self.tools.values().next())
            .flatten();
        let Some((t, arg)) = only.and_then(|t| t.text_argument.as_ref().map(|a| (t, a))) else {
            return Err(self.refusal(
                "a text message calls a tool only when the agent has one tool taking one \
                 string; send a data part {\"tool\": NAME, \"arguments\": {…}}"
                    .to_owned(),
            ));
        };
        let mut arguments = Map::new();
        arguments.insert(arg.clone(), Value::String(msg.text()));
        t.check(&arguments, "/parts")?;
        Ok(Call {
            tool: t.name.clone(),
            arguments,
        })
    }

    fn refusal(&self, what: String) -> A2aError {
        let names = self.names();
        let mut listed = names
            .iter()
            .take(20)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > 20 {
            listed.push_str(", …");
        }
        A2aError::new(
            ErrorCode::InvalidParams,
            format!("{what} (tools: {listed})"),
        )
    }

    /// This set as the check a handler runs on every message, reading the
    /// set current when the message arrives.
    pub(crate) fn message_check(
        current: Arc<std::sync::RwLock<Arc<ToolSet>>>,
    ) -> heddle_server::MessageCheck {
        Arc::new(move |msg| {
            let set = current.read().unwrap_or_else(|e| e.into_inner()).clone();
            set.resolve(msg).map(drop)
        })
    }
}

impl Tool {
    /// `Ok` when `arguments` match the input schema; else InvalidParams
    /// naming each violation under `at`.
    fn check(&self, arguments: &Map<String, Value>, at: &str) -> Result<(), A2aError> {
        let mut found = crate::manifest::Violations::default();
        found.collect(&self.validator, &Value::Object(arguments.clone()), at);
        found.into_result(&format!(
            "the arguments do not match the input schema of the tool {:?}",
            self.name
        ))
    }
}

/// The one string property a schema has (required or not), when it has
/// exactly one property and requires no other.
fn text_argument(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    if props.len() != 1 {
        return None;
    }
    let (name, prop) = props.iter().next()?;
    let required = schema.get("required").and_then(Value::as_array);
    if required.is_some_and(|r| r.iter().any(|n| n.as_str() != Some(name.as_str()))) {
        return None;
    }
    let is_string = match prop.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    };
    is_string.then(|| name.clone())
}

/// Placeholder arguments for a skill's example: each required property
/// with a value of its type.
fn example_arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let required = schema.get("required").and_then(Value::as_array);
    let props = schema.get("properties").and_then(Value::as_object);
    for name in required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .take(16)
    {
        let kind = props
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("number" | "integer") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("…"),
        };
        args.insert(name.to_owned(), value);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> ToolSet {
        ToolSet::new(
            vec![
                json!({"name": "shout", "description": "Upper-cases",
                       "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                       "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
                json!({"name": "add", "title": "Add",
                       "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}),
                json!({"description": "no name"}),
            ],
            None,
        )
    }

    fn data(v: Value) -> v1::Message {
        v1::Message {
            parts: vec![v1::Part {
                content: Some(Content::Data(heddle_core::wkt::Value(v))),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn text(t: &str) -> v1::Message {
        v1::Message {
            parts: vec![v1::Part {
                content: Some(Content::Text(t.into())),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn tools_become_skills_with_tags_from_annotations() {
        let skills = set().skills();
        let ids: Vec<&str> = skills.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["add", "shout"]);
        assert_eq!(skills[0].name, "Add");
        assert_eq!(skills[1].tags, ["mcp", "read-only", "closed-world"]);
        assert!(skills[0].examples[0].contains("\"tool\":\"add\""));
        let ext = set().extension();
        assert_eq!(ext.uri, TOOLS_EXTENSION);
        let params = serde_json::to_value(ext.params).expect("params");
        assert_eq!(
            params["tools"][1]["inputSchema"]["required"],
            json!(["text"])
        );
    }

    #[test]
    fn a_data_part_calls_the_named_tool_with_checked_arguments() {
        let s = set();
        let call = s
            .resolve(&data(json!({"tool": "add", "arguments": {"a": 1, "b": 2}})))
            .expect("call");
        assert_eq!(call.tool, "add");
        let err = s
            .resolve(&data(
                json!({"tool": "add", "arguments": {"a": "one", "b": 2}}),
            ))
            .expect_err("schema");
        assert_eq!(err.code, ErrorCode::InvalidParams);
        assert_eq!(err.violations[0].field, "/parts/0/data/arguments/a");
        let unknown = s
            .resolve(&data(json!({"tool": "nope"})))
            .expect_err("unknown");
        assert!(
            unknown.message.contains("tools: add, shout"),
            "{}",
            unknown.message
        );
        let no_tool = s.resolve(&data(json!({"a": 1}))).expect_err("no tool");
        assert!(
            no_tool.message.contains("/parts/0/data/tool"),
            "{}",
            no_tool.message
        );
    }

    #[test]
    fn text_calls_the_only_tool_when_it_takes_one_string() {
        let refused = set().resolve(&text("hi")).expect_err("two tools");
        assert!(
            refused.message.contains("one tool taking one string"),
            "{}",
            refused.message
        );
        let only = ToolSet::new(
            vec![
                json!({"name": "shout", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}),
            ],
            None,
        );
        let call = only.resolve(&text("hi")).expect("call");
        assert_eq!(call.arguments.get("text"), Some(&json!("hi")));
        assert_eq!(
            only.skills()[0].input_modes,
            ["application/json", "text/plain"]
        );
        let numeric = ToolSet::new(
            vec![
                json!({"name": "n", "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}}}),
            ],
            None,
        );
        assert!(numeric.resolve(&text("hi")).is_err());
    }

    #[test]
    fn a_text_call_needs_text_alone_and_no_other_required_argument() {
        let two = ToolSet::new(
            vec![json!({"name": "t", "inputSchema": {"type": "object",
                "properties": {"text": {"type": "string"}}, "required": ["text", "mode"]}})],
            None,
        );
        assert!(!two.takes_text());
        assert!(two.resolve(&text("hi")).is_err());
        let one = ToolSet::new(
            vec![json!({"name": "t", "inputSchema": {"type": "object",
                "properties": {"text": {"type": "string"}}, "required": ["text"]}})],
            None,
        );
        let mut with_file = text("hi");
        with_file
            .parts
            .push(v1::Part::url("https://x.example/a.pdf", "application/pdf"));
        let err = one.resolve(&with_file).expect_err("a file part");
        assert!(err.message.contains("/parts/1"), "{}", err.message);
    }

    #[test]
    fn hostile_tools_are_cut_or_left_out() {
        let huge = "x".repeat(70_000);
        let set = ToolSet::new(
            vec![
                json!({"name": "big", "inputSchema": {"type": "object", "description": huge}}),
                json!({"name": "broken", "inputSchema": {"type": "object", "properties": {"a": {"type": 7}}}}),
                json!({"name": "ok", "title": "t".repeat(1000),
                       "annotations": {"readOnlyHint": true, "evil": "x".repeat(10_000)}}),
            ],
            None,
        );
        assert_eq!(set.names(), ["ok"]);
        let skill = &set.skills()[0];
        assert_eq!(skill.name.chars().count(), MAX_TITLE);
        let params = serde_json::to_value(set.extension().params).expect("params");
        assert_eq!(
            params["tools"][0]["annotations"],
            json!({"readOnlyHint": true})
        );
    }

    #[test]
    fn a_draft_07_schema_is_read_as_draft_07() {
        // In draft 07 `items` as an array is a tuple; 2020-12 refuses it.
        let set = ToolSet::new(
            vec![
                json!({"name": "t", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object", "properties": {"p": {"type": "array", "items": [{"type": "string"}]}}}}),
            ],
            None,
        );
        assert!(
            set.resolve(&data(json!({"tool": "t", "arguments": {"p": ["a"]}})))
                .is_ok()
        );
        assert!(
            set.resolve(&data(json!({"tool": "t", "arguments": {"p": [1]}})))
                .is_err()
        );
    }

    #[test]
    fn only_the_listed_tools_are_kept() {
        let only = ToolSet::new(
            vec![json!({"name": "a"}), json!({"name": "b"})],
            Some(&["b".to_owned()]),
        );
        assert_eq!(only.names(), ["b"]);
    }
}
