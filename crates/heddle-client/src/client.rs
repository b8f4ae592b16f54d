//! [`A2aClient`]: every A2A operation over the chosen interface.

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use heddle_core::{
    A2aError, ProtocolVersion,
    compat::{v03, v03_proto},
    jsonrpc::ClientResponse,
    method::Method,
    sse::SseDecoder,
    v1::{self, send_message_response::Payload as SendPayload},
    v03_proto as v03_pb,
};
use heddle_signing::Verdict;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::{
    ClientError, Credentials,
    credentials::{KeyPlace, api_key_place, is_sensitive_header},
    discovery::{CardCache, choose_interface, fetch_card_limited},
    grpc::GrpcTransport,
    oauth::CardOrigin,
};

/// A protocol binding this client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP.
    JsonRpc,
    /// HTTP+JSON (REST).
    Rest,
    /// gRPC (HTTP/2, `lf.a2a.v1` or `a2a.v1` service).
    Grpc,
}

impl Binding {
    /// The binding named on a card (`JSONRPC`, `HTTP+JSON`, `GRPC`).
    pub fn from_card_name(name: &str) -> Option<Self> {
        match name {
            "JSONRPC" => Some(Self::JsonRpc),
            "HTTP+JSON" => Some(Self::Rest),
            "GRPC" => Some(Self::Grpc),
            _ => None,
        }
    }

    /// Parses a user's name for a binding (`jsonrpc`, `rest`, `grpc`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "jsonrpc" | "json-rpc" => Some(Self::JsonRpc),
            "rest" | "http+json" | "http" => Some(Self::Rest),
            "grpc" => Some(Self::Grpc),
            _ => None,
        }
    }
}

/// Sees every request and response, with secrets redacted (for `--debug`).
pub type WireLog = Arc<dyn Fn(&str) + Send + Sync>;

