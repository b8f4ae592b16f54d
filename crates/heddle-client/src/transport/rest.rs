//! HTTP+JSON (REST): routes filled in from the method table, shared by both
//! versions, and the v1.0 transport, whose bodies are ProtoJSON of the v1.0
//! proto (WIRE-NOTES §5).

use std::fmt::Display;

use heddle_core::{
    method::{Method, RestRoute, Verb},
    v1,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{
    Call, EventStream, ExtendedCard, Target, Transport, http::HttpCore, missing, to_value,
};
use crate::ClientError;

/// The REST binding over one interface, in its version's routes.
pub(crate) struct Rest {
    pub(crate) core: HttpCore,
}

/// The ids a route's template takes (empty where it has no such parameter).
#[derive(Clone, Copy, Default)]
pub(crate) struct Ids<'a> {
    pub(crate) task: &'a str,
    pub(crate) config: &'a str,
}

impl<'a> Ids<'a> {
    pub(crate) fn task(task: &'a str) -> Self {
        Self { task, config: "" }
    }

    pub(crate) fn config(task: &'a str, config: &'a str) -> Self {
        Self { task, config }
    }
}

/// A query string: names as given, values percent-encoded.
#[derive(Default)]
pub(crate) struct Query(String);

impl Query {
    pub(crate) fn add(&mut self, name: &str, value: impl Display) -> &mut Self {
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
        self.0.push_str(name);
        self.0.push('=');
        self.0.push_str(&query_value(&value.to_string()));
        self
    }

    pub(crate) fn add_opt(&mut self, name: &str, value: Option<impl Display>) -> &mut Self {
        if let Some(v) = value {
            self.add(name, v);
        }
        self
    }

    pub(crate) fn add_nonempty(&mut self, name: &str, value: &str) -> &mut Self {
        if !value.is_empty() {
            self.add(name, value);
        }
        self
    }
}

/// The HTTP method of a route's verb.
fn http_method(verb: Verb) -> reqwest::Method {
    match verb {
        Verb::Get => reqwest::Method::GET,
        Verb::Post => reqwest::Method::POST,
        Verb::Delete => reqwest::Method::DELETE,
    }
}

impl Rest {
    pub(crate) fn new(target: Target<'_>) -> Self {
        Self {
            core: HttpCore::new(target),
        }
    }

