//! What the two HTTP bindings (JSON-RPC and REST) share: requests carrying
//! the version header and credentials, bounded answers read into typed
//! errors, and server-sent event streams.

use std::time::Duration;

use futures::StreamExt;
use heddle_core::{A2aError, ProtocolVersion, jsonrpc::ClientResponse, sse::SseDecoder, v1};
use serde_json::Value;

use super::{EventStream, MAX_EVENT, Target};
use crate::{
    ClientError, Credentials, WireLog,
    credentials::{KeyPlace, api_key_place, is_sensitive_header},
    oauth::TokenSource,
};

/// One interface reached over HTTP.
pub(crate) struct HttpCore {
    http: reqwest::Client,
    /// The interface URL.
    pub(crate) url: String,
    /// `url` parsed once, for the requests to it that add no query
    /// parameter, rather than on every call.
    parsed: Option<reqwest::Url>,
    /// The interface's tenant (empty for none).
    pub(crate) tenant: String,
    pub(crate) version: ProtocolVersion,
    key_place: KeyPlace,
    credentials: Credentials,
    headers: Vec<(String, String)>,
    oauth: Option<TokenSource>,
    wire_log: Option<WireLog>,
    /// Bound on each unary call (streams have none).
    pub(crate) timeout: Duration,
    max_body_bytes: usize,
}

impl HttpCore {
    pub(crate) fn new(t: Target<'_>) -> Self {
        Self {
            http: t.http,
            url: t.interface.url.clone(),
            parsed: reqwest::Url::parse(&t.interface.url).ok(),
            tenant: t.interface.tenant.clone(),
            version: t.version,
            key_place: api_key_place(t.card),
            credentials: t.opts.credentials.clone(),
            headers: t.opts.headers.clone(),
            oauth: t.oauth,
            wire_log: t.opts.wire_log.clone(),
            timeout: t.opts.timeout,
            max_body_bytes: t.opts.max_body_bytes,
        }
    }

    pub(crate) fn log(&self, line: impl FnOnce() -> String) {
        if let Some(log) = &self.wire_log {
            log(&line());
        }
    }

    /// A request to `url` with the version header, the credentials (an OAuth
    /// 2.0 token fetched or reused first) and the extra headers, logged with
    /// secrets redacted.
    pub(crate) async fn request(
        &self,
        method: reqwest::Method,
        url: &str,
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let mut url = url.to_owned();
        let mut with_key = false;
        let mut headers: Vec<(String, String)> = Vec::new();
        // v0.3 predates the header: a v0.3 server may take it for a v1.0 client.
        if self.version == ProtocolVersion::V1_0 {
            headers.push(("A2A-Version".into(), "1.0".into()));
        }
        let token = match (&self.credentials.bearer, &self.oauth) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(o)) => Some(o.token().await?),
            (None, None) => None,
        };
        if let Some(t) = token {
            headers.push(("Authorization".into(), format!("Bearer {}", t.expose())));
        }
        if let Some(k) = &self.credentials.api_key {
            match &self.key_place {
                KeyPlace::Header(name) => headers.push((name.clone(), k.expose().to_owned())),
                KeyPlace::Cookie(name) => {
                    headers.push(("Cookie".into(), format!("{name}={}", k.expose())))
                }
                KeyPlace::Query(name) => {
                    let sep = if url.contains('?') { '&' } else { '?' };
                    url = format!("{url}{sep}{name}={}", k.expose());
                    with_key = true;
                }
            }
        }
        headers.extend(self.headers.iter().cloned());
        // A trace context the caller set itself is sent as set, once.
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
        {
            headers.extend(crate::trace_context::headers());
        }
        self.log(|| self.describe(&method, &url, &headers));
        let mut req = match &self.parsed {
            Some(parsed) if !with_key && url == self.url => {
                self.http.request(method, parsed.clone())
            }
            _ => self.http.request(method, &url),
        };
        for (k, v) in headers {
            req = req.header(k, v);
        }
        Ok(req)
    }

    /// The request line and headers for the wire log, secrets redacted.
    fn describe(
        &self,
        method: &reqwest::Method,
        url: &str,
        headers: &[(String, String)],
    ) -> String {
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
        let shown_url = match (&self.credentials.api_key, &self.key_place) {
            (Some(_), KeyPlace::Query(name)) => url
                .split(&format!("{name}="))
                .next()
                .map_or(url.to_owned(), |u| format!("{u}{name}=***")),
            _ => url.to_owned(),
        };
        format!("> {method} {shown_url}\n> {}", shown.join("\n> "))
    }

    /// Sends `req` with `body` (JSON) when given, bounded by the timeout, and
    /// reads the answer.
    pub(crate) async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
        body: Option<&Value>,
    ) -> Result<bytes::Bytes, ClientError> {
        self.exchange_text(req, body.map(Value::to_string)).await
    }

    /// [`exchange`](Self::exchange) with the JSON body already written.
    pub(crate) async fn exchange_text(
        &self,
        mut req: reqwest::RequestBuilder,
        body: Option<String>,
    ) -> Result<bytes::Bytes, ClientError> {
        if let Some(b) = body {
            self.log(|| format!("> {b}"));
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.timeout(self.timeout).send().await?;
        self.check_status(resp).await
    }

    /// The body of a 2xx answer (any: servers answer `201 Created` to a
    /// send), else the error the status and body describe.
    pub(crate) async fn check_status(
        &self,
        resp: reqwest::Response,
    ) -> Result<bytes::Bytes, ClientError> {
        let status = resp.status().as_u16();
        // Every challenge: a server may accept several schemes.
        let challenges: Vec<&str> = resp
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let challenge = (!challenges.is_empty()).then(|| challenges.join(" | "));
        let retry_after = crate::retry_after(resp.headers());
        let body = crate::body::read_limited(resp, self.max_body_bytes, "response body").await?;
        self.log(|| format!("< HTTP {status}\n< {}", String::from_utf8_lossy(&body)));
        if (200..300).contains(&status) {
            return Ok(body);
        }
        Err(status_error(status, &body, challenge, retry_after))
    }

    /// Turns an SSE (or, on error, JSON) response into a stream of events,
    /// each `data:` read by `parse`.
    pub(crate) async fn events(
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
        let log = self.wire_log.clone();
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
}

/// The error a non-2xx answer describes.
fn status_error(
    status: u16,
    body: &[u8],
    challenge: Option<String>,
    retry_after: Option<Duration>,
) -> ClientError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
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
        return ClientError::Http {
            status,
            message,
            retry_after,
        };
    }
    if let Some(v) = parsed
        && v.get("error").and_then(|e| e.get("details")).is_some()
    {
        return ClientError::A2a(A2aError::from_http_body(status, &v));
    }
    let message = challenge
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    ClientError::Http {
        status,
        message,
        retry_after,
    }
}
