//! `heddle push dead-letters`: the push deliveries a running hub gave up
//! on, listed and replayed through its admin API.

use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use crate::agents::{Admin, HubArgs};

/// `heddle push …`.
#[derive(Subcommand, Debug)]
pub enum PushCommand {
    /// The deliveries that gave up (dead letters).
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(DeadLetters),
}

/// `heddle push dead-letters …`.
#[derive(Subcommand, Debug)]
pub enum DeadLetters {
    /// List them, oldest first: sequence number, agent, task, receiver
    /// (without its query), attempts and the last error.
    List {
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// One JSON document instead of lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Put them back in the outbox, due at once (fix the receiver first).
    Replay {
        /// The sequence numbers `list` shows.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        seqs: Vec<i64>,
        /// Every dead letter (up to 1000 at a time).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        hub: HubArgs,
    },
}

/// Runs a `heddle push` command.
pub async fn run(cmd: PushCommand) -> anyhow::Result<ExitCode> {
    let PushCommand::DeadLetters(cmd) = cmd;
    match cmd {
        DeadLetters::List { limit, json, hub } => {
            let r = Admin::new(&hub)?
                .call_at(
                    Method::GET,
                    &format!("/push/dead-letters?limit={limit}"),
                    None,
                )
                .await?;
            if json {
                println!("{r}");
                return Ok(ExitCode::SUCCESS);
            }
            let dead = r["deadLetters"].as_array().cloned().unwrap_or_default();
            if dead.is_empty() {
                println!("no dead letters");
            }
            for d in dead {
                println!(
                    "{}  {}/{}  {}  {} attempts: {}",
                    d["seq"],
                    d["agentId"].as_str().unwrap_or_default(),
                    d["taskId"].as_str().unwrap_or_default(),
                    d["receiver"].as_str().unwrap_or_default(),
                    d["attempts"],
                    d["lastError"].as_str().unwrap_or_default()
                );
            }
        }
        DeadLetters::Replay { seqs, all, hub } => {
            let body = if all {
                json!({ "all": true })
            } else {
                json!({ "seqs": seqs })
            };
            let r = Admin::new(&hub)?
                .call_at(Method::POST, "/push/dead-letters/replay", Some(&body))
                .await?;
            println!("replayed {}", r["replayed"]);
        }
    }
    Ok(ExitCode::SUCCESS)
}
