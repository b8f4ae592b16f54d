//! The hub's part of a config file: `[[agents]]` tables (one
//! [`AgentEntry`] each) and an `[admin]` table. Read by `heddle serve
//! --config FILE` and checked offline by `heddle registry validate FILE`;
//! the file's other tables (`[auth]`) belong to other crates, so this type
//! is read from the file's own `agents` and `admin` values.
//!
//! ```toml
//! [[agents]]
//! id = "echo"
//! kind = "builtin"
//!
//! [[agents]]
//! id = "weather"
//! kind = "remote"
//! card_url = "https://weather.example/.well-known/agent-card.json"
//! auth = { type = "bearer", env = "WEATHER_TOKEN" }
//! tags = ["weather"]
//!
//! [[agents]]
//! id = "assistant"
//! kind = "llm"
//! llm = { model = "gpt-4o-mini", base_url = "https://api.openai.com/v1", api_key_env = "OPENAI_API_KEY" }
//!
//! [[agents]]
//! id = "files"
//! kind = "mcp"
//! mcp = { command = "npx", args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"] }
//!
//! [admin]
//! callers = ["key:3f9c2a"]
//! ```

use serde::Deserialize;

use crate::{
    AdminAccess, HubBuilder,
    registry::{AgentEntry, EntryError},
};

/// The `[admin]` table: who may use the admin API besides the holder of
/// the admin token.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Caller ids (as the authenticator names them: `key:{id}`,
    /// `jwt:{iss}#{sub}`) that are admins.
    #[serde(default)]
    pub callers: Vec<String>,
    /// The token scope that makes a caller an admin (default `heddle:admin`).
    #[serde(default)]
    pub scope: Option<String>,
}

/// The registry part of a config file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct RegistryConfig {
    /// The agents to serve from the start.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// Who administers the hub.
    #[serde(default)]
    pub admin: AdminConfig,
}

/// A config entry that breaks a rule: which one, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[[agents]] #{index} ({id}): {error}")]
pub struct ConfigError {
    /// 1-based position among the `[[agents]]` tables.
    pub index: usize,
    /// The entry's id as written.
    pub id: String,
    /// What is wrong.
    pub error: EntryError,
}

impl RegistryConfig {
    /// Every broken rule of every entry, and ids used twice.
    pub fn check(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        for (i, entry) in self.agents.iter().enumerate() {
            let fail = |error| ConfigError {
                index: i + 1,
                id: entry.id.clone(),
                error,
            };
            if let Err(e) = entry.check() {
                errors.push(fail(e));
            }
            if self.agents[..i].iter().any(|e| e.id == entry.id) {
                errors.push(fail(EntryError {
                    field: "id",
                    problem: "used by an earlier [[agents]] table".into(),
                }));
            }
        }
        errors
    }

    /// The admin access this config grants, added to `access`.
    pub fn admin_access(&self, mut access: AdminAccess) -> AdminAccess {
        for c in &self.admin.callers {
            access = access.caller(c.clone());
        }
        if let Some(s) = &self.admin.scope {
            access = access.scope(s.clone());
        }
        access
    }

    /// `builder` serving these agents from the start.
    pub fn apply(self, mut builder: HubBuilder) -> HubBuilder {
        for entry in self.agents {
            builder = builder.entry(entry);
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ids_and_broken_entries_are_all_reported() {
        let cfg: RegistryConfig = serde_json::from_value(serde_json::json!({
            "agents": [
                { "id": "echo", "kind": "builtin" },
                { "id": "echo", "kind": "builtin" },
                { "id": "Bad Id", "kind": "builtin" },
                { "id": "up", "kind": "remote" },
            ]
        }))
        .expect("config");
        let errors = cfg.check();
        let fields: Vec<(usize, &str)> = errors.iter().map(|e| (e.index, e.error.field)).collect();
        assert_eq!(fields, [(2, "id"), (3, "id"), (4, "card_url")]);
    }
}
