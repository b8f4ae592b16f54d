//! The operations over gRPC: v1.0 (`lf.a2a.v1`) sends the v1.0 messages as
//! they are; v0.3 (`a2a.v1`) converts with `compat::v03_proto` and names
//! tasks and configs by resource name (`tasks/{id}`).

use std::sync::Arc;

use heddle_core::{
    ProtocolVersion, compat::v03_proto as conv, method::Method, v1, v03_proto as pb, wkt,
};

use super::{
    Call, EventStream, ExtendedCard, Target, Transport, grpc::GrpcCore, missing,
    v03_history_length, v03_named_config, v03_named_from_v1, v03_trim_history,
};
use crate::ClientError;

/// The gRPC transport of `target`'s version, sharing one channel.
pub(crate) fn connect(target: &Target<'_>) -> Result<Arc<dyn Transport>, ClientError> {
    let core = GrpcCore::new(target)?;
    Ok(match target.version {
        ProtocolVersion::V1_0 => Arc::new(GrpcV1(core)),
        ProtocolVersion::V0_3 => Arc::new(GrpcV03(core)),
    })
}

/// gRPC, A2A 1.0.
pub(crate) struct GrpcV1(GrpcCore);

impl Transport for GrpcV1 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(self.0.unary(Method::SendMessage, req))
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(self.0.stream(Method::SendStreamingMessage, req, |e| e))
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(self.0.unary(Method::GetTask, req))
    }

    fn list_tasks(&self, req: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(self.0.unary(Method::ListTasks, req))
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(self.0.unary(Method::CancelTask, req))
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(self.0.stream(Method::SubscribeToTask, req, |e| e))
    }

    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(self.0.unary(Method::CreatePushConfig, req))
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(self.0.unary(Method::GetPushConfig, req))
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        Box::pin(self.0.unary(Method::ListPushConfigs, req))
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
        Box::pin(async move {
            let _: wkt::Empty = self.0.unary(Method::DeletePushConfig, req).await?;
            Ok(())
        })
    }

    fn extended_card(&self, req: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard> {
        Box::pin(async move {
            let card = self.0.unary(Method::GetExtendedAgentCard, req).await?;
            Ok(ExtendedCard { card, served: None })
        })
    }
}

/// gRPC, A2A 0.3.
pub(crate) struct GrpcV03(GrpcCore);

fn upgrade_event(e: pb::StreamResponse) -> v1::StreamResponse {
    conv::stream_response_to_v1(&e)
}

impl Transport for GrpcV03 {
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse> {
        Box::pin(async move {
            let msg = conv::send_request_from_v1(&req);
            let r: pb::SendMessageResponse = self.0.unary(Method::SendMessage, msg).await?;
            Ok(conv::send_response_to_v1(&r))
        })
    }

    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let msg = conv::send_request_from_v1(&req);
            (self.0)
                .stream(Method::SendStreamingMessage, msg, upgrade_event)
                .await
        })
    }

    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let msg = pb::GetTaskRequest {
                name: conv::task_name(&req.id),
                history_length: v03_history_length(req.history_length).unwrap_or(0),
            };
            let t: pb::Task = self.0.unary(Method::GetTask, msg).await?;
            Ok(v03_trim_history(conv::task_to_v1(&t), req.history_length))
        })
    }

    fn list_tasks(&self, _: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse> {
        Box::pin(async move { Err(missing(Method::ListTasks, ProtocolVersion::V0_3)) })
    }

    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task> {
        Box::pin(async move {
            let msg = pb::CancelTaskRequest {
                name: conv::task_name(&req.id),
            };
            let t: pb::Task = self.0.unary(Method::CancelTask, msg).await?;
            Ok(conv::task_to_v1(&t))
        })
    }

    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream> {
        Box::pin(async move {
            let msg = pb::TaskSubscriptionRequest {
                name: conv::task_name(&req.id),
            };
            (self.0)
                .stream(Method::SubscribeToTask, msg, upgrade_event)
                .await
        })
    }

    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let msg = pb::CreateTaskPushNotificationConfigRequest {
                parent: conv::task_name(&req.task_id),
                config_id: req.id.clone(),
                config: Some(v03_named_from_v1(&req)),
            };
            let c: pb::TaskPushNotificationConfig =
                self.0.unary(Method::CreatePushConfig, msg).await?;
            v03_named_config(&c, &req.task_id)
        })
    }

    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig> {
        Box::pin(async move {
            let msg = pb::GetTaskPushNotificationConfigRequest {
                name: conv::config_name(&req.task_id, &req.id),
            };
            let c: pb::TaskPushNotificationConfig =
                self.0.unary(Method::GetPushConfig, msg).await?;
            v03_named_config(&c, &req.task_id)
        })
    }

    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse> {
        Box::pin(async move {
            let msg = pb::ListTaskPushNotificationConfigRequest {
                parent: conv::task_name(&req.task_id),
                page_size: req.page_size,
                page_token: req.page_token.clone(),
            };
            let r: pb::ListTaskPushNotificationConfigResponse =
                self.0.unary(Method::ListPushConfigs, msg).await?;
            Ok(v1::ListTaskPushNotificationConfigsResponse {
                configs: r
                    .configs
                    .iter()
                    .map(|c| v03_named_config(c, &req.task_id))
                    .collect::<Result<_, _>>()?,
                next_page_token: r.next_page_token,
            })
        })
    }

    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()> {
        Box::pin(async move {
            let msg = pb::DeleteTaskPushNotificationConfigRequest {
                name: conv::config_name(&req.task_id, &req.id),
            };
            let _: wkt::Empty = self.0.unary(Method::DeletePushConfig, msg).await?;
            Ok(())
        })
    }

    fn extended_card(&self, _: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard> {
        // v0.3's GetAgentCard answers with the extended card to an
        // authenticated caller of an agent that has one.
        Box::pin(async move {
            let c: pb::AgentCard = (self.0)
                .unary(Method::GetExtendedAgentCard, pb::GetAgentCardRequest {})
                .await?;
            Ok(ExtendedCard {
                card: conv::card_to_v1(&c),
                served: None,
            })
        })
    }
}
