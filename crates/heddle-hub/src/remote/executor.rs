//! [`RemoteAgent`]: the executor that relays a hub task to an upstream agent.

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;
use heddle_client::{
    A2aClient, Binding, ClientError, ClientOptions, EventStream, Polling, Secret, SendReply,
    TlsOptions, reqwest,
};
use heddle_core::{ProtocolVersion, v1};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use heddle_store::RegistryStore;
use serde::{Deserialize, Serialize};

use super::{
    RemoteError, SecretSource, UpstreamAuth,
    auth::scrub,
    relay::{Relay, Upstream},
};

/// How long the hub waits on an upstream agent. Every wait is bounded, so
/// a dead or silent upstream fails the hub task instead of hanging it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteTimeouts {
    /// Opening a connection (default 10 s).
    pub connect: Duration,
    /// A call that should answer at once: opening a stream, GetTask,
    /// CancelTask (default 30 s).
    pub call: Duration,
    /// The longest the upstream may stay silent while working: the answer
    /// to a (blocking) unary send, or the gap between two stream events
    /// (default 5 min).
    pub idle: Duration,
}

impl Default for RemoteTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            call: Duration::from_secs(30),
            idle: Duration::from_secs(300),
        }
    }
}

/// How a [`RemoteAgent`] reaches its upstream.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Bindings the hub may use, in order of preference (default JSON-RPC,
    /// REST, gRPC); the upstream card's order and v1.0 over v0.3 decide
    /// among the interfaces of one binding.
    pub bindings: Vec<Binding>,
    /// Force a protocol version instead of the card's best.
    pub version: Option<ProtocolVersion>,
    /// The timeouts.
    pub timeouts: RemoteTimeouts,
    /// Extra CA certificates and a client certificate for the upstream.
    pub tls: TlsOptions,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            bindings: vec![Binding::JsonRpc, Binding::Rest, Binding::Grpc],
            version: None,
            timeouts: RemoteTimeouts::default(),
            tls: TlsOptions::default(),
        }
    }
}

/// The link the store keeps for a hub task: the upstream task it stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Link {
    upstream_task_id: String,
    upstream_context_id: String,
}

/// An upstream A2A agent as a hub executor.
///
/// * `execute` on a new task sends the message upstream (streaming when the
///   upstream card says it streams and the hub's caller streams or returned
///   at once, else one blocking send, followed by
///   polling if the upstream answers before its task is done), links the
///   hub task to the upstream task as soon as its id is known, and
///   publishes each upstream event on the hub task as it arrives, until the
///   upstream task ends or waits for input. A direct message answer becomes
///   the hub's direct answer.
/// * A continuation (a reply to INPUT_REQUIRED) goes to the linked upstream
///   task, in its context.
/// * `cancel` cancels the linked upstream task, then the hub task. The
///   server calls it whenever `ctx.cancel` fires (CancelTask on a running
///   task), so `execute` only stops relaying then.
/// * Every failure ends the hub task FAILED with a message a person can
///   act on (unreachable, timed out, an answer that is not A2A), with the
///   credentials scrubbed from it.
///
/// Limits: a task the hub process was running when it stopped is failed at
/// the next start (the hub's usual recovery), though the upstream task may
/// run on; CancelTask on a hub task waiting for input (no executor running)
/// does not reach the upstream, which the server does not ask the executor
/// about; the caller's activated extensions (`A2A-Extensions`) are not
/// forwarded, though the message's own `extensions` are.
pub struct RemoteAgent {
    agent_id: String,
    client: A2aClient,
    links: Arc<dyn RegistryStore>,
    timeouts: RemoteTimeouts,
    streaming: bool,
    /// Every secret value, to scrub from error texts.
    secrets: Vec<Secret>,
    /// Counts executions that fail upstream, when the hub keeps metrics.
    metrics: Option<Arc<crate::metrics::HubMetrics>>,
}

