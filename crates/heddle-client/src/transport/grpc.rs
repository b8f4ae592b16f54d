//! The gRPC binding's plumbing (v1 §10): one lazily connected channel to
//! the v1.0 service `lf.a2a.v1.A2AService` or the v0.3 service
//! `a2a.v1.A2AService`, calls addressed by the method table's names.
//!
//! * v1.0 requests carry the interface's `tenant` in their `tenant` field;
//!   v0.3 requests have none, so it goes in the `a2a-tenant` metadata (what
//!   Heddle's server routes by).
//! * Every call carries `a2a-version`, the credentials and the extra headers
//!   as metadata (gRPC keys are lowercase).
//! * A2A errors arrive as a `google.rpc.Status` in the status details; a
//!   status without one is mapped by its code. Unavailable and deadline
//!   errors are transport errors, so idempotent calls retry them.

use std::{sync::OnceLock, time::Duration};

use futures::StreamExt;
use heddle_core::{A2aError, ErrorCode, ProtocolVersion, method::Method, rpc, v1};
use heddle_proto::{
    v1::a2a_service_server::SERVICE_NAME as V1_SERVICE,
    v03::a2a_service_server::SERVICE_NAME as V03_SERVICE,
};
use prost::Message as _;
use serde::Serialize;
use tonic::{
    Code, Status,
    client::Grpc,
    codegen::http::uri::PathAndQuery,
    metadata::{AsciiMetadataKey, AsciiMetadataValue},
    transport::{Channel, Endpoint},
};
use tonic_prost::ProstCodec;

use super::{EventStream, MAX_EVENT, Target};
use crate::{
    ClientError, WireLog,
    credentials::{KeyPlace, api_key_place, is_sensitive_header},
};

/// Metadata key naming the agent of a v0.3 request (v0.3 has no tenant field).
const TENANT_METADATA: &str = "a2a-tenant";

/// One agent's gRPC interface: the channel and what every call carries.
pub(crate) struct GrpcCore {
    /// Where to connect (validated when the client is built).
    endpoint: Endpoint,
    /// Connected on first use: building a channel needs a Tokio runtime,
    /// which [`crate::A2aClient::from_card`] (a plain fn) may lack.
    channel: OnceLock<Channel>,
    pub(crate) version: ProtocolVersion,
    /// `(key, value, redact in the wire log)`.
    metadata: Vec<(AsciiMetadataKey, AsciiMetadataValue, bool)>,
    timeout: Duration,
    wire_log: Option<WireLog>,
    /// OAuth 2.0 client-credentials tokens (sent as `authorization` on each call).
    oauth: Option<crate::oauth::TokenSource>,
}

impl std::fmt::Debug for GrpcCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcCore")
            .field("uri", self.endpoint.uri())
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The endpoint URI of a card's gRPC URL: a bare `host:port` is plaintext
/// (`http://`), as Heddle's own cards list it for v1.0.
fn endpoint_uri(url: &str) -> String {
    if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    }
}

impl GrpcCore {
    /// A channel to `target`'s interface presenting its credentials and
    /// headers, and its OAuth 2.0 tokens (shared with the client's clones).
    pub(crate) fn new(target: &Target<'_>) -> Result<Self, ClientError> {
        let (card, iface, version, opts) =
            (target.card, target.interface, target.version, target.opts);
        let uri = endpoint_uri(&iface.url);
        let bad = |e: tonic::transport::Error| {
            ClientError::NoInterface(format!("gRPC URL {:?}: {e}", iface.url))
        };
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(bad)?
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("heddle/", env!("CARGO_PKG_VERSION")))
            .map_err(bad)?;
        if uri.starts_with("https://") {
            endpoint = endpoint.tls_config(opts.tls.grpc_config()).map_err(bad)?;
        }

