//! The API an agent implements: [`AgentExecutor`].
//!
//! The server calls [`AgentExecutor::execute`] once per message addressed to
//! a task (a new task, or a reply to one waiting for input) and hands it a
//! [`RequestContext`] and a [`TaskEvents`] sink. The agent reports progress
//! by publishing events on the sink; the server applies them to the task,
//! persists them, and fans them out to every subscriber.

use std::sync::Arc;

use async_trait::async_trait;
use heddle_core::{ProtocolVersion, v1, wkt::Struct};
use tokio_util::sync::CancellationToken;

use crate::{
    delegation::{Delegation, DelegationError},
    events::{EventError, TaskEvents},
};

/// Who is calling, as established by the authentication layer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Caller {
    /// Stable id of the principal (`""` for an anonymous caller on an open server).
    pub id: String,
    /// Whether a credential was verified.
    pub authenticated: bool,
}

impl Caller {
    /// The anonymous caller of an open server.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// A verified principal.
    pub fn authenticated(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            authenticated: true,
        }
    }
}

/// Everything an agent gets to act on one message.
///
/// An agent's future usually holds its context for the whole execution, and
/// an `async fn` (or `#[async_trait]`) future keeps its arguments twice, so
/// the two large fields most agents never read (the prior task and the send
/// configuration) are boxed: a context of a few hundred bytes instead of
/// nearly a kilobyte.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The task this message belongs to (server-assigned).
    pub task_id: String,
    /// The conversation (kept from the message or generated).
    pub context_id: String,
    /// The message that triggered this execution (already in the task history).
    pub message: v1::Message,
    /// The task as it was before this message, when continuing one.
    pub task: Option<Box<v1::Task>>,
    /// The caller.
    pub caller: Caller,
    /// Extension URIs the client activated (`A2A-Extensions`).
    pub extensions: Vec<String>,
    /// The request's send configuration.
    pub configuration: Option<Box<v1::SendMessageConfiguration>>,
    /// Request metadata.
    pub metadata: Option<Struct>,
    /// The protocol version the caller speaks. Agents rarely need it; the
    /// server converts everything they publish.
    pub protocol_version: ProtocolVersion,
    /// Fires when the task is canceled; long-running agents should watch it.
    pub cancel: CancellationToken,
    /// Whether the caller follows the task as a stream (SendStreamingMessage)
    /// rather than waiting for an answer: an agent that relays elsewhere can
    /// then stream there too, and make one call when nobody watches events.
    pub streaming: bool,
    /// This agent, as a delegation chain names it (its card's first
    /// interface, [`crate::delegation::agent_name`]): what
    /// [`Delegation::next`] adds for a call this agent makes.
    pub agent: Arc<str>,
    /// The delegation context the request arrived with, already admitted
    /// (no loop, within the hop limit, before the deadline); `None` at the
    /// root of a chain. A call made for this task carries it on.
    pub delegation: Option<Box<Delegation>>,
    /// The most agents a chain this agent starts may hold (the server's
    /// [`Delegation::max_hops`] limit), when the request carried no chain.
    pub max_hops: u32,
}

impl RequestContext {
    /// All text parts of the triggering message, joined by newlines.
    pub fn text(&self) -> String {
        self.message.text()
    }

    /// The context a call this agent makes for this task carries: the
    /// chain so far with this agent and task added. Refused when the
    /// callee would be past the hop limit.
    pub fn delegation_for_call(&self) -> Result<Delegation, DelegationError> {
        let base = self
            .delegation
            .as_deref()
            .cloned()
            .unwrap_or_else(|| Delegation::root(self.max_hops));
        base.next(&self.agent, &self.task_id)
    }

    /// Whether this message continues an existing task.
    pub fn is_continuation(&self) -> bool {
        self.task.is_some()
    }
}

/// An agent's failure; the task ends FAILED with this message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AgentError(pub String);

impl From<EventError> for AgentError {
    fn from(e: EventError) -> Self {
        Self(e.to_string())
    }
}

impl AgentError {
    /// An error with a message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// What an agent implements.
///
/// ```
/// use heddle_api::{AgentExecutor, AgentError, RequestContext, TaskEvents};
///
/// struct Echo;
///
/// #[heddle_api::async_trait]
/// impl AgentExecutor for Echo {
///     async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
///         events.artifact_text("echo", ctx.text()).await?;
///         events.complete(None).await?;
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait AgentExecutor: Send + Sync + 'static {
    /// Handles one message. Return when the task is terminal or waits for
    /// input; returning `Err` ends the task FAILED. A task left SUBMITTED or
    /// WORKING on return is failed by the server (an agent bug).
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError>;

    /// Asked to stop a task, whether a run of it is going on or it waits
    /// (for its caller's answer, say): work it started elsewhere (an
    /// upstream task, the tasks it delegated) is the agent's to stop. The
    /// default publishes CANCELED; a running `execute` also sees
    /// `ctx.cancel` fire. If the task is not terminal when this returns,
    /// the server marks it CANCELED.
    async fn cancel(&self, _ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.cancel(None).await?;
        Ok(())
    }

    /// Whether a run of this agent may be resumed on another server
    /// replica when the one running it dies. If so, the replica that takes
    /// the task over calls [`execute`](Self::execute) again with the task
    /// as it stands (`ctx.task`: its status, history and artifacts, the
    /// dead replica's last events included) and its last user message as
    /// `ctx.message`, with the first call's configuration, metadata,
    /// extensions and protocol version (`ctx.streaming` is false: whoever
    /// follows the task does so over the other replicas' streams); the run
    /// carries on from there without redoing what the task already shows.
    /// The default, `false`, ends such a task FAILED, saying its replica
    /// stopped.
    fn resumable(&self) -> bool {
        false
    }
}
