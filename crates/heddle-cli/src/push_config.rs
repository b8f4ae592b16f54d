//! `heddle task push-config …`: the webhooks an agent posts a task's
//! updates to. Human output names each config and its webhook and never
//! shows the credentials; `-o json` prints what the agent answered.

use std::process::ExitCode;

use clap::Subcommand;
use heddle_core::v1;

use crate::remote::{Connection, Output, print_json};

/// `heddle task push-config …`.
#[derive(Subcommand, Debug)]
pub enum PushConfigCommand {
    /// Register a webhook for a task (A2A 0.3: `set`).
    Set {
        /// The agent URL.
        url: String,
        /// The task id.
        task_id: String,
        /// Where the agent posts the task's updates.
        webhook: String,
        /// The config's id (default: the agent picks one; with one, setting
        /// it again replaces it).
        #[arg(long)]
        id: Option<String>,
        /// A token the agent sends with each notification, for the receiver to check.
        #[arg(long)]
        token: Option<String>,
        /// The scheme the agent authenticates to the webhook with (e.g. `Bearer`).
        #[arg(long, requires = "auth_credentials")]
        auth_scheme: Option<String>,
        /// The credentials for `--auth-scheme`.
        #[arg(
            long,
            env = "HEDDLE_PUSH_CREDENTIALS",
            hide_env_values = true,
            requires = "auth_scheme"
        )]
        auth_credentials: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Show one of a task's webhooks.
    Get {
        /// The agent URL.
        url: String,
        /// The task id.
        task_id: String,
        /// The config id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// List a task's webhooks.
    List {
        /// The agent URL.
        url: String,
        /// The task id.
        task_id: String,
        /// Page size (A2A 0.3 agents answer with every config at once).
        #[arg(long)]
        page_size: Option<i32>,
        /// The page to fetch.
        #[arg(long)]
        page_token: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Remove one of a task's webhooks.
    Delete {
        /// The agent URL.
        url: String,
        /// The task id.
        task_id: String,
        /// The config id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// One config for people: the token and credentials are only said to be set.
fn print_config(c: &v1::TaskPushNotificationConfig) {
    let mut extras = Vec::new();
    if !c.token.is_empty() {
        extras.push("token set".to_owned());
    }
    if let Some(a) = &c.authentication {
        extras.push(format!("auth {}", a.scheme));
    }
    let extras = if extras.is_empty() {
        String::new()
    } else {
        format!(" ({})", extras.join(", "))
    };
    println!("{}  task {}  {}{extras}", c.id, c.task_id, c.url);
}

fn show(c: &v1::TaskPushNotificationConfig, output: Output) -> anyhow::Result<ExitCode> {
    if output == Output::Json {
        print_json(c)?;
    } else {
        print_config(c);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a `task push-config` command.
pub async fn run(cmd: PushConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PushConfigCommand::Set {
            url,
            task_id,
            webhook,
            id,
            token,
            auth_scheme,
            auth_credentials,
            conn,
        } => {
            let config = v1::TaskPushNotificationConfig {
                tenant: String::new(),
                id: id.unwrap_or_default(),
                task_id,
                url: webhook,
                token: token.unwrap_or_default(),
                authentication: auth_scheme.map(|scheme| v1::AuthenticationInfo {
                    scheme,
                    credentials: auth_credentials.unwrap_or_default(),
                }),
            };
            let client = conn.client(&url).await?;
            show(&client.create_push_config(config).await?, conn.output)
        }
        PushConfigCommand::Get {
            url,
            task_id,
            id,
            conn,
        } => {
            let client = conn.client(&url).await?;
            show(&client.get_push_config(&task_id, &id).await?, conn.output)
        }
        PushConfigCommand::List {
            url,
            task_id,
            page_size,
            page_token,
            conn,
        } => {
            let req = v1::ListTaskPushNotificationConfigsRequest {
                task_id,
                page_size: page_size.unwrap_or_default(),
                page_token: page_token.unwrap_or_default(),
                ..Default::default()
            };
            let page = conn.client(&url).await?.list_push_configs(req).await?;
            if conn.output == Output::Json {
                print_json(&page)?;
                return Ok(ExitCode::SUCCESS);
            }
            page.configs.iter().for_each(print_config);
            let next = if page.next_page_token.is_empty() {
                String::new()
            } else {
                format!("; next page: --page-token {}", page.next_page_token)
            };
            println!("({} configs{next})", page.configs.len());
            Ok(ExitCode::SUCCESS)
        }
        PushConfigCommand::Delete {
            url,
            task_id,
            id,
            conn,
        } => {
            let client = conn.client(&url).await?;
            client.delete_push_config(&task_id, &id).await?;
            if conn.output == Output::Json {
                print_json(&serde_json::json!({"taskId": task_id, "id": id, "deleted": true}))?;
            } else {
                println!("deleted push config {id} of task {task_id}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
