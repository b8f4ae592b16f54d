//! [`Delegate`]: calls an agent makes to other agents for the task it runs.
//!
//! An executor that hands part of its work on gets a [`Delegate`] from its
//! client and its [`RequestContext`] ([`A2aClient::delegate`]). Each call
//! then carries the delegation context ([`heddle_api::delegation`]) in the
//! message metadata and activates the extension in `A2A-Extensions`, so the
//! callee knows the chain, the hop limit, the deadline and the budget. And
//! the task the call makes is tied to the caller's: when the caller's task is
//! canceled (or passes its deadline), the callee's task is canceled too,
//! which in a Heddle callee cancels what it delegated in turn.
//!
//! ```no_run
//! # use heddle_client::{A2aClient, ClientOptions};
//! # use heddle_api::{AgentError, RequestContext, TaskEvents};
//! # async fn run(ctx: RequestContext, events: TaskEvents, writer: A2aClient) -> Result<(), AgentError> {
//! let writer = writer.delegate(&ctx, &events).map_err(|e| AgentError::new(e.to_string()))?;
//! let draft = writer.send_text("a draft on: tides").await;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use futures::StreamExt as _;
use heddle_api::{
    Delegation, RequestContext, TaskEvents,
    delegation::{DELEGATION_EXT, Hop, agent_name},
};
use heddle_core::{
    A2aError,
    v1::{self, stream_response::Payload},
    wkt::Timestamp,
};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument as _;

use heddle_core::version::{EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER};

use crate::{A2aClient, ClientError, EventStream, SendReply};

/// A client whose calls work for one task of the calling agent (see the
/// module documentation).
#[derive(Clone)]
pub struct Delegate {
    client: A2aClient,
    context: Delegation,
    /// The calling task's cancel token.
    parent: CancellationToken,
    /// The calling task's events, where the tasks made are recorded.
    events: TaskEvents,
    /// Fires when the last clone is dropped: the watchers of callee tasks
    /// stop then, as the calling agent has stopped waiting for them.
    alive: CancellationToken,
    _guard: Arc<DropGuard>,
}

impl std::fmt::Debug for Delegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegate")
            .field("client", &self.client)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl A2aClient {
    /// This client, for calls made for the task `ctx` runs, whose
    /// `events` record each task made (in the task's metadata, under
    /// [`DELEGATION_EXT`] as `children`). Refused (with the callee's error,
    /// [`heddle_core::ErrorCode::DelegationRefused`]) when the callee would
    /// be past the hop limit or the deadline has passed: no call is made
    /// then.
    pub fn delegate(
        &self,
        ctx: &RequestContext,
        events: &TaskEvents,
    ) -> Result<Delegate, ClientError> {
        let mut context = ctx.delegation_for_call().map_err(A2aError::from)?;
        // The hold pays only agents of the hub that keeps it: it is sent
        // only where the calling agent itself is served (its host and port;
        // over gRPC, which a hub serves on a port of its own, its host).
        let grpc = self.binding() == crate::Binding::Grpc;
        if context.hold.is_some() && !same_server(&ctx.agent, &self.interface().url, grpc) {
            context.hold = None;
        }
        let mut opts = self.opts.clone();
        if let Some(at) = context.deadline {
            let left = at.as_millis().saturating_sub(Timestamp::now().as_millis());
            if left <= 0 {
                return Err(A2aError::from(heddle_api::DelegationError::DeadlinePassed(at)).into());
            }
            let left = std::time::Duration::from_millis(u64::try_from(left).unwrap_or(0));
            opts.timeout = opts.timeout.min(left);
        }
        // v0.3 names the header `X-A2A-Extensions`.
        let header = match self.version() {
            heddle_core::ProtocolVersion::V0_3 => LEGACY_EXTENSIONS_HEADER,
            heddle_core::ProtocolVersion::V1_0 => EXTENSIONS_HEADER,
        };
        activate(&mut opts.headers, header, DELEGATION_EXT);
        let client = self.rebound(opts)?;
        let alive = CancellationToken::new();
        Ok(Delegate {
            client,
            context,
            parent: ctx.cancel.clone(),
            events: events.clone(),
            _guard: Arc::new(alive.clone().drop_guard()),
            alive,
        })
    }
}

