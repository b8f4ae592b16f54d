//! The caller reaches the agent on every path, cancel included, and a task
//! is another caller's TaskNotFound while it runs (the live registry path).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use heddle_core::{ErrorCode, call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Caller, Limits, Reply, RequestContext, RequestHandler,
    TaskEvents,
};
use heddle_store::MemoryStore;

/// Works until canceled; remembers who asked it to stop.
#[derive(Default)]
struct Patient {
    canceled_by: Mutex<Option<Caller>>,
}

#[async_trait::async_trait]
impl AgentExecutor for Patient {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(Some("waiting")).await?;
        ctx.cancel.cancelled().await;
        Ok(())
    }

    async fn cancel(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        *self.canceled_by.lock().expect("lock") = Some(ctx.caller.clone());
        events.cancel(None).await?;
        Ok(())
    }
}

fn as_caller(id: &str) -> CallContext {
    CallContext {
        caller: Caller::authenticated(id),
        ..CallContext::anonymous()
    }
}

#[tokio::test]
async fn a_running_task_is_invisible_to_others_and_cancel_tells_the_agent_who_asked() {
    let agent = Arc::new(Patient::default());
    let handler = RequestHandler::new(
        "patient",
        v1::AgentCard::default(),
        agent.clone(),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let send = Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: "m1".into(),
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text("go")],
            ..Default::default()
        }),
        configuration: Some(v1::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    let Ok(Reply::Task(task)) = handler.handle(as_caller("alice"), send).await else {
        panic!("a task");
    };
    // Wait until the agent has announced it (it is live, not yet only in the store).
    for _ in 0..100 {
        if handler
            .get_task(&as_caller("alice"), &task.id, None)
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(handler.live_tasks(), 1);
    for call in [
        Call::GetTask(v1::GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        }),
        Call::CancelTask(v1::CancelTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        }),
    ] {
        let err = handler
            .handle(as_caller("bob"), call)
            .await
            .expect_err("not bob's");
        assert_eq!(err.code, ErrorCode::TaskNotFound);
    }
    assert!(agent.canceled_by.lock().expect("lock").is_none());
    let cancel = Call::CancelTask(v1::CancelTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    });
    let Ok(Reply::Task(done)) = handler.handle(as_caller("alice"), cancel).await else {
        panic!("canceled");
    };
    assert_eq!(
        done.status.map(|s| s.state()),
        Some(v1::TaskState::Canceled)
    );
    assert_eq!(
        agent.canceled_by.lock().expect("lock").clone(),
        Some(Caller::authenticated("alice"))
    );
}
