//! [`McpServer`]: one MCP server's connection, started on first use,
//! started again after a crash (with a backoff), stopped when idle, and
//! [`Pool`]: the servers of a hub's MCP agents, by agent id, so a rebuilt
//! card (a tool-list change, an admin refresh) keeps the running server.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    process::Stdio,
    sync::{
        Arc, Mutex, RwLock, Weak,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::StreamExt as _;
use heddle_client::Secret;
use rmcp::{
    ClientHandler, RoleClient, ServiceExt as _,
    model::{
        CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
        ClientCapabilities, ClientConfig, ClientNotification, ClientRequest, Implementation,
        ProgressNotificationParam, ProgressToken, RequestId,
    },
    service::{NotificationContext, Peer, PeerRequestOptions, RequestHandle, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::{sync::mpsc, time::Instant};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::{McpError, McpSettings, tools::Call, tools::ToolSet};
use crate::remote::SecretSource;

/// The variables a stdio server gets from the hub's environment (it gets
/// no other, so the hub's own secrets stay with the hub).
const INHERITED_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT"];
/// Lines of a stdio server's stderr kept to explain a crash.
const STDERR_LINES: usize = 5;
/// Longest stderr line kept, in characters.
const STDERR_LINE: usize = 300;
/// The first wait before starting a crashed server again; it doubles with
/// each failure in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Progress notifications buffered per call; more are dropped (the next
/// one says as much).
const PROGRESS_BUFFER: usize = 32;
/// The shortest time between two tool-list reloads of one server.
const RELOAD_INTERVAL: Duration = Duration::from_millis(200);
/// Largest JSON answer read from a streamable HTTP server.
const MAX_HTTP_RESPONSE: usize = 16 << 20;

pub(crate) type Connection = RunningService<RoleClient, Notices>;

/// Where progress notifications go: the call that holds the token.
type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, mpsc::Sender<ProgressNotificationParam>>>>;

/// The MCP client side of one connection: routes progress to its call and
/// reloads the tools when the server says they changed.
pub(crate) struct Notices {
    progress: ProgressRoutes,
    server: Weak<McpServer>,
}

impl ClientHandler for Notices {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let route = lock(&self.progress).get(&params.progress_token).cloned();
        if let Some(tx) = route {
            // A full buffer drops the notice: progress is advisory, and the
            // connection's reader must not wait on one slow caller.
            let _ = tx.try_send(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.tools_changed();
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("heddle-hub", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section leaves the value whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The connection slot: the live connection, and the backoff after
/// failures in a row.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Connection>>,
    failures: u32,
    retry_at: Option<Instant>,
}

/// One MCP server of an agent.
pub(crate) struct McpServer {
    agent_id: String,
    settings: McpSettings,
    allow_http: bool,
    /// `secret_env`, read when the agent is built.
    secret_env: Vec<(String, Secret)>,
    bearer: Option<Secret>,
    http: Option<reqwest013::Client>,
    slot: tokio::sync::Mutex<Slot>,
    tools: Arc<RwLock<Arc<ToolSet>>>,
    /// The tools as last listed, to tell a real change from a repeat.
    listed: Mutex<Vec<Value>>,
    /// Server name, version and instructions from the handshake.
    about: Mutex<Option<Value>>,
    progress: ProgressRoutes,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Calls in progress, and when the last one ended: the idle clock.
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
    /// Told the agent id when the tools change, so its card is rebuilt.
    changed: mpsc::UnboundedSender<String>,
    /// A tool-list notice waits to be acted on; a reload task runs.
    reload_requested: AtomicBool,
    reloading: AtomicBool,
    /// Its agent was changed or removed: stopped once no call uses it,
    /// and never started again.
    retired: AtomicBool,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("agent_id", &self.agent_id)
            .field("server", &self.settings.shown())
            .finish_non_exhaustive()
    }
}

/// A call sent to the server: its response, its progress, and what
/// cancelling it needs. Holding it counts as use of the server.
pub(crate) struct Pending {
    pub(crate) handle: RequestHandle<RoleClient>,
    pub(crate) progress: mpsc::Receiver<ProgressNotificationParam>,
    conn: Arc<Connection>,
    _use: InUse,
}

impl Pending {
    /// The connection the call went out on (to tell a crash apart).
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.handle.peer.clone()
    }

    /// The connection the call went out on.
    pub(crate) fn connection(&self) -> Arc<Connection> {
        self.conn.clone()
    }

    /// The request id, for `notifications/cancelled`.
    pub(crate) fn id(&self) -> RequestId {
        self.handle.id.clone()
    }
}

/// Counts one use of the server while held.
struct InUse {
    server: Arc<McpServer>,
    token: Option<ProgressToken>,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(t) = &self.token {
            lock(&self.server.progress).remove(t);
        }
        *lock(&self.server.last_used) = Instant::now();
        let was = self.server.busy.fetch_sub(1, Ordering::AcqRel);
        if was == 1 && self.server.retired.load(Ordering::Acquire) {
            // The last call of a replaced or removed agent's server ended.
            let server = self.server.clone();
            tokio::spawn(async move { server.stop().await });
        }
    }
}

impl McpServer {
    fn new(
        agent_id: &str,
        settings: McpSettings,
        allow_http: bool,
        secrets: &SecretSource,
        changed: mpsc::UnboundedSender<String>,
    ) -> Result<Self, McpError> {
        settings
            .check(allow_http)
            .map_err(|(field, problem)| McpError::Settings { field, problem })?;
        let secret_env = settings
            .secret_env
            .iter()
            .map(|(var, name)| secrets.get(name).map(|s| (var.clone(), s)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(McpError::Secret)?;
        let bearer = settings
            .bearer_env
            .as_deref()
            .map(|name| secrets.get(name))
            .transpose()
            .map_err(McpError::Secret)?;
        let http = settings.url.is_some().then(http_client).transpose()?;
        Ok(Self {
            agent_id: agent_id.to_owned(),
            settings,
            allow_http,
            secret_env,
            bearer,
            http,
            slot: tokio::sync::Mutex::new(Slot::default()),
            tools: Arc::new(RwLock::new(Arc::new(ToolSet::default()))),
            listed: Mutex::new(Vec::new()),
            about: Mutex::new(None),
            progress: Arc::new(Mutex::new(HashMap::new())),
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            changed,
            reload_requested: AtomicBool::new(false),
            reloading: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        })
    }

    /// The tools now.
    pub(crate) fn tools(&self) -> Arc<ToolSet> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The shared cell the message check reads the tools from.
    pub(crate) fn tools_cell(&self) -> Arc<RwLock<Arc<ToolSet>>> {
        self.tools.clone()
    }

    /// What the server said of itself in the handshake (`serverInfo`,
    /// `instructions`), as JSON.
    pub(crate) fn about(&self) -> Option<Value> {
        lock(&self.about).clone()
    }

    /// The settings this server runs with.
    pub(crate) fn settings(&self) -> &McpSettings {
        &self.settings
    }

    /// `text` without the secrets this server was given.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let secrets: Vec<Secret> = self
            .secret_env
            .iter()
            .map(|(_, s)| s.clone())
            .chain(self.bearer.clone())
            .collect();
        crate::remote::scrub_secrets(text, &secrets)
    }

    /// Takes `listed` (kept from an earlier run) as the tools, unless the
    /// server has listed its own since.
    pub(crate) fn seed_tools(&self, listed: Vec<Value>) {
        let mut last = lock(&self.listed);
        if last.is_empty() {
            self.set_tools(&mut last, listed);
        }
    }

    /// Makes `listed` the tools (the caller holds `listed`'s lock as `last`).
    fn set_tools(&self, last: &mut Vec<Value>, listed: Vec<Value>) {
        let set = ToolSet::new(listed.clone(), self.settings.tools.as_deref());
        *last = listed;
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
    }

    /// Drops the tools known, unless the server is running (its list is
    /// current then: it says when it changes).
    pub(crate) fn forget_tools(&self) {
        let running = self.slot.try_lock().map_or(true, |s| s.conn.is_some());
        if !running {
            lock(&self.listed).clear();
            *self.tools.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ToolSet::default());
        }
    }

    /// The tools as last listed (`tools/list` JSON).
    pub(crate) fn listed(&self) -> Vec<Value> {
        lock(&self.listed).clone()
    }

    /// Lists the tools, starting the server if it is not running: the card
    /// of a new agent is made from them.
    pub(crate) async fn ensure_tools(self: &Arc<Self>) -> Result<Arc<ToolSet>, McpError> {
        if self.tools().len() == 0 {
            let _use = self.enter(None);
            self.connection(Instant::now() + self.start_timeout())
                .await
                .map_err(McpError::Server)?;
        }
        Ok(self.tools())
    }

    fn start_timeout(&self) -> Duration {
        Duration::from_secs(self.settings.start_timeout_secs)
    }

    fn enter(self: &Arc<Self>, token: Option<ProgressToken>) -> InUse {
        self.busy.fetch_add(1, Ordering::AcqRel);
        InUse {
            server: self.clone(),
            token,
        }
    }

    /// Sends `call`, starting the server first if needed (waiting out a
    /// crash backoff, up to `deadline`).
    pub(crate) async fn start_call(
        self: &Arc<Self>,
        call: Call,
        deadline: Instant,
    ) -> Result<Pending, String> {
        let mut in_use = self.enter(None);
        let conn = self.connection(deadline).await?;
        let mut params = CallToolRequestParams::new(call.tool);
        params.arguments = Some(call.arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = conn
            .peer()
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.lost(&conn, &e.to_string()))?;
        // Registered after sending: a notice that beats this line is lost,
        // which progress (advisory) allows.
        let (tx, progress) = mpsc::channel(PROGRESS_BUFFER);
        lock(&self.progress).insert(handle.progress_token.clone(), tx);
        in_use.token = Some(handle.progress_token.clone());
        Ok(Pending {
            handle,
            progress,
            conn,
            _use: in_use,
        })
    }

    /// Tells the server a call is abandoned (`notifications/cancelled`).
    pub(crate) async fn cancel_call(&self, peer: &Peer<RoleClient>, id: RequestId, reason: &str) {
        let notice = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
        ));
        if let Err(e) = peer.send_notification(notice).await {
            tracing::debug!(agent = %self.agent_id, error = %e, "could not send an MCP cancellation");
        }
    }

    /// The reason a call failed because its connection closed under it;
    /// the connection is dropped and the next call starts the server again
    /// after the backoff.
    pub(crate) fn lost_call(&self, conn: &Arc<Connection>) -> String {
        self.lost(conn, "closed the connection")
    }

    fn lost(&self, conn: &Arc<Connection>, what: &str) -> String {
        let mut reason = format!(
            "the MCP server {} {what} during the call",
            self.settings.shown()
        );
        let tail: Vec<String> = lock(&self.stderr).iter().cloned().collect();
        if let Some(last) = tail.last() {
            reason.push_str(&format!(" (its last words: {last:?})"));
        }
        if let Ok(mut slot) = self.slot.try_lock()
            && slot.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn))
        {
            slot.conn = None;
            self.failed(&mut slot);
        }
        conn.cancellation_token().cancel();
        self.scrub(&reason)
    }

    /// A call completed: the server is healthy again.
    pub(crate) async fn succeeded(&self) {
        let mut slot = self.slot.lock().await;
        slot.failures = 0;
        slot.retry_at = None;
    }

    fn failed(&self, slot: &mut Slot) {
        slot.failures = slot.failures.saturating_add(1);
        let backoff = FIRST_BACKOFF
            .saturating_mul(1u32 << slot.failures.saturating_sub(1).min(10))
            .min(MAX_BACKOFF);
        slot.retry_at = Some(Instant::now() + backoff);
    }

    /// The live connection, or a new one.
    async fn connection(self: &Arc<Self>, deadline: Instant) -> Result<Arc<Connection>, String> {
        let mut slot = self.slot.lock().await;
        if self.retired.load(Ordering::Acquire) && slot.conn.is_none() {
            return Err(format!(
                "the MCP server {} belongs to an agent that was changed or removed",
                self.settings.shown()
            ));
        }
        if let Some(conn) = &slot.conn {
            if !conn.is_closed() && !conn.peer().is_transport_closed() {
                return Ok(conn.clone());
            }
            // It exited between calls (the idle stop takes it out of the
            // slot first): a crash, so the backoff applies.
            slot.conn = None;
            self.failed(&mut slot);
        }
        if let Some(at) = slot.retry_at
            && at > Instant::now()
        {
            if at > deadline {
                return Err(format!(
                    "the MCP server {} failed {} time(s) in a row and is not started again yet",
                    self.settings.shown(),
                    slot.failures
                ));
            }
            tokio::time::sleep_until(at).await;
        }
        let start = tokio::time::timeout(self.start_timeout(), self.start());
        let started = match start.await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!(
                "the MCP server {} did not start within {} s",
                self.settings.shown(),
                self.settings.start_timeout_secs
            )),
        };
        match started {
            Ok(conn) => {
                let conn = Arc::new(conn);
                slot.conn = Some(conn.clone());
                drop(slot);
                self.watch_idle(&conn);
                Ok(conn)
            }
            Err(e) => {
                self.failed(&mut slot);
                Err(self.scrub(&e))
            }
        }
    }

    /// Starts the server, shakes hands, and lists its tools.
    async fn start(self: &Arc<Self>) -> Result<Connection, String> {
        lock(&self.stderr).clear();
        let notices = Notices {
            progress: self.progress.clone(),
            server: Arc::downgrade(self),
        };
        let shown = self.settings.shown();
        let conn = match (&self.settings.command, &self.settings.url, &self.http) {
            (Some(command), _, _) => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(&self.settings.args).env_clear();
                for var in INHERITED_ENV {
                    if let Some(v) = std::env::var_os(var) {
                        cmd.env(var, v);
                    }
                }
                cmd.envs(&self.settings.env);
                for (var, secret) in &self.secret_env {
                    cmd.env(var, secret.expose());
                }
                if let Some(dir) = &self.settings.cwd {
                    cmd.current_dir(dir);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("{shown} could not be started: {e}"))?;
                if let Some(stderr) = stderr {
                    self.keep_stderr(stderr);
                }
                notices
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP server {shown} failed its handshake: {e}"))?
            }
            (None, Some(url), Some(http)) => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .max_json_response_size(MAX_HTTP_RESPONSE);
                if let Some(token) = &self.bearer {
                    config = config.auth_header(token.expose());
                }
                let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
                notices
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP server {shown} failed its handshake: {e}"))?
            }
            _ => return Err(format!("the MCP server {shown} has no command or url")),
        };
        *lock(&self.about) = conn
            .peer()
            .peer_info()
            .and_then(|info| serde_json::to_value(&*info).ok());
        let known = !lock(&self.listed).is_empty();
        if self.store_tools(&conn).await? && known {
            // Kept from an earlier run, or listed before a restart: the
            // card shows the old list.
            let _ = self.changed.send(self.agent_id.clone());
        }
        tracing::info!(agent = %self.agent_id, server = %shown, "MCP server started");
        Ok(conn)
    }

    /// Lists the tools and keeps them; true when they differ from before.
    async fn store_tools(&self, conn: &Connection) -> Result<bool, String> {
        let listed = conn.peer().list_all_tools().await.map_err(|e| {
            format!(
                "the MCP server {} did not list its tools: {e}",
                self.settings.shown()
            )
        })?;
        let listed: Vec<Value> = listed
            .iter()
            .take(super::tools::MAX_TOOLS.saturating_mul(4))
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        let mut last = lock(&self.listed);
        if *last == listed {
            return Ok(false);
        }
        self.set_tools(&mut last, listed);
        Ok(true)
    }

    /// After `notifications/tools/list_changed`: one reload at a time, at
    /// most one every [`RELOAD_INTERVAL`], however many notices arrive
    /// (the last one is always followed by a reload). Not awaited by the
    /// notice's handler: the reload talks over the connection whose
    /// reader runs it.
    fn tools_changed(self: &Arc<Self>) {
        self.reload_requested.store(true, Ordering::Release);
        if self.reloading.swap(true, Ordering::AcqRel) {
            return;
        }
        let server = self.clone();
        tokio::spawn(async move {
            loop {
                while server.reload_requested.swap(false, Ordering::AcqRel) {
                    server.clone().reload_tools().await;
                    tokio::time::sleep(RELOAD_INTERVAL).await;
                }
                server.reloading.store(false, Ordering::Release);
                // A notice that came after the last check but before the
                // flag fell would otherwise be left waiting.
                if !server.reload_requested.load(Ordering::Acquire)
                    || server.reloading.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        });
    }

    /// Lists the tools again and, when they changed, asks for the card to
    /// be rebuilt.
    async fn reload_tools(self: Arc<Self>) {
        let conn = self.slot.lock().await.conn.clone();
        let Some(conn) = conn else { return };
        match self.store_tools(&conn).await {
            Ok(true) => {
                tracing::info!(agent = %self.agent_id, tools = ?self.tools().names(), "MCP tools changed");
                let _ = self.changed.send(self.agent_id.clone());
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(agent = %self.agent_id, error = %self.scrub(&e), "MCP tools not reloaded")
            }
        }
    }

    /// Keeps the last lines of the server's stderr (to explain a crash) and
    /// logs them at debug level, without the secrets it was given.
    fn keep_stderr(self: &Arc<Self>, stderr: tokio::process::ChildStderr) {
        let tail = self.stderr.clone();
        let server = Arc::downgrade(self);
        tokio::spawn(async move {
            // A line longer than the codec's cap is dropped whole, so a
            // server writing without newlines costs no memory.
            let codec = LinesCodec::new_with_max_length(STDERR_LINE.saturating_mul(4));
            let mut lines = FramedRead::new(stderr, codec);
            while let Some(next) = lines.next().await {
                let line = match next {
                    Ok(line) => line,
                    Err(LinesCodecError::MaxLineLengthExceeded) => {
                        "[a line too long to keep]".to_owned()
                    }
                    Err(LinesCodecError::Io(_)) => break,
                };
                let Some(s) = server.upgrade() else { break };
                let line: String = s.scrub(&line).chars().take(STDERR_LINE).collect();
                tracing::debug!(agent = %s.agent_id, "mcp stderr: {line}");
                let mut t = lock(&tail);
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }

    /// Stops the connection once nothing used it for `idle_secs`.
    fn watch_idle(self: &Arc<Self>, conn: &Arc<Connection>) {
        if self.settings.idle_secs == 0 {
            return;
        }
        let idle = Duration::from_secs(self.settings.idle_secs);
        let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        let server = Arc::downgrade(self);
        let watched = Arc::downgrade(conn);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let (Some(s), Some(conn)) = (server.upgrade(), watched.upgrade()) else {
                    return;
                };
                if conn.is_closed() || conn.peer().is_transport_closed() {
                    return;
                }
                let quiet = lock(&s.last_used).elapsed() >= idle;
                if s.busy.load(Ordering::Acquire) == 0 && quiet {
                    let mut slot = s.slot.lock().await;
                    if s.busy.load(Ordering::Acquire) == 0
                        && slot.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn))
                    {
                        slot.conn = None;
                        conn.cancellation_token().cancel();
                        tracing::info!(agent = %s.agent_id, "idle MCP server stopped");
                    }
                    return;
                }
            }
        });
    }

    /// Stops the connection now (the agent was removed or replaced).
    async fn stop(&self) {
        if let Some(conn) = self.slot.lock().await.conn.take() {
            conn.cancellation_token().cancel();
        }
    }

    /// Its agent was changed or removed: calls in flight finish on it, then
    /// it stops. Never waits (a start may hold the slot for long).
    fn retire(self: &Arc<Self>) {
        self.retired.store(true, Ordering::Release);
        if self.busy.load(Ordering::Acquire) == 0 {
            let server = self.clone();
            tokio::spawn(async move { server.stop().await });
        }
    }
}

