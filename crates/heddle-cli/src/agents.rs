//! `heddle agents`: a running hub's registry, through its admin API.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// Where the hub is and how to be its admin.
#[derive(Args, Debug)]
pub struct HubArgs {
    /// The hub's base URL.
    #[arg(long, env = "HEDDLE_HUB", default_value = "http://127.0.0.1:8080")]
    hub: String,
    /// The hub's admin token (default: the one `heddle serve` keeps in
    /// --admin-token-file).
    #[arg(long, env = "HEDDLE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Where `heddle serve` keeps the admin token.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
}

/// What to write into a registration.
#[derive(Args, Debug, Default)]
pub struct EntryArgs {
    /// Card name (default: the builtin's or upstream's).
    #[arg(long)]
    name: Option<String>,
    /// Card description.
    #[arg(long)]
    description: Option<String>,
    /// A tag for discovery (repeat for more; replaces the tags on update).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Listed only to its owner and admins.
    #[arg(long, conflicts_with = "public")]
    private: bool,
    /// Listed to everyone (the default for a new agent).
    #[arg(long)]
    public: bool,
    /// Registered but not served.
    #[arg(long, conflicts_with = "enable")]
    disable: bool,
    /// Served (the default for a new agent).
    #[arg(long)]
    enable: bool,
}

/// `heddle agents …`.
#[derive(Subcommand, Debug)]
pub enum AgentsCommand {
    /// Every registration, with the builtins the hub can serve.
    List {
        #[command(flatten)]
        hub: HubArgs,
    },
    /// One registration, as JSON.
    Show {
        /// The agent id.
        id: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Register an agent: a builtin, a remote agent by its card URL, an MCP
    /// server (a command or a URL), or a registration (JSON or TOML) or
    /// a2ahub manifest (JSON) from a file.
    Add {
        /// The agent id (URL-safe; the path segment of its endpoints).
        #[arg(long, required_unless_present = "file")]
        id: Option<String>,
        /// Serve the hub's builtin executor of this name.
        #[arg(long, conflicts_with_all = ["card_url", "file", "mcp_command", "mcp_url"])]
        builtin: Option<String>,
        /// Front the A2A agent whose card is at this URL.
        #[arg(long, conflicts_with_all = ["file", "mcp_command", "mcp_url"])]
        card_url: Option<String>,
        /// Serve the tools of the MCP server this command runs (stdio).
        #[arg(long, value_name = "COMMAND", conflicts_with_all = ["file", "mcp_url"])]
        mcp_command: Option<String>,
        /// An argument of the MCP command (repeat for each).
        #[arg(
            long = "mcp-arg",
            value_name = "ARG",
            requires = "mcp_command",
            allow_hyphen_values = true
        )]
        mcp_args: Vec<String>,
        /// Serve the tools of the MCP server at this streamable HTTP URL.
        #[arg(long, value_name = "URL", conflicts_with = "file")]
        mcp_url: Option<String>,
        /// Accept a plain-http upstream (for a local one).
        #[arg(long)]
        allow_http: bool,
        /// The registration or manifest, as a file.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        #[command(flatten)]
        entry: EntryArgs,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Change a registration: the flags given, or the whole of it from a file.
    Update {
        /// The agent id.
        id: String,
        /// The new registration, as a file (JSON or TOML).
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        #[command(flatten)]
        entry: EntryArgs,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Stop serving an agent and forget its registration (its tasks stay).
    Remove {
        /// The agent id.
        id: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Fetch a remote agent's card again, or list an MCP agent's tools again.
    Refresh {
        /// The agent id.
        id: String,
        #[command(flatten)]
        hub: HubArgs,
    },
}

/// An admin API client.
pub(crate) struct Admin {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Admin {
    pub(crate) fn new(args: &HubArgs) -> anyhow::Result<Self> {
        let token = match &args.admin_token {
            Some(t) => t.clone(),
            None => {
                let file = args
                    .admin_token_file
                    .clone()
                    .unwrap_or_else(crate::hub_config::default_token_file);
                std::fs::read_to_string(&file)
                    .with_context(|| {
                        format!(
                            "reading the admin token from {} (pass --admin-token, or the --admin-token-file `heddle serve` used)",
                            file.display()
                        )
                    })?
                    .trim()
                    .to_owned()
            }
        };
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()?,
            base: format!("{}/api/v1/admin", args.hub.trim_end_matches('/')),
            token,
        })
    }

    /// Sends a request under `/api/v1/admin/agents`.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        self.call_at(method, &format!("/agents{path}"), body).await
    }

    /// Sends a request under `/api/v1/admin`; the JSON answer, or the
    /// hub's problem as an error.
    pub(crate) async fn call_at(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("cannot reach the hub at {}", self.base))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if status.is_success() {
            return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        bail!("{}", problem_text(status.as_u16(), &text))
    }
}

