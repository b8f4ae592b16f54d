//! REST, A2A 0.3: routes under `/v1/` and bodies in ProtoJSON of the
//! `a2a.v1` proto (WIRE-NOTES §5), converted with `compat::v03_proto`.

use heddle_core::{compat::v03_proto as conv, method::Method, v1, v03_proto as pb};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Call, EventStream, ExtendedCard, Transport, missing,
    rest::{Ids, Query, Rest, page_query},
    to_value, v03_history_length, v03_named_config, v03_named_from_v1, v03_trim_history,
};
use crate::ClientError;

/// REST, A2A 0.3.
pub(crate) struct RestV03(pub(crate) Rest);

/// A v0.3 stream event, upgraded.
fn event(data: &str) -> Result<v1::StreamResponse, ClientError> {
    let e: pb::StreamResponse =
        serde_json::from_str(data).map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
    Ok(conv::stream_response_to_v1(&e))
}

/// The push config list answer: the proto's `{configs, nextPageToken}`, or
/// the bare array the specification's REST tab shows.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigList {
    Wrapped(pb::ListTaskPushNotificationConfigResponse),
    Bare(Vec<pb::TaskPushNotificationConfig>),
}

impl Transport for RestV03 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(async move {
            let body = to_value(&conv::send_request_from_v1(&req))?;
            let r: pb::SendMessageResponse = (self.0)
                .call_as(
                    Method::SendMessage,
                    Ids::default(),
                    &Query::default(),
                    Some(body),
                )
                .await?;
            Ok(conv::send_response_to_v1(&r))
        })
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let body = to_value(&conv::send_request_from_v1(&req))?;
            (self.0)
                .stream(
                    Method::SendStreamingMessage,
                    Ids::default(),
                    Some(body),
                    event,
                )
                .await
        })
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let mut q = Query::default();
            q.add_opt("historyLength", v03_history_length(req.history_length));
            let t: pb::Task = (self.0)
                .call_as(Method::GetTask, Ids::task(&req.id), &q, None)
                .await?;
            Ok(v03_trim_history(conv::task_to_v1(&t), req.history_length))
        })
    }

    fn list_tasks(&self, _: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(async move { Err(missing(Method::ListTasks, self.0.core.version)) })
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        // The v0.3 request is only the task's name, which is the path.
        Box::pin(async move {
            let ids = Ids::task(&req.id);
            let t: pb::Task = (self.0)
                .call_as(Method::CancelTask, ids, &Query::default(), None)
                .await?;
            Ok(conv::task_to_v1(&t))
        })
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            (self.0)
                .stream(Method::SubscribeToTask, Ids::task(&req.id), None, event)
                .await
        })
    }

    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        // Servers read one of three body forms (WIRE-NOTES §5): the whole
        // `CreateTaskPushNotificationConfigRequest` (`{parent, configId,
        // config}`, the Python SDK; its `config` is the specification tab's
        // body), or the config itself (`{name, pushNotificationConfig}`, the
        // proto's `body: "config"`, the JS SDK). One body carries both: each
        // reader ignores the other's fields.
        Box::pin(async move {
            let named = v03_named_from_v1(&req);
            let mut body = json!({
                "parent": conv::task_name(&req.task_id),
                "config": to_value(&named)?,
                "pushNotificationConfig": to_value(&named.push_notification_config)?,
            });
            // A config the server will name is filed under its task.
            body["name"] = if named.name.is_empty() {
                json!(conv::task_name(&req.task_id))
            } else {
                json!(named.name)
            };
            if !req.id.is_empty() {
                body["configId"] = json!(req.id);
            }
            let ids = Ids::task(&req.task_id);
            let c: pb::TaskPushNotificationConfig = (self.0)
                .call_as(Method::CreatePushConfig, ids, &Query::default(), Some(body))
                .await?;
            v03_named_config(&c, &req.task_id)
        })
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let ids = Ids::config(&req.task_id, &req.id);
            let c: pb::TaskPushNotificationConfig = (self.0)
                .call_as(Method::GetPushConfig, ids, &Query::default(), None)
                .await?;
            v03_named_config(&c, &req.task_id)
        })
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        Box::pin(async move {
            let q = page_query(req.page_size, &req.page_token);
            let list: ConfigList = (self.0)
                .call_as(Method::ListPushConfigs, Ids::task(&req.task_id), &q, None)
                .await?;
            let (configs, next_page_token) = match list {
                ConfigList::Wrapped(r) => (r.configs, r.next_page_token),
                ConfigList::Bare(c) => (c, String::new()),
            };
            Ok(v1::ListTaskPushNotificationConfigsResponse {
                configs: configs
                    .iter()
                    .map(|c| v03_named_config(c, &req.task_id))
                    .collect::<Result<_, _>>()?,
                next_page_token,
            })
        })
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
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
            let c: pb::AgentCard = serde_json::from_value(doc.clone()).map_err(|e| {
                ClientError::InvalidResponse(format!("GetExtendedAgentCard result: {e}"))
            })?;
            Ok(ExtendedCard {
                card: conv::card_to_v1(&c),
                served: Some(doc),
            })
        })
    }
}
