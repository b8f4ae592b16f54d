//! MCP agents: a Model Context Protocol server served as an A2A agent from
//! a registry entry (`kind = "mcp"`), through the official Rust MCP SDK
//! (`rmcp`) as its client.
//!
//! * [`McpSettings`] is the entry's `mcp` table: a command to run (stdio)
//!   or a streamable HTTP URL, and how long calls and idle servers may
//!   last; [`McpSettings::check`] is run by the registry on every entry.
//! * [`server::McpServer`] owns the connection: it starts a stdio server on
//!   first use, starts it again (after a backoff) when it crashed, stops it
//!   when idle, and follows `notifications/tools/list_changed`.
//! * Each tool is a skill of the card ([`tools`]), its input schema in the
//!   card's [`TOOLS_EXTENSION`] and checked on every binding before a call.
//! * [`McpAgent`] is the executor: one message is one `tools/call`.
//!   Progress notifications become WORKING status messages, the result one
//!   artifact, an error result a FAILED task, and a cancel MCP's
//!   `notifications/cancelled`.
//!
//! What the mapping gives away (see `docs/hub.md`): the caller sees the
//! tools' names, schemas and each call's progress, which an A2A agent
//! would keep to itself.

mod executor;
mod result;
pub(crate) mod server;
pub(crate) mod tools;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use executor::McpAgent;

/// The extension whose params list the tools behind an MCP agent's skills:
/// `{"tools": [{"name", "inputSchema", "annotations"?}]}`.
pub const TOOLS_EXTENSION: &str = "https://heddle.dev/extensions/mcp-tools/v1";

/// Longest argument or environment value, in bytes.
const MAX_VALUE: usize = 32 << 10;
/// Default bound on one tool call, in seconds.
const DEFAULT_CALL_TIMEOUT_SECS: u64 = 300;
/// Default time an idle server is kept, in seconds.
const DEFAULT_IDLE_SECS: u64 = 300;
/// Default bound on starting a server (spawn or connect, and the MCP
/// handshake), in seconds.
const DEFAULT_START_TIMEOUT_SECS: u64 = 30;

/// Why an MCP agent cannot be built or reached.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A setting breaks a rule ([`McpSettings::check`]).
    #[error("{field}: {problem}")]
    Settings {
        /// The setting, as `mcp.command`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A secret the settings name cannot be read.
    #[error(transparent)]
    Secret(crate::remote::RemoteError),
    /// The server could not be started, or answered the handshake or
    /// `tools/list` badly.
    #[error("the MCP server {0}")]
    Server(String),
}

/// An MCP server: the `mcp` table of a `kind = "mcp"` registry entry.
/// Exactly one of `command` (stdio) and `url` (streamable HTTP).
///
/// ```toml
/// [[agents]]
/// id = "files"
/// kind = "mcp"
/// mcp = { command = "npx", args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"] }
///
/// [[agents]]
/// id = "search"
/// kind = "mcp"
/// mcp = { url = "https://mcp.example/mcp", bearer_env = "SEARCH_MCP_TOKEN" }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// The program that serves MCP on its stdin and stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it. The server does not inherit the
    /// hub's environment (which holds the hub's own secrets): it gets
    /// `PATH`, `HOME`, `LANG` and `TMPDIR` from the hub, and these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Environment variables set for it from secrets: variable name to the
    /// name of the secret (read from the hub's secrets file, else the
    /// hub's environment), so no credential is written in the registry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_env: BTreeMap<String, String>,
    /// The directory it runs in (default: the hub's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The server's streamable HTTP endpoint. Plain http is accepted on a
    /// loopback host, elsewhere only with the entry's `allow_http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The secret sent to `url` as `Authorization: Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// Only these tools become skills (default: every tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The longest one tool call may take, in seconds (default 300).
    #[serde(default = "default_call_timeout_secs")]
    pub call_timeout_secs: u64,
    /// A server unused for this long is stopped (stdio) or disconnected
    /// (HTTP), in seconds; 0 keeps it (default 300).
    #[serde(default = "default_idle_secs")]
    pub idle_secs: u64,
    /// The longest starting the server may take, in seconds (default 30).
    #[serde(default = "default_start_timeout_secs")]
    pub start_timeout_secs: u64,
}

fn default_call_timeout_secs() -> u64 {
    DEFAULT_CALL_TIMEOUT_SECS
}

fn default_idle_secs() -> u64 {
    DEFAULT_IDLE_SECS
}

fn default_start_timeout_secs() -> u64 {
    DEFAULT_START_TIMEOUT_SECS
}

