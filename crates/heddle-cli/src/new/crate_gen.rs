//! A new Rust crate for the agent: `Cargo.toml`, `agent.toml` (how it is
//! served), `src/main.rs` (the server, wired to the card as written) and
//! `src/agent.rs` (the `AgentExecutor` skeleton where the work goes).
//!
//! `main.rs` reads the card and `agent.toml` when it starts rather than
//! compiling them in, so one file serves every security scheme and binding
//! set: what differs between agents is data, not code.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::card::{JSONRPC_PATH, REST_PATH};
use super::quote;
use super::spec::{AgentSpec, Security, is_loopback};

const MAIN_RS: &str = include_str!("templates/main.rs.tmpl");
const AGENT_RS: &str = include_str!("templates/agent.rs.tmpl");
const CARGO_TOML: &str = include_str!("templates/Cargo.toml.tmpl");

/// Where the generated crate takes the heddle crates from.
#[derive(Clone, Debug)]
pub enum DepSource {
    /// A checkout of the Heddle workspace (its `crates/` folder beside `Cargo.toml`).
    Path(PathBuf),
    /// A git repository.
    Git(String),
    /// A registry version.
    Version(String),
}

impl DepSource {
    /// The default: the workspace this `heddle` was built from, when it is
    /// still there; else the project's repository.
    pub fn default_source() -> Self {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        match here.canonicalize() {
            Ok(root) if root.join("crates/heddle-server/Cargo.toml").exists() => Self::Path(root),
            _ => Self::Git(env!("CARGO_PKG_REPOSITORY").to_owned()),
        }
    }

    /// The dependency table of `krate`, with `features`.
    fn dep(&self, krate: &str, features: &[&str]) -> String {
        let source = match self {
            Self::Path(root) => {
                let p = root.join("crates").join(krate);
                format!("path = {}", quote(&p.display().to_string()))
            }
            Self::Git(url) => format!("git = {}", quote(url)),
            Self::Version(v) => format!("version = {}", quote(v)),
        };
        if features.is_empty() {
            format!("{{ {source} }}")
        } else {
            let f: Vec<String> = features.iter().map(|f| quote(f)).collect();
            format!("{{ {source}, features = [{}] }}", f.join(", "))
        }
    }
}

/// The `listen` address for a base URL: its port on the loopback address
/// when the agent runs here, else port 8080 behind a proxy (or the URL's
/// port on every address when the agent terminates TLS itself).
fn listen_addr(url: &url::Url, tls: bool) -> String {
    let port = url.port_or_known_default().unwrap_or(8080);
    if is_loopback(url) {
        format!("127.0.0.1:{port}")
    } else if tls {
        format!("0.0.0.0:{port}")
    } else {
        "127.0.0.1:8080".into()
    }
}

/// `agent.toml` for `spec`.
fn settings(spec: &AgentSpec, id: &str) -> anyhow::Result<String> {
    let url = url::Url::parse(&spec.base_url).context("the agent's URL")?;
    let tls = spec.security == Security::Mtls;
    let mut out = format!(
        "# How `cargo run` serves agent-card.json. The card's URLs say where callers reach the\n\
         # agent; this file says where this process listens (behind a proxy, or directly).\n\n\
         id = {}\nlisten = {}\n",
        quote(id),
        quote(&listen_addr(&url, tls))
    );
    if spec.bindings.grpc {
        // As `listen`: the callers' port when they reach this process
        // directly (here, or with its own TLS), else 50051 behind the proxy
        // that holds the public port.
        let port = spec.grpc_addr.rsplit_once(':').map_or("50051", |(_, p)| p);
        let addr = if is_loopback(&url) {
            format!("127.0.0.1:{port}")
        } else if tls {
            format!("0.0.0.0:{port}")
        } else {
            "127.0.0.1:50051".to_owned()
        };
        out.push_str(&format!("grpc_listen = {}\n", quote(&addr)));
    }
    if url.scheme() == "https" && !tls {
        out.push_str(
            "# The card's URLs are https: this process speaks plain HTTP (and gRPC), so put a\n\
             # TLS-terminating proxy in front of `listen` (and `grpc_listen`, with HTTP/2).\n",
        );
    }
    let path = url.path().trim_end_matches('/');
    out.push_str(&format!(
        "base_path = {}\n",
        quote(if path.is_empty() { "/" } else { path })
    ));
    if spec.bindings.jsonrpc {
        out.push_str(&format!("jsonrpc_path = {}\n", quote(JSONRPC_PATH)));
    }
    if spec.bindings.rest {
        out.push_str(&format!("rest_path = {}\n", quote(REST_PATH)));
    }
    match &spec.security {
        Security::None => {}
        Security::ApiKey { header } => out.push_str(&format!(
            "\n# API keys: `heddle keys create --name NAME --store sqlite:keys.db` makes one.\n\
             keys_db = \"keys.db\"\n\n[auth.api_keys]\nlocation = \"header\"\nname = {}\n",
            quote(header)
        )),
        Security::BearerJwt { issuer, audience } => {
            out.push_str(&format!(
                "\n# Bearer JWTs from {issuer}: HS256 with the secret in $AGENT_JWT_SECRET (at\n\
                 # least 32 bytes). For RS256/ES256 keys use `jwks_url` or `pem_file` instead.\n\
                 [auth.api_keys]\nenabled = false\n\n[auth.jwt]\nissuer = {}\n",
                quote(issuer)
            ));
            if !audience.is_empty() {
                out.push_str(&format!("audience = [{}]\n", quote(audience)));
            }
            out.push_str(
                "\n[[auth.jwt.keys]]\nalg = \"HS256\"\nsecret_env = \"AGENT_JWT_SECRET\"\n",
            );
        }
        Security::OAuth2 {
            token_url,
            scopes,
            jwks_url,
        } => {
            let scopes: Vec<String> = scopes.iter().map(|s| quote(s)).collect();
            out.push_str(&format!(
                "\n# OAuth 2.0 client credentials: callers get tokens at {token_url}; this agent\n\
                 # checks them against the issuer's keys.\n\
                 [auth.api_keys]\nenabled = false\n\n[auth.jwt]\njwks_url = {}\nrequired_scopes = [{}]\n",
                quote(jwks_url),
                scopes.join(", ")
            ));
        }
        Security::Mtls => out.push_str(
            "\n# Mutual TLS: the agent's certificate and key, and the CA whose client\n\
             # certificates it accepts (paths relative to this file).\n\
             [tls]\ncert = \"tls/server.pem\"\nkey = \"tls/server.key\"\nclient_ca = \"tls/ca.pem\"\n\
             require_client_cert = true\n",
        ),
    }
    Ok(out)
}

