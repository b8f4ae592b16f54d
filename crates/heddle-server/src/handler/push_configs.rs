//! The push config operations (Create, Get, List, Delete) and the config a
//! SendMessage may carry. Every one is scoped to the caller: the task must be
//! the caller's, and configs live in the same scope, in the push notifier's
//! store (without a notifier every one is PushNotificationNotSupported).

use heddle_core::{A2aError, ErrorCode, ProtocolVersion, v1};
use heddle_store::Scope;

use super::{CallContext, Reply, RequestHandler, store_err};
use crate::push::{self, PushNotifier};

/// Most configs one List page returns.
const MAX_PAGE: usize = 100;

impl RequestHandler {
    /// The notifier, when this agent does push notifications.
    pub(super) fn push_notifier(&self) -> Result<&PushNotifier, A2aError> {
        if !self.push_supported() {
            return Err(A2aError::new(
                ErrorCode::PushNotificationNotSupported,
                "this agent does not support push notifications",
            ));
        }
        self.inner.push.as_ref().ok_or_else(|| {
            A2aError::new(
                ErrorCode::PushNotificationNotSupported,
                "push notification delivery is not configured on this server",
            )
        })
    }

    /// Checks the URL against the SSRF policy, fills in the id and stores the
    /// config for the caller's task `task_id`.
    async fn put_config(
        &self,
        cx: &CallContext,
        task_id: &str,
        mut config: v1::TaskPushNotificationConfig,
        field: &str,
    ) -> Result<v1::TaskPushNotificationConfig, A2aError> {
        let notifier = self.push_notifier()?;
        notifier
            .policy()
            .check_url(&config.url)
            .map_err(|r| A2aError::invalid_field(field, r.0))?;
        // A config given no id is named after its task, as the official
        // SDKs name it: a Get by task id alone (v0.3) then finds it, and
        // setting another without an id replaces it.
        if config.id.is_empty() {
            task_id.clone_into(&mut config.id);
        }
        task_id.clone_into(&mut config.task_id);
        let scope = self.scope(&cx.caller);
        notifier
            .store()
            .put_push_config(&scope, &push::record(config.clone(), cx.version))
            .await
            .map_err(store_err)?;
        notifier.arm(&scope, task_id);
        if let Some(cluster) = &self.inner.cluster {
            cluster.tell_push_config(&scope, task_id).await?;
        }
        Ok(config)
    }

    /// Another replica stored a push config for a task: its events are
    /// delivered to it from now on, if this replica runs it (one that does
    /// not reads the configs when it next does).
    pub(crate) fn push_config_made(&self, scope: &Scope, task_id: &str) {
        if let Some(push) = &self.inner.push
            && self
                .inner
                .live
                .get(scope, task_id)
                .is_some_and(|l| l.running.load(std::sync::atomic::Ordering::Acquire))
        {
            push.arm(scope, task_id);
        }
    }

    /// Checks SendMessage's config (capability, URL) before the send changes anything.
    pub(super) fn check_send_push_config(
        &self,
        config: &v1::TaskPushNotificationConfig,
    ) -> Result<(), A2aError> {
        self.push_notifier()?
            .policy()
            .check_url(&config.url)
            .map(|_| ())
            .map_err(|r| {
                A2aError::invalid_field("configuration.taskPushNotificationConfig.url", r.0)
            })
    }

    /// The config inside SendMessage's configuration, for the task the send
    /// made or continued.
    pub(super) async fn register_send_push_config(
        &self,
        cx: &CallContext,
        task_id: &str,
        config: v1::TaskPushNotificationConfig,
    ) -> Result<(), A2aError> {
        self.put_config(
            cx,
            task_id,
            config,
            "configuration.taskPushNotificationConfig.url",
        )
        .await
        .map(|_| ())
    }

    /// The caller's task must exist (TaskNotFound otherwise, whoever owns it).
    async fn check_task(&self, cx: &CallContext, task_id: &str) -> Result<(), A2aError> {
        self.get_task(cx, task_id, Some(0)).await.map(|_| ())
    }

    pub(super) async fn create_push_config(
        &self,
        cx: &CallContext,
        r: v1::TaskPushNotificationConfig,
    ) -> Result<Reply, A2aError> {
        self.check_task(cx, &r.task_id).await?;
        let task_id = r.task_id.clone();
        self.put_config(cx, &task_id, r, "url")
            .await
            .map(Reply::PushConfig)
    }

    pub(super) async fn get_push_config(
        &self,
        cx: &CallContext,
        r: v1::GetTaskPushNotificationConfigRequest,
    ) -> Result<Reply, A2aError> {
        self.check_task(cx, &r.task_id).await?;
        let scope = self.scope(&cx.caller);
        let store = self.push_notifier()?.store();
        let mut found = store
            .get_push_config(&scope, &r.task_id, &r.id)
            .await
            .map_err(store_err)?;
        // v0.3 allows asking by task id alone (decoded as the id of a config
        // set without one, the task's own): failing that, the task's first.
        if found.is_none() && cx.version == ProtocolVersion::V0_3 && r.id == r.task_id {
            found = store
                .list_push_configs(&scope, &r.task_id)
                .await
                .map_err(store_err)?
                .into_iter()
                .next();
        }
        found
            .map(|rec| Reply::PushConfig(rec.config))
            .ok_or_else(|| {
                A2aError::new(
                    ErrorCode::TaskNotFound,
                    format!(
                        "task {} has no push notification config {:?}",
                        r.task_id, r.id
                    ),
                )
                .with_meta("taskId", r.task_id.clone())
            })
    }

    pub(super) async fn list_push_configs(
        &self,
        cx: &CallContext,
        r: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Result<Reply, A2aError> {
        self.check_task(cx, &r.task_id).await?;
        let all = self
            .push_notifier()?
            .store()
            .list_push_configs(&self.scope(&cx.caller), &r.task_id)
            .await
            .map_err(store_err)?;
        let size = usize::try_from(r.page_size)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(MAX_PAGE)
            .min(MAX_PAGE);
        // The page token is the offset of the page's first config.
        let start = if r.page_token.is_empty() {
            0
        } else {
            r.page_token.parse::<usize>().map_err(|_| {
                A2aError::invalid_field("pageToken", "not a token this server issued")
            })?
        };
        let end = start.saturating_add(size).min(all.len());
        let configs = all
            .get(start.min(end)..end)
            .map(|s| s.iter().map(|rec| rec.config.clone()).collect())
            .unwrap_or_default();
        Ok(Reply::PushConfigs(
            v1::ListTaskPushNotificationConfigsResponse {
                configs,
                next_page_token: if end < all.len() {
                    end.to_string()
                } else {
                    String::new()
                },
            },
        ))
    }

    /// Idempotent: deleting a config that is not there succeeds.
    pub(super) async fn delete_push_config(
        &self,
        cx: &CallContext,
        r: v1::DeleteTaskPushNotificationConfigRequest,
    ) -> Result<Reply, A2aError> {
        self.check_task(cx, &r.task_id).await?;
        self.push_notifier()?
            .store()
            .delete_push_config(&self.scope(&cx.caller), &r.task_id, &r.id)
            .await
            .map_err(store_err)?;
        Ok(Reply::Empty)
    }
}