impl std::fmt::Debug for RemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgent")
            .field("agent_id", &self.agent_id)
            .field("client", &self.client)
            .field("timeouts", &self.timeouts)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl RemoteAgent {
    /// The executor for the upstream described by `card` (from
    /// [`super::fetch_card`]), hosted as `agent_id`, presenting `auth` with
    /// values from `secrets`, keeping its task links in `links`.
    pub fn new(
        agent_id: impl Into<String>,
        card: &v1::AgentCard,
        auth: &UpstreamAuth,
        secrets: &SecretSource,
        opts: RemoteOptions,
        links: Arc<dyn RegistryStore>,
    ) -> Result<Self, RemoteError> {
        let resolved = auth.resolve(secrets)?;
        let t = opts.timeouts;
        let builder = reqwest::Client::builder()
            .connect_timeout(t.connect)
            // No redirects: a 307 would resend a token request's secret.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("heddle-hub/", env!("CARGO_PKG_VERSION")));
        let http = opts
            .tls
            .apply(builder)
            .and_then(|b| b.build().map_err(ClientError::from))
            .map_err(|e| RemoteError::Client(scrub(&e.to_string(), &resolved.secrets)))?;
        let client_opts = ClientOptions {
            bindings: opts.bindings,
            version: opts.version,
            credentials: resolved.credentials,
            headers: resolved.headers,
            // The hub bounds every call itself; the client's own bound is
            // only a backstop.
            timeout: t.call + t.idle,
            retries: 1,
            http: Some(http),
            tls: opts.tls,
            polling: Polling {
                initial_interval: Duration::from_millis(200),
                max_interval: Duration::from_secs(2),
                max_wait: t.idle,
            },
            ..ClientOptions::default()
        };
        let client = A2aClient::from_card(card.clone(), client_opts)
            .map_err(|e| RemoteError::Client(scrub(&e.to_string(), &resolved.secrets)))?;
        let streaming = card
            .capabilities
            .as_ref()
            .and_then(|c| c.streaming)
            .unwrap_or(false);
        Ok(Self {
            agent_id: agent_id.into(),
            client,
            links,
            timeouts: t,
            streaming,
            secrets: resolved.secrets,
            metrics: None,
        })
    }

    /// Counts each execution that fails upstream in `metrics`
    /// (`heddle_upstream_errors_total`).
    pub(crate) fn counting_errors(mut self, metrics: Arc<crate::metrics::HubMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The upstream interface in use.
    pub fn upstream_interface(&self) -> &v1::AgentInterface {
        self.client.interface()
    }

    async fn run(&self, ctx: &RequestContext, events: &TaskEvents) -> Result<(), String> {
        let prior = match &ctx.task {
            Some(_) => Some(self.link(&ctx.task_id).await?.ok_or_else(|| {
                "this task has no upstream task to continue (it was never sent upstream)".to_owned()
            })?),
            None => None,
        };
        let upstream_context = match &prior {
            Some(l) => Some(l.upstream_context_id.clone()),
            None => self
                .link(&context_key(ctx))
                .await?
                .map(|l| l.upstream_context_id),
        };
        let mut message = ctx.message.clone();
        message.message_id = A2aClient::user_message(Vec::new()).message_id;
        message.task_id = prior
            .as_ref()
            .map(|l| l.upstream_task_id.clone())
            .unwrap_or_default();
        message.context_id = upstream_context.unwrap_or_default();
        // A chain's hold pays only on this hub: it never goes upstream.
        heddle_server::delegation::strip_hold(&mut message.metadata);
        let mut metadata = ctx.metadata.clone();
        heddle_server::delegation::strip_hold(&mut metadata);
        let req = v1::SendMessageRequest {
            message: Some(message),
            configuration: Some(v1::SendMessageConfiguration {
                accepted_output_modes: ctx
                    .configuration
                    .as_ref()
                    .map(|c| c.accepted_output_modes.clone())
                    .unwrap_or_default(),
                history_length: Some(0),
                ..Default::default()
            }),
            metadata,
            ..Default::default()
        };
        let mut relay = Relay::new(events, ctx.task.as_deref());
        let mut linked = prior.map(|l| Upstream {
            task_id: l.upstream_task_id,
            context_id: l.upstream_context_id,
        });
        let t = self.timeouts;
        // Streamed upstream when someone may watch the hub task's events as
        // they happen (a streaming caller, or one that returned at once and
        // will subscribe or poll); a caller that waits for the answer gets
        // it from one blocking call, which costs the hub far less.
        let watched = ctx.streaming
            || ctx
                .configuration
                .as_ref()
                .is_some_and(|c| c.return_immediately);
        let stream = if self.streaming && watched {
            tokio::time::timeout(t.call, self.client.send_streaming(req))
                .await
                .map_err(|_| format!("the remote agent did not answer within {:?}", t.call))?
                .map_err(|e| self.describe(&e))?
        } else {
            let reply = tokio::time::timeout(t.idle, self.client.send(req))
                .await
                .map_err(|_| format!("the remote agent did not answer within {:?}", t.idle))?
                .map_err(|e| self.describe(&e))?;
            let task = match reply {
                SendReply::Message(m) => {
                    return relay.apply(message_event(m)).await;
                }
                SendReply::Task(task) => task,
            };
            let id = task.id.clone();
            self.relay_event(ctx, &mut relay, &mut linked, task_event(task))
                .await?;
            if relay.settled() {
                return Ok(());
            }
            // Answered before it was done: follow it (polled, as the
            // upstream does not stream).
            tokio::time::timeout(t.call, self.client.subscribe(&id))
                .await
                .map_err(|_| format!("the remote agent did not answer within {:?}", t.call))?
                .map_err(|e| self.describe(&e))?
        };
        self.follow(ctx, stream, &mut relay, &mut linked).await
    }

    /// Relays a stream until the upstream task settles. A stream that ends
    /// early is checked once with GetTask.
    async fn follow(
        &self,
        ctx: &RequestContext,
        mut stream: EventStream,
        relay: &mut Relay<'_>,
        linked: &mut Option<Upstream>,
    ) -> Result<(), String> {
        let idle = self.timeouts.idle;
        loop {
            let next = match tokio::time::timeout(idle, stream.next()).await {
                Ok(next) => next,
                Err(_) => {
                    self.abandon(linked.as_ref()).await;
                    return Err(format!(
                        "the remote agent sent nothing for {idle:?}; the task was abandoned"
                    ));
                }
            };
            match next {
                Some(Ok(ev)) => {
                    self.relay_event(ctx, relay, linked, ev).await?;
                    if relay.settled() {
                        return Ok(());
                    }
                }
                Some(Err(e)) => return Err(self.describe(&e)),
                None => break,
            }
        }
        let Some(up) = linked.clone() else {
            return Err("the remote agent closed the stream without answering".into());
        };
        let task = tokio::time::timeout(
            self.timeouts.call,
            self.client.get_task(&up.task_id, Some(0)),
        )
        .await
        .map_err(|_| "the remote agent's stream ended, and GetTask did not answer".to_owned())?
        .map_err(|e| self.describe(&e))?;
        relay.snapshot(task).await?;
        if relay.settled() {
            Ok(())
        } else {
            Err(format!(
                "the remote agent's stream ended while its task was {}",
                relay.state.as_str_name()
            ))
        }
    }

    /// Links the hub task on the first event naming the upstream task
    /// (before relaying it, so a cancel can already find it), then relays.
    async fn relay_event(
        &self,
        ctx: &RequestContext,
        relay: &mut Relay<'_>,
        linked: &mut Option<Upstream>,
        ev: v1::StreamResponse,
    ) -> Result<(), String> {
        if let Some(up) = Relay::upstream_of(&ev)
            && linked.as_ref() != Some(&up)
        {
            if let Some(known) = linked.as_ref()
                && known.task_id != up.task_id
            {
                return Err(format!(
                    "the remote agent answered about another task ({}, not {})",
                    up.task_id, known.task_id
                ));
            }
            let link = Link {
                upstream_task_id: up.task_id.clone(),
                upstream_context_id: up.context_id.clone(),
            };
            self.put_link(&ctx.task_id, &link).await?;
            self.put_link(&context_key(ctx), &link).await?;
            *linked = Some(up);
        }
        relay.apply(ev).await
    }

    async fn link(&self, key: &str) -> Result<Option<Link>, String> {
        let doc = self
            .links
            .link(&self.agent_id, key)
            .await
            .map_err(|e| format!("the hub cannot read its task links: {e}"))?;
        doc.map(|d| {
            serde_json::from_str(&d).map_err(|e| format!("the hub's task link is corrupt: {e}"))
        })
        .transpose()
    }

    async fn put_link(&self, key: &str, link: &Link) -> Result<(), String> {
        let doc = serde_json::to_string(link).map_err(|e| e.to_string())?;
        self.links
            .put_link(&self.agent_id, key, &doc)
            .await
            .map_err(|e| format!("the hub cannot record its task link: {e}"))
    }

    /// Best-effort cancel of an upstream task the hub gives up on.
    async fn abandon(&self, up: Option<&Upstream>) {
        if let Some(up) = up {
            let canceled =
                tokio::time::timeout(self.timeouts.call, self.client.cancel_task(&up.task_id))
                    .await;
            if let Ok(Err(e)) = canceled {
                tracing::debug!(agent = %self.agent_id, error = %self.describe(&e), "upstream cancel failed");
            }
        }
    }

    /// A client error as a person should read it, with no secret in it.
    fn describe(&self, e: &ClientError) -> String {
        let text = match e {
            ClientError::Transport(why) => format!("the remote agent could not be reached: {why}"),
            ClientError::Http {
                status, message, ..
            } => {
                format!("the remote agent answered HTTP {status}: {message}")
            }
            ClientError::A2a(err) => format!("the remote agent refused the request: {err}"),
            ClientError::InvalidResponse(why) => {
                format!("the remote agent's answer is not valid A2A: {why}")
            }
            other => format!("the remote agent failed: {other}"),
        };
        scrub(&text, &self.secrets)
    }
}

/// The link key of the caller's conversation, so the next task in the same
/// hub context continues the same upstream context. Hub task ids are UUIDs,
/// so this never meets one.
fn context_key(ctx: &RequestContext) -> String {
    format!("context:{}:{}", ctx.caller.id, ctx.context_id)
}

fn task_event(t: v1::Task) -> v1::StreamResponse {
    v1::StreamResponse {
        payload: Some(v1::stream_response::Payload::Task(t)),
    }
}

fn message_event(m: v1::Message) -> v1::StreamResponse {
    v1::StreamResponse {
        payload: Some(v1::stream_response::Payload::Message(m)),
    }
}

#[async_trait::async_trait]
impl AgentExecutor for RemoteAgent {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => {
                // CancelTask is running `cancel`, which cancels upstream and
                // ends the hub task; returning before it does would fail the
                // task instead. The server stops this execution once `cancel`
                // returns; this wait is only a bound.
                tokio::time::sleep(self.timeouts.call + Duration::from_secs(1)).await;
                Ok(())
            }
            run = self.run(&ctx, &events) => match run {
                Ok(()) => {
                    if let Some(m) = &self.metrics {
                        m.upstream_outcome(&self.agent_id, true);
                    }
                    Ok(())
                }
                Err(e) => {
                    if let Some(m) = &self.metrics {
                        m.upstream_error(&self.agent_id);
                    }
                    Err(AgentError::new(e))
                }
            },
        }
    }

    async fn cancel(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let link = self.link(&ctx.task_id).await.map_err(AgentError::new)?;
        let mut note = None;
        if let Some(link) = link {
            match tokio::time::timeout(
                self.timeouts.call,
                self.client.cancel_task(&link.upstream_task_id),
            )
            .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => note = Some(self.describe(&e)),
                Err(_) => {
                    note = Some(format!(
                        "the remote agent did not confirm the cancel within {:?}",
                        self.timeouts.call
                    ));
                }
            }
        }
        if let Some(n) = &note {
            tracing::warn!(agent = %self.agent_id, task = %ctx.task_id, "{n}");
        }
        let text = match &note {
            Some(n) => format!("canceled at the caller's request (upstream: {n})"),
            None => "canceled at the caller's request".to_owned(),
        };
        match events.cancel(Some(&text)).await {
            // Already ended (the upstream's CANCELED was relayed first).
            Ok(()) | Err(heddle_server::EventError::IllegalTransition(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
