//! `heddle`: serve A2A agents, talk to any A2A agent, and work with Agent Cards.

mod agents;
mod card;
mod card_sign;
mod db;
mod hub_config;
mod itk;
mod keys;
mod new;
mod push_config;
mod push_dead;
mod registry;
mod remote;
mod serve;
mod serve_auth;
mod serve_limits;
mod serve_tls;
mod task_tree;
mod telemetry;
mod trust;
mod wallet;
mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: a request allocates many small strings; glibc malloc spent a
/// sixth of the server's time in a profile, mimalloc much less. `heddle_alloc`
/// calls it through its fast path (see that crate for why).
#[global_allocator]
static GLOBAL: heddle_alloc::MiMalloc = heddle_alloc::MiMalloc;

/// Heddle: an A2A (Agent2Agent) server, hub and toolkit.
#[derive(Parser, Debug)]
#[command(name = "heddle", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the hub: the agents of its config (default: the demo agents
    /// echo, writer, writer-stream, conformance) and those registered while it runs.
    Serve(Box<serve::ServeArgs>),
    /// Register, list, change and remove a running hub's agents (its admin API).
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Callers' wallets and agents' earnings on a running hub (its admin
    /// API): top up, balance, history, subscribe, earnings.
    #[command(subcommand)]
    Wallet(wallet::WalletCommand),
    /// Push deliveries on a running hub (its admin API): the dead letters,
    /// listed and replayed.
    #[command(subcommand)]
    Push(push_dead::PushCommand),
    /// Work with Agent Cards.
    #[command(subcommand)]
    Card(card::CardCommand),
    /// Send a message to an agent.
    Send(remote::SendArgs),
    /// Work with an agent's tasks.
    #[command(subcommand)]
    Task(remote::TaskCommand),
    /// Chat with an agent, answering its questions on the same task.
    Chat(remote::ChatArgs),
    /// Manage the API keys `heddle serve --require-auth` accepts.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Receive push notifications (a webhook that prints what arrives).
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// Lay out something new: `heddle new agent` writes an agent's card,
    /// skills schema, endpoint blueprint, and a crate or hub entry.
    #[command(subcommand)]
    New(new::NewCommand),
    /// Check what the hub's registry takes, offline (agent manifests).
    #[command(subcommand)]
    Registry(registry::RegistryCommand),
    /// The store's schema: `heddle db migrate --store postgres://…`.
    #[command(subcommand)]
    Db(db::DbCommand),
    /// Serve an agent for the A2A interop kit (ITK): it follows the
    /// instruction in each message, calling the next agent as told.
    #[command(name = "itk-agent")]
    ItkAgent(itk::ItkArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // On one core a work-stealing scheduler only adds cross-thread overhead.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut builder = if cores > 1 {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await.map(|()| ExitCode::SUCCESS),
            Command::Card(cmd) => card::run(cmd).await,
            Command::Send(args) => remote::send(args).await,
            Command::Task(cmd) => remote::task(cmd).await,
            Command::Chat(args) => remote::chat(args).await,
            Command::Keys(cmd) => keys::run(cmd).await,
            Command::Agents(cmd) => agents::run(cmd).await,
            Command::Wallet(cmd) => wallet::run(cmd).await,
            Command::Push(cmd) => push_dead::run(cmd).await,
            Command::Webhook(cmd) => webhook::run(cmd).await,
            Command::Registry(cmd) => registry::run(cmd),
            Command::New(cmd) => new::run(cmd).await,
            Command::Db(cmd) => db::run(cmd).await,
            Command::ItkAgent(args) => itk::run(args).await.map(|()| ExitCode::SUCCESS),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(heddle_client::ClientError::Http {
                status: 401 | 403, ..
            }) = e.downcast_ref()
            {
                eprintln!(
                    "hint: the agent wants credentials: pass --api-key KEY (from `heddle keys create` \
                     on a Heddle server) or --bearer TOKEN"
                );
            }
            ExitCode::from(2)
        }
    }
}
