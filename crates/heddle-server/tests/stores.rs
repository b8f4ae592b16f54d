//! The server over stores in separate roles: a task store that keeps no
//! push configs still serves every task operation, and a push store apart
//! from the task store gets the configs and deliveries while the tasks stay
//! in the task store.

use std::{sync::Arc, time::Duration};

use heddle_core::{ErrorCode, call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Limits, PushNotifier, PushOptions, Reply,
    RequestContext, RequestHandler, TaskEvents,
};
use heddle_store::{ListPage, ListQuery, MemoryStore, PushStore, Scope, StoreError, TaskStore};

#[path = "stores/postgres.rs"]
mod postgres;

/// A store that keeps tasks only: the memory store without its push side.
#[derive(Default)]
struct TasksOnly(MemoryStore);

#[async_trait::async_trait]
impl TaskStore for TasksOnly {
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError> {
        self.0.load(scope, task_id).await
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        self.0.save(scope, task).await
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        self.0.list(scope, query).await
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        self.0.fail_interrupted(reason).await
    }
}

struct Done;

#[async_trait::async_trait]
impl AgentExecutor for Done {
    async fn execute(&self, _: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(None).await?;
        events.complete(Some("done")).await?;
        Ok(())
    }
}

/// A card that declares push notifications.
fn card() -> v1::AgentCard {
    v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            push_notifications: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn config(task_id: &str) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        task_id: task_id.into(),
        url: "https://receiver.example/hook".into(),
        ..Default::default()
    }
}

/// A blocking send, optionally registering a push config with it.
async fn send(h: &RequestHandler, push: bool) -> v1::Task {
    let call = Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message::new(
            "m1",
            v1::Role::User,
            vec![v1::Part::text("go")],
        )),
        configuration: Some(v1::SendMessageConfiguration {
            task_push_notification_config: push.then(|| config("")),
            ..Default::default()
        }),
        ..Default::default()
    });
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        h.handle(CallContext::anonymous(), call),
    )
    .await
    .expect("the send answers");
    match reply {
        Ok(Reply::Task(t)) => t,
        Ok(other) => panic!("expected a task, got {other:?}"),
        Err(e) => panic!("send failed: {e}"),
    }
}

fn state(task: &v1::Task) -> v1::TaskState {
    task.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

#[tokio::test]
async fn a_task_store_without_push_serves_tasks_and_refuses_push_configs() {
    let store = Arc::new(TasksOnly::default());
    assert!(store.clone().push_store().is_none());
    let h = RequestHandler::new("agent", card(), Arc::new(Done), store, Limits::default());

    let task = send(&h, false).await;
    assert_eq!(state(&task), v1::TaskState::Completed);

    let create = h
        .handle(
            CallContext::anonymous(),
            Call::CreatePushConfig(config(&task.id)),
        )
        .await;
    let Err(e) = create else {
        panic!("a push config was accepted without a push store");
    };
    assert_eq!(e.code, ErrorCode::PushNotificationNotSupported);
}

#[tokio::test]
async fn a_separate_push_store_gets_the_configs_and_deliveries() {
    let tasks = Arc::new(TasksOnly::default());
    let push = Arc::new(MemoryStore::default());
    let notifier = PushNotifier::new(push.clone(), PushOptions::default()).expect("a notifier");
    let h = RequestHandler::builder("agent", card(), Arc::new(Done), tasks.clone())
        .push(notifier)
        .build();

    let task = send(&h, true).await;
    assert_eq!(state(&task), v1::TaskState::Completed);
    let scope = Scope::new("agent", "");

    // The task is in the task store, its config and deliveries in the push
    // store (the worker is not running, so they wait there).
    let stored = tasks.load(&scope, &task.id).await.expect("load");
    assert_eq!(stored.as_ref().map(state), Some(v1::TaskState::Completed));
    assert_eq!(push.load(&scope, &task.id).await.expect("load"), None);
    let configs = push
        .list_push_configs(&scope, &task.id)
        .await
        .expect("configs");
    assert_eq!(configs.len(), 1);
    let pending = push.pending_deliveries(100).await.expect("outbox");
    assert!(!pending.is_empty(), "no delivery was recorded");
    assert!(pending.iter().all(|d| d.item.task_id == task.id));

    // The push config operations read the same store.
    let list = h
        .handle(
            CallContext::anonymous(),
            Call::ListPushConfigs(v1::ListTaskPushNotificationConfigsRequest {
                task_id: task.id.clone(),
                ..Default::default()
            }),
        )
        .await;
    match list {
        Ok(Reply::PushConfigs(l)) => assert_eq!(l.configs.len(), 1),
        Ok(other) => panic!("expected configs, got {other:?}"),
        Err(e) => panic!("list failed: {e}"),
    }
}
