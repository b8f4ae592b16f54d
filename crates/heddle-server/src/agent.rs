//! The API an agent implements: [`AgentExecutor`].
//!
//! The server calls [`AgentExecutor::execute`] once per message addressed to
//! a task (a new task, or a reply to one waiting for input) and hands it a
//! [`RequestContext`] and a [`TaskEvents`] sink. The agent reports progress
//! by publishing events on the sink; the server applies them to the task,
//! persists them, and fans them out to every subscriber.
//!
//! These types are defined in `heddle-api`, so an agent crate can be built
//! without the server, and re-exported here under their old paths.

pub use heddle_api::{
    AgentError, AgentExecutor, Caller, DELEGATION_EXT, Delegation, DelegationError, EventError,
    RequestContext, TaskEvents, TaskSink,
};
