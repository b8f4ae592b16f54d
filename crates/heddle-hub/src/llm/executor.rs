//! [`LlmAgent`]: the executor that answers a hub task with one
//! chat-completions call per message.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::StreamExt as _;
use heddle_client::{Secret, reqwest, retry_after};
use heddle_core::{
    sse::{EventTooLarge, SseDecoder},
    v1,
    wkt::Struct,
};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use heddle_store::{ListQuery, Scope, TaskStore};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    ASK_USER_TOOL, LlmError, LlmSettings, USAGE_KEY, conversation,
    retry::backoff,
    wire::{ChatMessage, ChatRequest, Chunk, ErrorEnvelope, Role, StreamOptions, Usage, tools},
};
use crate::remote::SecretSource;

/// Opening a connection to the endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the endpoint may stay silent in a stream.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest server-sent event (or line) read from the endpoint.
const MAX_EVENT_BYTES: usize = 1 << 20;
/// Largest answer from one call: its text, refusal, tool names and
/// arguments together.
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// Most tool calls in one answer.
const MAX_TOOL_CALLS: usize = 8;
/// Largest error body read.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// 429 answers retried at most this many times (within the turn's deadline).
const MAX_RETRIES: u32 = 5;
/// Tasks of a context read for its history.
const HISTORY_TASKS: u32 = 100;

/// A model behind an OpenAI-compatible chat-completions endpoint, as a hub
/// executor.
///
/// * Each message is one call, its messages: the system prompt, the
///   context's history (read from the hub's store, within the budget of
///   [`LlmSettings`]), the new message. The call is always streamed from
///   the endpoint; a streaming caller gets each piece of text as an
///   artifact chunk (`append`, then `lastChunk` on the last), a waiting
///   caller one artifact.
/// * The tool `ask_user` is declared in every call; when the model calls
///   it, the task waits in INPUT_REQUIRED with the question, and the reply
///   continues the conversation.
/// * The tokens used are summed on the task's metadata under
///   [`USAGE_KEY`], before the status that ends the turn, also when the
///   answer is refused after the endpoint reported them.
/// * `ctx.cancel` drops the call at once, which closes the connection.
/// * A 429 is retried after its `Retry-After` (seconds or an HTTP date;
///   else a backoff from 0.5 s, doubling) while the turn's deadline
///   (`timeout_secs`) allows; any other refusal, a timeout, a content
///   filter or a refusal by the model fails the task with a reason that
///   says which, with the API key scrubbed from it.
pub struct LlmAgent {
    agent_id: String,
    settings: LlmSettings,
    endpoint: String,
    /// The entry's `allow_http`: image URLs may be http too.
    allow_http: bool,
    http: reqwest::Client,
    key: Option<Secret>,
    store: Arc<dyn TaskStore>,
}

impl std::fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgent")
            .field("agent_id", &self.agent_id)
            .field("model", &self.settings.model)
            .field("endpoint", &crate::remote::shown_url(&self.endpoint))
            .finish_non_exhaustive()
    }
}

/// What one call produced: the tokens it used, reported even when the
/// answer is refused (a content filter, a refusal, a bad tool call), and
/// the answer: a question for the caller, or none (the text is published).
struct Outcome {
    usage: Option<Usage>,
    answer: Result<Option<String>, String>,
}

