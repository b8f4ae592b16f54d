//! Why a request was not let through.

/// An authentication or authorization failure. Messages never carry the
/// credential itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential was presented.
    #[error("authentication required")]
    Missing,
    /// A credential was presented and did not verify.
    #[error("invalid credentials: {0}")]
    Invalid(String),
    /// The credential is larger than the server accepts.
    #[error("credential too large ({0} bytes)")]
    TooLarge(usize),
    /// The caller is known but may not do this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Keys could not be fetched or read (JWKS, OIDC discovery, key store).
    #[error("authentication unavailable: {0}")]
    Unavailable(String),
    /// The authenticator's configuration is wrong.
    #[error("authentication config: {0}")]
    Config(String),
}