impl McpSettings {
    /// A stdio server run as `command args…`, everything else by default.
    pub fn stdio(command: impl Into<String>, args: &[&str]) -> Self {
        Self {
            command: Some(command.into()),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Self::http("")
        }
    }

    /// A streamable HTTP server at `url`, everything else by default.
    pub fn http(url: impl Into<String>) -> Self {
        let url = url.into();
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            secret_env: BTreeMap::new(),
            cwd: None,
            url: (!url.is_empty()).then_some(url),
            bearer_env: None,
            tools: None,
            call_timeout_secs: DEFAULT_CALL_TIMEOUT_SECS,
            idle_secs: DEFAULT_IDLE_SECS,
            start_timeout_secs: DEFAULT_START_TIMEOUT_SECS,
        }
    }

    /// Every rule the settings must keep: the first broken one, as the
    /// field (`mcp.command`, …) and the problem. `allow_http` is the entry's.
    pub fn check(&self, allow_http: bool) -> Result<(), (&'static str, String)> {
        let bad = |field: &'static str, why: &str| Err((field, why.to_owned()));
        match (&self.command, &self.url) {
            (Some(command), None) => {
                if command.trim().is_empty() || command.len() > 4096 || command.contains('\0') {
                    return bad("mcp.command", "must be 1 to 4096 bytes, without NUL");
                }
                if self.args.len() > 256
                    || self
                        .args
                        .iter()
                        .any(|a| a.contains('\0') || a.len() > MAX_VALUE)
                {
                    return bad("mcp.args", "at most 256 arguments of 32 KiB, without NUL");
                }
                if self.env.len().saturating_add(self.secret_env.len()) > 256 {
                    return bad("mcp.env", "at most 256 variables");
                }
                if self
                    .cwd
                    .as_ref()
                    .is_some_and(|c| c.len() > 4096 || c.contains('\0'))
                {
                    return bad("mcp.cwd", "must be at most 4096 bytes, without NUL");
                }
                for (name, value) in &self.env {
                    check_env_name(name).map_err(|why| ("mcp.env", why))?;
                    if value.contains('\0') || value.len() > MAX_VALUE {
                        return bad("mcp.env", "a value is over 32 KiB or contains NUL");
                    }
                }
                for (name, secret) in &self.secret_env {
                    check_env_name(name).map_err(|why| ("mcp.secret_env", why))?;
                    if secret.trim().is_empty() {
                        return bad("mcp.secret_env", "names an empty secret");
                    }
                }
                if self.bearer_env.is_some() {
                    return bad(
                        "mcp.bearer_env",
                        "is for a url server (a stdio server gets secret_env)",
                    );
                }
            }
            (None, Some(url)) => {
                crate::outbound::check_url(url, allow_http, "mcp.bearer_env")
                    .map_err(|why| ("mcp.url", why))?;
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.secret_env.is_empty()
                    || self.cwd.is_some()
                {
                    return bad(
                        "mcp.url",
                        "a url server has no args, env, secret_env or cwd",
                    );
                }
                if self
                    .bearer_env
                    .as_ref()
                    .is_some_and(|b| b.trim().is_empty())
                {
                    return bad("mcp.bearer_env", "is empty (leave it out to send no token)");
                }
            }
            (Some(_), Some(_)) => return bad("mcp.url", "give command or url, not both"),
            (None, None) => {
                return bad(
                    "mcp.command",
                    "an mcp agent needs a command (stdio) or a url (streamable HTTP)",
                );
            }
        }
        if self
            .tools
            .as_ref()
            .is_some_and(|t| t.is_empty() || t.len() > 256)
        {
            return bad(
                "mcp.tools",
                "lists 1 to 256 tools (leave it out for every tool)",
            );
        }
        if !(1..=86_400).contains(&self.call_timeout_secs) {
            return bad("mcp.call_timeout_secs", "must be 1 to 86400");
        }
        if self.idle_secs > 86_400 {
            return bad("mcp.idle_secs", "at most 86400 (0 keeps the server)");
        }
        if !(1..=600).contains(&self.start_timeout_secs) {
            return bad("mcp.start_timeout_secs", "must be 1 to 600");
        }
        Ok(())
    }

    /// How the server is named in messages: the command's file name, or
    /// the URL without anything that may hold a credential.
    pub(crate) fn shown(&self) -> String {
        match (&self.command, &self.url) {
            (Some(c), _) => format!(
                "{:?}",
                std::path::Path::new(c)
                    .file_name()
                    .map_or_else(|| c.clone(), |n| n.to_string_lossy().into_owned())
            ),
            (None, Some(u)) => crate::remote::shown_url(u),
            (None, None) => String::new(),
        }
    }
}

