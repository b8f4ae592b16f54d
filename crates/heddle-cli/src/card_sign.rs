//! `heddle card sign | verify | jwks`: signed Agent Cards (v1 §8.4).

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use heddle_client::{
    CardVerification,
    heddle_signing::{SigningKey, Verdict, sign_served_card},
};

use crate::remote::{Connection, Output};

/// Options of `heddle card sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// The signing key: a JWK file (`oct`, HS256) or a PEM private key (PKCS#8
    /// EC P-256 → ES256, Ed25519 → EdDSA, RSA → RS256).
    #[arg(long, value_name = "FILE")]
    pub key: String,
    /// Algorithm, when not the key's default (HS384, HS512, ES384, RS384, RS512, PS256…).
    #[arg(long)]
    pub alg: Option<String>,
    /// Key id for the protected header (default: the JWK's `kid`, else its RFC 7638 thumbprint).
    #[arg(long)]
    pub kid: Option<String>,
    /// URL of the JWKS that holds the public key, written into the protected header.
    #[arg(long)]
    pub jku: Option<String>,
    /// The card: a file, `-` for standard input, or a URL.
    pub card: String,
    #[command(flatten)]
    pub conn: Connection,
}

/// Options of `heddle card verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The card: an agent base URL, a card URL, a file, or `-`.
    pub source: String,
    /// Trusted keys: a JWK or JWKS file or URL (repeatable). `--trust-jku`
    /// also lets the signature's own `jku` be fetched.
    #[arg(long, value_name = "FILE|URL")]
    pub jwks: Vec<String>,
    #[command(flatten)]
    pub conn: Connection,
}

/// Options of `heddle card jwks`.
#[derive(Args, Debug)]
pub struct JwksArgs {
    /// The PEM private key whose public half to print.
    #[arg(long, value_name = "FILE")]
    pub key: String,
    /// Key id (default: the RFC 7638 thumbprint).
    #[arg(long)]
    pub kid: Option<String>,
}

fn load_key(path: &str, alg: Option<&str>, kid: Option<&str>) -> anyhow::Result<SigningKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the key {path}"))?;
    SigningKey::from_file_text(&text, alg, kid).with_context(|| format!("the key {path}"))
}

/// Prints the card with one more signature (two for a dual v1.0 + v0.3 card:
/// over the JSON, and over its v1.0 view).
pub async fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = load_key(&args.key, args.alg.as_deref(), args.kid.as_deref())?;
    let text = crate::card::read_source(&args.card, &args.conn).await?;
    let mut card: serde_json::Value =
        serde_json::from_str(&text).context("the card is not JSON")?;
    sign_served_card(&mut card, &key, args.jku.as_deref())?;
    println!("{}", serde_json::to_string_pretty(&card)?);
    eprintln!("signed with {} (kid {})", key.alg(), key.kid());
    Ok(ExitCode::SUCCESS)
}

/// Reports verified, unverifiable, absent or invalid; exit 0 only when verified.
pub async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let opts = args.conn.options()?;
    let http = heddle_client::http_client(&opts)?;
    let mut v = opts.card_verification.clone().unwrap_or_default();
    for src in &args.jwks {
        if src.starts_with("https://") || src.starts_with("http://") {
            v.jwks_urls.push(src.clone());
        } else {
            let text =
                std::fs::read_to_string(src).with_context(|| format!("reading --jwks {src}"))?;
            v = v
                .with_jwks_text(&text)
                .with_context(|| format!("--jwks {src}"))?;
        }
    }
    let text = crate::card::read_source(&args.source, &args.conn).await?;
    let card: serde_json::Value = serde_json::from_str(&text).context("the card is not JSON")?;
    let verdict = CardVerification::verify(&v, &http, &card).await?;
    if args.conn.output == Output::Json {
        println!(
            "{}",
            serde_json::json!({"verdict": verdict.name(), "detail": verdict.to_string()})
        );
    } else {
        println!("{verdict}");
    }
    Ok(match verdict {
        Verdict::Verified { .. } => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// Prints the public JWKS of a PEM key, to publish at the signature's `jku`.
pub fn jwks(args: &JwksArgs) -> anyhow::Result<ExitCode> {
    let key = load_key(&args.key, None, args.kid.as_deref())?;
    let jwk = key
        .public_jwk()
        .context("an HMAC key has no public half: share the JWK itself with verifiers")?;
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({"keys": [jwk]}))?
    );
    Ok(ExitCode::SUCCESS)
}
