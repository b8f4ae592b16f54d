use heddle_core::A2aError;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The agent answered with an A2A error.
    #[error(transparent)]
    A2a(#[from] A2aError),
    /// The HTTP exchange failed (connection, timeout, TLS).
    #[error("transport error: {0}")]
    Transport(String),
    /// The server answered with an HTTP error status and no A2A error body.
    #[error("HTTP {status}: {message}")]
    Http {
        /// Status code.
        status: u16,
        /// What the server said (first bytes of the body), or the `WWW-Authenticate` challenge.
        message: String,
        /// The server's `Retry-After`, in seconds form, when it sent one.
        retry_after: Option<std::time::Duration>,
    },
    /// The answer could not be read as A2A.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// No interface on the card is one this client can use.
    #[error("no usable interface: {0}")]
    NoInterface(String),
    /// The card could not be fetched or read.
    #[error("agent card: {0}")]
    Card(String),
    /// A response body (or one stream event) was larger than the client accepts.
    #[error("{what} larger than {limit} bytes")]
    BodyTooLarge {
        /// What was being read (`response body`, `agent card`, …).
        what: &'static str,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The OAuth 2.0 client secret was not sent to a token URL (which was
    /// not contacted): `rule` says why.
    #[error("OAuth 2.0: the client secret is not sent to {url}: {rule}")]
    TokenUrlRefused {
        /// The token URL, without credentials, query or fragment.
        url: String,
        /// The rule it broke.
        rule: crate::TokenUrlRefusal,
    },
    /// Card signatures are required and this card's did not verify
    /// (unverifiable, absent or invalid).
    #[error("agent card signature: {0}")]
    CardSignature(String),
    /// The task this call worked for was canceled, so the call stopped
    /// waiting (see [`crate::Delegate`]); the callee's task is canceled too.
    #[error("the calling task was canceled")]
    Canceled,
}

impl From<reqwest::Error> for ClientError {
    fn from(e: reqwest::Error) -> Self {
        // Without the URL: it may carry an API key in its query. With the
        // causes, which say what failed (a refused connection, an unknown
        // certificate issuer).
        let e = e.without_url();
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message = format!("{message}: {text}");
            }
            source = cause.source();
        }
        ClientError::Transport(message)
    }
}

impl ClientError {
    /// Whether a retry could succeed for an idempotent call.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport(_) => true,
            ClientError::Http { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }
}
