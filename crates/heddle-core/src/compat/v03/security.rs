//! v0.3 security schemes and their conversion.

use super::*;

/// A v0.3 OAuth flow (all four kinds share this shape).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlow {
    /// Authorization endpoint (authorizationCode, implicit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    /// Token endpoint (authorizationCode, clientCredentials, password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Refresh endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
    /// Scope name to description.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}

/// v0.3 `OAuthFlows`: any number of flows at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlows {
    /// Authorization code flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_code: Option<OAuthFlow>,
    /// Client credentials flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<OAuthFlow>,
    /// Implicit flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implicit: Option<OAuthFlow>,
    /// Password flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<OAuthFlow>,
}

/// A v0.3 security scheme (OpenAPI-like, tagged by `type`).
#[allow(clippy::large_enum_variant)] // cards are read rarely; plain variants read best
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum SecurityScheme {
    /// API key in a header, query parameter or cookie.
    #[serde(rename = "apiKey")]
    ApiKey {
        /// `header`, `query` or `cookie`.
        #[serde(rename = "in")]
        location: String,
        /// Header, parameter or cookie name.
        name: String,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// HTTP authentication (`bearer`, `basic`, …).
    #[serde(rename = "http", rename_all = "camelCase")]
    Http {
        /// Scheme name.
        scheme: String,
        /// Bearer token format hint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_format: Option<String>,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OAuth 2.0.
    #[serde(rename = "oauth2", rename_all = "camelCase")]
    OAuth2 {
        /// Flows.
        flows: OAuthFlows,
        /// RFC 8414 metadata URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oauth2_metadata_url: Option<String>,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OpenID Connect.
    #[serde(rename = "openIdConnect", rename_all = "camelCase")]
    OpenIdConnect {
        /// Discovery URL.
        open_id_connect_url: String,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// Mutual TLS.
    #[serde(rename = "mutualTLS")]
    MutualTls {
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

impl SecurityScheme {
    /// Upgrade to v1.0 (first OAuth flow only; see the module docs).
    pub fn to_v1(&self) -> v1::SecurityScheme {
        use v1::{o_auth_flows::Flow, security_scheme::Scheme};
        let d = |o: &Option<String>| o.clone().unwrap_or_default();
        let scheme = match self {
            Self::ApiKey {
                location,
                name,
                description,
            } => Scheme::ApiKeySecurityScheme(v1::ApiKeySecurityScheme {
                description: d(description),
                location: location.clone(),
                name: name.clone(),
            }),
            Self::Http {
                scheme,
                bearer_format,
                description,
            } => Scheme::HttpAuthSecurityScheme(v1::HttpAuthSecurityScheme {
                description: d(description),
                scheme: scheme.clone(),
                bearer_format: d(bearer_format),
            }),
            Self::OAuth2 {
                flows,
                oauth2_metadata_url,
                description,
            } => {
                let flow = if let Some(f) = &flows.authorization_code {
                    Some(Flow::AuthorizationCode(v1::AuthorizationCodeOAuthFlow {
                        authorization_url: d(&f.authorization_url),
                        token_url: d(&f.token_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                        pkce_required: false,
                    }))
                } else if let Some(f) = &flows.client_credentials {
                    Some(Flow::ClientCredentials(v1::ClientCredentialsOAuthFlow {
                        token_url: d(&f.token_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                    }))
                } else if let Some(f) = &flows.implicit {
                    #[allow(deprecated)]
                    Some(Flow::Implicit(v1::ImplicitOAuthFlow {
                        authorization_url: d(&f.authorization_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                    }))
                } else {
                    #[allow(deprecated)]
                    flows.password.as_ref().map(|f| {
                        Flow::Password(v1::PasswordOAuthFlow {
                            token_url: d(&f.token_url),
                            refresh_url: d(&f.refresh_url),
                            scopes: f.scopes.clone().into_iter().collect(),
                        })
                    })
                };
                Scheme::Oauth2SecurityScheme(v1::OAuth2SecurityScheme {
                    description: d(description),
                    flows: Some(v1::OAuthFlows { flow }),
                    oauth2_metadata_url: d(oauth2_metadata_url),
                })
            }
            Self::OpenIdConnect {
                open_id_connect_url,
                description,
            } => Scheme::OpenIdConnectSecurityScheme(v1::OpenIdConnectSecurityScheme {
                description: d(description),
                open_id_connect_url: open_id_connect_url.clone(),
            }),
            Self::MutualTls { description } => {
                Scheme::MtlsSecurityScheme(v1::MutualTlsSecurityScheme {
                    description: d(description),
                })
            }
        };
        v1::SecurityScheme {
            scheme: Some(scheme),
        }
    }

    /// Downgrade from v1.0. `None` for a scheme with no member set.
    pub fn from_v1(s: &v1::SecurityScheme) -> Option<Self> {
        use v1::{o_auth_flows::Flow, security_scheme::Scheme};
        let flow =
            |auth: &str,
             token: &str,
             refresh: &str,
             scopes: &std::collections::HashMap<String, String>| OAuthFlow {
                authorization_url: opt_string(auth),
                token_url: opt_string(token),
                refresh_url: opt_string(refresh),
                scopes: scopes.clone().into_iter().collect(),
            };
        Some(match s.scheme.as_ref()? {
            Scheme::ApiKeySecurityScheme(k) => Self::ApiKey {
                location: k.location.clone(),
                name: k.name.clone(),
                description: opt_string(&k.description),
            },
            Scheme::HttpAuthSecurityScheme(h) => Self::Http {
                scheme: h.scheme.clone(),
                bearer_format: opt_string(&h.bearer_format),
                description: opt_string(&h.description),
            },
            Scheme::Oauth2SecurityScheme(o) => {
                let mut flows = OAuthFlows::default();
                #[allow(deprecated)]
                match o.flows.as_ref().and_then(|f| f.flow.as_ref()) {
                    Some(Flow::AuthorizationCode(f)) => {
                        flows.authorization_code = Some(flow(
                            &f.authorization_url,
                            &f.token_url,
                            &f.refresh_url,
                            &f.scopes,
                        ))
                    }
                    Some(Flow::ClientCredentials(f)) => {
                        flows.client_credentials =
                            Some(flow("", &f.token_url, &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::Implicit(f)) => {
                        flows.implicit =
                            Some(flow(&f.authorization_url, "", &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::Password(f)) => {
                        flows.password = Some(flow("", &f.token_url, &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::DeviceCode(_)) | None => {}
                }
                Self::OAuth2 {
                    flows,
                    oauth2_metadata_url: opt_string(&o.oauth2_metadata_url),
                    description: opt_string(&o.description),
                }
            }
            Scheme::OpenIdConnectSecurityScheme(o) => Self::OpenIdConnect {
                open_id_connect_url: o.open_id_connect_url.clone(),
                description: opt_string(&o.description),
            },
            Scheme::MtlsSecurityScheme(m) => Self::MutualTls {
                description: opt_string(&m.description),
            },
        })
    }
}

/// v0.3 security requirements: `[{"schemeName": ["scope", …]}, …]`.
pub type SecurityRequirements = Vec<BTreeMap<String, Vec<String>>>;

/// Upgrade v0.3 `security` to v1.0 `securityRequirements`.
pub fn requirements_to_v1(reqs: &SecurityRequirements) -> Vec<v1::SecurityRequirement> {
    reqs.iter()
        .map(|r| v1::SecurityRequirement {
            schemes: r
                .iter()
                .map(|(k, v)| (k.clone(), v1::StringList { list: v.clone() }))
                .collect(),
        })
        .collect()
}

/// Downgrade v1.0 `securityRequirements` to v0.3 `security`.
pub fn requirements_from_v1(reqs: &[v1::SecurityRequirement]) -> SecurityRequirements {
    reqs.iter()
        .map(|r| {
            r.schemes
                .iter()
                .map(|(k, v)| (k.clone(), v.list.clone()))
                .collect()
        })
        .collect()
}