    fn route(&self, method: Method) -> Result<&'static RestRoute, ClientError> {
        method
            .rest_route(self.core.version)
            .ok_or_else(|| missing(method, self.core.version))
    }

    /// The route's verb and full URL: the interface URL, the tenant segment
    /// when the interface has one, the filled-in path, the query.
    fn target(
        &self,
        method: Method,
        ids: Ids<'_>,
        query: &Query,
    ) -> Result<(reqwest::Method, String), ClientError> {
        let route = self.route(method)?;
        let base = self.core.url.trim_end_matches('/');
        let path = route.fill(ids.task, ids.config);
        let url = if self.core.tenant.is_empty() {
            format!("{base}{path}{}", query.0)
        } else {
            format!("{base}/{}{path}{}", self.core.tenant, query.0)
        };
        Ok((http_method(route.verb), url))
    }

    /// One unary call; the answer's body.
    pub(crate) async fn call(
        &self,
        method: Method,
        ids: Ids<'_>,
        query: &Query,
        body: Option<Value>,
    ) -> Result<bytes::Bytes, ClientError> {
        let (verb, url) = self.target(method, ids, query)?;
        let req = self.core.request(verb, &url).await?;
        self.core.exchange(req, body.as_ref()).await
    }

    /// One unary call whose answer is a `T`.
    pub(crate) async fn call_as<T: DeserializeOwned>(
        &self,
        method: Method,
        ids: Ids<'_>,
        query: &Query,
        body: Option<Value>,
    ) -> Result<T, ClientError> {
        let bytes = self.call(method, ids, query, body).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::InvalidResponse(format!("{method:?} answer: {e}")))
    }

    /// A streaming call: each SSE `data:` is one event that `parse` reads.
    pub(crate) async fn stream(
        &self,
        method: Method,
        ids: Ids<'_>,
        body: Option<Value>,
        parse: fn(&str) -> Result<v1::StreamResponse, ClientError>,
    ) -> Result<EventStream, ClientError> {
        let (verb, url) = self.target(method, ids, &Query::default())?;
        let mut req = self
            .core
            .request(verb, &url)
            .await?
            .header("accept", "text/event-stream");
        if let Some(b) = body {
            self.core.log(|| format!("> {b}"));
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await?;
        self.core.events(resp, parse).await
    }
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub(crate) fn query_value(s: &str) -> String {
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

/// The paging query of a push config list, both versions.
pub(crate) fn page_query(page_size: i32, page_token: &str) -> Query {
    let mut q = Query::default();
    q.add_opt("pageSize", (page_size != 0).then_some(page_size))
        .add_nonempty("pageToken", page_token);
    q
}

/// A v1.0 stream event.
fn v1_event(data: &str) -> Result<v1::StreamResponse, ClientError> {
    serde_json::from_str(data).map_err(|e| ClientError::InvalidResponse(e.to_string()))
}

/// REST, A2A 1.0.
pub(crate) struct RestV1(pub(crate) Rest);

impl RestV1 {
    /// ListTasks' filters as query parameters (v1 §11.5: camelCase names,
    /// enums by name).
    fn list_query(req: &v1::ListTasksRequest) -> Query {
        let mut q = Query::default();
        q.add_nonempty("contextId", &req.context_id)
            .add_opt(
                "status",
                (req.status != 0).then(|| req.status().as_str_name()),
            )
            .add_opt("pageSize", req.page_size)
            .add_nonempty("pageToken", &req.page_token)
            .add_opt("historyLength", req.history_length)
            .add_opt("statusTimestampAfter", req.status_timestamp_after)
            .add_opt("includeArtifacts", req.include_artifacts);
        q
    }
}

impl Transport for RestV1 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(async move {
            let body = to_value(&req)?;
            (self.0)
                .call_as(
                    Method::SendMessage,
                    Ids::default(),
                    &Query::default(),
                    Some(body),
                )
                .await
        })
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let body = to_value(&req)?;
            (self.0)
                .stream(
                    Method::SendStreamingMessage,
                    Ids::default(),
                    Some(body),
                    v1_event,
                )
                .await
        })
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let mut q = Query::default();
            q.add_opt("historyLength", req.history_length);
            (self.0)
                .call_as(Method::GetTask, Ids::task(&req.id), &q, None)
                .await
        })
    }

    fn list_tasks(&self, req: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(async move {
            let q = Self::list_query(&req);
            (self.0)
                .call_as(Method::ListTasks, Ids::default(), &q, None)
                .await
        })
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            // The id is in the path; the body holds only the metadata.
            let body = match &req.metadata {
                Some(m) => json!({ "metadata": m }),
                None => json!({}),
            };
            let ids = Ids::task(&req.id);
            (self.0)
                .call_as(Method::CancelTask, ids, &Query::default(), Some(body))
                .await
        })
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            (self.0)
                .stream(Method::SubscribeToTask, Ids::task(&req.id), None, v1_event)
                .await
        })
    }

    fn create_push_config(
        &self,
        mut req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            // The task id and tenant are in the path, so not in the body.
            let task_id = std::mem::take(&mut req.task_id);
            req.tenant.clear();
            let body = to_value(&req)?;
            let ids = Ids::task(&task_id);
            (self.0)
                .call_as(Method::CreatePushConfig, ids, &Query::default(), Some(body))
                .await
        })
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let ids = Ids::config(&req.task_id, &req.id);
            (self.0)
                .call_as(Method::GetPushConfig, ids, &Query::default(), None)
                .await
        })
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        Box::pin(async move {
            let q = page_query(req.page_size, &req.page_token);
            (self.0)
                .call_as(Method::ListPushConfigs, Ids::task(&req.task_id), &q, None)
                .await
        })
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
        // The answer is `{}` (or nothing): there is nothing in it to read.
        Box::pin(async move {
            let ids = Ids::config(&req.task_id, &req.id);
            (self.0)
                .call(Method::DeletePushConfig, ids, &Query::default(), None)
                .await?;
            Ok(())
        })
    }

    fn extended_card(&self, _: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard> {
        Box::pin(async move {
            let doc: Value = (self.0)
                .call_as(
                    Method::GetExtendedAgentCard,
                    Ids::default(),
                    &Query::default(),
                    None,
                )
                .await?;
            let card = heddle_core::card::parse_card(&doc).map_err(ClientError::A2a)?;
            Ok(ExtendedCard {
                card,
                served: Some(doc),
            })
        })
    }
}
