//! How the hub authenticates to an upstream agent ([`UpstreamAuth`]), and
//! where the secret values come from ([`SecretSource`]).
//!
//! A registration names secrets, never holds them: the document the hub
//! stores says `{"type": "bearer", "env": "WEATHER_TOKEN"}`, and the value
//! is read when the agent is built, from the hub's secrets file or else the
//! environment variable of that name. Values are kept as
//! [`heddle_client::Secret`]s (redacted by `Debug` and `Display`) and are
//! scrubbed from every upstream error text the hub passes on.

use std::{collections::HashMap, path::Path};

use heddle_client::{ClientCredentials, Credentials, Secret};
use serde::{Deserialize, Serialize};

use super::RemoteError;

/// The credentials the hub presents to an upstream agent. Serialized with a
/// `type` tag, for the registry document and a TOML config:
///
/// ```toml
/// auth = { type = "api_key", header = "x-api-key", env = "WEATHER_KEY" }
/// ```
///
/// Each `*env` field names a secret: looked up in the hub's secrets file,
/// else in the environment variable of that name ([`SecretSource`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum UpstreamAuth {
    /// No credentials.
    #[default]
    None,
    /// An API key in a request header (HTTP) or metadata entry (gRPC).
    ApiKey {
        /// The header name, e.g. `x-api-key`.
        header: String,
        /// The secret holding the key.
        env: String,
    },
    /// `Authorization: Bearer …`.
    Bearer {
        /// The secret holding the token.
        env: String,
    },
    /// OAuth 2.0 client credentials (RFC 6749 §4.4); tokens are cached and
    /// refreshed by the client.
    Oauth2ClientCredentials {
        /// The token endpoint (`https`, or `http` on a loopback host).
        token_url: String,
        /// The secret holding the client id.
        client_id_env: String,
        /// The secret holding the client secret.
        client_secret_env: String,
        /// Scopes to request.
        #[serde(default)]
        scopes: Vec<String>,
    },
}

/// What [`UpstreamAuth`] resolves to: the client's credentials, extra
/// headers, and every secret value (to scrub from error texts).
#[derive(Clone, Default)]
pub(crate) struct Resolved {
    pub(crate) credentials: Credentials,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) secrets: Vec<Secret>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Resolved")
            .field("credentials", &self.credentials)
            .field("headers", &names)
            .finish_non_exhaustive()
    }
}

impl UpstreamAuth {
    /// Checks the fields that need no secret: names are non-empty, the
    /// header is a valid header name.
    pub fn validate(&self) -> Result<(), RemoteError> {
        let bad = |why: String| Err(RemoteError::InvalidAuth(why));
        let named = |field: &str, v: &str| {
            if v.trim().is_empty() {
                Err(RemoteError::InvalidAuth(format!("`{field}` is empty")))
            } else {
                Ok(())
            }
        };
        match self {
            UpstreamAuth::None => Ok(()),
            UpstreamAuth::ApiKey { header, env } => {
                named("env", env)?;
                let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
                if header.is_empty() || !header.chars().all(token) {
                    return bad(format!("`header` {header:?} is not a header name"));
                }
                Ok(())
            }
            UpstreamAuth::Bearer { env } => named("env", env),
            UpstreamAuth::Oauth2ClientCredentials {
                token_url,
                client_id_env,
                client_secret_env,
                ..
            } => {
                named("token_url", token_url)?;
                named("client_id_env", client_id_env)?;
                named("client_secret_env", client_secret_env)
            }
        }
    }

    /// The credentials, with their values read from `secrets`.
    pub(crate) fn resolve(&self, secrets: &SecretSource) -> Result<Resolved, RemoteError> {
        self.validate()?;
        let mut out = Resolved::default();
        match self {
            UpstreamAuth::None => {}
            UpstreamAuth::ApiKey { header, env } => {
                let key = secrets.get(env)?;
                // In the extra headers, which every transport sends (gRPC as
                // metadata, whose keys are lowercase).
                out.headers
                    .push((header.to_ascii_lowercase(), key.expose().to_owned()));
                out.secrets.push(key);
            }
            UpstreamAuth::Bearer { env } => {
                let token = secrets.get(env)?;
                out.credentials.bearer = Some(token.clone());
                out.secrets.push(token);
            }
            UpstreamAuth::Oauth2ClientCredentials {
                token_url,
                client_id_env,
                client_secret_env,
                scopes,
            } => {
                let id = secrets.get(client_id_env)?;
                let secret = secrets.get(client_secret_env)?;
                out.credentials.oauth2 = Some(ClientCredentials {
                    token_url: token_url.clone(),
                    client_id: id.expose().to_owned(),
                    client_secret: secret.clone(),
                    scopes: scopes.clone(),
                });
                out.secrets.extend([id, secret]);
            }
        }
        Ok(out)
    }
}

/// Where secret values come from: a secrets file given to the hub (a TOML
/// or JSON object of name → string value), then, unless turned off, the
/// environment. `Debug` shows the names only.
#[derive(Clone, Default)]
pub struct SecretSource {
    values: HashMap<String, Secret>,
    no_environment: bool,
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.values.keys().collect();
        names.sort();
        f.debug_struct("SecretSource")
            .field("names", &names)
            .field("environment", &!self.no_environment)
            .finish()
    }
}

impl SecretSource {
    /// Secrets from environment variables only.
    pub fn environment() -> Self {
        Self::default()
    }

