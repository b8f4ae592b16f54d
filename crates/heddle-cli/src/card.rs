//! `heddle card`: fetch, validate, sign and verify Agent Cards.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use heddle_core::{
    card::{CardForm, card_form, parse_card},
    validate::Validate,
};

use crate::remote::Connection;

/// `heddle card …`
#[derive(Subcommand, Debug)]
pub enum CardCommand {
    /// Fetch an agent's card (from its base URL or the card URL) and show it.
    Get {
        /// Agent base URL or card URL.
        url: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Check a card against the spec; report every problem with its JSON path.
    Validate {
        /// A card URL, an agent base URL, a file, or `-` for standard input.
        source: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Sign a card (JWS over its RFC 8785 canonical form); the signed card goes to stdout.
    Sign(crate::card_sign::SignArgs),
    /// Check a card's signatures: verified, unverifiable, absent or invalid
    /// (exit 0 only when verified).
    Verify(crate::card_sign::VerifyArgs),
    /// Print the public JWKS of a PEM signing key (to publish at the `jku`).
    Jwks(crate::card_sign::JwksArgs),
}

/// Runs a card command; `validate` exits 0 when valid, 1 when not.
pub async fn run(cmd: CardCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CardCommand::Get { url, conn } => crate::remote::card_get(&url, &conn).await,
        CardCommand::Sign(args) => crate::card_sign::sign(args).await,
        CardCommand::Verify(args) => crate::card_sign::verify(args).await,
        CardCommand::Jwks(args) => crate::card_sign::jwks(&args),
        CardCommand::Validate { source, conn } => {
            let text = read_source(&source, &conn).await?;
            let doc: serde_json::Value =
                serde_json::from_str(&text).context("the card is not JSON")?;
            let form = match card_form(&doc) {
                CardForm::V1 => "v1.0",
                CardForm::V03 => "v0.3",
                CardForm::Dual => "dual v1.0 + v0.3",
            };
            let problems: Vec<String> = match parse_card(&doc) {
                Err(e) => e
                    .violations
                    .iter()
                    .map(|v| format!("{}: {}", v.field, v.description))
                    .collect(),
                Ok(card) => card.validate().err().map_or_else(Vec::new, |e| {
                    e.violations
                        .iter()
                        .map(|v| format!("{}: {}", v.field, v.description))
                        .collect()
                }),
            };
            if problems.is_empty() {
                println!("valid ({form} card)");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("invalid ({form} card), {} problem(s):", problems.len());
                for p in problems {
                    println!("  {p}");
                }
                Ok(ExitCode::from(1))
            }
        }
    }
}

/// The card JSON from a URL (trying the well-known paths), a file, or stdin.
pub(crate) async fn read_source(source: &str, conn: &Connection) -> anyhow::Result<String> {
    Ok(fetch_source(source, conn).await?.0)
}

/// [`read_source`], with the URL the card was fetched from (`None` for a
/// file or stdin). A served card larger than
/// [`heddle_client::DEFAULT_MAX_BODY_BYTES`] is refused, not read.
pub(crate) async fn fetch_source(
    source: &str,
    conn: &Connection,
) -> anyhow::Result<(String, Option<String>)> {
    if source == "-" {
        let text = std::io::read_to_string(std::io::stdin()).context("reading standard input")?;
        return Ok((text, None));
    }
    if !(source.starts_with("http://") || source.starts_with("https://")) {
        let text = tokio::fs::read_to_string(source)
            .await
            .with_context(|| format!("reading {source}"))?;
        return Ok((text, None));
    }
    let opts = conn.options()?;
    let http = heddle_client::http_client(&opts)?;
    let urls: Vec<String> = if source.ends_with(".json") {
        vec![source.to_owned()]
    } else {
        let base = source.trim_end_matches('/');
        vec![
            format!("{base}/.well-known/agent-card.json"),
            format!("{base}/.well-known/agent.json"),
        ]
    };
    let mut last = String::new();
    for u in urls {
        let mut req = http.get(&u);
        for (k, v) in &opts.headers {
            req = req.header(k, v);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => {
                let body = heddle_client::read_limited(
                    r,
                    heddle_client::DEFAULT_MAX_BODY_BYTES,
                    "agent card",
                )
                .await
                .with_context(|| format!("GET {u}"))?;
                let text = String::from_utf8(body.to_vec())
                    .with_context(|| format!("GET {u}: the card is not UTF-8"))?;
                return Ok((text, Some(u)));
            }
            Ok(r) => last = format!("GET {u}: HTTP {}", r.status().as_u16()),
            Err(e) => last = format!("GET {u}: {}", heddle_client::ClientError::from(e)),
        }
    }
    anyhow::bail!("{last}")
}
