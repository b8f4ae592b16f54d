use std::fmt;

use heddle_core::v1::{self, security_scheme::Scheme};

/// A secret value: shown as `***` by `Debug` and `Display`, so it never
/// reaches a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The credentials a client presents.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// `Authorization: Bearer …`.
    pub bearer: Option<Secret>,
    /// An API key, placed where the card's `apiKey` scheme says (header `api-key` if it says nothing).
    pub api_key: Option<Secret>,
    /// OAuth 2.0 client credentials: used when `bearer` is not set; the token
    /// endpoint defaults to the card's `clientCredentials` flow's `tokenUrl`.
    pub oauth2: Option<crate::oauth::ClientCredentials>,
}

/// Where an API key goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyPlace {
    Header(String),
    Query(String),
    Cookie(String),
}

/// The card's API-key placement (the first `apiKey` scheme), or header `api-key`.
pub(crate) fn api_key_place(card: &v1::AgentCard) -> KeyPlace {
    let scheme = card
        .security_schemes
        .values()
        .find_map(|s| match &s.scheme {
            Some(Scheme::ApiKeySecurityScheme(k)) => Some(k),
            _ => None,
        });
    match scheme {
        Some(k) if k.location.eq_ignore_ascii_case("query") => KeyPlace::Query(k.name.clone()),
        Some(k) if k.location.eq_ignore_ascii_case("cookie") => KeyPlace::Cookie(k.name.clone()),
        Some(k) if !k.name.is_empty() => KeyPlace::Header(k.name.clone()),
        _ => KeyPlace::Header("api-key".into()),
    }
}

/// Header names whose values are redacted in wire logs.
pub(crate) fn is_sensitive_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "authorization"
        || n == "cookie"
        || n == "proxy-authorization"
        || n.contains("api-key")
        || n.contains("apikey")
        || n.contains("token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
        let c = Credentials {
            bearer: Some(s.clone()),
            api_key: Some(s.clone()),
            oauth2: Some(crate::oauth::ClientCredentials {
                token_url: String::new(),
                client_id: "id".into(),
                client_secret: s,
                scopes: vec![],
            }),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn api_key_goes_where_the_card_says() {
        let card: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "securitySchemes": {"k": {"apiKeySecurityScheme": {"location": "query", "name": "key"}}}
        }))
        .expect("card");
        assert_eq!(api_key_place(&card), KeyPlace::Query("key".into()));
        assert_eq!(
            api_key_place(&v1::AgentCard::default()),
            KeyPlace::Header("api-key".into())
        );
    }
}
