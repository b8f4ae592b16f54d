//! JSON-RPC, A2A 0.3: slash method names and the `kind`-tagged JSON model
//! (WIRE-NOTES §4), converted to and from v1.0 with `compat::v03`.

use heddle_core::{compat::v03, method::Method, v1};
use serde::Deserialize;
use serde_json::json;

use super::{
    Call, EventStream, ExtendedCard, Transport, jsonrpc::JsonRpc, missing, v03_history_length,
    v03_trim_history,
};
use crate::ClientError;

/// JSON-RPC, A2A 0.3.
pub(crate) struct JsonRpcV03(pub(crate) JsonRpc);

/// A v0.3 stream event, upgraded.
fn event(result: &str) -> Result<v1::StreamResponse, ClientError> {
    let ev: v03::StreamEvent =
        serde_json::from_str(result).map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
    ev.to_v1().map_err(ClientError::InvalidResponse)
}

/// The push config list result: a bare array in the v0.3 schema; the
/// proto's `{configs}` wrapper is read too.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigList {
    Bare(Vec<v03::TaskPushNotificationConfig>),
    Wrapped {
        #[serde(default)]
        configs: Vec<v03::TaskPushNotificationConfig>,
    },
}

/// `tasks/pushNotificationConfig/get` and `…/delete` params.
fn config_params(task_id: &str, config_id: &str) -> v03::PushConfigParams {
    v03::PushConfigParams {
        id: task_id.to_owned(),
        push_notification_config_id: Some(config_id.to_owned()),
        metadata: None,
    }
}

fn task_id_params(id: String, metadata: Option<heddle_core::wkt::Struct>) -> v03::TaskIdParams {
    v03::TaskIdParams {
        id,
        metadata: metadata.map(|m| m.0),
    }
}

impl Transport for JsonRpcV03 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(async move {
            let params = v03::MessageSendParams::from_v1(&req);
            let r: v03::SendResult = self.0.call_as(Method::SendMessage, &params).await?;
            r.to_v1().map_err(ClientError::InvalidResponse)
        })
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let params = v03::MessageSendParams::from_v1(&req);
            self.0
                .stream(Method::SendStreamingMessage, &params, event)
                .await
        })
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let params = v03::TaskQueryParams {
                id: req.id,
                history_length: v03_history_length(req.history_length),
                metadata: None,
            };
            let t: v03::Task = self.0.call_as(Method::GetTask, &params).await?;
            let t = t.to_v1().map_err(ClientError::InvalidResponse)?;
            Ok(v03_trim_history(t, req.history_length))
        })
    }

    fn list_tasks(&self, _: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(async move { Err(missing(Method::ListTasks, self.0.core.version)) })
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let params = task_id_params(req.id, req.metadata);
            let t: v03::Task = self.0.call_as(Method::CancelTask, &params).await?;
            t.to_v1().map_err(ClientError::InvalidResponse)
        })
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let params = task_id_params(req.id, None);
            self.0.stream(Method::SubscribeToTask, &params, event).await
        })
    }

    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let params = v03::TaskPushNotificationConfig::from_v1(&req);
            let c: v03::TaskPushNotificationConfig =
                self.0.call_as(Method::CreatePushConfig, &params).await?;
            Ok(c.to_v1())
        })
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let params = config_params(&req.task_id, &req.id);
            let c: v03::TaskPushNotificationConfig =
                self.0.call_as(Method::GetPushConfig, &params).await?;
            Ok(c.to_v1())
        })
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        // v0.3 has no paging here: every config comes in one answer.
        Box::pin(async move {
            let params = task_id_params(req.task_id, None);
            let list: ConfigList = self.0.call_as(Method::ListPushConfigs, &params).await?;
            let (ConfigList::Bare(configs) | ConfigList::Wrapped { configs }) = list;
            Ok(v1::ListTaskPushNotificationConfigsResponse {
                configs: configs
                    .iter()
                    .map(v03::TaskPushNotificationConfig::to_v1)
                    .collect(),
                next_page_token: String::new(),
            })
        })
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
        // The result is `null`.
        Box::pin(async move {
            let params = config_params(&req.task_id, &req.id);
            self.0.call(Method::DeletePushConfig, &params).await?;
            Ok(())
        })
    }

    fn extended_card(&self, _: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard> {
        Box::pin(async move { self.0.extended_card(&json!({})).await })
    }
}