impl LlmAgent {
    /// The executor for `settings`, hosted as `agent_id`, its key read from
    /// `secrets`, the conversation read from `store` (the hub's). The
    /// settings are checked (`allow_http` is the entry's).
    pub fn new(
        agent_id: impl Into<String>,
        settings: LlmSettings,
        allow_http: bool,
        secrets: &SecretSource,
        store: Arc<dyn TaskStore>,
    ) -> Result<Self, LlmError> {
        settings
            .check(allow_http)
            .map_err(|(field, problem)| LlmError::Settings { field, problem })?;
        let key = settings
            .api_key_env
            .as_deref()
            .map(|name| secrets.get(name))
            .transpose()
            .map_err(LlmError::Secret)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("heddle-hub/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Client(e.to_string()))?;
        let endpoint =
            super::chat_endpoint(&settings.base_url).map_err(|problem| LlmError::Settings {
                field: "llm.base_url",
                problem,
            })?;
        Ok(Self {
            agent_id: agent_id.into(),
            settings,
            endpoint,
            allow_http,
            http,
            key,
            store,
        })
    }

    /// `text` with the API key replaced by `***`, and the endpoint shown
    /// without its query (which some deployments put a key in).
    fn scrub(&self, text: &str) -> String {
        let text = text.replace(&self.endpoint, &crate::remote::shown_url(&self.endpoint));
        crate::remote::scrub_secrets(&text, self.key.as_slice())
    }

    async fn run(&self, ctx: &RequestContext, events: &TaskEvents) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(self.settings.timeout_secs);
        let new = match conversation::content(&ctx.message, true, self.allow_http) {
            Ok(c) => c,
            Err(refusal) => {
                events.fail(&refusal).await.map_err(|e| e.to_string())?;
                return Ok(());
            }
        };
        let mut messages = Vec::new();
        if let Some(p) = self
            .settings
            .system_prompt
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            messages.push(ChatMessage::text(Role::System, p));
        }
        messages.extend(self.history(ctx).await?);
        messages.push(ChatMessage {
            role: Role::User,
            content: new,
        });
        events.working(None).await.map_err(|e| e.to_string())?;
        let outcome = self
            .call(&messages, ctx.streaming, events, deadline)
            .await?;
        if let Some(usage) = outcome.usage {
            let total = self.usage_total(ctx.task.as_deref(), usage);
            let mut fields = Struct::default();
            fields.0.insert(USAGE_KEY.to_owned(), total);
            events
                .task_metadata(fields)
                .await
                .map_err(|e| e.to_string())?;
        }
        match outcome.answer? {
            Some(q) => events.input_required(&q).await,
            None => events.complete(None).await,
        }
        .map_err(|e| e.to_string())
    }

    /// The earlier turns of the conversation, from the store, and those of
    /// the task being continued (sent even when `history_messages` is 0).
    async fn history(&self, ctx: &RequestContext) -> Result<Vec<ChatMessage>, String> {
        if self.settings.history_messages == 0 {
            return Ok(conversation::history(
                Vec::new(),
                &ctx.task_id,
                ctx.task.as_deref(),
                0,
                self.settings.history_chars,
            ));
        }
        let scope = Scope::new(self.agent_id.clone(), ctx.caller.id.clone());
        let query = ListQuery {
            context_id: Some(ctx.context_id.clone()),
            page_size: HISTORY_TASKS,
            ..ListQuery::default()
        };
        let page = self
            .store
            .list(&scope, &query)
            .await
            .map_err(|e| format!("cannot read the conversation from the store: {e}"))?;
        Ok(conversation::history(
            page.tasks,
            &ctx.task_id,
            ctx.task.as_deref(),
            self.settings.history_messages,
            self.settings.history_chars,
        ))
    }

    /// This call's usage added to what the task's earlier turns used.
    fn usage_total(&self, task: Option<&v1::Task>, usage: Usage) -> Value {
        let before = task
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.0.get(USAGE_KEY));
        let prior = |k: &str| {
            before
                .and_then(|b| b.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let prompt = usage.prompt_tokens.unwrap_or(0);
        let completion = usage.completion_tokens.unwrap_or(0);
        let total = usage
            .total_tokens
            .unwrap_or(prompt.saturating_add(completion));
        // The counts are the endpoint's (and the task's metadata) word: they
        // saturate rather than overflow.
        json!({
            "model": self.settings.model,
            "promptTokens": prior("promptTokens").saturating_add(prompt),
            "completionTokens": prior("completionTokens").saturating_add(completion),
            "totalTokens": prior("totalTokens").saturating_add(total),
            "calls": prior("calls").saturating_add(1),
        })
    }

    /// One call: the request (429s retried), then its stream read to the
    /// end, text published as it comes when `streaming`.
    async fn call(
        &self,
        messages: &[ChatMessage],
        streaming: bool,
        events: &TaskEvents,
        deadline: Instant,
    ) -> Result<Outcome, String> {
        let body = ChatRequest {
            model: &self.settings.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: self.settings.temperature,
            max_tokens: self.settings.max_tokens,
            tools: tools(),
        };
        let response = self.send(&body, deadline).await?;
        let media = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !media.trim_start().starts_with("text/event-stream") {
            return Err(format!(
                "the model endpoint answered with {:?}, not a stream (text/event-stream); it must support \"stream\": true",
                media.chars().take(100).collect::<String>()
            ));
        }
        let mut answer = Answer::new(events, streaming);
        let mut stream = response.bytes_stream();
        let mut sse = SseDecoder::new(MAX_EVENT_BYTES);
        let mut finish: Option<String> = None;
        // `[DONE]` seen, or the body ended.
        let (mut done, mut ended) = (false, false);
        while !done && !ended {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = tokio::time::timeout(IDLE_TIMEOUT.min(left), stream.next())
                .await
                .map_err(|_| {
                    if left <= IDLE_TIMEOUT {
                        self.timed_out()
                    } else {
                        format!("the model endpoint sent nothing for {IDLE_TIMEOUT:?}")
                    }
                })?;
            let datas = match next {
                Some(Ok(bytes)) => sse.push(&bytes),
                Some(Err(e)) => {
                    return Err(self.scrub(&format!(
                        "the model endpoint's answer broke off: {}",
                        error_chain(&e)
                    )));
                }
                None => {
                    ended = true;
                    // The end of the body ends an event left open.
                    sse.push(b"\n\n")
                }
            }
            .map_err(|EventTooLarge(n)| {
                format!("the model endpoint sent a stream event larger than {n} bytes")
            })?;
            for data in datas {
                if data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                let chunk: Chunk = serde_json::from_str(&data).map_err(|e| {
                    format!("the model endpoint sent a stream chunk that is not chat-completions JSON ({e})")
                })?;
                if let Some(err) = chunk.error {
                    return Err(self.scrub(&format!(
                        "the model endpoint reported an error mid-answer: {}",
                        err.describe()
                    )));
                }
                if chunk.usage.is_some() {
                    answer.usage = chunk.usage;
                }
                for choice in chunk.choices.unwrap_or_default() {
                    if choice.index.unwrap_or(0) != 0 {
                        continue;
                    }
                    if let Some(delta) = choice.delta {
                        answer.delta(delta).await?;
                    }
                    if let Some(reason) = choice.finish_reason {
                        finish = Some(reason);
                    }
                }
            }
        }
        if !done && finish.is_none() {
            return Err("the model endpoint's stream ended before the answer did".to_owned());
        }
        Ok(answer.finish(finish.as_deref()).await)
    }

    /// Sends the request, retrying 429s within the deadline.
    async fn send(
        &self,
        body: &ChatRequest<'_>,
        deadline: Instant,
    ) -> Result<reqwest::Response, String> {
        let mut attempt = 0u32;
        loop {
            let mut req = self.http.post(&self.endpoint).json(body);
            if let Some(key) = &self.key {
                req = req.bearer_auth(key.expose());
            }
            let response = tokio::time::timeout_at(deadline, req.send())
                .await
                .map_err(|_| self.timed_out())?
                .map_err(|e| {
                    self.scrub(&format!(
                        "cannot reach the model endpoint {}: {}",
                        crate::remote::shown_url(&self.endpoint),
                        error_chain(&e)
                    ))
                })?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = retry_after(response.headers());
            let why = self.error_text(response, deadline).await;
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                attempt += 1;
                let wait = retry_after.unwrap_or_else(|| backoff(attempt));
                if attempt <= MAX_RETRIES
                    && wait < deadline.saturating_duration_since(Instant::now())
                {
                    tracing::debug!(agent = %self.agent_id, ?wait, attempt, "model endpoint rate limited; retrying");
                    tokio::time::sleep(wait).await;
                    continue;
                }
                return Err(if attempt > MAX_RETRIES {
                    format!(
                        "the model endpoint kept refusing for too many requests (429): {attempt} tries, the retry cap ({MAX_RETRIES} retries) reached: {why}"
                    )
                } else {
                    format!(
                        "the model endpoint kept refusing for too many requests (429) after {attempt} tries; the next try (in {wait:?}) would pass the {} s deadline: {why}",
                        self.settings.timeout_secs
                    )
                });
            }
            let hint = match status.as_u16() {
                401 | 403 => " (check the API key the agent is configured with)",
                404 => " (check the base URL and the model name)",
                _ => "",
            };
            return Err(format!(
                "the model endpoint refused the call with {status}{hint}: {why}"
            ));
        }
    }

    fn timed_out(&self) -> String {
        format!(
            "the model endpoint did not finish answering within the {} s deadline",
            self.settings.timeout_secs
        )
    }

    /// An error body as text: the endpoint's `error.message` when it sent
    /// one, else the start of the body; read within the turn's deadline and
    /// [`MAX_ERROR_BYTES`], scrubbed.
    async fn error_text(&self, response: reqwest::Response, deadline: Instant) -> String {
        let read = heddle_client::read_limited(response, MAX_ERROR_BYTES, "error body");
        let body = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return self.scrub(&format!("its body could not be read ({e})")),
            Err(_) => return "its body did not arrive within the deadline".to_owned(),
        };
        let text = match serde_json::from_slice::<ErrorEnvelope>(&body) {
            Ok(e) => e.error.describe(),
            Err(_) => {
                let raw = String::from_utf8_lossy(&body);
                let short: String = raw.trim().chars().take(300).collect();
                if short.is_empty() {
                    "no explanation given".to_owned()
                } else {
                    short
                }
            }
        };
        self.scrub(&text)
    }
}