/// How to build a client.
#[derive(Clone)]
pub struct ClientOptions {
    /// Bindings in order of preference. The default is JSON-RPC then REST:
    /// gRPC is used only when listed, since it often listens on a separate
    /// port (and needs HTTP/2) that networks reaching the HTTP URL may not reach.
    pub bindings: Vec<Binding>,
    /// Force a protocol version instead of negotiating.
    pub version: Option<ProtocolVersion>,
    /// Credentials to present.
    pub credentials: Credentials,
    /// Extra headers on every request.
    pub headers: Vec<(String, String)>,
    /// Timeout of each unary call (streams have none).
    pub timeout: Duration,
    /// Retries of idempotent calls on transient failures.
    pub retries: u32,
    /// The wire log, if any.
    pub wire_log: Option<WireLog>,
    /// An HTTP client to reuse. OAuth 2.0 token requests use it too, under
    /// its redirect policy: reqwest's default follows a 307 or 308 with the
    /// body, which holds the client secret, so give it
    /// `reqwest::redirect::Policy::none()` when using OAuth. (Without it, a
    /// client is built whose token requests follow no redirects.)
    pub http: Option<reqwest::Client>,
    /// Extra CAs and a client certificate, for HTTP and gRPC (not applied to
    /// a caller-supplied [`ClientOptions::http`]).
    pub tls: crate::TlsOptions,
    /// When set, discovery requires a card signature that verifies.
    pub card_verification: Option<crate::CardVerification>,
    /// Largest unary answer (or error body) and, at discovery, the largest
    /// card accepted, in bytes: a larger one is a
    /// [`ClientError::BodyTooLarge`]. Default [`crate::DEFAULT_MAX_BODY_BYTES`]
    /// (16 MiB). Stream events have their own bound (16 MiB each).
    pub max_body_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            bindings: vec![Binding::JsonRpc, Binding::Rest],
            version: None,
            credentials: Credentials::default(),
            headers: Vec::new(),
            timeout: Duration::from_secs(60),
            retries: 3,
            wire_log: None,
            http: None,
            tls: crate::TlsOptions::default(),
            card_verification: None,
            max_body_bytes: crate::DEFAULT_MAX_BODY_BYTES,
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("bindings", &self.bindings)
            .field("version", &self.version)
            .field("credentials", &self.credentials)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

/// What a send produced.
#[derive(Clone, Debug, PartialEq)]
pub enum SendReply {
    /// A task.
    Task(v1::Task),
    /// A direct message.
    Message(v1::Message),
}

/// Events of a stream, in order; it ends when the server closes it.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<v1::StreamResponse, ClientError>> + Send>>;

/// Largest single stream event (or gRPC message) accepted.
pub(crate) const MAX_EVENT: usize = 16 << 20;

/// A client bound to one agent interface.
#[derive(Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    card: v1::AgentCard,
    interface: v1::AgentInterface,
    binding: Binding,
    version: ProtocolVersion,
    opts: ClientOptions,
    /// The gRPC transport when the binding is gRPC (shared by clones, so
    /// they share one channel).
    grpc: Option<Arc<GrpcTransport>>,
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

/// The HTTP client `opts` describe: [`ClientOptions::http`] when given,
/// else a new one with [`ClientOptions::tls`] applied.
pub fn http_client(opts: &ClientOptions) -> Result<reqwest::Client, ClientError> {
    match &opts.http {
        Some(c) => Ok(c.clone()),
        None => opts
            .tls
            .apply(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .user_agent(concat!("heddle/", env!("CARGO_PKG_VERSION"))),
            )?
            .build()
            .map_err(ClientError::from),
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
        let grpc = match binding {
            Binding::Grpc => Some(Arc::new(GrpcTransport::new(
                &card,
                &interface,
                version,
                &opts,
                oauth.clone(),
            )?)),
            Binding::JsonRpc | Binding::Rest => None,
        };
        Ok(Self {
            http,
            card,
            interface,
            binding,
            version,
            opts,
            grpc,
            oauth,
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

    /// The gRPC transport; only called when the binding is gRPC.
    fn grpc(&self) -> Result<&GrpcTransport, ClientError> {
        self.grpc
            .as_deref()
            .ok_or_else(|| ClientError::NoInterface("the client has no gRPC interface".into()))
    }

    fn log(&self, line: impl FnOnce() -> String) {
        if let Some(log) = &self.opts.wire_log {
            log(&line());
        }
    }

    /// A request with the version header, credentials and extra headers.
    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut url = url.to_owned();
        let mut headers: Vec<(String, String)> = Vec::new();
        if self.version == ProtocolVersion::V1_0 {
            headers.push(("A2A-Version".into(), "1.0".into()));
        }
        if let Some(t) = &self.opts.credentials.bearer {
            headers.push(("Authorization".into(), format!("Bearer {}", t.expose())));
        } else if let Some(t) = self.oauth.as_ref().and_then(|o| o.current()) {
            // Fetched by `authorize` just before.
            headers.push(("Authorization".into(), format!("Bearer {}", t.expose())));
        }
        if let Some(k) = &self.opts.credentials.api_key {
            match api_key_place(&self.card) {
                KeyPlace::Header(name) => headers.push((name, k.expose().to_owned())),
                KeyPlace::Cookie(name) => {
                    headers.push(("Cookie".into(), format!("{name}={}", k.expose())))
                }
                KeyPlace::Query(name) => {
                    let sep = if url.contains('?') { '&' } else { '?' };
                    url = format!("{url}{sep}{name}={}", k.expose());
                }
            }
        }
        headers.extend(self.opts.headers.iter().cloned());
        self.log(|| {
            let shown: Vec<String> = headers
                .iter()
                .map(|(k, v)| {
                    if is_sensitive_header(k) {
                        format!("{k}: ***")
                    } else {
                        format!("{k}: {v}")
                    }
                })
                .collect();
            let shown_url = match (&self.opts.credentials.api_key, api_key_place(&self.card)) {
                (Some(_), KeyPlace::Query(name)) => url
                    .split(&format!("{name}="))
                    .next()
                    .map_or(url.clone(), |u| format!("{u}{name}=***")),
                _ => url.clone(),
            };
            format!("> {method} {shown_url}\n> {}", shown.join("\n> "))
        });
        let mut req = self.http.request(method, &url);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req
    }

    async fn check_status(&self, resp: reqwest::Response) -> Result<bytes::Bytes, ClientError> {
        let status = resp.status().as_u16();
        // Every challenge: a server may accept several schemes.
        let challenges: Vec<&str> = resp
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let challenge = (!challenges.is_empty()).then(|| challenges.join(" | "));
        // Retry-After in its delay-seconds form (the HTTP-date form is rare
        // from APIs and is treated as absent).
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body =
            crate::body::read_limited(resp, self.opts.max_body_bytes, "response body").await?;
        self.log(|| format!("< HTTP {status}\n< {}", String::from_utf8_lossy(&body)));
        // Any 2xx: servers answer `201 Created` to a send, for one.
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        // Refused credentials are not A2A errors, whatever the body's shape:
        // the server's reason and what it accepts instead.
        if status == 401 || status == 403 {
            let reason = parsed
                .as_ref()
                .and_then(|v| v["error"]["message"].as_str())
                .unwrap_or(if status == 401 {
                    "authentication required"
                } else {
                    "forbidden"
                });
            let message = match &challenge {
                Some(c) => format!("{reason} (the agent accepts: {c})"),
                None => reason.to_owned(),
            };
            return Err(ClientError::Http {
                status,
                message,
                retry_after,
            });
        }
        if let Some(v) = parsed
            && v.get("error").and_then(|e| e.get("details")).is_some()
        {
            return Err(ClientError::A2a(A2aError::from_http_body(status, &v)));
        }
        let message = challenge
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
        Err(ClientError::Http {
            status,
            message,
            retry_after,
        })
    }

    /// Retries `f` on transient failures with jittered exponential backoff
    /// (only for idempotent calls).
    async fn retrying<T, F, Fut>(&self, mut f: F) -> Result<T, ClientError>
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

    /// Obtains (or reuses) the OAuth 2.0 token that `request` sends.
    async fn authorize(&self) -> Result<(), ClientError> {
        if let Some(o) = &self.oauth {
            o.token().await?;
        }
        Ok(())
    }

    // ---- JSON-RPC ---------------------------------------------------------------

    async fn rpc_raw(&self, method: Method, params: Value) -> Result<Value, ClientError> {
        let name = method.jsonrpc_name(self.version).ok_or_else(|| {
            ClientError::NoInterface(format!("{method:?} does not exist in A2A {}", self.version))
        })?;
        self.authorize().await?;
        let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": name, "params": params});
        let req = self.request(reqwest::Method::POST, &self.interface.url);
        self.log(|| format!("> {body}"));
        let resp = req
            .header("content-type", "application/json")
            .timeout(self.opts.timeout)
            .body(body.to_string())
            .send()
            .await?;
        let bytes = self.check_status(resp).await?;
        let r: ClientResponse<'_> = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
        if let Some(err) = r.error {
            return Err(ClientError::A2a(A2aError::from_jsonrpc(&err)));
        }
        let result = r.result.map_or("null", |r| r.get());
        serde_json::from_str(result).map_err(|e| ClientError::InvalidResponse(e.to_string()))
    }

    async fn rpc<T: DeserializeOwned>(
        &self,
        method: Method,
        params: Value,
    ) -> Result<T, ClientError> {
        let v = self.rpc_raw(method, params).await?;
        serde_json::from_value(v)
            .map_err(|e| ClientError::InvalidResponse(format!("{method:?} result: {e}")))
    }

    async fn rpc_stream(&self, method: Method, params: Value) -> Result<EventStream, ClientError> {
        let name = method.jsonrpc_name(self.version).ok_or_else(|| {
            ClientError::NoInterface(format!("{method:?} does not exist in A2A {}", self.version))
        })?;
        self.authorize().await?;
        let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": name, "params": params});
        let req = self.request(reqwest::Method::POST, &self.interface.url);
        self.log(|| format!("> {body}"));
        let resp = req
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_string())
            .send()
            .await?;
        let version = self.version;
        self.events(resp, move |data| {
            let r: ClientResponse<'_> = serde_json::from_str(data)
                .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
            if let Some(err) = r.error {
                return Err(ClientError::A2a(A2aError::from_jsonrpc(&err)));
            }
            let result = r.result.map_or("null", |r| r.get());
            parse_event(version, result)
        })
        .await
    }

    /// Turns an SSE (or, on error, JSON) response into a stream of events.
    async fn events(
        &self,
        resp: reqwest::Response,
        parse: impl Fn(&str) -> Result<v1::StreamResponse, ClientError> + Send + 'static,
    ) -> Result<EventStream, ClientError> {
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            // An error answered as a JSON-RPC response or a REST error body.
            let bytes = self.check_status(resp).await?;
            if let Ok(r) = serde_json::from_slice::<ClientResponse<'_>>(&bytes)
                && let Some(err) = r.error
            {
                return Err(ClientError::A2a(A2aError::from_jsonrpc(&err)));
            }
            return Err(ClientError::InvalidResponse(
                "expected text/event-stream".into(),
            ));
        }
        let log = self.opts.wire_log.clone();
        let mut decoder = SseDecoder::new(MAX_EVENT);
        // The stream ends after an error: past an event too large, the
        // bytes that follow are the rest of it, not events.
        let stream = resp
            .bytes_stream()
            .scan(false, move |ended, chunk| {
                if *ended {
                    return futures::future::ready(None);
                }
                let out: Vec<Result<v1::StreamResponse, ClientError>> = match chunk {
                    Err(e) => {
                        *ended = true;
                        vec![Err(ClientError::Transport(format!(
                            "stream interrupted: {}",
                            e.without_url()
                        )))]
                    }
                    Ok(bytes) => match decoder.push(&bytes) {
                        Err(e) => {
                            *ended = true;
                            vec![Err(ClientError::BodyTooLarge {
                                what: "server-sent event",
                                limit: e.0,
                            })]
                        }
                        Ok(datas) => datas
                            .iter()
                            .map(|d| {
                                if let Some(log) = &log {
                                    log(&format!("< data: {d}"));
                                }
                                parse(d)
                            })
                            .collect(),
                    },
                };
                futures::future::ready(Some(futures::stream::iter(out)))
            })
            .flatten();
        Ok(Box::pin(stream))
    }

    // ---- REST -------------------------------------------------------------------

    fn rest_url(&self, path: &str) -> String {
        let base = self.interface.url.trim_end_matches('/');
        if self.interface.tenant.is_empty() {
            format!("{base}{path}")
        } else {
            format!("{base}/{}{path}", self.interface.tenant)
        }
    }

    async fn rest<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, ClientError> {
        self.authorize().await?;
        let mut req = self
            .request(method, &self.rest_url(path))
            .timeout(self.opts.timeout);
        if let Some(b) = body {
            self.log(|| format!("> {b}"));
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let bytes = self.check_status(req.send().await?).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::InvalidResponse(e.to_string()))
    }

    async fn rest_stream(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<EventStream, ClientError> {
        self.authorize().await?;
        let mut req = self
            .request(method, &self.rest_url(path))
            .header("accept", "text/event-stream");
        if let Some(b) = body {
            self.log(|| format!("> {b}"));
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await?;
        match self.version {
            ProtocolVersion::V1_0 => {
                self.events(resp, |data| {
                    serde_json::from_str(data)
                        .map_err(|e| ClientError::InvalidResponse(e.to_string()))
                })
                .await
            }
            // v0.3: `data:` lines are ProtoJSON of the `a2a.v1` proto.
            ProtocolVersion::V0_3 => {
                self.events(resp, |data| {
                    let e: v03_pb::StreamResponse = serde_json::from_str(data)
                        .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
                    Ok(v03_proto::stream_response_to_v1(&e))
                })
                .await
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
        req.tenant.clone_from(&self.interface.tenant);
        match (self.binding, self.version) {
            (Binding::Grpc, _) => self.grpc()?.send(req).await,
            (Binding::Rest, ProtocolVersion::V0_3) => {
                let body = to_value(&v03_proto::send_request_from_v1(&req))?;
                let r: v03_pb::SendMessageResponse = self
                    .rest(reqwest::Method::POST, "/v1/message:send", Some(body))
                    .await?;
                send_reply(v03_proto::send_response_to_v1(&r))
            }
            (Binding::Rest, _) => {
                let r: v1::SendMessageResponse = self
                    .rest(
                        reqwest::Method::POST,
                        "/message:send",
                        Some(to_value(&req)?),
                    )
                    .await?;
                send_reply(r)
            }
            (_, ProtocolVersion::V1_0) => {
                send_reply(self.rpc(Method::SendMessage, to_value(&req)?).await?)
            }
            (_, ProtocolVersion::V0_3) => {
                let params = to_value(&v03::MessageSendParams::from_v1(&req))?;
                let r: v03::SendResult = self.rpc(Method::SendMessage, params).await?;
                send_reply(r.to_v1().map_err(ClientError::InvalidResponse)?)
            }
        }
    }

    /// SendStreamingMessage: the events of the task (or one message).
    pub async fn send_streaming(
        &self,
        mut req: v1::SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        req.tenant.clone_from(&self.interface.tenant);
        match (self.binding, self.version) {
            (Binding::Grpc, _) => self.grpc()?.send_streaming(req).await,
            (Binding::Rest, ProtocolVersion::V0_3) => {
                let body = to_value(&v03_proto::send_request_from_v1(&req))?;
                self.rest_stream(reqwest::Method::POST, "/v1/message:stream", Some(body))
                    .await
            }
            (Binding::Rest, _) => {
                self.rest_stream(
                    reqwest::Method::POST,
                    "/message:stream",
                    Some(to_value(&req)?),
                )
                .await
            }
            (_, ProtocolVersion::V1_0) => {
                self.rpc_stream(Method::SendStreamingMessage, to_value(&req)?)
                    .await
            }
            (_, ProtocolVersion::V0_3) => {
                self.rpc_stream(
                    Method::SendStreamingMessage,
                    to_value(&v03::MessageSendParams::from_v1(&req))?,
                )
                .await
            }
        }
    }

    /// GetTask.
    pub async fn get_task(
        &self,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<v1::Task, ClientError> {
        self.retrying(|| async move {
            match (self.binding, self.version) {
                (Binding::Grpc, _) => self.grpc()?.get_task(id, history_length).await,
                (Binding::Rest, ProtocolVersion::V0_3) => {
                    // v0.3 reads 0 as "all"; v1.0's "none" is the nearest it can say.
                    let q = history_length
                        .map(|n| format!("?historyLength={}", n.max(1)))
                        .unwrap_or_default();
                    let t: v03_pb::Task = self
                        .rest(
                            reqwest::Method::GET,
                            &format!("/v1/tasks/{}{q}", path_segment(id)),
                            None,
                        )
                        .await?;
                    let mut t = v03_proto::task_to_v1(&t);
                    if history_length == Some(0) {
                        t.history.clear();
                    }
                    Ok(t)
                }
                (Binding::Rest, _) => {
                    let q = history_length
                        .map(|n| format!("?historyLength={n}"))
                        .unwrap_or_default();
                    self.rest(
                        reqwest::Method::GET,
                        &format!("/tasks/{}{q}", path_segment(id)),
                        None,
                    )
                    .await
                }
                (_, ProtocolVersion::V1_0) => {
                    let req = v1::GetTaskRequest {
                        tenant: self.interface.tenant.clone(),
                        id: id.to_owned(),
                        history_length,
                    };
                    self.rpc(Method::GetTask, to_value(&req)?).await
                }
                (_, ProtocolVersion::V0_3) => {
                    let mut p = json!({"id": id});
                    if let Some(n) = history_length {
                        // v0.3 reads 0 as "all"; v1.0's "none" is the nearest it can say.
                        p["historyLength"] = json!(n.max(1));
                    }
                    let t: v03::Task = self.rpc(Method::GetTask, p).await?;
                    let mut t = t.to_v1().map_err(ClientError::InvalidResponse)?;
                    if history_length == Some(0) {
                        t.history.clear();
                    }
                    Ok(t)
                }
            }
        })
        .await
    }

    /// ListTasks (v1.0 only; v0.3 has no such method).
    pub async fn list_tasks(
        &self,
        mut req: v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, ClientError> {
        req.tenant.clone_from(&self.interface.tenant);
        let req = &req;
        self.retrying(|| async move {
            match (self.binding, self.version) {
                (Binding::Grpc, _) => self.grpc()?.list_tasks(req.clone()).await,
                (Binding::Rest, ProtocolVersion::V0_3) => {
                    Err(ClientError::NoInterface("A2A 0.3 has no ListTasks".into()))
                }
                (Binding::Rest, _) => {
                    let mut q = Vec::new();
                    if !req.context_id.is_empty() {
                        q.push(format!("contextId={}", query_value(&req.context_id)));
                    }
                    if req.status != 0 {
                        q.push(format!("status={}", req.status().as_str_name()));
                    }
                    if let Some(n) = req.page_size {
                        q.push(format!("pageSize={n}"));
                    }
                    if !req.page_token.is_empty() {
                        q.push(format!("pageToken={}", query_value(&req.page_token)));
                    }
                    if let Some(n) = req.history_length {
                        q.push(format!("historyLength={n}"));
                    }
                    if let Some(t) = req.status_timestamp_after {
                        q.push(format!(
                            "statusTimestampAfter={}",
                            query_value(&t.to_string())
                        ));
                    }
                    if let Some(b) = req.include_artifacts {
                        q.push(format!("includeArtifacts={b}"));
                    }
                    let qs = if q.is_empty() {
                        String::new()
                    } else {
                        format!("?{}", q.join("&"))
                    };
                    self.rest(reqwest::Method::GET, &format!("/tasks{qs}"), None)
                        .await
                }
                (_, ProtocolVersion::V1_0) => self.rpc(Method::ListTasks, to_value(req)?).await,
                (_, ProtocolVersion::V0_3) => {
                    Err(ClientError::NoInterface("A2A 0.3 has no ListTasks".into()))
                }
            }
        })
        .await
    }

    /// CancelTask (idempotent, so retried on transient failures).
    pub async fn cancel_task(&self, id: &str) -> Result<v1::Task, ClientError> {
        self.retrying(|| async move {
            match (self.binding, self.version) {
                (Binding::Grpc, _) => self.grpc()?.cancel_task(id).await,
                (Binding::Rest, ProtocolVersion::V0_3) => {
                    let t: v03_pb::Task = self
                        .rest(
                            reqwest::Method::POST,
                            &format!("/v1/tasks/{}:cancel", path_segment(id)),
                            None,
                        )
                        .await?;
                    Ok(v03_proto::task_to_v1(&t))
                }
                (Binding::Rest, _) => {
                    self.rest(
                        reqwest::Method::POST,
                        &format!("/tasks/{}:cancel", path_segment(id)),
                        Some(json!({})),
                    )
                    .await
                }
                (_, ProtocolVersion::V1_0) => {
                    let req = v1::CancelTaskRequest {
                        tenant: self.interface.tenant.clone(),
                        id: id.to_owned(),
                        metadata: None,
                    };
                    self.rpc(Method::CancelTask, to_value(&req)?).await
                }
                (_, ProtocolVersion::V0_3) => {
                    let t: v03::Task = self.rpc(Method::CancelTask, json!({"id": id})).await?;
                    t.to_v1().map_err(ClientError::InvalidResponse)
                }
            }
        })
        .await
    }

    /// SubscribeToTask: the current task first, then its events. Also how a
    /// dropped stream resumes: feed the events to a [`crate::TaskAccumulator`],
    /// whose snapshot replaces what it had, so no chunk is counted twice.
    pub async fn subscribe(&self, id: &str) -> Result<EventStream, ClientError> {
        match (self.binding, self.version) {
            (Binding::Grpc, _) => self.grpc()?.subscribe(id).await,
            (Binding::Rest, ProtocolVersion::V0_3) => {
                self.rest_stream(
                    reqwest::Method::POST,
                    &format!("/v1/tasks/{}:subscribe", path_segment(id)),
                    None,
                )
                .await
            }
            (Binding::Rest, _) => {
                self.rest_stream(
                    reqwest::Method::POST,
                    &format!("/tasks/{}:subscribe", path_segment(id)),
                    None,
                )
                .await
            }
            (_, ProtocolVersion::V1_0) => {
                let req = v1::SubscribeToTaskRequest {
                    tenant: self.interface.tenant.clone(),
                    id: id.to_owned(),
                };
                self.rpc_stream(Method::SubscribeToTask, to_value(&req)?)
                    .await
            }
            (_, ProtocolVersion::V0_3) => {
                self.rpc_stream(Method::SubscribeToTask, json!({"id": id}))
                    .await
            }
        }
    }

    /// GetExtendedAgentCard. With [`ClientOptions::card_verification`] set,
    /// the extended card must carry a signature that verifies, as the public
    /// card must at discovery: one over the JSON as served, or over the v1.0
    /// JSON of the card returned (what a card that arrives as protobuf, or
    /// in v0.3 form, can be checked against).
    pub async fn extended_card(&self) -> Result<v1::AgentCard, ClientError> {
        let (card, served) = self.fetch_extended_card().await?;
        let Some(verification) = &self.opts.card_verification else {
            return Ok(card);
        };
        let model = to_value(&card)?;
        let forms: Vec<&Value> = served.iter().chain([&model]).collect();
        match verification.verify_any(&self.http, &forms).await? {
            Verdict::Verified { .. } => Ok(card),
            other => Err(ClientError::CardSignature(format!(
                "extended card: {other}"
            ))),
        }
    }

    /// The extended card, and its JSON as served when it came as JSON.
    async fn fetch_extended_card(&self) -> Result<(v1::AgentCard, Option<Value>), ClientError> {
        let doc = match (self.binding, self.version) {
            (Binding::Grpc, _) => return Ok((self.grpc()?.extended_card().await?, None)),
            (Binding::Rest, ProtocolVersion::V0_3) => {
                let doc: Value = self.rest(reqwest::Method::GET, "/v1/card", None).await?;
                let c: v03_pb::AgentCard = serde_json::from_value(doc.clone()).map_err(|e| {
                    ClientError::InvalidResponse(format!("GetExtendedAgentCard result: {e}"))
                })?;
                return Ok((v03_proto::card_to_v1(&c), Some(doc)));
            }
            (Binding::Rest, _) => {
                self.rest(reqwest::Method::GET, "/extendedAgentCard", None)
                    .await?
            }
            (_, _) => {
                self.rpc_raw(Method::GetExtendedAgentCard, json!({}))
                    .await?
            }
        };
        let card = heddle_core::card::parse_card(&doc).map_err(ClientError::A2a)?;
        Ok((card, Some(doc)))
    }
}

fn to_value<T: Serialize>(v: &T) -> Result<Value, ClientError> {
    serde_json::to_value(v)
        .map_err(|e| ClientError::InvalidResponse(format!("cannot encode the request: {e}")))
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

fn parse_event(version: ProtocolVersion, result: &str) -> Result<v1::StreamResponse, ClientError> {
    match version {
        ProtocolVersion::V1_0 => {
            serde_json::from_str(result).map_err(|e| ClientError::InvalidResponse(e.to_string()))
        }
        ProtocolVersion::V0_3 => {
            let ev: v03::StreamEvent = serde_json::from_str(result)
                .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
            ev.to_v1().map_err(ClientError::InvalidResponse)
        }
    }
}

/// Percent-encodes a path segment (task ids are opaque).
fn path_segment(s: &str) -> String {
    query_value(s)
}

fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    use super::*;

    /// Answers the first request 503 with `Retry-After: 1`, the next with a task.
    async fn flaky_server() -> (String, tokio::task::JoinHandle<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let handle = tokio::spawn(async move {
            let mut served = 0;
            while served < 2 {
                let Ok((mut sock, _)) = listener.accept().await else {
                    break;
                };
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let resp = if served == 0 {
                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy".to_owned()
                } else {
                    let body =
                        r#"{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}"#;
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = sock.write_all(resp.as_bytes()).await;
                served += 1;
            }
            served
        });
        (format!("http://{addr}"), handle)
    }

    #[tokio::test]
    async fn idempotent_calls_wait_out_retry_after() {
        let (url, server) = flaky_server().await;
        let card: v1::AgentCard = serde_json::from_value(json!({
            "name": "flaky", "supportedInterfaces": [{"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]
        }))
        .expect("card");
        let client = A2aClient::from_card(
            card,
            ClientOptions {
                bindings: vec![Binding::Rest],
                ..ClientOptions::default()
            },
        )
        .expect("client");
        let start = Instant::now();
        let task = client
            .get_task("t1", None)
            .await
            .expect("retried after 503");
        assert_eq!(task.id, "t1");
        assert!(
            start.elapsed() >= Duration::from_secs(1),
            "waited for Retry-After"
        );
        assert_eq!(server.await.expect("server"), 2);
    }

    fn rest_card(url: &str) -> v1::AgentCard {
        serde_json::from_value(json!({
            "name": "big", "supportedInterfaces": [{"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]
        }))
        .expect("card")
    }

    fn rest_options() -> ClientOptions {
        ClientOptions {
            bindings: vec![Binding::Rest],
            retries: 0,
            ..ClientOptions::default()
        }
    }

    #[tokio::test]
    async fn a_20_mb_answer_is_refused() {
        for declared in [true, false] {
            let url = crate::body::tests::big(20 << 20, declared).await;
            let client = A2aClient::from_card(rest_card(&url), rest_options()).expect("client");
            let err = client.get_task("t1", None).await.expect_err("too large");
            assert!(
                matches!(err, ClientError::BodyTooLarge { limit, .. } if limit == 16 << 20),
                "declared {declared}: {err:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_answer_bound_is_configurable() {
        let url = crate::body::tests::big(2000, true).await;
        let opts = ClientOptions {
            max_body_bytes: 1000,
            ..rest_options()
        };
        let client = A2aClient::from_card(rest_card(&url), opts).expect("client");
        let err = client.get_task("t1", None).await.expect_err("too large");
        assert!(
            matches!(err, ClientError::BodyTooLarge { limit: 1000, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_20_mb_card_is_refused() {
        let url = crate::body::tests::big(20 << 20, false).await;
        let err = A2aClient::discover(&url, rest_options())
            .await
            .expect_err("too large");
        assert!(
            matches!(
                err,
                ClientError::BodyTooLarge {
                    what: "agent card",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// Answers every request with one SSE stream: an event, then a `data:`
    /// line of 17 MiB, then another event.
    async fn oversized_event_server() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let event = r#"{"task":{"id":"t1","contextId":"c1"}}"#;
                let mut body = format!("data: {event}\r\rdata: ").into_bytes();
                body.resize(body.len() + (17 << 20), b'x');
                body.extend_from_slice(format!("\r\rdata: {event}\r\r").as_bytes());
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                let _ = sock.shutdown().await;
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn an_oversized_stream_event_is_a_typed_error_and_ends_the_stream() {
        let url = oversized_event_server().await;
        let client = A2aClient::from_card(rest_card(&url), rest_options()).expect("client");
        let events: Vec<_> = client
            .subscribe("t1")
            .await
            .expect("stream")
            .collect()
            .await;
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(events[0].is_ok(), "{:?}", events[0]);
        assert!(
            matches!(
                events[1],
                Err(ClientError::BodyTooLarge {
                    what: "server-sent event",
                    ..
                })
            ),
            "{:?}",
            events[1]
        );
    }
}
