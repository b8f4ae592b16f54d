//! `heddle serve` security options: signed cards and TLS (optionally mTLS).

use std::{future::Future, sync::Arc};

use anyhow::Context;
use clap::Args;
use heddle_client::heddle_signing::{CardSigner, SigningKey};
use heddle_server::{
    listen::{ConnLimits, Served},
    tls::{TlsServerConfig, TlsSettings, serve_tls_service},
};

/// Where the hub publishes the public key of an asymmetric signing key.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Card signing and TLS options of `heddle serve`.
#[derive(Args, Debug, Default)]
pub struct ServeSecurityArgs {
    /// Sign every agent card at start with this key: a JWK file (`oct`, HS256)
    /// or a PEM private key (PKCS#8 EC P-256 → ES256, Ed25519 → EdDSA, RSA → RS256).
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<String>,
    /// Key id in the signatures (default: the JWK's `kid`, else its RFC 7638 thumbprint).
    #[arg(long, requires = "sign_key")]
    pub sign_kid: Option<String>,
    /// JWKS URL in the signatures (default for a PEM key: PUBLIC_URL/.well-known/jwks.json,
    /// which this server then serves).
    #[arg(long, requires = "sign_key")]
    pub sign_jku: Option<String>,
    /// Serve HTTP and gRPC over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<String>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<String>,
    /// Ask clients for a certificate issued by this CA (PEM): a verified
    /// client certificate's subject CN (or first SAN) becomes the caller.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<String>,
    /// With --tls-client-ca: refuse clients without a certificate.
    #[arg(long, requires = "tls_client_ca")]
    pub tls_require_client_cert: bool,
}

fn read(path: &str, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {what} {path}"))
}

impl ServeSecurityArgs {
    /// The rustls configuration, when TLS is on.
    pub fn tls(&self) -> anyhow::Result<Option<Arc<TlsServerConfig>>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let mut settings =
            TlsSettings::from_pem(&read(cert, "--tls-cert")?, &read(key, "--tls-key")?)?;
        if let Some(ca) = &self.tls_client_ca {
            settings = settings.with_client_ca(&read(ca, "--tls-client-ca")?)?;
            settings.require_client_cert = self.tls_require_client_cert;
        }
        Ok(Some(settings.server_config()?))
    }

    /// The card signer, when a key is given.
    pub fn signer(&self, public_url: &str) -> anyhow::Result<Option<Arc<CardSigner>>> {
        let Some(path) = &self.sign_key else {
            return Ok(None);
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading --sign-key {path}"))?;
        let key = SigningKey::from_file_text(&text, None, self.sign_kid.as_deref())
            .with_context(|| format!("--sign-key {path}"))?;
        let jku = self.sign_jku.clone().or_else(|| {
            key.public_jwk()
                .map(|_| format!("{}{JWKS_PATH}", public_url.trim_end_matches('/')))
        });
        Ok(Some(Arc::new(CardSigner::new(key, jku))))
    }
}

/// Serves `app` on `listener`, over TLS when `tls` is set, held to the
/// connection `limits`.
pub async fn serve<S: Served>(
    listener: tokio::net::TcpListener,
    app: S,
    tls: Option<Arc<TlsServerConfig>>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(config) => serve_tls_service(listener, config, app, limits, shutdown).await,
        // HTTP/1 and HTTP/2 told apart by a peek; TCP_NODELAY on every socket.
        None => heddle_server::listen::serve_service(listener, app, limits, shutdown).await,
    }
}
