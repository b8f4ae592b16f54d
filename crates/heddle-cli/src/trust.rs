//! Global flags for what a client trusts: CAs and a client certificate for
//! TLS, and the keys discovered cards must be signed with.

use anyhow::Context;
use clap::Args;
use heddle_client::{CardVerification, ClientIdentity, ClientOptions, TlsOptions};

/// TLS and card-signature trust, on every command that talks to an agent.
#[derive(Args, Debug, Clone, Default)]
pub struct TrustArgs {
    /// Trust this CA certificate (PEM) besides the built-in web roots (repeatable).
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_cert: Vec<String>,
    /// Client certificate (PEM) to present for mutual TLS; needs --client-key.
    #[arg(long, global = true, value_name = "FILE")]
    pub client_cert: Option<String>,
    /// Private key (PEM) of --client-cert.
    #[arg(long, global = true, value_name = "FILE")]
    pub client_key: Option<String>,
    /// Require a verified card signature, with keys from this JWK/JWKS file or
    /// URL (repeatable); a card that does not verify is refused.
    #[arg(long, global = true, value_name = "FILE|URL")]
    pub verify_card_jwks: Vec<String>,
    /// Require a verified card signature, and fetch the signer's JWKS from the
    /// signature's `jku` when it starts with this URL prefix (repeatable).
    #[arg(long, global = true, value_name = "URL_PREFIX")]
    pub trust_jku: Vec<String>,
}

fn is_url(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("http://")
}

fn read(path: &str, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {what} {path}"))
}

impl TrustArgs {
    /// The TLS settings.
    pub fn tls(&self) -> anyhow::Result<TlsOptions> {
        let mut tls = TlsOptions::default();
        for f in &self.ca_cert {
            tls.ca_certs.push(read(f, "--ca-cert")?);
        }
        tls.client_identity = match (&self.client_cert, &self.client_key) {
            (Some(c), Some(k)) => Some(ClientIdentity::from_pem(
                read(c, "--client-cert")?,
                read(k, "--client-key")?,
            )),
            (None, None) => None,
            _ => anyhow::bail!("--client-cert and --client-key go together"),
        };
        Ok(tls)
    }

    /// The card verification the flags ask for (none without key flags).
    pub fn card_verification(&self) -> anyhow::Result<Option<CardVerification>> {
        if self.verify_card_jwks.is_empty() && self.trust_jku.is_empty() {
            return Ok(None);
        }
        let mut v = CardVerification {
            trusted_jku: self.trust_jku.clone(),
            ..CardVerification::default()
        };
        for src in &self.verify_card_jwks {
            if is_url(src) {
                v.jwks_urls.push(src.clone());
            } else {
                let text = std::fs::read_to_string(src)
                    .with_context(|| format!("reading --verify-card-jwks {src}"))?;
                v = v
                    .with_jwks_text(&text)
                    .with_context(|| format!("--verify-card-jwks {src}"))?;
            }
        }
        Ok(Some(v))
    }

    /// Sets the TLS and verification options of `opts`.
    pub fn apply(&self, opts: &mut ClientOptions) -> anyhow::Result<()> {
        opts.tls = self.tls()?;
        opts.card_verification = self.card_verification()?;
        Ok(())
    }
}
