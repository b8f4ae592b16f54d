//! Push notification configs: where an agent posts a task's updates, kept
//! per task (v1 §3.1.7–3.1.10). The v0.3 forms (`set`, named configs,
//! several schemes) are converted by the transports.

use heddle_core::v1;

use crate::{A2aClient, ClientError};

impl A2aClient {
    /// CreateTaskPushNotificationConfig (v0.3: `set`) for `config.task_id`.
    /// The agent assigns an id when `config.id` is empty.
    ///
    /// Retried on transient failures only when the config has an id: with
    /// one, a repeat sets the same config again; without, it could leave a
    /// second config that would post every update twice.
    pub async fn create_push_config(
        &self,
        mut config: v1::TaskPushNotificationConfig,
    ) -> Result<v1::TaskPushNotificationConfig, ClientError> {
        config.tenant = self.tenant();
        if config.id.is_empty() {
            return self.transport.create_push_config(config).await;
        }
        self.retrying(|| self.transport.create_push_config(config.clone()))
            .await
    }

    /// GetTaskPushNotificationConfig: config `config_id` of task `task_id`.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<v1::TaskPushNotificationConfig, ClientError> {
        let req = v1::GetTaskPushNotificationConfigRequest {
            tenant: self.tenant(),
            task_id: task_id.to_owned(),
            id: config_id.to_owned(),
        };
        self.retrying(|| self.transport.get_push_config(req.clone()))
            .await
    }

    /// ListTaskPushNotificationConfigs: a page of `req.task_id`'s configs.
    /// A2A 0.3 has no paging: its agents answer with every config at once.
    pub async fn list_push_configs(
        &self,
        mut req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Result<v1::ListTaskPushNotificationConfigsResponse, ClientError> {
        req.tenant = self.tenant();
        self.retrying(|| self.transport.list_push_configs(req.clone()))
            .await
    }

    /// DeleteTaskPushNotificationConfig: idempotent (v1 §3.1.10), so retried
    /// on transient failures.
    pub async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<(), ClientError> {
        let req = v1::DeleteTaskPushNotificationConfigRequest {
            tenant: self.tenant(),
            task_id: task_id.to_owned(),
            id: config_id.to_owned(),
        };
        self.retrying(|| self.transport.delete_push_config(req.clone()))
            .await
    }
}
