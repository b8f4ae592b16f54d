//! JSON-RPC 2.0 over HTTP: the envelope, shared by both versions, and the
//! v1.0 transport, whose params and results are ProtoJSON of the v1.0 proto
//! (WIRE-NOTES §3).

use heddle_core::{A2aError, jsonrpc::ClientResponse, method::Method, v1};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::{Call, EventStream, ExtendedCard, Target, Transport, http::HttpCore, missing};
use crate::ClientError;

/// The JSON-RPC envelope over one interface, in its version's method names.
pub(crate) struct JsonRpc {
    pub(crate) core: HttpCore,
}

impl JsonRpc {
    pub(crate) fn new(target: Target<'_>) -> Self {
        Self {
            core: HttpCore::new(target),
        }
    }

    /// The request envelope for `method` in this version's naming, as the
    /// JSON text sent: written from the typed params in one pass (no
    /// intermediate `Value`).
    fn envelope<P: Serialize>(&self, method: Method, params: &P) -> Result<String, ClientError> {
        #[derive(Serialize)]
        struct Envelope<'a, P> {
            jsonrpc: &'static str,
            id: String,
            method: &'a str,
            params: &'a P,
        }
        let name = method
            .jsonrpc_name(self.core.version)
            .ok_or_else(|| missing(method, self.core.version))?;
        serde_json::to_string(&Envelope {
            jsonrpc: "2.0",
            id: uuid::Uuid::new_v4().to_string(),
            method: name,
            params,
        })
        .map_err(|e| ClientError::InvalidResponse(format!("cannot encode the request: {e}")))
    }

    /// One call; the whole response body, once its `error` (if any) is
    /// turned into the error it stands for.
    async fn exchange<P: Serialize>(
        &self,
        method: Method,
        params: &P,
    ) -> Result<bytes::Bytes, ClientError> {
        let body = self.envelope(method, params)?;
        let req = self
            .core
            .request(reqwest::Method::POST, &self.core.url)
            .await?;
        self.core.exchange_text(req, Some(body)).await
    }

    /// One call; its `result` as JSON (`null` when absent).
    pub(crate) async fn call<P: Serialize>(
        &self,
        method: Method,
        params: &P,
    ) -> Result<Value, ClientError> {
        self.call_as(method, params).await
    }

    /// One call whose result is a `T`, read straight from the response.
    pub(crate) async fn call_as<P: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        params: &P,
    ) -> Result<T, ClientError> {
        let bytes = self.exchange(method, params).await?;
        let r: ClientResponse<'_> = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
        if let Some(err) = r.error {
            return Err(ClientError::A2a(A2aError::from_jsonrpc(&err)));
        }
        let result = r.result.map_or("null", |r| r.get());
        serde_json::from_str(result)
            .map_err(|e| ClientError::InvalidResponse(format!("{method:?} result: {e}")))
    }

    /// A streaming call: each SSE `data:` is a JSON-RPC response whose
    /// `result` `parse` reads.
    pub(crate) async fn stream<P: Serialize>(
        &self,
        method: Method,
        params: &P,
        parse: fn(&str) -> Result<v1::StreamResponse, ClientError>,
    ) -> Result<EventStream, ClientError> {
        let body = self.envelope(method, params)?;
        let req = self
            .core
            .request(reqwest::Method::POST, &self.core.url)
            .await?;
        // After the request line, which `request` logs.
        self.core.log(|| format!("> {body}"));
        let resp = req
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body)
            .send()
            .await?;
        self.core
            .events(resp, move |data| {
                let r: ClientResponse<'_> = serde_json::from_str(data)
                    .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
                if let Some(err) = r.error {
                    return Err(ClientError::A2a(A2aError::from_jsonrpc(&err)));
                }
                parse(r.result.map_or("null", |r| r.get()))
            })
            .await
    }

    /// The extended card, read whatever version's shape it has.
    pub(crate) async fn extended_card<P: Serialize>(
        &self,
        params: &P,
    ) -> Result<ExtendedCard, ClientError> {
        let doc = self.call(Method::GetExtendedAgentCard, params).await?;
        let card = heddle_core::card::parse_card(&doc).map_err(ClientError::A2a)?;
        Ok(ExtendedCard {
            card,
            served: Some(doc),
        })
    }
}

/// A v1.0 stream event.
fn v1_event(result: &str) -> Result<v1::StreamResponse, ClientError> {
    serde_json::from_str(result).map_err(|e| ClientError::InvalidResponse(e.to_string()))
}

/// JSON-RPC, A2A 1.0.
pub(crate) struct JsonRpcV1(pub(crate) JsonRpc);

impl Transport for JsonRpcV1 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(async move { self.0.call_as(Method::SendMessage, &req).await })
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            self.0
                .stream(Method::SendStreamingMessage, &req, v1_event)
                .await
        })
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move { self.0.call_as(Method::GetTask, &req).await })
    }

    fn list_tasks(&self, req: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(async move { self.0.call_as(Method::ListTasks, &req).await })
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move { self.0.call_as(Method::CancelTask, &req).await })
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(async move { self.0.stream(Method::SubscribeToTask, &req, v1_event).await })
    }

    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move { self.0.call_as(Method::CreatePushConfig, &req).await })
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move { self.0.call_as(Method::GetPushConfig, &req).await })
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        Box::pin(async move { self.0.call_as(Method::ListPushConfigs, &req).await })
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
        // The result is `google.protobuf.Empty` (`{}`); `null` is taken too.
        Box::pin(async move {
            self.0.call(Method::DeletePushConfig, &req).await?;
            Ok(())
        })
    }

    fn extended_card(&self, req: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard> {
        Box::pin(async move { self.0.extended_card(&req).await })
    }
}