/// The model's answer as it streams: text (published as chunks when the
/// caller streams), tool calls, a refusal, the usage.
struct Answer<'a> {
    events: &'a TaskEvents,
    streaming: bool,
    artifact_id: String,
    text: String,
    /// The latest piece, held back so the last one can carry `lastChunk`.
    held: Option<String>,
    started: bool,
    refusal: String,
    tools: BTreeMap<u64, (String, String)>,
    /// Bytes received in the answer so far, in all its fields.
    bytes: usize,
    usage: Option<Usage>,
}

impl<'a> Answer<'a> {
    fn new(events: &'a TaskEvents, streaming: bool) -> Self {
        Self {
            events,
            streaming,
            artifact_id: events.sink().new_id(),
            text: String::new(),
            held: None,
            started: false,
            refusal: String::new(),
            tools: BTreeMap::new(),
            bytes: 0,
            usage: None,
        }
    }

    /// Counts `n` more bytes of the answer; past [`MAX_ANSWER_BYTES`] the
    /// answer is refused.
    fn count(&mut self, n: usize) -> Result<(), String> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > MAX_ANSWER_BYTES {
            return Err(format!(
                "the model's answer (its text, refusal and tool calls) is longer than {MAX_ANSWER_BYTES} bytes"
            ));
        }
        Ok(())
    }

    async fn delta(&mut self, delta: super::wire::Delta) -> Result<(), String> {
        if let Some(r) = delta.refusal {
            self.count(r.len())?;
            self.refusal.push_str(&r);
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let index = call.index.unwrap_or(0);
            if !self.tools.contains_key(&index) && self.tools.len() >= MAX_TOOL_CALLS {
                return Err(format!(
                    "the model made more than {MAX_TOOL_CALLS} tool calls in one answer"
                ));
            }
            let function = call.function.unwrap_or_default();
            let name = function.name.filter(|n| !n.is_empty());
            let args = function.arguments.unwrap_or_default();
            self.count(name.as_deref().map_or(0, str::len) + args.len())?;
            let entry = self.tools.entry(index).or_default();
            // The name comes whole (some endpoints repeat it in every delta);
            // the arguments come in pieces.
            if let Some(n) = name {
                entry.0 = n;
            }
            entry.1.push_str(&args);
        }
        let Some(piece) = delta.content.filter(|c| !c.is_empty()) else {
            return Ok(());
        };
        self.count(piece.len())?;
        self.text.push_str(&piece);
        if self.streaming
            && let Some(prev) = self.held.replace(piece)
        {
            self.publish(prev, false).await?;
        }
        Ok(())
    }

    async fn publish(&mut self, text: String, last: bool) -> Result<(), String> {
        let artifact = v1::Artifact {
            artifact_id: self.artifact_id.clone(),
            name: "answer".to_owned(),
            parts: vec![v1::Part::text(text)],
            ..Default::default()
        };
        let append = self.started;
        self.started = true;
        self.events
            .artifact(artifact, append, last)
            .await
            .map_err(|e| e.to_string())
    }

    /// The end of the stream: the answer, and the tokens used.
    async fn finish(mut self, reason: Option<&str>) -> Outcome {
        let answer = self.settle(reason).await;
        Outcome {
            usage: self.usage,
            answer,
        }
    }

    /// The last chunk (or the one artifact), and what the model asked for.
    async fn settle(&mut self, reason: Option<&str>) -> Result<Option<String>, String> {
        if !self.refusal.is_empty() {
            // The reason is the task's status message: a person reads it.
            const SHOWN: usize = 1000;
            let refusal = match self.refusal.char_indices().nth(SHOWN) {
                Some((end, _)) => format!("{}…", &self.refusal[..end]),
                None => self.refusal.clone(),
            };
            return Err(format!("the model refused: {refusal}"));
        }
        if reason == Some("content_filter") {
            return Err("the model endpoint withheld the answer (its content filter)".to_owned());
        }
        if self.streaming {
            if let Some(last) = self.held.take() {
                self.publish(last, true).await?;
            }
        } else if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.publish(text, true).await?;
        }
        let mut question = None;
        for (name, args) in self.tools.values() {
            if name != ASK_USER_TOOL {
                return Err(format!(
                    "the model called the tool {name:?}, which this agent does not offer"
                ));
            }
            let parsed: Option<String> = serde_json::from_str::<Value>(args)
                .ok()
                .and_then(|v| v.get("question").and_then(Value::as_str).map(str::to_owned))
                .filter(|q| !q.trim().is_empty());
            match parsed {
                Some(q) => question = Some(q),
                None => {
                    return Err(format!(
                        "the model called {ASK_USER_TOOL} without a question"
                    ));
                }
            }
        }
        if question.is_none() && !self.started {
            return Err(match reason {
                Some("length") => {
                    "the model ran out of tokens (max_tokens) before answering".to_owned()
                }
                _ => "the model answered nothing".to_owned(),
            });
        }
        Ok(question)
    }
}

/// An error with its causes, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

#[async_trait::async_trait]
impl AgentExecutor for LlmAgent {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => {
                // The call is dropped here, which closes its connection.
                // CancelTask is publishing CANCELED; the server stops this
                // execution once it has, and this wait is only a bound.
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(())
            }
            run = self.run(&ctx, &events) => run.map_err(AgentError::new),
        }
    }
}