/// A problem document as lines a person reads.
fn problem_text(status: u16, body: &str) -> String {
    let Ok(p) = serde_json::from_str::<Value>(body) else {
        return format!("the hub answered {status}");
    };
    let mut out = format!(
        "{} ({status}): {}",
        p["title"].as_str().unwrap_or("error"),
        p["detail"].as_str().unwrap_or_default()
    );
    for e in p["errors"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n  {}: {}",
            e["pointer"].as_str().unwrap_or_default(),
            e["detail"].as_str().unwrap_or_default()
        ));
    }
    out
}

/// A registration or manifest file: JSON, or TOML (one entry's fields).
fn read_file(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        return Ok(v);
    }
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("{} is neither JSON nor TOML", path.display()))?;
    Ok(serde_json::to_value(table)?)
}

impl EntryArgs {
    fn apply(&self, entry: &mut Value) {
        if let Some(n) = &self.name {
            entry["name"] = json!(n);
        }
        if let Some(d) = &self.description {
            entry["description"] = json!(d);
        }
        if !self.tags.is_empty() {
            entry["tags"] = json!(self.tags);
        }
        if self.private || self.public {
            entry["public"] = json!(self.public);
        }
        if self.disable || self.enable {
            entry["enabled"] = json!(self.enable);
        }
    }
}

/// Runs a `heddle agents` command.
pub async fn run(cmd: AgentsCommand) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    match cmd {
        AgentsCommand::List { hub } => {
            let all = Admin::new(&hub)?.call(Method::GET, "", None).await?;
            println!(
                "{:<20} {:<8} {:<8} {:<7} CARD",
                "ID", "KIND", "SERVED", "LISTED"
            );
            for a in all["agents"].as_array().into_iter().flatten() {
                println!(
                    "{:<20} {:<8} {:<8} {:<7} {}",
                    a["id"].as_str().unwrap_or_default(),
                    a["kind"].as_str().unwrap_or_default(),
                    if a["enabled"].as_bool().unwrap_or(true) {
                        "yes"
                    } else {
                        "no"
                    },
                    if a["public"].as_bool().unwrap_or(true) {
                        "public"
                    } else {
                        "private"
                    },
                    a["cardUrl"].as_str().unwrap_or_default()
                );
            }
            let builtins: Vec<&str> = all["builtins"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            println!("builtins: {}", builtins.join(", "));
        }
        AgentsCommand::Show { id, hub } => {
            let a = Admin::new(&hub)?
                .call(Method::GET, &format!("/{id}"), None)
                .await?;
            println!("{}", serde_json::to_string_pretty(&a)?);
        }
        AgentsCommand::Add {
            id,
            builtin,
            card_url,
            mcp_command,
            mcp_args,
            mcp_url,
            allow_http,
            file,
            entry,
            hub,
        } => {
            let mut body = match (&file, &card_url, &mcp_command, &mcp_url) {
                (Some(f), ..) => read_file(f)?,
                (None, Some(url), ..) => json!({ "kind": "remote", "card_url": url }),
                (None, None, Some(command), _) => {
                    json!({ "kind": "mcp", "mcp": { "command": command, "args": mcp_args } })
                }
                (None, None, None, Some(url)) => json!({ "kind": "mcp", "mcp": { "url": url } }),
                (None, None, None, None) => {
                    json!({ "kind": "builtin", "builtin": builtin.or(id.clone()) })
                }
            };
            if let Some(id) = id {
                body["id"] = json!(id);
            }
            if allow_http {
                body["allow_http"] = json!(true);
            }
            entry.apply(&mut body);
            let a = Admin::new(&hub)?
                .call(Method::POST, "", Some(&body))
                .await?;
            println!(
                "registered {} ({}): card at {}",
                a["id"].as_str().unwrap_or_default(),
                a["kind"].as_str().unwrap_or_default(),
                a["cardUrl"].as_str().unwrap_or_default()
            );
            for w in a["warnings"].as_array().into_iter().flatten() {
                println!("warning: {}", w.as_str().unwrap_or_default());
            }
        }
        AgentsCommand::Update {
            id,
            file,
            entry,
            hub,
        } => {
            let admin = Admin::new(&hub)?;
            let mut body = match &file {
                Some(f) => read_file(f)?,
                None => admin.call(Method::GET, &format!("/{id}"), None).await?,
            };
            if let Some(o) = body.as_object_mut() {
                // What the hub adds when it shows an entry is not part of one.
                o.remove("cardUrl");
                o.insert("id".into(), json!(id));
            }
            entry.apply(&mut body);
            let a = admin
                .call(Method::PUT, &format!("/{id}"), Some(&body))
                .await?;
            println!(
                "updated {}: {}",
                id,
                if a["enabled"].as_bool().unwrap_or(true) {
                    "served"
                } else {
                    "registered, not served"
                }
            );
        }
        AgentsCommand::Remove { id, hub } => {
            Admin::new(&hub)?
                .call(Method::DELETE, &format!("/{id}"), None)
                .await?;
            println!("removed {id}");
        }
        AgentsCommand::Refresh { id, hub } => {
            let a = Admin::new(&hub)?
                .call(Method::POST, &format!("/{id}/refresh"), None)
                .await?;
            println!("refreshed {}", a["id"].as_str().unwrap_or_default());
        }
    }
    Ok(ExitCode::SUCCESS)
}
