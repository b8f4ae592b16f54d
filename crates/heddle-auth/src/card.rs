//! What an [`Authenticator`] enforces, declared on an Agent Card: v1.0
//! `securitySchemes` + `securityRequirements`, which the dual card renders as
//! v0.3 `securitySchemes` + `security` too (`heddle_core::card`).

use heddle_core::v1::{self, security_scheme::Scheme};

use crate::Authenticator;

/// Scheme name of API keys on the card.
pub const API_KEY_SCHEME: &str = "apiKey";
/// Scheme name of bearer JWTs on the card.
pub const BEARER_SCHEME: &str = "bearer";
/// Scheme name of OIDC tokens on the card.
pub const OIDC_SCHEME: &str = "oidc";

/// Declares `auth`'s schemes on `card`; each is an alternative (any one
/// credential suffices), as the layer enforces.
pub fn declare(auth: &Authenticator, card: &mut v1::AgentCard) {
    let mut add = |name: &str, scheme: Scheme| {
        card.security_schemes.insert(
            name.to_owned(),
            v1::SecurityScheme {
                scheme: Some(scheme),
            },
        );
        card.security_requirements.push(v1::SecurityRequirement {
            schemes: [(name.to_owned(), v1::StringList { list: Vec::new() })]
                .into_iter()
                .collect(),
        });
    };
    if auth.api_keys().is_some() {
        let loc = auth.key_location();
        add(
            API_KEY_SCHEME,
            Scheme::ApiKeySecurityScheme(v1::ApiKeySecurityScheme {
                description: "An API key issued by the operator of this agent".into(),
                location: loc.kind().into(),
                name: loc.name().into(),
            }),
        );
    }
    if let Some(jwt) = auth.jwt() {
        match jwt.oidc_issuer() {
            Some(issuer) => add(
                OIDC_SCHEME,
                Scheme::OpenIdConnectSecurityScheme(v1::OpenIdConnectSecurityScheme {
                    description: "An access token from the OpenID Connect issuer".into(),
                    open_id_connect_url: format!("{issuer}/.well-known/openid-configuration"),
                }),
            ),
            None => add(
                BEARER_SCHEME,
                Scheme::HttpAuthSecurityScheme(v1::HttpAuthSecurityScheme {
                    description: "A signed JWT".into(),
                    scheme: "Bearer".into(),
                    bearer_format: "JWT".into(),
                }),
            ),
        }
    }
}
