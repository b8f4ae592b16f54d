//! `heddle card`: validate Agent Cards.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::Subcommand;
use heddle_core::{
    card::{CardForm, card_form, parse_card},
    validate::Validate,
};

/// `heddle card …`
#[derive(Subcommand, Debug)]
pub enum CardCommand {
    /// Check a card file against the spec; report every problem with its JSON path.
    Validate {
        /// The card JSON file (`-` for standard input).
        file: PathBuf,
    },
}

/// Runs a card command; exit 0 when valid, 1 when not.
pub async fn run(cmd: CardCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CardCommand::Validate { file } => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).context("reading standard input")?
            } else {
                tokio::fs::read_to_string(&file)
                    .await
                    .with_context(|| format!("reading {}", file.display()))?
            };
            let doc: serde_json::Value =
                serde_json::from_str(&text).context("the card is not JSON")?;
            let form = match card_form(&doc) {
                CardForm::V1 => "v1.0",
                CardForm::V03 => "v0.3",
                CardForm::Dual => "dual v1.0 + v0.3",
            };
            let problems = match parse_card(&doc) {
                Err(e) => e
                    .violations
                    .iter()
                    .map(|v| format!("{}: {}", v.field, v.description))
                    .collect::<Vec<_>>(),
                Ok(card) => match card.validate() {
                    Ok(()) => Vec::new(),
                    Err(e) => e
                        .violations
                        .iter()
                        .map(|v| format!("{}: {}", v.field, v.description))
                        .collect(),
                },
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
