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

impl AuthError {
    /// 401 for credential problems, 403 for permission, 503 when keys are unavailable.
    pub fn http_status(&self) -> http::StatusCode {
        match self {
            AuthError::Forbidden(_) => http::StatusCode::FORBIDDEN,
            AuthError::Unavailable(_) | AuthError::Config(_) => {
                http::StatusCode::SERVICE_UNAVAILABLE
            }
            _ => http::StatusCode::UNAUTHORIZED,
        }
    }

    /// The gRPC code of the same failure.
    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            AuthError::Forbidden(_) => tonic::Code::PermissionDenied,
            AuthError::Unavailable(_) | AuthError::Config(_) => tonic::Code::Unavailable,
            _ => tonic::Code::Unauthenticated,
        }
    }

    /// The `ErrorInfo.reason` of the failure.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Forbidden(_) => "PERMISSION_DENIED",
            AuthError::Unavailable(_) | AuthError::Config(_) => "UNAVAILABLE",
            _ => "UNAUTHENTICATED",
        }
    }
}
