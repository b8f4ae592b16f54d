//! What `heddle new agent` is told about an agent, and the check of each
//! answer. Flags and the interactive form go through the same checks, so a
//! script gets the same message a person is re-asked with.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use serde_json::Value;

/// One skill, as asked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkillSpec {
    /// Unique id: letters, digits, `.`, `_`, `-` (no spaces).
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// At least one (v1.0 requires tags).
    pub tags: Vec<String>,
    /// Example prompts.
    pub examples: Vec<String>,
    /// Accepted media types (empty: the card's defaults).
    pub input_modes: Vec<String>,
    /// Produced media types (empty: the card's defaults).
    pub output_modes: Vec<String>,
    /// A JSON Schema (draft 2020-12) for a `data` part the skill takes.
    pub input_schema: Option<Value>,
    /// A JSON Schema for a `data` part the skill answers with.
    pub output_schema: Option<Value>,
}

/// The protocol bindings an agent serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bindings {
    /// JSON-RPC 2.0 over HTTP.
    pub jsonrpc: bool,
    /// HTTP+JSON (REST).
    pub rest: bool,
    /// gRPC.
    pub grpc: bool,
}

/// How callers authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Security {
    /// Anyone may call.
    None,
    /// An API key in a request header.
    ApiKey {
        /// The header name.
        header: String,
    },
    /// A bearer JWT from `issuer`, for `audience`.
    BearerJwt {
        /// Required `iss`.
        issuer: String,
        /// Required `aud` (empty: any).
        audience: String,
    },
    /// OAuth 2.0 client credentials: tokens from `token_url`.
    OAuth2 {
        /// The token endpoint.
        token_url: String,
        /// Scopes a caller asks for (each must be granted).
        scopes: Vec<String>,
        /// Where the issuer publishes its signing keys.
        jwks_url: String,
    },
    /// Mutual TLS: a client certificate from the agent's CA.
    Mtls,
}

impl Security {
    /// The names `--security` takes, in the order the form offers them.
    pub const NAMES: [&'static str; 5] = ["none", "api-key", "bearer-jwt", "oauth2", "mtls"];
}

/// Everything the generated files are made from.
#[derive(Clone, Debug)]
pub struct AgentSpec {
    /// Card name.
    pub name: String,
    /// Card description.
    pub description: String,
    /// The agent's version (semver).
    pub version: String,
    /// Provider organization and URL, if any.
    pub provider: Option<(String, String)>,
    /// Skills, at least one.
    pub skills: Vec<SkillSpec>,
    /// Streams its answers.
    pub streaming: bool,
    /// Sends push notifications.
    pub push: bool,
    /// Served bindings.
    pub bindings: Bindings,
    /// Also serve (and write the card of) A2A v0.3.
    pub v03: bool,
    /// Authentication.
    pub security: Security,
    /// Where callers reach it: the base URL (card at `{base}/.well-known/agent-card.json`).
    pub base_url: String,
    /// The gRPC address callers dial (`host:port`), when gRPC is served.
    pub grpc_addr: String,
}

/// Whether a URL's host is this machine, where plain http is acceptable.
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A non-empty line of text, trimmed.
pub fn text(answer: &str, what: &str) -> anyhow::Result<String> {
    let t = answer.trim();
    if t.is_empty() {
        bail!("{what} must not be empty");
    }
    if t.chars().any(char::is_control) {
        bail!("{what} must be one line of text");
    }
    Ok(t.to_owned())
}

/// `s` with every control character (newlines included) made a space: text
/// from a card someone else wrote, fit for a TOML comment or a Markdown line.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A skill id: no spaces; letters, digits, `.`, `_` and `-`.
pub fn skill_id(answer: &str) -> anyhow::Result<String> {
    let t = answer.trim();
    if t.is_empty() {
        bail!("a skill id must not be empty");
    }
    if t.chars().any(char::is_whitespace) {
        bail!(
            "a skill id cannot contain spaces (try {:?})",
            heddle_hub::registry::slug(t)
        );
    }
    if let Some(c) = t
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        bail!("a skill id may hold letters, digits, '.', '_' and '-', not {c:?}");
    }
    Ok(t.to_owned())
}