/// Whether two agent URLs (interface URLs; gRPC's may have no scheme)
/// name the same server: the same host and port, or with `any_port` the
/// same host.
fn same_server(a: &str, b: &str, any_port: bool) -> bool {
    let at = |u: &str| {
        let parsed = reqwest::Url::parse(u)
            .ok()
            .filter(|p| p.has_host())
            .or_else(|| reqwest::Url::parse(&format!("http://{u}")).ok())?;
        let host = parsed.host_str()?.to_ascii_lowercase();
        Some((host, parsed.port_or_known_default()))
    };
    match (at(a), at(b)) {
        (Some((h1, p1)), Some((h2, p2))) => h1 == h2 && (any_port || p1 == p2),
        _ => false,
    }
}

/// Adds `uri` to the extensions header `name` in `headers` (one header,
/// comma-separated), unless it is there.
fn activate(headers: &mut Vec<(String, String)>, name: &str, uri: &str) {
    let existing = headers
        .iter_mut()
        .find(|(k, _)| k.eq_ignore_ascii_case(name));
    match existing {
        Some((_, v)) if v.split(',').any(|u| u.trim() == uri) => {}
        Some((_, v)) => {
            v.push_str(", ");
            v.push_str(uri);
        }
        None => headers.push((name.to_owned(), uri.to_owned())),
    }
}

impl Delegate {
    /// The client the calls go through (with the extension activated and
    /// the deadline as its timeout), for the other operations.
    pub fn client(&self) -> &A2aClient {
        &self.client
    }

    /// The context each call carries.
    pub fn context(&self) -> &Delegation {
        &self.context
    }

    /// Sends one text message and waits for the answer.
    pub async fn send_text(&self, text: &str) -> Result<SendReply, ClientError> {
        let req = v1::SendMessageRequest {
            message: Some(A2aClient::user_message(vec![v1::Part::text(text)])),
            ..Default::default()
        };
        self.send(req).await
    }

    /// SendMessage, answered when the callee's task is finished or needs
    /// input (as a blocking send is).
    ///
    /// A new task: the send asks to return at once, so the task is known,
    /// and tied to the caller's, while it runs; it is then followed
    /// ([`A2aClient::wait`]). A callee that blocks anyway still answers, but
    /// cannot be canceled before it does. A reply to a task (the message
    /// names it) is tied first and sent blocking, so the answer is the
    /// task after this turn, not its state before.
    ///
    /// The send runs on a task of its own: a caller canceled (and dropped)
    /// while the send is in flight still learns the callee's task, and
    /// cancels it.
    pub async fn send(&self, mut req: v1::SendMessageRequest) -> Result<SendReply, ClientError> {
        self.carry(&mut req);
        let known = req
            .message
            .as_ref()
            .map(|m| m.task_id.clone())
            .filter(|id| !id.is_empty());
        if known.is_none() {
            req.configuration
                .get_or_insert_with(Default::default)
                .return_immediately = true;
        }
        let me = self.clone();
        let sent = tokio::spawn(
            async move {
                if let Some(id) = &known {
                    me.tie(id).await;
                }
                let reply = me.client.send(req).await?;
                if let (None, SendReply::Task(t)) = (&known, &reply) {
                    me.tie(&t.id).await;
                }
                Ok::<_, ClientError>((reply, known.is_some()))
            }
            .instrument(tracing::Span::current()),
        );
        let (reply, blocking) = sent.await.map_err(|_| ClientError::Canceled)??;
        let SendReply::Task(task) = reply else {
            return Ok(reply);
        };
        if self.parent.is_cancelled() {
            return Err(ClientError::Canceled);
        }
        if blocking {
            return Ok(SendReply::Task(task));
        }
        tokio::select! {
            waited = self.client.wait(task) => waited.map(SendReply::Task),
            // The caller's task was canceled: the watcher cancels the
            // callee's; stop waiting for it.
            () = self.parent.cancelled() => Err(ClientError::Canceled),
        }
    }