/// The HTTP client for streamable HTTP servers: rustls on ring, with the
/// system's roots and the web PKI's; redirects are not followed.
fn http_client() -> Result<reqwest013::Client, McpError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system root rustls cannot parse is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| McpError::Server(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest013::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest013::redirect::Policy::none())
        .user_agent(concat!("heddle-hub/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| McpError::Server(format!("HTTP client setup failed: {e}")))
}

/// The MCP servers of a hub's agents, by agent id.
pub(crate) struct Pool {
    servers: Mutex<BTreeMap<String, Arc<McpServer>>>,
    changed: mpsc::UnboundedSender<String>,
    /// Taken once by the hub, which rebuilds the cards of the agents named.
    pub(crate) changes: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Default for Pool {
    fn default() -> Self {
        let (changed, changes) = mpsc::unbounded_channel();
        Self {
            servers: Mutex::new(BTreeMap::new()),
            changed,
            changes: Mutex::new(Some(changes)),
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("servers", &lock(&self.servers).len())
            .finish()
    }
}

impl Pool {
    /// The server of agent `id`: the running one when its settings are the
    /// same, else a new one (the old one stops when its last call ends).
    pub(crate) fn server(
        &self,
        id: &str,
        settings: &McpSettings,
        allow_http: bool,
        secrets: &SecretSource,
    ) -> Result<Arc<McpServer>, McpError> {
        if let Some(s) = lock(&self.servers).get(id)
            && s.settings() == settings
            && s.allow_http == allow_http
        {
            return Ok(s.clone());
        }
        let server = Arc::new(McpServer::new(
            id,
            settings.clone(),
            allow_http,
            secrets,
            self.changed.clone(),
        )?);
        Ok(server)
    }

    /// Keeps `server` as agent `id`'s (once its agent is served), stopping
    /// the one it replaces.
    pub(crate) fn keep(&self, id: &str, server: &Arc<McpServer>) {
        let old = lock(&self.servers).insert(id.to_owned(), server.clone());
        if let Some(old) = old
            && !Arc::ptr_eq(&old, server)
        {
            old.retire();
        }
    }

    /// Forgets agent `id`'s server, which stops once its calls end.
    pub(crate) fn remove(&self, id: &str) {
        let old = lock(&self.servers).remove(id);
        if let Some(old) = old {
            old.retire();
        }
    }
}
