//! What the hub knows of an agent: an [`AgentEntry`], the one document a
//! registration is, wherever it comes from (a `[[agents]]` table of the
//! hub's TOML config, the admin API's JSON body, or the store, which keeps it
//! as JSON). Checked whole by [`AgentEntry::check`] before it is used.

use serde::{Deserialize, Serialize};

/// Longest agent id: ids are path segments and store keys.
pub const MAX_ID_LEN: usize = 64;

/// What kind of agent an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// An executor compiled into the hub, named by [`AgentEntry::builtin`].
    Builtin,
    /// An A2A agent elsewhere, fronted by the hub ([`AgentEntry::card_url`]).
    Remote,
    /// A model behind an OpenAI-compatible chat-completions endpoint
    /// ([`AgentEntry::llm`]).
    Llm,
    /// An MCP server's tools, one skill each ([`AgentEntry::mcp`]).
    Mcp,
}

impl AgentKind {
    /// The name used in the config, the API and searches.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Remote => "remote",
            Self::Llm => "llm",
            Self::Mcp => "mcp",
        }
    }
}

/// Per-agent overrides of the hub's request limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryLimits {
    /// Largest request body, in bytes (at most the hub's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<usize>,
    /// Most parts in one message (at most the hub's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parts: Option<usize>,
}

/// One registered agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// URL-safe and unique: the path segment under `/api/v1/agents/` and the
    /// gRPC tenant.
    pub id: String,
    /// Builtin or remote.
    pub kind: AgentKind,
    /// For `builtin`: the name of the hub's executor (default: the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// For `remote`: where the upstream's agent card is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_url: Option<String>,
    /// For `remote`: how the hub authenticates to the upstream. Names the
    /// environment variables or secrets holding credentials, never the
    /// credentials themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<crate::remote::UpstreamAuth>,
    /// For `llm`: the model, its endpoint and how it is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm::LlmSettings>,
    /// For `mcp`: the server (a command, or a streamable HTTP URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<crate::mcp::McpSettings>,
    /// For `remote`: accept an upstream card or interface over plain http
    /// (for a local upstream; refused by default). For `llm`: accept a
    /// plain-http endpoint on a host other than a loopback one; for `mcp`,
    /// a plain-http server URL off a loopback host.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_http: bool,
    /// Card name (default: the builtin's or upstream's, or the manifest's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Card description (default as for the name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tags for discovery, beside the skills' own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// A disabled agent is kept but not served (404) nor listed.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// Listed to every caller; a non-public agent is listed only to its
    /// owner and admins (it is still callable by whoever knows its URL and
    /// passes authentication).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub public: bool,
    /// The caller id that registered it (set by the admin API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Limits tighter than the hub's.
    #[serde(default, skip_serializing_if = "is_default")]
    pub limits: EntryLimits,
    /// An a2ahub manifest this agent was registered from, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<serde_json::Value>,
    /// What a task costs its caller (default: the manifest's `pricing`;
    /// neither: free). See [`crate::market`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<crate::market::price::PriceSpec>,
    /// Facts every answer of the agent carries in its metadata (model,
    /// task type, supported file types), declared as an extension in its
    /// card ([`crate::answer_metadata`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_metadata: Option<crate::answer_metadata::AnswerMetadata>,
    /// For `remote`: the upstream card as last fetched (v1.0 JSON), served
    /// while the upstream is down; the hub fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_card: Option<serde_json::Value>,
    /// For `mcp`: the tools as the server last listed them (`tools/list`
    /// JSON), so a restarted hub serves the card without starting the
    /// server before its first call; the hub fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_tools: Option<Vec<serde_json::Value>>,
    /// For `remote`: what the fetch found suspicious in the upstream card.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// For `remote`: what checking the upstream card's signatures found
    /// when it was fetched (`verified`, `unverifiable`, `absent`,
    /// `invalid`); the hub fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_signature: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Why an entry cannot be registered; each names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct EntryError {
    /// The field at fault (`id`, `card_url`, …).
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn bad(field: &'static str, problem: impl Into<String>) -> EntryError {
    EntryError {
        field,
        problem: problem.into(),
    }
}

impl AgentEntry {
    /// A builtin entry for the executor `builtin`, served as `id`.
    pub fn builtin(id: impl Into<String>, builtin: impl Into<String>) -> Self {
        Self::new(id, AgentKind::Builtin, Some(builtin.into()), None)
    }

    /// A remote entry fronting the agent whose card is at `card_url`.
    pub fn remote(id: impl Into<String>, card_url: impl Into<String>) -> Self {
        Self::new(id, AgentKind::Remote, None, Some(card_url.into()))
    }

