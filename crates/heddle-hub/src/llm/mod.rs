//! LLM agents: a model behind an OpenAI-compatible chat-completions
//! endpoint, served as an A2A agent from a registry entry (`kind = "llm"`).
//!
//! * [`LlmSettings`] is the entry's `llm` table: model, endpoint, the name
//!   of the secret holding the API key, system prompt, sampling caps, the
//!   history budget and the card's skills; [`LlmSettings::check`] is run by
//!   the registry on every entry.
//! * [`LlmAgent`] is the executor. Each message is one chat-completions
//!   call (always streamed from the endpoint, so a cancel or a silent
//!   endpoint is noticed at once): a streaming caller gets the tokens as
//!   artifact chunks, a waiting caller one artifact.
//! * The conversation of a `contextId` is the model's history: it is read
//!   back from the hub's store (the completed tasks of that context, oldest
//!   first, and the task being continued), never kept a second time.
//! * The tokens the endpoint reports are summed on the task's own metadata
//!   under [`USAGE_KEY`].
//! * The model may ask the caller a question by calling the tool
//!   [`ASK_USER_TOOL`] (declared in every request); the task then waits in
//!   INPUT_REQUIRED with the question as its message.

mod conversation;
mod executor;
mod retry;
mod wire;

use serde::{Deserialize, Serialize};

pub use executor::LlmAgent;

/// Why an LLM agent cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A setting breaks a rule ([`LlmSettings::check`]).
    #[error("{field}: {problem}")]
    Settings {
        /// The setting, as `llm.model`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The API key's secret cannot be read.
    #[error(transparent)]
    Secret(crate::remote::RemoteError),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// The key, in a task's `metadata`, of the tokens its model calls used:
/// `{"model", "promptTokens", "completionTokens", "totalTokens", "calls"}`,
/// summed over every turn of the task. Declared as an extension in the card.
pub const USAGE_KEY: &str = "https://heddle.dev/extensions/usage/v1";

/// The tool through which the model asks the caller a question: its one
/// argument, `question`, becomes the INPUT_REQUIRED message.
pub const ASK_USER_TOOL: &str = "ask_user";

/// Default history budget, in messages.
const DEFAULT_HISTORY_MESSAGES: usize = 40;
/// Default history budget, in characters (about 25k tokens of English).
const DEFAULT_HISTORY_CHARS: usize = 100_000;
/// Default bound on one turn, retries included.
const DEFAULT_TIMEOUT_SECS: u64 = 120;

/// A model behind an OpenAI-compatible endpoint: the `llm` table of a
/// `kind = "llm"` registry entry.
///
/// ```toml
/// [[agents]]
/// id = "writer"
/// kind = "llm"
/// llm = { model = "gpt-4o-mini", base_url = "https://api.openai.com/v1",
///         api_key_env = "OPENAI_API_KEY", system_prompt = "You write haiku." }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// The model name the endpoint knows (`gpt-4o-mini`, `llama3.1:8b`).
    pub model: String,
    /// The API's base URL, to which `/chat/completions` is added
    /// (`https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`). Plain
    /// http is accepted on a loopback host, elsewhere only with the entry's
    /// `allow_http`.
    pub base_url: String,
    /// The secret holding the API key (sent as `Authorization: Bearer`):
    /// read from the hub's secrets file, else the environment variable of
    /// that name. None: no key is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The system message that opens every conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Sampling temperature, 0 to 2 (default: the endpoint's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Most tokens one answer may have (default: the endpoint's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Most earlier messages of the conversation sent with a new one; the
    /// oldest are dropped first (default 40; 0 sends none but those of the
    /// task being continued, which are always sent).
    #[serde(default = "default_history_messages")]
    pub history_messages: usize,
    /// Most characters of earlier messages sent (default 100 000); the
    /// oldest messages are dropped first.
    #[serde(default = "default_history_chars")]
    pub history_chars: usize,
    /// The longest one turn may take, 429 retries included, in seconds
    /// (default 120).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// The card's skills (default: one `chat` skill).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<LlmSkill>,
}

/// A skill on an LLM agent's card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSkill {
    /// Unique among the agent's skills.
    pub id: String,
    /// What people call it.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Tags for discovery.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

fn default_history_messages() -> usize {
    DEFAULT_HISTORY_MESSAGES
}

fn default_history_chars() -> usize {
    DEFAULT_HISTORY_CHARS
}

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

