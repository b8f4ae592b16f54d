//! Serving over TLS (rustls, ring): HTTP/1.1 and HTTP/2 (so gRPC too) on
//! one listener, with optional mutual TLS.
//!
//! With a client CA, a client certificate that verifies against it makes
//! the caller: its subject CN, or else its first DNS/email/URI SAN, goes into
//! the request extensions as [`Caller::authenticated`], where every binding
//! reads it (an authentication layer leaves a caller already authenticated
//! alone). Without a certificate the connection is anonymous, unless
//! [`TlsSettings::require_client_cert`] says every client must present one.
//!
//! ```no_run
//! # async fn run(app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
//! use heddle_server::tls::{TlsSettings, serve_tls};
//! let settings = TlsSettings::from_pem(&std::fs::read("cert.pem")?, &std::fs::read("key.pem")?)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8443").await?;
//! serve_tls(listener, settings.server_config()?, app, std::future::pending()).await?;
//! # Ok(()) }
//! ```

use std::{future::Future, sync::Arc};

use axum::Router;
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::{
    Caller,
    listen::{ConnLimits, Served, Wire, accept_loop, serve_connection},
};

/// The rustls server configuration [`serve_tls`] takes.
pub use rustls::ServerConfig as TlsServerConfig;

/// Why the TLS settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file held no certificate or key, or could not be read.
    #[error("{what}: {message}")]
    Pem {
        /// Which input.
        what: &'static str,
        /// What was wrong.
        message: String,
    },
    /// rustls refused the certificate, key or client CA.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A server certificate chain and key, and the CAs whose client
/// certificates identify callers.
#[derive(Clone)]
pub struct TlsSettings {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    client_ca: Vec<CertificateDer<'static>>,
    /// Refuse connections without a client certificate (when a client CA is set).
    pub require_client_cert: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("chain", &self.chain.len())
            .field("key", &"[redacted]")
            .field("client_ca", &self.client_ca.len())
            .field("require_client_cert", &self.require_client_cert)
            .finish()
    }
}

fn certs(what: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what,
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what,
            message: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

impl TlsSettings {
    /// The certificate chain (leaf first) and its private key, both PEM.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Pem {
            what: "TLS key",
            message: e.to_string(),
        })?;
        Ok(Self {
            chain: certs("TLS certificate", cert_chain)?,
            key: Arc::new(key),
            client_ca: Vec::new(),
            require_client_cert: false,
        })
    }

    /// Asks clients for a certificate issued by one of these CAs (PEM).
    pub fn with_client_ca(mut self, ca: &[u8]) -> Result<Self, TlsError> {
        self.client_ca = certs("client CA", ca)?;
        Ok(self)
    }

    /// The rustls configuration, offering HTTP/2 and HTTP/1.1 by ALPN.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = if self.client_ca.is_empty() {
            builder.with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            for ca in &self.client_ca {
                roots
                    .add(ca.clone())
                    .map_err(|e| TlsError::Config(format!("client CA: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if self.require_client_cert {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Config(format!("client CA: {e}")))?,
            )
        };
        let mut config = builder
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The caller a verified client certificate names: `mtls:` and its subject
/// CN, else its first DNS name, email or URI SAN. The prefix is the
/// certificate's own, so a certificate whose CN reads like another kind of
/// caller id (`key:…`, `jwt:…`) does not become that caller.
pub fn caller_from_certificate(der: &[u8]) -> Option<Caller> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .find_map(|cn| cn.as_str().ok().map(str::to_owned));
    let san = || {
        cert.subject_alternative_name()
            .ok()
            .flatten()
            .and_then(|ext| {
                ext.value.general_names.iter().find_map(|n| match n {
                    GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
                        Some((*s).to_owned())
                    }
                    _ => None,
                })
            })
    };
    cn.filter(|s| !s.is_empty())
        .or_else(san)
        .map(|name| Caller::authenticated(format!("mtls:{name}")))
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then lets
/// open connections finish, with [`ConnLimits::default`]. The protocol ALPN
/// settled on picks hyper's HTTP/1.1 or HTTP/2 server (see [`crate::listen`]).
pub async fn serve_tls(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_tls_with(listener, config, app, ConnLimits::default(), shutdown).await
}

/// [`serve_tls`] with connection `limits` of the caller's choosing (over
/// TLS the handshake timeout, then the idle timeout, stand for the
/// first-byte timeout).
pub async fn serve_tls_with(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Turn the routes into services once, not per connection or request.
    serve_tls_service(listener, config, app.with_state(()), limits, shutdown).await
}

/// [`serve_tls_with`] for any [`Served`] service, such as a router wrapped
/// in layers.
pub async fn serve_tls_service<S: Served>(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    app: S,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limits = limits.sane();
    let acceptor = TlsAcceptor::from(config);
    // Shared, not copied into every connection's future.
    let shared = std::sync::Arc::new(limits);
    accept_loop(listener, limits, shutdown, move |tcp, peer, drain| {
        let acceptor = acceptor.clone();
        let app = app.clone();
        let limits = shared.clone();
        async move {
            let tls = match tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(tcp))
                .await
            {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let session = &tls.get_ref().1;
            let caller = session
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| caller_from_certificate(c));
            // HTTP/2 over TLS is negotiated by ALPN (RFC 9113 §3.2), so a
            // client that offered no protocol speaks HTTP/1.1.
            let wire = match session.alpn_protocol() {
                Some(b"h2") => Wire::Http2,
                _ => Wire::Http1,
            };
            serve_connection(tls, wire, app, peer, caller, &limits, drain).await;
        }
    })
    .await
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