    fn new(
        id: impl Into<String>,
        kind: AgentKind,
        builtin: Option<String>,
        card_url: Option<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind,
            builtin,
            card_url,
            auth: None,
            llm: None,
            mcp: None,
            allow_http: false,
            name: None,
            description: None,
            tags: Vec::new(),
            enabled: true,
            public: true,
            owner: None,
            limits: EntryLimits::default(),
            manifest: None,
            pricing: None,
            answer_metadata: None,
            upstream_card: None,
            mcp_tools: None,
            warnings: Vec::new(),
            upstream_signature: None,
        }
    }

    /// An `llm` entry for the model `settings` describe.
    pub fn llm(id: impl Into<String>, settings: crate::llm::LlmSettings) -> Self {
        let mut e = Self::new(id, AgentKind::Llm, None, None);
        e.llm = Some(settings);
        e
    }

    /// An `mcp` entry for the server `settings` describe.
    pub fn mcp(id: impl Into<String>, settings: crate::mcp::McpSettings) -> Self {
        let mut e = Self::new(id, AgentKind::Mcp, None, None);
        e.mcp = Some(settings);
        e
    }

    /// The agent's checked price: [`pricing`](Self::pricing), else its
    /// manifest's; `None` when it is free (none, or every rate zero).
    pub fn price(&self) -> Result<Option<crate::market::price::Price>, crate::RegistryError> {
        Ok(self
            .any_price()?
            .filter(|p| !p.rate.is_zero() || p.skills.values().any(|s| !s.rate.is_zero())))
    }

    fn any_price(&self) -> Result<Option<crate::market::price::Price>, crate::RegistryError> {
        if let Some(p) = &self.pricing {
            return p
                .check()
                .map(Some)
                .map_err(|e| crate::RegistryError::Invalid(bad("pricing", e.to_string())));
        }
        let Some(p) = self.manifest.as_ref().and_then(|m| m.get("pricing")) else {
            return Ok(None);
        };
        let spec = serde_json::from_value::<crate::manifest::Pricing>(p.clone())
            .ok()
            .and_then(|typed| {
                Some(crate::market::price::PriceSpec {
                    model: typed.model,
                    rate: p.get("rate")?.clone(),
                    currency: typed.currency,
                    skills: Default::default(),
                })
            });
        let fault = |problem: String| {
            crate::RegistryError::Manifest(vec![("/manifest/pricing".to_owned(), problem)])
        };
        match spec {
            Some(spec) => spec.check().map(Some).map_err(|e| fault(e.to_string())),
            None => Err(fault("is not {model, rate, currency}".to_owned())),
        }
    }

    /// The builtin executor's name: [`builtin`](Self::builtin) or the id.
    pub fn builtin_name(&self) -> &str {
        self.builtin.as_deref().unwrap_or(&self.id)
    }

    /// Every rule an entry must keep, whoever wrote it: the first broken one.
    pub fn check(&self) -> Result<(), EntryError> {
        check_id(&self.id)?;
        if self.llm.is_some() && self.kind != AgentKind::Llm {
            return Err(bad("llm", "only a kind = \"llm\" agent has llm settings"));
        }
        if self.mcp.is_some() && self.kind != AgentKind::Mcp {
            return Err(bad("mcp", "only a kind = \"mcp\" agent has mcp settings"));
        }
        match self.kind {
            AgentKind::Mcp => {
                let Some(mcp) = &self.mcp else {
                    return Err(bad(
                        "mcp",
                        "an mcp agent needs its settings (a command or a url)",
                    ));
                };
                if self.card_url.is_some() || self.auth.is_some() || self.builtin.is_some() {
                    return Err(bad(
                        "card_url",
                        "an mcp agent has no card_url, auth or builtin (its server is in mcp)",
                    ));
                }
                mcp.check(self.allow_http)
                    .map_err(|(field, problem)| bad(field, problem))?;
            }
            AgentKind::Llm => {
                let Some(llm) = &self.llm else {
                    return Err(bad(
                        "llm",
                        "an llm agent needs its settings (model and base_url at least)",
                    ));
                };
                if self.card_url.is_some() || self.auth.is_some() || self.builtin.is_some() {
                    return Err(bad(
                        "card_url",
                        "an llm agent has no card_url, auth or builtin (its key is llm.api_key_env)",
                    ));
                }
                llm.check(self.allow_http)
                    .map_err(|(field, problem)| bad(field, problem))?;
            }
            AgentKind::Builtin => {
                if self.card_url.is_some() || self.auth.is_some() {
                    return Err(bad(
                        "card_url",
                        "a builtin agent has no card_url or auth (those are for kind = \"remote\")",
                    ));
                }
            }
            AgentKind::Remote => {
                let Some(url) = &self.card_url else {
                    return Err(bad("card_url", "a remote agent needs the URL of its card"));
                };
                let parsed = url::Url::parse(url).map_err(|e| bad("card_url", e.to_string()))?;
                match parsed.scheme() {
                    "https" => {}
                    "http" if self.allow_http => {}
                    "http" => {
                        return Err(bad(
                            "card_url",
                            "plain http is refused; use https, or set allow_http = true for a local upstream",
                        ));
                    }
                    other => return Err(bad("card_url", format!("unsupported scheme {other:?}"))),
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err(bad(
                        "card_url",
                        "credentials in the URL are refused; name them in `auth`",
                    ));
                }
                if self.builtin.is_some() {
                    return Err(bad("builtin", "a remote agent names no builtin"));
                }
                if let Some(auth) = &self.auth {
                    auth.validate().map_err(|e| bad("auth", e.to_string()))?;
                }
            }
        }
        if let Some(p) = &self.pricing {
            p.check().map_err(|e| bad("pricing", e.to_string()))?;
        }
        for (field, text, max) in [
            ("name", self.name.as_deref(), 200),
            ("description", self.description.as_deref(), 4000),
            ("owner", self.owner.as_deref(), 300),
        ] {
            if let Some(t) = text
                && t.chars().count() > max
            {
                return Err(bad(field, format!("longer than {max} characters")));
            }
        }
        if self.tags.len() > 32 || self.tags.iter().any(|t| t.is_empty() || t.len() > 64) {
            return Err(bad("tags", "at most 32 tags of 1 to 64 bytes"));
        }
        Ok(())
    }
}