/// A Semantic Versioning 2.0.0 version: `MAJOR.MINOR.PATCH`, then an
/// optional `-pre.release` and `+build.metadata`, each a dot-separated list
/// of non-empty `[0-9A-Za-z-]` identifiers (numeric pre-release identifiers
/// without leading zeros).
pub fn version(answer: &str) -> anyhow::Result<String> {
    let t = answer.trim();
    let (rest, build) = match t.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (t, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let number = |p: &str| {
        !p.is_empty()
            && p.bytes().all(|c| c.is_ascii_digit())
            && (p.len() == 1 || !p.starts_with('0'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3 || !parts.iter().all(|p| number(p)) {
        bail!("a version is MAJOR.MINOR.PATCH, like 1.0.0");
    }
    let identifiers = |list: &str| {
        list.split('.')
            .all(|i| !i.is_empty() && i.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
    };
    if let Some(pre) = pre {
        let leading_zero = pre
            .split('.')
            .any(|i| i.bytes().all(|c| c.is_ascii_digit()) && !number(i));
        if !identifiers(pre) || leading_zero {
            bail!(
                "a pre-release (after '-') is dot-separated identifiers of letters, digits and \
                 '-', like 1.0.0-rc.1 (numbers without leading zeros)"
            );
        }
    }
    if let Some(build) = build
        && !identifiers(build)
    {
        bail!(
            "build metadata (after '+') is dot-separated identifiers of letters, digits and '-', \
             like 1.0.0+build.5"
        );
    }
    Ok(t.to_owned())
}

/// A comma-separated list of non-empty items, each one line ([`one_line`]).
pub fn list(answer: &str) -> Vec<String> {
    answer
        .split(',')
        .map(|s| one_line(s).trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Media types (`type/subtype`), comma-separated.
pub fn media_types(answer: &str) -> anyhow::Result<Vec<String>> {
    let items = list(answer);
    for m in &items {
        let ok = m.split_once('/').is_some_and(|(t, s)| {
            !t.is_empty()
                && !s.is_empty()
                && !m.chars().any(|c| c.is_whitespace() || c == ',')
                && !s.contains('/')
        });
        if !ok {
            bail!("{m:?} is not a media type (type/subtype, like text/plain)");
        }
    }
    Ok(items)
}

/// An endpoint URL callers use: https, or http only on this machine
/// (or when `allow_http` says so). No query or fragment.
pub fn endpoint(answer: &str, allow_http: bool, what: &str) -> anyhow::Result<String> {
    let t = answer.trim();
    let url = url::Url::parse(t).with_context(|| format!("{what} {t:?} is not a URL"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http || is_loopback(&url) => {}
        "http" => {
            bail!("{what} must be https (plain http only for localhost, or with --allow-http)")
        }
        other => bail!("{what} must be an https URL, not {other}:"),
    }
    if url.host().is_none() {
        bail!("{what} needs a host");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("{what} cannot have a query or fragment");
    }
    Ok(t.trim_end_matches('/').to_owned())
}

/// A gRPC address: `host:port`.
pub fn grpc_addr(answer: &str) -> anyhow::Result<String> {
    let t = answer.trim();
    let ok = t
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok());
    if !ok {
        bail!("a gRPC address is host:port, like agents.example.com:443");
    }
    Ok(t.to_owned())
}

/// The bindings named in a comma-separated list.
pub fn bindings(answer: &str) -> anyhow::Result<Bindings> {
    let mut b = Bindings {
        jsonrpc: false,
        rest: false,
        grpc: false,
    };
    for name in list(answer) {
        match name.to_ascii_lowercase().as_str() {
            "jsonrpc" | "json-rpc" => b.jsonrpc = true,
            "rest" | "http+json" => b.rest = true,
            "grpc" => b.grpc = true,
            other => bail!("unknown binding {other:?}: use jsonrpc, rest and/or grpc"),
        }
    }
    if !(b.jsonrpc || b.rest || b.grpc) {
        bail!("name at least one binding: jsonrpc, rest, grpc");
    }
    Ok(b)
}

/// A yes/no answer (`default` when empty).
pub fn yes_no(answer: &str, default: bool) -> anyhow::Result<bool> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "" => Ok(default),
        "y" | "yes" | "true" => Ok(true),
        "n" | "no" | "false" => Ok(false),
        _ => bail!("answer yes or no"),
    }
}

/// Reads a JSON Schema from `path` and checks that it compiles (draft 2020-12).
pub fn schema_file(path: &str) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path.trim()).with_context(|| format!("reading {}", path.trim()))?;
    let schema: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.trim()))?;
    check_schema(&schema).with_context(|| path.trim().to_owned())?;
    Ok(schema)
}

/// Whether `schema` is a JSON Schema the hub can enforce: it must compile
/// (draft 2020-12), with no `$ref` outside itself.
pub fn check_schema(schema: &Value) -> anyhow::Result<()> {
    heddle_hub::manifest::InputCheck::from_schema(schema)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("not a usable JSON Schema: {e}"))
}