impl LlmSettings {
    /// Settings for `model` at `base_url`, everything else by default.
    pub fn new(model: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            base_url: base_url.into(),
            api_key_env: None,
            system_prompt: None,
            temperature: None,
            max_tokens: None,
            history_messages: DEFAULT_HISTORY_MESSAGES,
            history_chars: DEFAULT_HISTORY_CHARS,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            skills: Vec::new(),
        }
    }

    /// Every rule the settings must keep: the first broken one, as the
    /// field (`llm.model`, …) and the problem. `allow_http` is the entry's.
    pub fn check(&self, allow_http: bool) -> Result<(), (&'static str, String)> {
        let bad = |field: &'static str, why: &str| Err((field, why.to_owned()));
        if self.model.trim().is_empty() || self.model.len() > 200 {
            return bad("llm.model", "must be 1 to 200 bytes");
        }
        check_base_url(&self.base_url, allow_http).map_err(|why| ("llm.base_url", why))?;
        if let Some(env) = &self.api_key_env
            && env.trim().is_empty()
        {
            return bad("llm.api_key_env", "is empty (leave it out to send no key)");
        }
        if self
            .system_prompt
            .as_ref()
            .is_some_and(|p| p.chars().count() > 100_000)
        {
            return bad("llm.system_prompt", "longer than 100000 characters");
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return bad("llm.temperature", "must be between 0 and 2");
        }
        if self.max_tokens == Some(0) {
            return bad("llm.max_tokens", "must be at least 1");
        }
        if self.history_messages > 1000 {
            return bad("llm.history_messages", "at most 1000");
        }
        if !(1..=3600).contains(&self.timeout_secs) {
            return bad("llm.timeout_secs", "must be 1 to 3600");
        }
        if self.skills.len() > 64 {
            return bad("llm.skills", "at most 64 skills");
        }
        let mut ids = std::collections::BTreeSet::new();
        for s in &self.skills {
            if s.id.trim().is_empty() || s.name.trim().is_empty() {
                return bad("llm.skills", "every skill needs an id and a name");
            }
            if !ids.insert(s.id.as_str()) {
                return Err(("llm.skills", format!("skill id {:?} is used twice", s.id)));
            }
        }
        Ok(())
    }

    /// The card profile of an agent `id` with these settings.
    pub fn profile(&self, id: &str) -> heddle_server::profile::AgentProfile {
        let description = format!("{} behind an OpenAI-compatible endpoint", self.model);
        let mut p = heddle_server::profile::AgentProfile::new(id, id, &description, &["llm"]);
        if let Some(chat) = p.skills.first_mut() {
            "chat".clone_into(&mut chat.id);
            "Chat".clone_into(&mut chat.name);
        }
        if !self.skills.is_empty() {
            p.skills = self
                .skills
                .iter()
                .map(|s| heddle_core::v1::AgentSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: s.examples.clone(),
                    ..Default::default()
                })
                .collect();
        }
        p.input_modes = conversation::INPUT_MODES
            .iter()
            .map(|m| (*m).to_owned())
            .collect();
        p.extensions.push(heddle_core::v1::AgentExtension {
            uri: USAGE_KEY.to_owned(),
            description:
                "Each task's metadata carries, under this URI, the tokens its model calls used"
                    .to_owned(),
            required: false,
            params: None,
        });
        p
    }
}

/// An endpoint URL the hub may call ([`crate::outbound::check_url`]),
/// to which the chat path can be added.
fn check_base_url(url: &str, allow_http: bool) -> Result<(), String> {
    crate::outbound::check_url(url, allow_http, "api_key_env")?;
    chat_endpoint(url).map(drop)
}

/// `{base_url}/chat/completions`, the path extended and a query (such as
/// `?api-version=…`) kept; a fragment is refused, being never sent.
pub(crate) fn chat_endpoint(base_url: &str) -> Result<String, String> {
    let mut url = url::Url::parse(base_url).map_err(|e| e.to_string())?;
    if url.fragment().is_some() {
        return Err("a fragment (#…) in the base URL is refused: it is never sent".to_owned());
    }
    url.path_segments_mut()
        .map_err(|()| "the base URL cannot have a path".to_owned())?
        .pop_if_empty()
        .extend(["chat", "completions"]);
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_from_toml_with_defaults_and_refuse_unknown_fields() {
        let s: LlmSettings =
            toml::from_str("model = \"m\"\nbase_url = \"https://api.example/v1\"\n")
                .expect("settings");
        assert_eq!(s, LlmSettings::new("m", "https://api.example/v1"));
        assert!(
            toml::from_str::<LlmSettings>("model = \"m\"\nbase_url = \"x\"\napi_key = \"sk\"\n")
                .is_err()
        );
    }

    #[test]
    fn the_endpoint_extends_the_path_and_keeps_the_query() {
        assert_eq!(
            chat_endpoint("https://api.example/v1/").as_deref(),
            Ok("https://api.example/v1/chat/completions")
        );
        assert_eq!(
            chat_endpoint("https://az.example/openai/deployments/d?api-version=2024-06-01")
                .as_deref(),
            Ok("https://az.example/openai/deployments/d/chat/completions?api-version=2024-06-01")
        );
        let fragment = LlmSettings::new("m", "https://api.example/v1#x");
        assert!(
            matches!(fragment.check(false), Err(("llm.base_url", why)) if why.contains("fragment"))
        );
    }

    #[test]
    fn checks_name_the_field() {
        let ok = LlmSettings::new("m", "https://api.example/v1");
        assert!(ok.check(false).is_ok());
        let field = |s: &LlmSettings, allow: bool| s.check(allow).map_err(|(f, _)| f);
        let local = LlmSettings::new("m", "http://127.0.0.1:9/v1");
        assert!(local.check(false).is_ok(), "loopback http");
        let far = LlmSettings::new("m", "http://llm.example/v1");
        assert_eq!(field(&far, false), Err("llm.base_url"));
        assert!(far.check(true).is_ok());
        let creds = LlmSettings::new("m", "https://u:sk-secret@api.example/v1");
        let err = creds.check(false).expect_err("credentials");
        assert!(!err.1.contains("sk-secret"), "{err:?}");
        let mut hot = ok.clone();
        hot.temperature = Some(3.0);
        assert_eq!(field(&hot, false), Err("llm.temperature"));
        let mut empty = ok.clone();
        empty.model = " ".into();
        assert_eq!(field(&empty, false), Err("llm.model"));
        let mut twice = ok;
        let skill = LlmSkill {
            id: "a".into(),
            name: "A".into(),
            description: String::new(),
            tags: Vec::new(),
            examples: Vec::new(),
        };
        twice.skills = vec![skill.clone(), skill];
        assert_eq!(field(&twice, false), Err("llm.skills"));
    }
}
