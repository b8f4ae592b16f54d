//! The agents `heddle serve` hosts out of the box.
//!
//! * [`Echo`]: completes with an artifact repeating the caller's text.
//! * [`Writer`]: the seed harness: reads a PDF and an instruction, asks who
//!   the report is for (INPUT_REQUIRED), then writes it.
//! * [`WriterStream`]: streams its artifact in three chunks.
//! * [`Conformance`]: the behaviour public conformance suites drive.
//! * [`Research`] and [`Summarizer`]: the delegation demo; research hands
//!   its work to writer and summarizer on the same hub.

mod conformance;
mod echo;
mod research;
mod writer;

use std::sync::Arc;

pub use conformance::{Conformance, ConformanceCard, REQUIRED_EXTENSION, conformance_profile};
pub use echo::Echo;
pub use research::{Research, Summarizer};
pub use writer::{WRITER_STREAM_CHUNKS, Writer, WriterStream};

use crate::{AgentProfile, HubBuilder};

/// Adds the demo agents to a hub.
pub fn with_demo_agents(hub: HubBuilder) -> HubBuilder {
    with_demo_agents_using(hub, WriterStream::default())
}

/// How the demo agents are set up (`heddle serve`'s flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct DemoOptions {
    /// Serves `writer-stream` (the benchmarks set its pause between chunks:
    /// none, to measure streaming throughput, or a long one, to hold
    /// streams open).
    pub writer_stream: WriterStream,
    /// The conformance agent's card: a required extension, streaming.
    pub conformance: ConformanceCard,
}

/// Adds the demo agents to a hub, with `writer_stream` serving
/// `writer-stream`.
pub fn with_demo_agents_using(hub: HubBuilder, writer_stream: WriterStream) -> HubBuilder {
    with_demo_agents_configured(
        hub,
        DemoOptions {
            writer_stream,
            ..DemoOptions::default()
        },
    )
}

/// Adds the demo agents to a hub, set up as `options` say: each a
/// builtin served under its own name.
pub fn with_demo_agents_configured(hub: HubBuilder, options: DemoOptions) -> HubBuilder {
    DEMO_AGENTS
        .iter()
        .fold(demo_builtins(hub, options), |hub, id| {
            hub.entry(crate::registry::AgentEntry::builtin(*id, *id))
        })
}

/// The demo agents' ids, which are also their builtin names.
pub const DEMO_AGENTS: [&str; 6] = [
    "echo",
    "writer",
    "writer-stream",
    "conformance",
    "research",
    "summarizer",
];

/// Makes the demo agents available as builtins, set up as `options`
/// say, without serving them: a registration (the config's `[[agents]]`
/// tables or the admin API) names the ones to serve.
pub fn demo_builtins(hub: HubBuilder, options: DemoOptions) -> HubBuilder {
    hub.builtin(
        "echo",
        AgentProfile::new(
            "echo",
            "Echo",
            "Repeats your message back as an artifact.",
            &["demo", "echo"],
        ),
        Arc::new(Echo),
    )
    .builtin(
        "writer",
        AgentProfile {
            input_modes: vec!["text/plain".into(), "application/pdf".into()],
            ..AgentProfile::new(
                "writer",
                "Report writer",
                "Reads a document and an instruction, asks who the report is for, then writes it.",
                &["demo", "writing", "multi-turn"],
            )
        },
        Arc::new(Writer),
    )
    .builtin(
        "writer-stream",
        AgentProfile::new(
            "writer-stream",
            "Streaming writer",
            "Writes a short report and streams it in three chunks.",
            &["demo", "writing", "streaming"],
        ),
        Arc::new(options.writer_stream),
    )
    .builtin(
        "conformance",
        conformance_profile(options.conformance),
        Arc::new(Conformance::default()),
    )
    .builtin(
        "research",
        AgentProfile::new(
            "research",
            "Researcher",
            "Gathers notes on a topic, has the writer write them up (asking you who it is for) and the summarizer sum the report up.",
            &["demo", "delegation", "multi-turn"],
        ),
        Arc::new(Research),
    )
    .builtin(
        "summarizer",
        AgentProfile::new(
            "summarizer",
            "Summarizer",
            "Sums a text up in a line.",
            &["demo", "writing"],
        ),
        Arc::new(Summarizer),
    )
}
