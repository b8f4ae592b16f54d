//! The commands that talk to an agent: `send`, `chat`, `task …` (push
//! configs in [`crate::push_config`]), `card get`.
//! Human output by default, with live progress; `-o json` prints one JSON
//! object (or JSON Lines for streams). Exit codes: 0 success, 1 the task
//! failed / was canceled / rejected, 2 usage or transport error.

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use futures::StreamExt;
use heddle_client::{
    A2aClient, Binding, ClientOptions, Credentials, EventStream, Secret, SendReply, TaskAccumulator,
};
use heddle_core::{
    ProtocolVersion,
    v1::{self, stream_response::Payload},
};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people: progress, states, artifact text.
    Human,
    /// One JSON object (JSON Lines for streams).
    Json,
}

/// Options shared by every command that talks to an agent.
#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// Extra request header, `Name: value` (repeatable).
    #[arg(long = "header", global = true, value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Bearer token (`Authorization: Bearer …`).
    #[arg(long, global = true, env = "HEDDLE_BEARER", hide_env_values = true)]
    pub bearer: Option<String>,
    /// API key, sent where the agent's card says (header `api-key` by default).
    #[arg(long, global = true, env = "HEDDLE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// OAuth 2.0 client-credentials: the client id (the token is fetched, cached and refreshed).
    #[arg(long, global = true, env = "HEDDLE_OAUTH_CLIENT_ID")]
    pub oauth_client_id: Option<String>,
    /// OAuth 2.0 client-credentials: the client secret.
    #[arg(
        long,
        global = true,
        env = "HEDDLE_OAUTH_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub oauth_client_secret: Option<String>,
    /// OAuth 2.0 token endpoint (default: the card's clientCredentials `tokenUrl`).
    #[arg(long, global = true)]
    pub oauth_token_url: Option<String>,
    /// OAuth 2.0 scope to request (repeatable).
    #[arg(long, global = true)]
    pub oauth_scope: Vec<String>,
    /// Force a protocol version (`1.0` or `0.3`) instead of negotiating.
    #[arg(long, global = true)]
    pub a2a_version: Option<String>,
    /// Preferred binding: `jsonrpc`, `rest` or `grpc` (repeatable, in order;
    /// without it JSON-RPC then REST, gRPC only when named).
    #[arg(long, global = true)]
    pub binding: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "human")]
    pub output: Output,
    /// Print the raw wire (secrets redacted) to standard error.
    #[arg(long, global = true)]
    pub debug: bool,
    #[command(flatten)]
    pub trust: crate::trust::TrustArgs,
}

