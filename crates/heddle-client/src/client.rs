//! [`A2aClient`]: every A2A operation over the chosen interface.
//!
//! The client binds to one interface of the card and one transport for it
//! (see [`crate::transport`]); everything here is the same whatever the
//! binding: the tenant, retries of idempotent calls, OAuth 2.0 refresh,
//! extended card verification, and polling where the agent cannot stream.

use std::{sync::Arc, time::Duration};

use heddle_core::{
    ProtocolVersion,
    v1::{self, send_message_response::Payload as SendPayload},
};
use heddle_signing::Verdict;
use serde_json::Value;

use crate::{
    Binding, ClientError, ClientOptions,
    discovery::{CardCache, choose_interface, fetch_card_limited},
    oauth::CardOrigin,
    options::http_client,
    transport::{self, EventStream, Target, Transport},
};

/// What a send produced.
#[derive(Clone, Debug, PartialEq)]
pub enum SendReply {
    /// A task.
    Task(v1::Task),
    /// A direct message.
    Message(v1::Message),
}

/// A client bound to one agent interface.
#[derive(Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    card: v1::AgentCard,
    interface: v1::AgentInterface,
    binding: Binding,
    version: ProtocolVersion,
    pub(crate) opts: ClientOptions,
    /// The interface's transport, shared by clones (a gRPC one holds one
    /// channel for all of them).
    pub(crate) transport: Arc<dyn Transport>,
    /// OAuth 2.0 client-credentials tokens, when configured without a static bearer.
    oauth: Option<crate::oauth::TokenSource>,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("url", &self.interface.url)
            .field("binding", &self.binding)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl A2aClient {
    /// Fetches the card of the agent at `url` and binds to its best
    /// interface. The card's OAuth 2.0 token URL is trusted as its origin
    /// and signature allow (see [`crate::ClientCredentials`]).
    pub async fn discover(url: &str, opts: ClientOptions) -> Result<Self, ClientError> {
        let http = http_client(&opts)?;
        let (card, card_url) = fetch_card_limited(
            &http,
            url,
            Some(&CardCache::default()),
            &opts.headers,
            opts.card_verification.as_ref(),
            opts.max_body_bytes,
        )
        .await?;
        // Discovery fails unless the signature verified, when one is required.
        let origin = CardOrigin {
            card_url: Some(card_url),
            verified: opts.card_verification.is_some(),
        };
        Self::bind(card, opts, http, &origin)
    }

    /// Binds to the best interface of a card already in hand. Where the card
    /// came from is unknown, so its OAuth 2.0 token URL is not trusted with
    /// the client secret: configure [`crate::ClientCredentials::token_url`].
    pub fn from_card(card: v1::AgentCard, opts: ClientOptions) -> Result<Self, ClientError> {
        let http = http_client(&opts)?;
        Self::bind(card, opts, http, &CardOrigin::default())
    }

    fn bind(
        card: v1::AgentCard,
        opts: ClientOptions,
        http: reqwest::Client,
        origin: &CardOrigin,
    ) -> Result<Self, ClientError> {
        let (interface, binding, version) = choose_interface(&card, &opts.bindings, opts.version)?;
        let oauth = crate::oauth::source_for(&card, &opts, origin)?;
        let target = Target {
            card: &card,
            interface: &interface,
            version,
            opts: &opts,
            http: http.clone(),
            oauth: oauth.clone(),
        };
        let transport = transport::connect(binding, target)?;
        Ok(Self {
            http,
            card,
            interface,
            binding,
            version,
            opts,
            transport,
            oauth,
        })
    }

    /// This client with other options, on the same card, interface, HTTP
    /// client and OAuth 2.0 tokens (a new transport, which the options
    /// shape).
    pub(crate) fn rebound(&self, opts: ClientOptions) -> Result<Self, ClientError> {
        let target = Target {
            card: &self.card,
            interface: &self.interface,
            version: self.version,
            opts: &opts,
            http: self.http.clone(),
            oauth: self.oauth.clone(),
        };
        let transport = transport::connect(self.binding, target)?;
        Ok(Self {
            http: self.http.clone(),
            card: self.card.clone(),
            interface: self.interface.clone(),
            binding: self.binding,
            version: self.version,
            opts,
            transport,
            oauth: self.oauth.clone(),
        })
    }

    /// The agent's card.
    pub fn card(&self) -> &v1::AgentCard {
        &self.card
    }

    /// The interface in use.
    pub fn interface(&self) -> &v1::AgentInterface {
        &self.interface
    }

    /// The binding in use.
    pub fn binding(&self) -> Binding {
        self.binding
    }

    /// The protocol version in use.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// The interface's tenant, which every request echoes (v1 §8.3.2).
    pub(crate) fn tenant(&self) -> String {
        self.interface.tenant.clone()
    }

    /// Retries `f` on transient failures with jittered exponential backoff
    /// (only for idempotent calls), and once after a 401 with a fresh OAuth
    /// 2.0 token.
    pub(crate) async fn retrying<T, F, Fut>(&self, mut f: F) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 0;
        let mut reauthorized = false;
        loop {
            match f().await {
                // An OAuth token the agent rejects: fetch a new one, once.
                Err(ClientError::Http { status: 401, .. })
                    if self.oauth.is_some() && !reauthorized =>
                {
                    reauthorized = true;
                    if let Some(o) = &self.oauth {
                        o.invalidate();
                    }
                }
                Err(e) if e.is_transient() && attempt < self.opts.retries => {
                    attempt += 1;
                    let base = 100u64 << attempt.min(6);
                    let jitter = rand::random::<u64>() % base;
                    let backoff = Duration::from_millis(base / 2 + jitter);
                    // The server's Retry-After wins, capped so a call cannot hang for long.
                    let wait = match &e {
                        ClientError::Http {
                            retry_after: Some(ra),
                            ..
                        } => (*ra).min(Duration::from_secs(60)),
                        _ => backoff,
                    };
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    // ---- operations -------------------------------------------------------------

    /// A user message with a fresh id and the given parts.
    pub fn user_message(parts: Vec<v1::Part>) -> v1::Message {
        v1::Message::new(uuid::Uuid::new_v4().to_string(), v1::Role::User, parts)
    }

    /// Sends one text message and waits for the answer.
    pub async fn send_text(&self, text: &str) -> Result<SendReply, ClientError> {
        let req = v1::SendMessageRequest {
            message: Some(Self::user_message(vec![v1::Part::text(text)])),
            ..Default::default()
        };
        self.send(req).await
    }

    /// SendMessage. Never retried: the agent may have acted on it.
    pub async fn send(&self, mut req: v1::SendMessageRequest) -> Result<SendReply, ClientError> {
        req.tenant = self.tenant();
        send_reply(self.transport.send(req).await?)
    }

    /// SendStreamingMessage: the events of the task (or one message). An
    /// agent whose card says it does not stream is polled instead: the
    /// message is sent without waiting, then the task is read until it ends
    /// or needs input, each change arriving as a task snapshot
    /// ([`ClientOptions::polling`]).
    pub async fn send_streaming(
        &self,
        mut req: v1::SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        req.tenant = self.tenant();
        if !self.streams() {
            return self.poll_send(req).await;
        }
        self.transport.send_streaming(req).await
    }

    /// GetTask (idempotent, so retried on transient failures).
    pub async fn get_task(
        &self,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<v1::Task, ClientError> {
        let req = v1::GetTaskRequest {
            tenant: self.tenant(),
            id: id.to_owned(),
            history_length,
        };
        self.retrying(|| self.transport.get_task(req.clone())).await
    }

    /// ListTasks (v1.0 only; v0.3 has no such method).
    pub async fn list_tasks(
        &self,
        mut req: v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, ClientError> {
        req.tenant = self.tenant();
        self.retrying(|| self.transport.list_tasks(req.clone()))
            .await
    }

    /// CancelTask (idempotent, so retried on transient failures).
    pub async fn cancel_task(&self, id: &str) -> Result<v1::Task, ClientError> {
        let req = v1::CancelTaskRequest {
            tenant: self.tenant(),
            id: id.to_owned(),
            metadata: None,
        };
        self.retrying(|| self.transport.cancel_task(req.clone()))
            .await
    }

    /// SubscribeToTask: the current task first, then its events. Also how a
    /// dropped stream resumes: feed the events to a [`crate::TaskAccumulator`],
    /// whose snapshot replaces what it had, so no chunk is counted twice. An
    /// agent whose card says it does not stream is polled instead, as for
    /// [`Self::send_streaming`].
    pub async fn subscribe(&self, id: &str) -> Result<EventStream, ClientError> {
        if !self.streams() {
            return self.poll_task(id).await;
        }
        let req = v1::SubscribeToTaskRequest {
            tenant: self.tenant(),
            id: id.to_owned(),
        };
        self.transport.subscribe(req).await
    }

    /// GetExtendedAgentCard. With [`ClientOptions::card_verification`] set,
    /// the extended card must carry a signature that verifies, as the public
    /// card must at discovery: one over the JSON as served, or over the v1.0
    /// JSON of the card returned (what a card that arrives as protobuf, or
    /// in v0.3 form, can be checked against).
    pub async fn extended_card(&self) -> Result<v1::AgentCard, ClientError> {
        let req = v1::GetExtendedAgentCardRequest {
            tenant: self.tenant(),
        };
        let got = self
            .retrying(|| self.transport.extended_card(req.clone()))
            .await?;
        let Some(verification) = &self.opts.card_verification else {
            return Ok(got.card);
        };
        let model = transport::to_value(&got.card)?;
        let forms: Vec<&Value> = got.served.iter().chain([&model]).collect();
        match verification.verify_any(&self.http, &forms).await? {
            Verdict::Verified { .. } => Ok(got.card),
            other => Err(ClientError::CardSignature(format!(
                "extended card: {other}"
            ))),
        }
    }
}

pub(crate) fn send_reply(r: v1::SendMessageResponse) -> Result<SendReply, ClientError> {
    match r.payload {
        Some(SendPayload::Task(t)) => Ok(SendReply::Task(t)),
        Some(SendPayload::Message(m)) => Ok(SendReply::Message(m)),
        None => Err(ClientError::InvalidResponse(
            "SendMessage result holds neither a task nor a message".into(),
        )),
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