impl AgentSpec {
    /// Checks what a single answer cannot: unique skill ids, and that the
    /// scheme and bindings fit together.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.skills.is_empty() {
            bail!("an agent needs at least one skill");
        }
        let mut seen = BTreeSet::new();
        for s in &self.skills {
            if !seen.insert(s.id.as_str()) {
                bail!("two skills have the id {:?}", s.id);
            }
            if s.tags.is_empty() {
                bail!("skill {:?} needs at least one tag", s.id);
            }
        }
        if self.security == Security::Mtls && !self.base_url.starts_with("https://") {
            bail!("mutual TLS needs an https URL: the agent itself terminates TLS");
        }
        Ok(())
    }

    /// The card's input media types: every skill's, in order, each once.
    pub fn default_input_modes(&self) -> Vec<String> {
        union(self.skills.iter().map(|s| &s.input_modes))
    }

    /// The card's output media types, likewise.
    pub fn default_output_modes(&self) -> Vec<String> {
        union(self.skills.iter().map(|s| &s.output_modes))
    }

    /// A file- and crate-safe name for the agent (the hub's slug of its name).
    pub fn slug(&self) -> String {
        let s = heddle_hub::registry::slug(&self.name);
        if s.is_empty() { "agent".into() } else { s }
    }
}

/// Every string of `lists` once, in first-seen order; `text/plain` when none.
fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in lists.flatten() {
        if !out.contains(m) {
            out.push(m.clone());
        }
    }
    if out.is_empty() {
        out.push("text/plain".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_as_a_person_would_be_told() {
        assert!(skill_id("get weather").is_err());
        assert_eq!(
            skill_id(" get-weather ").ok().as_deref(),
            Some("get-weather")
        );
        assert!(endpoint("http://agents.example.com", false, "url").is_err());
        assert!(endpoint("http://agents.example.com", true, "url").is_ok());
        assert!(endpoint("http://127.0.0.1:8080/", false, "url").is_ok());
        assert_eq!(
            endpoint("https://a.example/x/", false, "url")
                .ok()
                .as_deref(),
            Some("https://a.example/x")
        );
        assert!(version("1.0").is_err());
        for good in [
            "1.2.3-rc.1",
            "1.0.0-alpha-1.0+exp.sha.5114f85",
            "1.0.0+001",
            "0.1.0",
        ] {
            assert!(version(good).is_ok(), "{good}");
        }
        for bad in [
            "1.0.0-",
            "1.0.0-rc..1",
            "1.0.0-rc.01",
            "1.0.0+",
            "1.0.0+a..b",
            "1.0.0-rc\"x",
            "1.0.0+b\nc",
            "1.0.0-a b",
            "01.0.0",
        ] {
            assert!(version(bad).is_err(), "{bad:?}");
        }
        assert!(media_types("text/plain, application/json").is_ok());
        assert!(media_types("text").is_err());
        assert_eq!(list("a\n[x], b,\t"), ["a [x]", "b"]);
        assert!(grpc_addr("h:50051").is_ok());
        assert!(grpc_addr("h").is_err());
    }
}