/// A crate name from the agent's slug.
pub fn crate_name(spec: &AgentSpec) -> String {
    let s = spec.slug();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("agent-{s}")
    } else {
        s
    }
}

/// `template` with each `{{KEY}}` of `values` replaced, in one pass: a
/// `{{…}}` inside a value is written as it is, never replaced in turn.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let value = after.find("}}").and_then(|end| {
            let key = &after[..end];
            values
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (v, end))
        });
        match value {
            Some((v, end)) => {
                out.push_str(v);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The files of the crate, as (path under the output folder, contents).
pub fn files(
    spec: &AgentSpec,
    id: &str,
    source: &DepSource,
) -> anyhow::Result<Vec<(String, String)>> {
    if let DepSource::Path(root) = source
        && !root.join("crates/heddle-server/Cargo.toml").exists()
    {
        bail!(
            "{} holds no Heddle workspace (no crates/heddle-server)",
            root.display()
        );
    }
    let skill_docs: Vec<String> = spec
        .skills
        .iter()
        .map(|s| format!("//! - `{}`: {}", s.id, s.description))
        .collect();
    let values = [
        ("NAME", spec.name.clone()),
        ("NAME_LIT", quote(&spec.name)),
        ("CRATE", crate_name(spec)),
        ("VERSION", quote(&spec.version)),
        ("DESCRIPTION", quote(&spec.description)),
        ("SKILL_DOCS", skill_docs.join("\n")),
        ("DEP_SERVER", source.dep("heddle-server", &["grpc", "tls"])),
        ("DEP_API", source.dep("heddle-api", &[])),
        ("DEP_CORE", source.dep("heddle-core", &[])),
        ("DEP_AUTH", source.dep("heddle-auth", &[])),
        ("DEP_STORE", source.dep("heddle-store", &[])),
    ];
    let fill = |t: &str| fill(t, &values);
    let mut out = vec![
        ("Cargo.toml".to_owned(), fill(CARGO_TOML)),
        ("agent.toml".to_owned(), settings(spec, id)?),
        ("src/main.rs".to_owned(), fill(MAIN_RS)),
        ("src/agent.rs".to_owned(), fill(AGENT_RS)),
        (
            ".gitignore".to_owned(),
            "/target\nkeys.db\n/tls\n".to_owned(),
        ),
    ];
    // The versions Heddle is tested with, so the crate builds with them.
    if let DepSource::Path(root) = source
        && let Ok(lock) = std::fs::read_to_string(root.join("Cargo.lock"))
    {
        out.push(("Cargo.lock".to_owned(), lock));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_and_values_are_not_read_again() {
        let values = [
            ("NAME", "{{CRATE}} and {{NAME}}".to_owned()),
            ("CRATE", "c".to_owned()),
        ];
        assert_eq!(
            fill("a {{NAME}} b {{CRATE}} {{OTHER}} {{", &values),
            "a {{CRATE}} and {{NAME}} b c {{OTHER}} {{"
        );
    }
}