impl Connection {
    pub fn options(&self) -> anyhow::Result<ClientOptions> {
        let mut headers = Vec::new();
        for h in &self.headers {
            let (k, v) = h
                .split_once(':')
                .with_context(|| format!("--header {h:?}: expected `Name: value`"))?;
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        let version = match self.a2a_version.as_deref() {
            None => None,
            Some(v) => Some(
                ProtocolVersion::parse(v)
                    .with_context(|| format!("--a2a-version {v:?}: use 1.0 or 0.3"))?,
            ),
        };
        let mut bindings = Vec::new();
        for b in &self.binding {
            bindings.push(
                Binding::parse(b)
                    .with_context(|| format!("--binding {b:?}: use jsonrpc, rest or grpc"))?,
            );
        }
        if bindings.is_empty() {
            bindings = vec![Binding::JsonRpc, Binding::Rest];
        }
        let wire_log: Option<heddle_client::WireLog> = self
            .debug
            .then(|| Arc::new(|line: &str| eprintln!("{line}")) as heddle_client::WireLog);
        let mut opts = ClientOptions {
            bindings,
            version,
            credentials: Credentials {
                bearer: self.bearer.clone().map(Secret::new),
                api_key: self.api_key.clone().map(Secret::new),
                oauth2: match (&self.oauth_client_id, &self.oauth_client_secret) {
                    (Some(id), Some(secret)) => Some(heddle_client::ClientCredentials {
                        token_url: self.oauth_token_url.clone().unwrap_or_default(),
                        client_id: id.clone(),
                        client_secret: Secret::new(secret.clone()),
                        scopes: self.oauth_scope.clone(),
                    }),
                    (None, None) => None,
                    _ => anyhow::bail!("--oauth-client-id and --oauth-client-secret go together"),
                },
            },
            headers,
            wire_log,
            ..ClientOptions::default()
        };
        self.trust.apply(&mut opts)?;
        Ok(opts)
    }

    pub async fn client(&self, url: &str) -> anyhow::Result<A2aClient> {
        Ok(A2aClient::discover(url, self.options()?).await?)
    }
}

/// `heddle send` options.
#[derive(Args, Debug)]
pub struct SendArgs {
    /// The agent: its base URL or its card URL.
    pub url: String,
    /// The message text.
    pub text: String,
    /// Attach a file (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Attach structured data (a JSON value).
    #[arg(long)]
    pub data: Option<String>,
    /// Continue this task (it must be waiting for input).
    #[arg(long)]
    pub task_id: Option<String>,
    /// The conversation to send in.
    #[arg(long)]
    pub context_id: Option<String>,
    /// Stream the task's events as they happen (polled, for an agent whose
    /// card says it does not stream).
    #[arg(long)]
    pub stream: bool,
    /// If the agent answers before the task is done, follow it (streaming,
    /// or polling an agent that does not stream) until it ends or needs
    /// input, and print the task then.
    #[arg(long, conflicts_with = "stream")]
    pub wait: bool,
    /// Ask the agent to answer at once with the task as it stands, without
    /// waiting for it to finish (with `--wait`, then follow it here).
    #[arg(long, conflicts_with = "stream")]
    pub return_immediately: bool,
    /// The message id (default: a fresh UUID).
    #[arg(long)]
    pub message_id: Option<String>,
    #[command(flatten)]
    pub conn: Connection,
}

fn media_type(path: &std::path::Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("pdf") => "application/pdf",
        Some("txt" | "md") => "text/plain",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("html") => "text/html",
        _ => "application/octet-stream",
    }
}

async fn message(
    text: &str,
    files: &[PathBuf],
    data: Option<&str>,
    task_id: Option<&str>,
    context_id: Option<&str>,
) -> anyhow::Result<v1::Message> {
    let mut parts = vec![v1::Part::text(text)];
    for f in files {
        let bytes = tokio::fs::read(f)
            .await
            .with_context(|| format!("reading {}", f.display()))?;
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("file")
            .to_owned();
        parts.push(v1::Part::raw(bytes, media_type(f), name));
    }
    if let Some(d) = data {
        let v: serde_json::Value = serde_json::from_str(d).context("--data is not JSON")?;
        let mut p = v1::Part::data(v);
        p.media_type = "application/json".into();
        parts.push(p);
    }
    let mut m = A2aClient::user_message(parts);
    m.task_id = task_id.unwrap_or_default().to_owned();
    m.context_id = context_id.unwrap_or_default().to_owned();
    Ok(m)
}