        let mut pairs: Vec<(String, String)> = vec![("a2a-version".into(), version.to_string())];
        if version == ProtocolVersion::V0_3 && !iface.tenant.is_empty() {
            pairs.push((TENANT_METADATA.into(), iface.tenant.clone()));
        }
        if let Some(t) = &opts.credentials.bearer {
            pairs.push(("authorization".into(), format!("Bearer {}", t.expose())));
        }
        if let Some(k) = &opts.credentials.api_key {
            match api_key_place(card) {
                // gRPC has no query string: a query key travels under its name.
                KeyPlace::Header(name) | KeyPlace::Query(name) => {
                    pairs.push((name, k.expose().to_owned()));
                }
                KeyPlace::Cookie(name) => {
                    pairs.push(("cookie".into(), format!("{name}={}", k.expose())));
                }
            }
        }
        pairs.extend(opts.headers.iter().cloned());

        let mut metadata = Vec::new();
        for (k, v) in pairs {
            let name = k.to_ascii_lowercase();
            // Binary (`-bin`) keys and non-ASCII values cannot be sent as text: skip them.
            match (
                AsciiMetadataKey::from_bytes(name.as_bytes()),
                AsciiMetadataValue::try_from(v.as_str()),
            ) {
                (Ok(key), Ok(mut value)) => {
                    let secret = is_sensitive_header(&name);
                    value.set_sensitive(secret);
                    metadata.push((key, value, secret));
                }
                _ => tracing::warn!(header = %name, "skipped: not valid as gRPC metadata"),
            }
        }
        Ok(Self {
            endpoint,
            channel: OnceLock::new(),
            version,
            metadata,
            timeout: opts.timeout,
            wire_log: opts.wire_log.clone(),
            oauth: target.oauth.clone(),
        })
    }

    fn channel(&self) -> Channel {
        if let Some(c) = self.channel.get() {
            return c.clone();
        }
        let c = self.endpoint.connect_lazy();
        // A concurrent first call may have won: use whichever was stored.
        self.channel.get_or_init(|| c).clone()
    }

    fn log(&self, line: impl FnOnce() -> String) {
        if let Some(log) = &self.wire_log {
            log(&line());
        }
    }

    /// A request with the metadata, logged with secrets redacted.
    fn request<T: Serialize>(&self, method: &str, msg: T) -> tonic::Request<T> {
        self.log(|| {
            let mut lines = vec![format!("> gRPC {method} {}", self.endpoint.uri())];
            lines.extend(self.metadata.iter().map(|(k, v, secret)| {
                if *secret {
                    format!("> {k}: ***")
                } else {
                    format!("> {k}: {}", v.to_str().unwrap_or("?"))
                }
            }));
            lines.push(format!("> {}", json(&msg)));
            lines.join("\n")
        });
        let mut req = tonic::Request::new(msg);
        for (k, v, _) in &self.metadata {
            req.metadata_mut().append(k.clone(), v.clone());
        }
        // A trace context the caller set itself is sent as set, once.
        let own = req.metadata().contains_key("traceparent");
        for (k, v) in crate::trace_context::headers().into_iter().filter(|_| !own) {
            if let (Ok(key), Ok(value)) = (
                AsciiMetadataKey::from_bytes(k.as_bytes()),
                AsciiMetadataValue::try_from(v.as_str()),
            ) {
                req.metadata_mut().insert(key, value);
            }
        }
        req
    }

    /// Adds the OAuth 2.0 token, when configured, as sensitive `authorization` metadata.
    async fn authorize<T>(&self, req: &mut tonic::Request<T>) -> Result<(), ClientError> {
        if let Some(o) = &self.oauth {
            let token = o.token().await?;
            let mut value = AsciiMetadataValue::try_from(format!("Bearer {}", token.expose()))
                .map_err(|_| {
                    ClientError::InvalidResponse("OAuth 2.0 token is not valid metadata".into())
                })?;
            value.set_sensitive(true);
            req.metadata_mut().insert("authorization", value);
        }
        Ok(())
    }

    /// The call's path, `/{service}/{method}`, from the method table; an
    /// operation the version's service lacks is refused before sending.
    fn path(&self, method: Method) -> Result<(&'static str, PathAndQuery), ClientError> {
        let name = method
            .grpc_name(self.version)
            .ok_or_else(|| super::missing(method, self.version))?;
        let service = match self.version {
            ProtocolVersion::V1_0 => V1_SERVICE,
            ProtocolVersion::V0_3 => V03_SERVICE,
        };
        let path = PathAndQuery::try_from(format!("/{service}/{name}"))
            .map_err(|e| ClientError::NoInterface(format!("gRPC path for {name}: {e}")))?;
        Ok((name, path))
    }

    /// A ready client on the channel, taking messages up to [`MAX_EVENT`].
    async fn client(&self) -> Result<Grpc<Channel>, Status> {
        let mut grpc = Grpc::new(self.channel()).max_decoding_message_size(MAX_EVENT);
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("channel not ready: {e}")))?;
        Ok(grpc)
    }

    /// One unary call, bounded by the client's timeout.
    pub(crate) async fn unary<Req, Resp>(
        &self,
        method: Method,
        msg: Req,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message + Serialize + Send + Sync + 'static,
        Resp: prost::Message + Default + Serialize + Send + Sync + 'static,
    {
        let (name, path) = self.path(method)?;
        let mut req = self.request(name, msg);
        self.authorize(&mut req).await?;
        req.set_timeout(self.timeout);
        let call = async {
            self.client()
                .await?
                .unary(req, path, ProstCodec::<Req, Resp>::default())
                .await
        };
        let result = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| ClientError::Transport(format!("{name}: timed out")))?;
        match result {
            Ok(resp) => {
                let resp = resp.into_inner();
                self.log(|| format!("< {}", json(&resp)));
                Ok(resp)
            }
            Err(status) => {
                self.log(|| format!("< {:?}: {}", status.code(), status.message()));
                Err(status_error(&status))
            }
        }
    }

    /// A server-streaming call as an [`EventStream`], each event upgraded by `to_v1`.
    pub(crate) async fn stream<Req, Ev>(
        &self,
        method: Method,
        msg: Req,
        to_v1: fn(Ev) -> v1::StreamResponse,
    ) -> Result<EventStream, ClientError>
    where
        Req: prost::Message + Serialize + Send + Sync + 'static,
        Ev: prost::Message + Default + Serialize + Send + Sync + 'static,
    {
        let (name, path) = self.path(method)?;
        let mut req = self.request(name, msg);
        self.authorize(&mut req).await?;
        let call = async {
            self.client()
                .await?
                .server_streaming(req, path, ProstCodec::<Req, Ev>::default())
                .await
        };
        let events = match call.await {
            Ok(resp) => resp.into_inner(),
            Err(status) => {
                self.log(|| format!("< {:?}: {}", status.code(), status.message()));
                return Err(status_error(&status));
            }
        };
        let log = self.wire_log.clone();
        Ok(Box::pin(events.map(move |item| match item {
            Ok(ev) => {
                if let Some(log) = &log {
                    log(&format!("< {}", json(&ev)));
                }
                Ok(to_v1(ev))
            }
            Err(status) => {
                if let Some(log) = &log {
                    log(&format!("< {:?}: {}", status.code(), status.message()));
                }
                Err(match status_error(&status) {
                    ClientError::Transport(m) => {
                        ClientError::Transport(format!("stream interrupted: {m}"))
                    }
                    other => other,
                })
            }
        })))
    }
}