/// The card profile of an agent `id` serving `tools`, named and described
/// after what the server said of itself (`about`: the handshake's
/// `serverInfo` and `instructions`).
pub(crate) fn profile(
    id: &str,
    tools: &tools::ToolSet,
    about: Option<&serde_json::Value>,
) -> heddle_server::profile::AgentProfile {
    let text = |pointer: &str| {
        about
            .and_then(|a| a.pointer(pointer))
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.trim().is_empty())
    };
    let name: String = text("/serverInfo/title")
        .or_else(|| text("/serverInfo/name"))
        .unwrap_or(id)
        .chars()
        .take(200)
        .collect();
    let name = name.as_str();
    let description = match text("/instructions") {
        Some(i) => i.chars().take(2000).collect(),
        None => format!(
            "The tools of the MCP server {name}, one skill each: {}",
            tools.names().join(", ")
        ),
    };
    let mut p = heddle_server::profile::AgentProfile::new(id, name, &description, &["mcp"]);
    p.skills = tools.skills();
    if let Some(v) = text("/serverInfo/version") {
        v.chars()
            .take(64)
            .collect::<String>()
            .clone_into(&mut p.version);
    }
    p.input_modes = vec!["application/json".into()];
    if tools.takes_text() {
        p.input_modes.push("text/plain".into());
    }
    p.output_modes = vec![
        "text/plain".into(),
        "application/json".into(),
        "application/octet-stream".into(),
    ];
    p.extensions.push(tools.extension());
    p
}

fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 256
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(format!(
            "{name:?} is not a variable name (letters, digits and _)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_from_toml_with_defaults_and_refuse_unknown_fields() {
        let s: McpSettings =
            toml::from_str("command = \"node\"\nargs = [\"s.js\", \"stdio\"]\n").expect("settings");
        assert_eq!(s, McpSettings::stdio("node", &["s.js", "stdio"]));
        let h: McpSettings = toml::from_str("url = \"https://mcp.example/mcp\"\n").expect("url");
        assert_eq!(h, McpSettings::http("https://mcp.example/mcp"));
        assert!(toml::from_str::<McpSettings>("url = \"x\"\ntoken = \"t\"\n").is_err());
    }

    #[test]
    fn checks_name_the_field() {
        let field = |s: &McpSettings, allow: bool| s.check(allow).map_err(|(f, _)| f);
        assert_eq!(field(&McpSettings::stdio("node", &[]), false), Ok(()));
        assert_eq!(
            field(&McpSettings::http("http://127.0.0.1:3/mcp"), false),
            Ok(())
        );
        assert_eq!(
            field(&McpSettings::http("http://mcp.example/mcp"), false),
            Err("mcp.url")
        );
        assert_eq!(
            field(&McpSettings::http("http://mcp.example/mcp"), true),
            Ok(())
        );
        let neither = McpSettings::http("");
        assert_eq!(field(&neither, false), Err("mcp.command"));
        let mut both = McpSettings::stdio("node", &[]);
        both.url = Some("https://mcp.example/mcp".into());
        assert_eq!(field(&both, false), Err("mcp.url"));
        let mut env = McpSettings::stdio("node", &[]);
        env.env.insert("BAD NAME".into(), "x".into());
        assert_eq!(field(&env, false), Err("mcp.env"));
        let mut bearer = McpSettings::stdio("node", &[]);
        bearer.bearer_env = Some("T".into());
        assert_eq!(field(&bearer, false), Err("mcp.bearer_env"));
        let mut slow = McpSettings::stdio("node", &[]);
        slow.call_timeout_secs = 0;
        assert_eq!(field(&slow, false), Err("mcp.call_timeout_secs"));
        let mut none = McpSettings::stdio("node", &[]);
        none.tools = Some(Vec::new());
        assert_eq!(field(&none, false), Err("mcp.tools"));
        let creds = McpSettings::http("https://u:sk-secret@mcp.example/mcp");
        let err = creds.check(false).expect_err("credentials");
        assert!(!err.1.contains("sk-secret"), "{err:?}");
    }

    #[test]
    fn a_server_is_shown_without_its_arguments_or_credentials() {
        assert_eq!(
            McpSettings::stdio("/usr/bin/node", &["--token=sk-1"]).shown(),
            "\"node\""
        );
        assert_eq!(
            McpSettings::http("https://mcp.example/mcp?key=sk-1").shown(),
            "https://mcp.example/mcp"
        );
    }
}