fn state_of(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

/// 1 for a task that failed, was canceled or rejected; else 0.
fn exit_for(state: Option<v1::TaskState>) -> ExitCode {
    match state {
        Some(v1::TaskState::Failed | v1::TaskState::Canceled | v1::TaskState::Rejected) => {
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

fn short_state(s: v1::TaskState) -> &'static str {
    s.as_str_name().trim_start_matches("TASK_STATE_")
}

/// Prints a task for people.
fn print_task(t: &v1::Task) {
    let s = state_of(t);
    println!("task {} ({})", t.id, short_state(s));
    if let Some(m) = t.status.as_ref().and_then(|s| s.message.as_ref()) {
        let text = m.text();
        if !text.is_empty() {
            println!("agent: {text}");
        }
    }
    print_artifacts(t);
    if s == v1::TaskState::InputRequired {
        println!("(the agent needs input: reply with --task-id {})", t.id);
    }
}

/// Prints a task's artifacts for people.
fn print_artifacts(t: &v1::Task) {
    for a in &t.artifacts {
        let name = if a.name.is_empty() {
            a.artifact_id.as_str()
        } else {
            a.name.as_str()
        };
        println!("--- artifact {name}");
        for p in &a.parts {
            match &p.content {
                Some(v1::part::Content::Text(t)) => println!("{t}"),
                Some(v1::part::Content::Data(d)) => println!("{}", d.0),
                Some(v1::part::Content::Url(u)) => println!("<file {u}>"),
                Some(v1::part::Content::Raw(b)) => {
                    println!("<file {} ({} bytes)>", p.filename, b.len())
                }
                None => {}
            }
        }
    }
}

pub(crate) fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(v)?);
    Ok(())
}

/// A spinner on standard error while waiting, when it is a terminal.
struct Spinner(Option<tokio::task::JoinHandle<()>>);

impl Spinner {
    fn start(label: &str, enabled: bool) -> Self {
        if !enabled || !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let label = label.to_owned();
        Self(Some(tokio::spawn(async move {
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            for i in 0.. {
                eprint!("\r{} {label}", frames[i % frames.len()]);
                let _ = std::io::stderr().flush();
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
            eprint!("\r\x1b[2K");
        }
    }
}

/// `heddle send`.
pub async fn send(args: SendArgs) -> anyhow::Result<ExitCode> {
    let client = args.conn.client(&args.url).await?;
    let mut msg = message(
        &args.text,
        &args.files,
        args.data.as_deref(),
        args.task_id.as_deref(),
        args.context_id.as_deref(),
    )
    .await?;
    if let Some(id) = args.message_id {
        msg.message_id = id;
    }
    let req = v1::SendMessageRequest {
        message: Some(msg),
        configuration: args
            .return_immediately
            .then(|| v1::SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            }),
        ..Default::default()
    };
    if args.stream {
        let events = client.send_streaming(req).await?;
        return follow(events, args.conn.output).await;
    }
    let spinner = Spinner::start("waiting for the agent", args.conn.output == Output::Human);
    let mut reply = client.send(req).await?;
    if args.wait
        && let SendReply::Task(t) = reply
    {
        reply = SendReply::Task(client.wait(t).await?);
    }
    drop(spinner);
    match reply {
        SendReply::Task(t) => {
            if args.conn.output == Output::Json {
                print_json(&t)?;
            } else {
                print_task(&t);
            }
            Ok(exit_for(Some(state_of(&t))))
        }
        SendReply::Message(m) => {
            if args.conn.output == Output::Json {
                print_json(&m)?;
            } else {
                println!("agent: {}", m.text());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints a stream as it arrives: states and artifact text for people, JSON
/// Lines otherwise. A stream cut before the task ends is a transport error.
/// Artifacts that arrived only in task snapshots (a resubscribe, or an
/// agent that is polled because it does not stream) are printed at the end.
async fn follow(mut events: EventStream, output: Output) -> anyhow::Result<ExitCode> {
    let mut acc = TaskAccumulator::default();
    let mut shown = Progress::default();
    while let Some(ev) = events.next().await {
        let ev = ev?;
        acc.apply(&ev);
        if output == Output::Json {
            print_json(&ev)?;
        } else {
            shown.print(&ev);
        }
    }
    if output == Output::Human {
        shown.finish(acc.task.as_ref());
    }
    let state = acc.state();
    let ended =
        acc.message.is_some() || state.is_some_and(|s| s.is_terminal() || s.is_interrupted());
    if !ended {
        bail!(
            "the stream ended before the task did (last state: {})",
            state.map_or("none", short_state)
        );
    }
    Ok(exit_for(state))
}

/// What [`follow`] has shown people so far.
#[derive(Default)]
struct Progress {
    last_state: Option<v1::TaskState>,
    /// The artifact whose chunks are being printed.
    open_artifact: Option<String>,
    /// Whether any artifact arrived as chunks (else the task's are printed at the end).
    artifact_streamed: bool,
}

impl Progress {
    fn print(&mut self, ev: &v1::StreamResponse) {
        match &ev.payload {
            Some(Payload::Task(t)) => {
                // Polled snapshots repeat the task: say it again only when its state moved.
                let s = state_of(t);
                if self.last_state != Some(s) {
                    println!("task {} ({})", t.id, short_state(s));
                    self.last_state = Some(s);
                }
            }
            Some(Payload::Message(m)) => println!("agent: {}", m.text()),
            Some(Payload::StatusUpdate(u)) => self.status(u),
            Some(Payload::ArtifactUpdate(u)) => self.artifact(u),
            None => {}
        }
    }

    fn status(&mut self, u: &v1::TaskStatusUpdateEvent) {
        let s = u
            .status
            .as_ref()
            .map_or(v1::TaskState::Unspecified, |s| s.state());
        if self.open_artifact.take().is_some() {
            println!();
        }
        if self.last_state != Some(s) {
            println!("→ {}", short_state(s));
            self.last_state = Some(s);
        }
        if let Some(text) = u
            .status
            .as_ref()
            .and_then(|s| s.message.as_ref())
            .map(v1::Message::text)
            .filter(|t| !t.is_empty())
        {
            println!("agent: {text}");
        }
    }

    fn artifact(&mut self, u: &v1::TaskArtifactUpdateEvent) {
        self.artifact_streamed = true;
        let Some(a) = &u.artifact else {
            return;
        };
        if self.open_artifact.as_deref() != Some(a.artifact_id.as_str()) {
            if self.open_artifact.is_some() {
                println!();
            }
            let name = if a.name.is_empty() {
                a.artifact_id.as_str()
            } else {
                a.name.as_str()
            };
            println!("--- artifact {name}");
            self.open_artifact = Some(a.artifact_id.clone());
        }
        for p in &a.parts {
            if let Some(t) = p.as_text() {
                print!("{t}");
            }
        }
        let _ = std::io::stdout().flush();
        if u.last_chunk {
            println!();
            self.open_artifact = None;
        }
    }

    /// Ends an open artifact's line; prints the task's artifacts when none
    /// arrived as chunks (a resubscribe's snapshot, or a polled agent).
    fn finish(&mut self, task: Option<&v1::Task>) {
        if self.open_artifact.is_some() {
            println!();
        }
        if !self.artifact_streamed
            && let Some(t) = task
        {
            print_artifacts(t);
        }
    }
}

/// `heddle task …`.
#[derive(clap::Subcommand, Debug)]
pub enum TaskCommand {
    /// Show a task.
    Get {
        /// The agent URL.
        url: String,
        /// The task id.
        id: String,
        /// Only the last N history messages.
        #[arg(long)]
        history_length: Option<i32>,
        #[command(flatten)]
        conn: Connection,
    },
    /// List your tasks, newest first.
    List {
        /// The agent URL.
        url: String,
        /// Only this conversation.
        #[arg(long)]
        context_id: Option<String>,
        /// Only tasks in this state (e.g. `working`, `TASK_STATE_COMPLETED`).
        #[arg(long)]
        state: Option<String>,
        /// Page size (1-100).
        #[arg(long)]
        page_size: Option<i32>,
        /// The page to fetch.
        #[arg(long)]
        page_token: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Cancel a task.
    Cancel {
        /// The agent URL.
        url: String,
        /// The task id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Follow a running task's events (polled, for an agent whose card says
    /// it does not stream).
    Subscribe {
        /// The agent URL.
        url: String,
        /// The task id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Show a task and, below it, the tasks its delegated calls made, with
    /// their states (and costs, on a Heddle hub). Only agents on the
    /// origin of URL are read.
    Tree {
        /// The agent URL.
        url: String,
        /// The task id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Manage the webhooks a task's updates are posted to.
    #[command(subcommand, name = "push-config")]
    PushConfig(crate::push_config::PushConfigCommand),
}

fn parse_state(s: &str) -> anyhow::Result<v1::TaskState> {
    let up = s.to_ascii_uppercase().replace('-', "_");
    let name = if up.starts_with("TASK_STATE_") {
        up
    } else {
        format!("TASK_STATE_{up}")
    };
    v1::TaskState::from_str_name(&name)
        .with_context(|| format!("--state {s:?} is not a task state"))
}

/// A page of ListTasks for people: one line per task, then the count.
fn print_task_page(page: &v1::ListTasksResponse) {
    for t in &page.tasks {
        let when = t
            .status
            .as_ref()
            .and_then(|s| s.timestamp)
            .map(|t| t.to_string())
            .unwrap_or_default();
        println!(
            "{}  {:<15} {}  context {}",
            t.id,
            short_state(state_of(t)),
            when,
            t.context_id
        );
    }
    println!(
        "({} of {} tasks{})",
        page.tasks.len(),
        page.total_size,
        if page.next_page_token.is_empty() {
            String::new()
        } else {
            format!("; next page: --page-token {}", page.next_page_token)
        }
    );
}

/// Runs a `task` command.
pub async fn task(cmd: TaskCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TaskCommand::Get {
            url,
            id,
            history_length,
            conn,
        } => {
            let t = conn
                .client(&url)
                .await?
                .get_task(&id, history_length)
                .await?;
            if conn.output == Output::Json {
                print_json(&t)?
            } else {
                print_task(&t)
            }
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::List {
            url,
            context_id,
            state,
            page_size,
            page_token,
            conn,
        } => {
            let req = v1::ListTasksRequest {
                context_id: context_id.unwrap_or_default(),
                status: state
                    .as_deref()
                    .map(parse_state)
                    .transpose()?
                    .map_or(0, |s| s as i32),
                page_size,
                page_token: page_token.unwrap_or_default(),
                ..Default::default()
            };
            let page = conn.client(&url).await?.list_tasks(req).await?;
            if conn.output == Output::Json {
                print_json(&page)?;
            } else {
                print_task_page(&page);
            }
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::Cancel { url, id, conn } => {
            let t = conn.client(&url).await?.cancel_task(&id).await?;
            if conn.output == Output::Json {
                print_json(&t)?
            } else {
                print_task(&t)
            }
            // Canceling was what the user asked for: success.
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::Subscribe { url, id, conn } => {
            let events = conn.client(&url).await?.subscribe(&id).await?;
            follow(events, conn.output).await
        }
        TaskCommand::Tree { url, id, conn } => crate::task_tree::run(&conn, &url, &id).await,
        TaskCommand::PushConfig(cmd) => crate::push_config::run(cmd).await,
    }
}

/// `heddle chat` options.
#[derive(Args, Debug)]
pub struct ChatArgs {
    /// The agent URL.
    pub url: String,
    #[command(flatten)]
    pub conn: Connection,
}

/// `heddle chat`: a multi-turn session; answers INPUT_REQUIRED on the same task.
pub async fn chat(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let client = args.conn.client(&args.url).await?;
    println!(
        "chatting with {} ({}); an empty line or Ctrl-D ends",
        client.card().name,
        client.interface().url
    );
    let (mut task_id, mut context_id): (Option<String>, Option<String>) = (None, None);
    let stdin = std::io::stdin();
    loop {
        print!("you> ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if stdin.read_line(&mut line)? == 0 || line.trim().is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        let msg = message(
            line.trim(),
            &[],
            None,
            task_id.as_deref(),
            context_id.as_deref(),
        )
        .await?;
        let spinner = Spinner::start("thinking", true);
        let reply = client
            .send(v1::SendMessageRequest {
                message: Some(msg),
                ..Default::default()
            })
            .await;
        drop(spinner);
        match reply? {
            SendReply::Message(m) => {
                context_id = Some(m.context_id.clone())
                    .filter(|c| !c.is_empty())
                    .or(context_id);
                println!("agent> {}", m.text());
            }
            SendReply::Task(t) => {
                context_id = Some(t.context_id.clone());
                let s = state_of(&t);
                print_task(&t);
                // Stay on the task while it waits for us; a finished task ends the thread.
                task_id = s.is_interrupted().then(|| t.id.clone());
            }
        }
    }
}

/// `heddle card get`.
pub async fn card_get(url: &str, conn: &Connection) -> anyhow::Result<ExitCode> {
    let opts = conn.options()?;
    let http = heddle_client::http_client(&opts)?;
    let (card, card_url) = heddle_client::fetch_card_verified(
        &http,
        url,
        None,
        &opts.headers,
        opts.card_verification.as_ref(),
    )
    .await?;
    if conn.output == Output::Json {
        print_json(&card)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} {} ({card_url})", card.name, card.version);
    println!("{}", card.description);
    for i in &card.supported_interfaces {
        let tenant = if i.tenant.is_empty() {
            String::new()
        } else {
            format!(" tenant {}", i.tenant)
        };
        println!(
            "  {:<9} {:<4} {}{tenant}",
            i.protocol_binding, i.protocol_version, i.url
        );
    }
    if let Some(c) = &card.capabilities {
        println!(
            "  streaming: {}, push notifications: {}, extended card: {}",
            c.streaming.unwrap_or(false),
            c.push_notifications.unwrap_or(false),
            c.extended_agent_card.unwrap_or(false)
        );
    }
    for s in &card.skills {
        println!("  skill {}: {} [{}]", s.id, s.name, s.tags.join(", "));
    }
    if !card.security_schemes.is_empty() {
        let names: Vec<&str> = card.security_schemes.keys().map(String::as_str).collect();
        println!("  security: {}", names.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