    /// Secrets from `values` only (the environment is not read): for tests
    /// and for callers that keep secrets elsewhere.
    pub fn from_values<K: Into<String>, V: Into<String>>(
        values: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            values: values
                .into_iter()
                .map(|(k, v)| (k.into(), Secret::new(v)))
                .collect(),
            no_environment: true,
        }
    }

    /// Secrets from the file at `path` (TOML, or JSON when it starts with
    /// `{`), then the environment.
    pub fn from_file(path: &Path) -> Result<Self, RemoteError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| RemoteError::SecretsFile(format!("{shown}: {e}")))?;
        Self::from_text(&text).map_err(|why| RemoteError::SecretsFile(format!("{shown}: {why}")))
    }

    /// Parses a secrets file's text. The error never quotes the text (it
    /// may hold secrets): it gives a line number at most.
    fn from_text(text: &str) -> Result<Self, String> {
        let values: HashMap<String, String> = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| {
                format!(
                    "not a JSON object of string values (line {}, column {})",
                    e.line(),
                    e.column()
                )
            })?
        } else {
            toml::from_str(text).map_err(|e| {
                let line = e
                    .span()
                    .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
                match line {
                    Some(l) => format!("not a TOML table of string values (line {l})"),
                    None => "not a TOML table of string values".to_owned(),
                }
            })?
        };
        Ok(Self {
            values: values
                .into_iter()
                .map(|(k, v)| (k, Secret::new(v)))
                .collect(),
            no_environment: false,
        })
    }

    /// The secret `name`: from the file, else the environment.
    pub fn get(&self, name: &str) -> Result<Secret, RemoteError> {
        if let Some(v) = self.values.get(name) {
            return Ok(v.clone());
        }
        if !self.no_environment
            && let Ok(v) = std::env::var(name)
            && !v.is_empty()
        {
            return Ok(Secret::new(v));
        }
        Err(RemoteError::MissingSecret(name.to_owned()))
    }
}

/// `text` with every secret value replaced by `***`.
pub(crate) fn scrub(text: &str, secrets: &[Secret]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        // Very short values would blank out ordinary words; none is that short
        // in practice, and a one-character secret is no secret.
        if s.expose().len() >= 4 {
            out = out.replace(s.expose(), "***");
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn registrations_read_from_toml_and_json() {
        #[derive(Deserialize)]
        struct Entry {
            auth: UpstreamAuth,
        }
        let e: Entry =
            toml::from_str(r#"auth = { type = "api_key", header = "X-Key", env = "K" }"#).unwrap();
        assert_eq!(
            e.auth,
            UpstreamAuth::ApiKey {
                header: "X-Key".into(),
                env: "K".into()
            }
        );
        let a: UpstreamAuth = serde_json::from_str(
            r#"{"type":"oauth2_client_credentials","token_url":"https://t/token",
                "client_id_env":"ID","client_secret_env":"SECRET"}"#,
        )
        .unwrap();
        assert!(
            matches!(a, UpstreamAuth::Oauth2ClientCredentials { ref scopes, .. } if scopes.is_empty())
        );
        assert_eq!(
            serde_json::to_value(UpstreamAuth::None).unwrap(),
            serde_json::json!({"type": "none"})
        );
        // A value where a name belongs is refused, not stored.
        assert!(serde_json::from_str::<UpstreamAuth>(r#"{"type":"bearer","token":"x"}"#).is_err());
    }

    #[test]
    fn secrets_resolve_from_the_file_and_never_print() {
        let s = SecretSource::from_text("K = \"hunter22\"\nT = \"tok-1234\"\n").unwrap();
        assert!(!format!("{s:?}").contains("hunter22"));
        let api = UpstreamAuth::ApiKey {
            header: "X-Key".into(),
            env: "K".into(),
        };
        let r = api.resolve(&s).unwrap();
        assert_eq!(r.headers, [("x-key".to_owned(), "hunter22".to_owned())]);
        assert!(!format!("{r:?}").contains("hunter22"));
        let bearer = UpstreamAuth::Bearer { env: "T".into() };
        let r = bearer.resolve(&s).unwrap();
        assert_eq!(r.credentials.bearer.unwrap().expose(), "tok-1234");
        let missing = UpstreamAuth::Bearer {
            env: "NOPE_NOT_SET_ANYWHERE_42".into(),
        };
        let e = missing.resolve(&s).unwrap_err().to_string();
        assert!(e.contains("NOPE_NOT_SET_ANYWHERE_42"), "{e}");
        assert_eq!(
            scrub("bad key hunter22!", &[Secret::new("hunter22")]),
            "bad key ***!"
        );
    }

    #[test]
    fn a_broken_secrets_file_is_reported_without_its_text() {
        let e = SecretSource::from_text("A = \"ok\"\nB = hunter22 oops\n").unwrap_err();
        assert!(!e.contains("hunter22"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        let e = SecretSource::from_text("{\"A\": 5}").unwrap_err();
        assert!(e.contains("JSON"), "{e}");
        let json = SecretSource::from_text(r#"{"A": "v4lue"}"#).unwrap();
        assert_eq!(json.get("A").unwrap().expose(), "v4lue");
    }

    #[test]
    fn bad_names_are_refused() {
        let e = UpstreamAuth::ApiKey {
            header: "x key".into(),
            env: "K".into(),
        };
        assert!(e.validate().is_err());
        assert!(UpstreamAuth::Bearer { env: " ".into() }.validate().is_err());
    }
}
