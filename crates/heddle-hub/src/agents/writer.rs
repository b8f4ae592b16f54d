use std::time::Duration;

use async_trait::async_trait;
use heddle_core::v1::{self, part::Content};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};

/// The seed's writer: a PDF and an instruction in, a clarifying question,
/// then a text artifact.
///
/// WORKING → INPUT_REQUIRED ("who is it for?") → (caller answers on the same
/// task) → WORKING → COMPLETED with a `report` artifact.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writer;

/// The document of a message: name and size of its first file part.
fn document(message: &v1::Message) -> Option<(String, usize)> {
    message.parts.iter().find_map(|p| match &p.content {
        Some(Content::Raw(b)) => Some((name_of(p), b.len())),
        Some(Content::Url(_)) => Some((name_of(p), 0)),
        _ => None,
    })
}

fn name_of(p: &v1::Part) -> String {
    if p.filename.is_empty() {
        "the attached document".to_owned()
    } else {
        p.filename.clone()
    }
}

/// The instruction and document of the task's first user message.
fn brief(task: &v1::Task) -> (String, Option<(String, usize)>) {
    let first = task.history.iter().find(|m| m.role() == v1::Role::User);
    (
        first.map(v1::Message::text).unwrap_or_default(),
        first.and_then(document),
    )
}

#[async_trait]
impl AgentExecutor for Writer {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        match &ctx.task {
            None => {
                let doc = document(&ctx.message);
                let what = match &doc {
                    Some((name, size)) if *size > 0 => format!("Reading {name} ({size} bytes)."),
                    Some((name, _)) => format!("Reading {name}."),
                    None => "No document attached; working from your instruction alone.".to_owned(),
                };
                events.working(Some(&what)).await?;
                events
                    .input_required("Who is the report for, and how long should it be? (for example: \"the board, one page\")")
                    .await?;
            }
            Some(task) => {
                let (instruction, doc) = brief(task);
                let audience = ctx.text();
                events.working(Some("Drafting the report.")).await?;
                let source = doc.map_or_else(|| "your instruction".to_owned(), |(name, _)| name);
                let report = format!(
                    "Report for {audience}\n\nBrief: {instruction}\nSource: {source}\n\n\
                     The document was reviewed and its main points summarised for the stated audience. \
                     Key findings, risks and recommended next steps follow the structure requested."
                );
                events.artifact_text("report", report).await?;
                events.complete(Some("The report is ready.")).await?;
            }
        }
        Ok(())
    }
}

/// Streams a three-chunk artifact, then COMPLETED. The artifact is named
/// by the request's metadata key `reportName` (a string), or `report`.
#[derive(Clone, Copy, Debug)]
pub struct WriterStream {
    /// Pause between chunks, so a terminal shows them arrive.
    pub pause: Duration,
    /// Whether a run whose server replica died is resumed on another
    /// (the chunks the task already holds are not written again) rather
    /// than failed ([`AgentExecutor::resumable`]).
    pub resumable: bool,
}

impl Default for WriterStream {
    fn default() -> Self {
        Self {
            pause: Duration::from_millis(150),
            resumable: false,
        }
    }
}

/// The three chunks of the streamed report.
pub const WRITER_STREAM_CHUNKS: [&str; 3] = [
    "Report, part one: the findings. ",
    "Part two: what they mean. ",
    "Part three: what to do next.",
];

#[async_trait]
impl AgentExecutor for WriterStream {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let id = format!("{}-report", ctx.task_id);
        // A resumed run: the chunks the task holds are written already.
        let written = ctx
            .task
            .as_ref()
            .and_then(|t| t.artifacts.iter().find(|a| a.artifact_id == id))
            .map_or(0, |a| a.parts.len());
        let note = if written > 0 { "Resuming." } else { "Writing." };
        let name = ctx
            .metadata
            .as_ref()
            .and_then(|m| m.0.get("reportName"))
            .and_then(|v| v.as_str())
            .unwrap_or("report")
            .to_owned();
        events.working(Some(note)).await?;
        for (i, chunk) in WRITER_STREAM_CHUNKS.iter().enumerate().skip(written) {
            if ctx.cancel.is_cancelled() {
                return Ok(());
            }
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
            let artifact = v1::Artifact {
                artifact_id: id.clone(),
                name: name.clone(),
                parts: vec![v1::Part::text(*chunk)],
                ..Default::default()
            };
            events
                .artifact(artifact, i > 0, i == WRITER_STREAM_CHUNKS.len() - 1)
                .await?;
        }
        events.complete(None).await?;
        Ok(())
    }

    fn resumable(&self) -> bool {
        self.resumable
    }
}