    /// SendStreamingMessage. The callee's task is tied to the caller's as
    /// soon as the stream names it. The send and the stream are read on a
    /// task of their own, so that happens even when the caller is canceled
    /// (and drops the stream) first; once the task is known, dropping the
    /// stream ends that reading.
    pub async fn send_streaming(
        &self,
        mut req: v1::SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        self.carry(&mut req);
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let (opened_tx, opened) = tokio::sync::oneshot::channel();
        let me = self.clone();
        tokio::spawn(
            async move {
                let mut events = match me.client.send_streaming(req).await {
                    Ok(events) => {
                        let _ = opened_tx.send(Ok(()));
                        events
                    }
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                        return;
                    }
                };
                let mut watched = false;
                loop {
                    let event = tokio::select! {
                        event = events.next() => event,
                        // The reader left: stop, unless the task is not known yet.
                        () = tx.closed(), if watched => return,
                    };
                    let Some(event) = event else { return };
                    if !watched
                        && let Ok(e) = &event
                        && let Some(id) = task_of(e)
                    {
                        watched = true;
                        me.tie(id).await;
                    }
                    // A reader that left is seen at the next event (or above).
                    let _ = tx.send(event).await;
                }
            }
            .instrument(tracing::Span::current()),
        );
        opened.await.map_err(|_| ClientError::Canceled)??;
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        })))
    }

    /// Puts the context in the message's metadata.
    fn carry(&self, req: &mut v1::SendMessageRequest) {
        if let Some(m) = req.message.as_mut() {
            self.context.put_into(&mut m.metadata);
        }
    }

    /// Ties the callee's task `id` to the caller's: recorded among the
    /// calling task's children, and canceled with it.
    async fn tie(&self, id: &str) {
        self.watch(id);
        // The callee as it names itself: its card's first interface.
        let agent = self
            .client
            .card()
            .supported_interfaces
            .first()
            .map_or_else(|| agent_name(self.client.interface()), agent_name);
        let child = Hop {
            agent,
            task_id: id.to_owned(),
        };
        // A task that has ended keeps what it had: the record is a courtesy.
        if let Err(e) = self.events.add_child(child).await {
            tracing::debug!(task = %id, error = %e, "recording a delegated task failed");
        }
    }

    /// Cancels the callee's task `id` when the caller's is canceled, until
    /// the caller drops this delegate.
    fn watch(&self, id: &str) {
        if id.is_empty() {
            return;
        }
        let (client, parent, alive, id) = (
            self.client.clone(),
            self.parent.clone(),
            self.alive.clone(),
            id.to_owned(),
        );
        let watcher = async move {
            // The caller's cancel first: it may come with the drop.
            let canceled = tokio::select! {
                biased;
                () = parent.cancelled() => true,
                () = alive.cancelled() => false,
            };
            if canceled && let Err(e) = client.cancel_task(&id).await {
                tracing::debug!(task = %id, error = %e, "canceling a delegated task failed");
            }
        };
        tokio::spawn(watcher.instrument(tracing::Span::current()));
    }
}

/// The task a stream event names.
fn task_of(e: &v1::StreamResponse) -> Option<&str> {
    let id = match e.payload.as_ref()? {
        Payload::Task(t) => &t.id,
        Payload::StatusUpdate(u) => &u.task_id,
        Payload::ArtifactUpdate(u) => &u.task_id,
        Payload::Message(m) => &m.task_id,
    };
    (!id.is_empty()).then_some(id.as_str())
}

#[cfg(test)]
mod tests {
    use super::{activate, same_server};

    #[test]
    fn a_hold_stays_on_its_server() {
        let hub = "https://hub.example/api/v1/agents/research";
        let writer = "https://HUB.example:443/api/v1/agents/writer";
        assert!(same_server(hub, writer, false));
        let elsewhere = "https://hub.example:8443/api/v1/agents/writer";
        assert!(!same_server(hub, elsewhere, false));
        assert!(same_server(
            "http://127.0.0.1:8080/a",
            "127.0.0.1:50051",
            true
        ));
        let neighbour = "http://127.0.0.1:9999/a";
        assert!(!same_server("http://127.0.0.1:8080/a", neighbour, false));
        assert!(!same_server(hub, "https://elsewhere.example/a2a", true));
        assert!(!same_server(hub, "not a url at all", true));
    }

    #[test]
    fn the_extension_joins_an_existing_header_once() {
        let mut h = vec![("a2a-extensions".to_owned(), "urn:x".to_owned())];
        activate(&mut h, "A2A-Extensions", "urn:y");
        activate(&mut h, "A2A-Extensions", "urn:y");
        assert_eq!(h, vec![("a2a-extensions".into(), "urn:x, urn:y".into())]);
        let mut h = Vec::new();
        activate(&mut h, "A2A-Extensions", "urn:y");
        assert_eq!(h, vec![("A2A-Extensions".into(), "urn:y".into())]);
    }
}