/// A name as an id: lowercase ASCII letters and digits, every other run of
/// characters one `-`, none at either end (empty when the name has no ASCII
/// letter or digit). Agent ids made from a manifest's name and skill ids
/// made from skill names both come from here.
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// An agent id: 1 to [`MAX_ID_LEN`] bytes of lowercase ASCII letters,
/// digits, `-`, `_` and `.`, starting with a letter or digit (so it is a
/// path segment as it stands, and never `.` or `..`).
pub fn check_id(id: &str) -> Result<(), EntryError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(bad(
            "id",
            format!(
                "must be 1 to {MAX_ID_LEN} of a-z, 0-9, '-', '_', '.', starting with a letter or digit"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_path_segments() {
        for good in ["echo", "writer-stream", "a", "agent_2.v1", "0x"] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        let long = "a".repeat(MAX_ID_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            "-a",
            "A",
            "a/b",
            "a b",
            "é",
            "a%2f",
            long.as_str(),
        ] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_remote_entry_needs_an_https_card_url_without_credentials() {
        let mut e = AgentEntry::remote("up", "https://agent.example/.well-known/agent-card.json");
        assert!(e.check().is_ok());
        e.card_url = Some("http://127.0.0.1:9/card".into());
        assert_eq!(e.check().map_err(|e| e.field), Err("card_url"));
        e.allow_http = true;
        assert!(e.check().is_ok());
        e.card_url = Some("https://user:pw@agent.example/card".into());
        let err = e.check().expect_err("credentials in the URL");
        assert!(!err.to_string().contains("pw"), "{err}");
        e.card_url = None;
        assert!(e.check().is_err());
    }

    #[test]
    fn an_llm_entry_reads_from_toml_and_is_checked_whole() {
        let e: AgentEntry = toml::from_str(
            r#"
            id = "writer"
            kind = "llm"
            [llm]
            model = "gpt-4o-mini"
            base_url = "https://api.openai.com/v1"
            api_key_env = "OPENAI_API_KEY"
            "#,
        )
        .expect("entry");
        assert_eq!(e.kind, AgentKind::Llm);
        assert!(e.check().is_ok());
        let mut no_settings = e.clone();
        no_settings.llm = None;
        assert_eq!(no_settings.check().map_err(|e| e.field), Err("llm"));
        let mut bad_url = e.clone();
        if let Some(l) = bad_url.llm.as_mut() {
            l.base_url = "http://llm.example/v1".into();
        }
        assert_eq!(bad_url.check().map_err(|e| e.field), Err("llm.base_url"));
        bad_url.allow_http = true;
        assert!(bad_url.check().is_ok());
        let mut builtin = AgentEntry::builtin("echo", "echo");
        builtin.llm = e.llm;
        assert_eq!(builtin.check().map_err(|e| e.field), Err("llm"));
    }

    #[test]
    fn entries_round_trip_as_json_and_refuse_unknown_fields() {
        let mut e = AgentEntry::builtin("echo", "echo");
        e.tags = vec!["demo".into()];
        e.public = false;
        let json = serde_json::to_string(&e).expect("json");
        assert_eq!(serde_json::from_str::<AgentEntry>(&json).expect("back"), e);
        let typo = r#"{"id":"x","kind":"builtin","enabeld":false}"#;
        assert!(serde_json::from_str::<AgentEntry>(typo).is_err());
    }
}
