//! The send gate: a say, before the agent runs, on whether a send goes ahead,
//! and word of how the run ended ([`HandlerBuilder::gate`]).
//!
//! A server that charges for tasks, or books them against a quota, needs
//! three moments the executor cannot give it: before the task exists (so a
//! refusal is the caller's error, not a failed task), when the agent starts,
//! and when its run ends (terminal, or waiting for the caller). The
//! [`SendGate`] is asked at the first; the [`Pass`] it hands back is
//! told the other two. A pass dropped without being told the end (the
//! send failed after the gate, or the run was aborted after a cancel)
//! must settle itself from what it knows: its `Drop` is the last word.
//!
//! [`HandlerBuilder::gate`]: crate::HandlerBuilder::gate

use std::sync::Arc;

use async_trait::async_trait;
use heddle_core::{A2aError, v1, wkt::Struct};

use crate::agent::Caller;

/// One send, as an [`SendGate`] sees it.
#[derive(Debug)]
pub struct SendAtGate<'a> {
    /// The handler's agent.
    pub agent_id: &'a str,
    /// Who sends.
    pub caller: &'a Caller,
    /// The task the message starts (its id already chosen) or continues.
    pub task_id: &'a str,
    /// Whether the message starts the task.
    pub new_task: bool,
    /// The message (checked: its parts, role and the message check passed).
    pub message: &'a v1::Message,
    /// The request's metadata.
    pub metadata: Option<&'a Struct>,
    /// The delegation context the message carries, admitted (within the
    /// hop limit, no loop, before the deadline).
    pub delegation: Option<&'a heddle_api::Delegation>,
}

/// Decides whether sends go ahead (module docs).
#[async_trait]
pub trait SendGate: Send + Sync + 'static {
    /// `Ok(Some(pass))`: go ahead, and tell the pass how it went;
    /// `Ok(None)`: go ahead, nothing to tell; `Err`: the caller's answer,
    /// in its binding, and no task is made or changed.
    async fn admit(&self, send: SendAtGate<'_>) -> Result<Option<Box<dyn Pass>>, A2aError>;

    /// A task ended while no run of it was going on, so no pass hears of
    /// it: canceled while it waited for its caller, or while its reply
    /// waited in the queue. The default does nothing.
    fn ended_outside_run(&self, _task: &v1::Task) {}
}

/// What an admitted send is told; see the module docs for when it is
/// dropped untold.
pub trait Pass: Send + 'static {
    /// The agent starts on the message.
    fn started(&mut self) {}

    /// The run ended: `task` as it stands (terminal, or interrupted and
    /// waiting for the caller), or `None` when the agent answered with a
    /// message and no task was kept.
    fn ended(self: Box<Self>, task: Option<&v1::Task>);

    /// The budget this run may hand down to the agents it calls, and the
    /// opaque hold that pays them: put in the run's delegation context
    /// ([`heddle_api::Delegation::budget`] and `hold`), so every call the
    /// agent makes with `heddle_client::Delegate` carries it. The default
    /// hands nothing down.
    fn delegation_budget(&self) -> Option<(heddle_api::delegation::Amount, String)> {
        None
    }
}

/// A gate, shared by the handler's clones.
pub(crate) type SharedGate = Arc<dyn SendGate>;
