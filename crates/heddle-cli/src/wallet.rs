//! `heddle wallet`: callers' wallets and agents' earnings on a running hub,
//! through its admin API.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use crate::agents::{Admin, HubArgs};

/// `heddle wallet …`.
#[derive(Subcommand, Debug)]
pub enum WalletCommand {
    /// Add money to a caller's wallet.
    Topup {
        /// The caller id (`key:…`, `jwt:…#…`, or `anonymous` on an open hub).
        owner: String,
        /// The amount, as a decimal (`5`, `0.25`).
        amount: String,
        /// ISO 4217 code.
        #[arg(long, default_value = "USD")]
        currency: String,
        /// A note kept with the entry (a payment reference).
        #[arg(long, default_value = "")]
        memo: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// A caller's balances, and what its running tasks hold.
    Balance {
        /// The caller id.
        owner: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// A caller's ledger entries, newest first.
    History {
        /// The caller id.
        owner: String,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Entries before this sequence number (the previous page's last).
        #[arg(long)]
        before: Option<i64>,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Pay for 30 days of a subscription-priced agent.
    Subscribe {
        /// The caller id.
        owner: String,
        /// The agent.
        #[arg(long)]
        agent: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// What an agent has earned.
    Earnings {
        /// The agent id.
        agent: String,
        #[command(flatten)]
        hub: HubArgs,
    },
}

/// A caller id as one path segment.
fn segment(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

fn amounts(list: &Value) -> String {
    let shown: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            format!(
                "{} {}",
                a["amount"],
                a["currency"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if shown.is_empty() {
        "nothing".to_owned()
    } else {
        shown.join(", ")
    }
}

/// Runs a `heddle wallet` command.
pub async fn run(cmd: WalletCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        WalletCommand::Topup {
            owner,
            amount,
            currency,
            memo,
            hub,
        } => {
            let number: Value = serde_json::from_str(&amount)
                .ok()
                .filter(Value::is_number)
                .with_context(|| format!("{amount:?} is not a decimal amount"))?;
            let body = json!({ "amount": number, "currency": currency, "memo": memo });
            let r = Admin::new(&hub)?
                .call_at(
                    Method::POST,
                    &format!("/wallets/{}/topup", segment(&owner)),
                    Some(&body),
                )
                .await?;
            println!("{owner}: balance {}", amounts(&json!([r["balance"]])));
        }
        WalletCommand::Balance { owner, hub } => {
            let r = Admin::new(&hub)?
                .call_at(Method::GET, &format!("/wallets/{}", segment(&owner)), None)
                .await?;
            println!(
                "{owner}: {} (held: {})",
                amounts(&r["balances"]),
                amounts(&r["held"])
            );
        }
        WalletCommand::History {
            owner,
            limit,
            before,
            hub,
        } => {
            let mut path = format!("/wallets/{}/history?limit={limit}", segment(&owner));
            if let Some(b) = before {
                path.push_str(&format!("&before={b}"));
            }
            let r = Admin::new(&hub)?.call_at(Method::GET, &path, None).await?;
            println!(
                "{:>8} {:<10} {:>12} {:<4} RESERVATION / MEMO",
                "SEQ", "KIND", "AMOUNT", "CUR"
            );
            for e in r["entries"].as_array().into_iter().flatten() {
                println!(
                    "{:>8} {:<10} {:>12} {:<4} {}",
                    e["seq"],
                    e["kind"].as_str().unwrap_or_default(),
                    e["amount"].to_string(),
                    e["currency"].as_str().unwrap_or_default(),
                    e["reservation"]
                        .as_str()
                        .or(e["memo"].as_str())
                        .unwrap_or_default()
                );
            }
            if let Some(next) = r["nextBefore"].as_i64() {
                println!("more: --before {next}");
            }
        }
        WalletCommand::Subscribe { owner, agent, hub } => {
            let r = Admin::new(&hub)?
                .call_at(
                    Method::POST,
                    &format!("/wallets/{}/subscriptions", segment(&owner)),
                    Some(&json!({ "agent": agent })),
                )
                .await?;
            let Some(until) = r["until"].as_i64() else {
                bail!("the hub's answer has no end date: {r}");
            };
            println!(
                "{owner} subscribes to {agent} until {} (paid {})",
                heddle_core::wkt::Timestamp::from_millis(until),
                amounts(&json!([r["paid"]]))
            );
        }
        WalletCommand::Earnings { agent, hub } => {
            let r = Admin::new(&hub)?
                .call_at(
                    Method::GET,
                    &format!("/agents/{}/earnings", segment(&agent)),
                    None,
                )
                .await?;
            println!("{agent}: earned {}", amounts(&r["earnings"]));
        }
    }
    Ok(ExitCode::SUCCESS)
}