/// A message in ProtoJSON, for the wire log.
fn json<T: Serialize>(msg: &T) -> String {
    serde_json::to_string(msg).unwrap_or_else(|e| format!("(not printable: {e})"))
}

/// The client error of a gRPC status: the A2A error in its details, else the
/// closest one to its code (transport codes are [`ClientError::Transport`], so
/// idempotent calls retry them; auth codes are their HTTP equivalents, since
/// A2A has no error for them).
pub(crate) fn status_error(status: &Status) -> ClientError {
    // Refused credentials are not A2A errors, whatever the details hold (as
    // on the HTTP bindings).
    let message = status.message().to_owned();
    match status.code() {
        Code::Unauthenticated => {
            return ClientError::Http {
                status: 401,
                message,
                retry_after: None,
            };
        }
        Code::PermissionDenied => {
            return ClientError::Http {
                status: 403,
                message,
                retry_after: None,
            };
        }
        _ => {}
    }
    if !status.details().is_empty()
        && let Ok(st) = rpc::Status::decode(status.details())
    {
        return ClientError::A2a(A2aError::from_grpc_status(&st));
    }
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled => {
            ClientError::Transport(format!("gRPC {:?}: {message}", status.code()))
        }
        Code::ResourceExhausted => ClientError::Http {
            status: 429,
            message,
            retry_after: None,
        },
        Code::FailedPrecondition => {
            ClientError::A2a(A2aError::new(ErrorCode::UnsupportedOperation, message))
        }
        code => ClientError::A2a(A2aError::from_grpc_status(&rpc::Status {
            code: code as i32,
            message,
            details: Vec::new(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_client_errors() {
        let err = A2aError::task_not_found("t-1");
        let st = err.to_grpc_status();
        let status = Status::with_details(
            Code::NotFound,
            st.message.clone(),
            st.encode_to_vec().into(),
        );
        match status_error(&status) {
            ClientError::A2a(e) => assert_eq!(e, err),
            other => panic!("{other:?}"),
        }
        let bare = status_error(&Status::invalid_argument("bad"));
        assert!(
            matches!(&bare, ClientError::A2a(e) if e.code == ErrorCode::InvalidParams),
            "{bare:?}"
        );
        let down = status_error(&Status::unavailable("tcp connect error"));
        assert!(down.is_transient(), "{down:?}");
        assert!(matches!(
            status_error(&Status::unauthenticated("who?")),
            ClientError::Http { status: 401, .. }
        ));
    }

    #[test]
    fn metadata_carries_version_tenant_credentials_and_headers() {
        let card = v1::AgentCard::default();
        let iface = v1::AgentInterface {
            url: "127.0.0.1:50051".into(),
            protocol_binding: "GRPC".into(),
            tenant: "echo".into(),
            protocol_version: "0.3".into(),
        };
        let opts = crate::ClientOptions {
            credentials: crate::Credentials {
                bearer: Some(crate::Secret::new("tok")),
                api_key: Some(crate::Secret::new("key")),
                oauth2: None,
            },
            headers: vec![
                ("X-Trace".into(), "1".into()),
                ("bad header".into(), "x".into()),
            ],
            ..Default::default()
        };
        let target = Target {
            card: &card,
            interface: &iface,
            version: ProtocolVersion::V0_3,
            opts: &opts,
            http: reqwest::Client::new(),
            oauth: None,
        };
        let t = GrpcCore::new(&target).expect("ok");
        assert_eq!(t.endpoint.uri().to_string(), "http://127.0.0.1:50051/");
        let got: Vec<(String, String, bool)> = t
            .metadata
            .iter()
            .map(|(k, v, s)| (k.to_string(), v.to_str().unwrap_or("?").to_owned(), *s))
            .collect();
        let want = [
            ("a2a-version", "0.3", false),
            ("a2a-tenant", "echo", false),
            ("authorization", "Bearer tok", true),
            ("api-key", "key", true),
            ("x-trace", "1", false),
        ];
        let want: Vec<(String, String, bool)> = want
            .iter()
            .map(|(k, v, s)| ((*k).to_owned(), (*v).to_owned(), *s))
            .collect();
        assert_eq!(got, want);
    }
}
