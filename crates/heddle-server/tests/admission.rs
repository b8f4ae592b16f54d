//! What the dispatcher refuses before any method runs, and in which order:
//! an operation the card does not declare is refused as that, whatever its
//! params; with the capability declared, bad params are refused as such.

use std::sync::Arc;

use heddle_core::{call::Call, error::ErrorCode, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Limits, RequestContext, RequestHandler, TaskEvents,
};
use heddle_store::MemoryStore;

struct Done;

#[async_trait::async_trait]
impl AgentExecutor for Done {
    async fn execute(&self, _: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.complete(Some("done")).await?;
        Ok(())
    }
}

fn handler(streaming: bool) -> RequestHandler {
    let card = v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(streaming),
            ..Default::default()
        }),
        ..Default::default()
    };
    RequestHandler::new(
        "done",
        card,
        Arc::new(Done),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    )
}

/// A SendStreamingMessage whose message has no id: invalid params.
fn invalid_stream() -> Call {
    Call::SendStreamingMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text("go")],
            ..Default::default()
        }),
        ..Default::default()
    })
}

async fn refusal(h: &RequestHandler, call: Call) -> ErrorCode {
    match h.handle(CallContext::anonymous(), call).await {
        Ok(_) => panic!("the call was accepted"),
        Err(e) => e.code,
    }
}

#[tokio::test]
async fn an_undeclared_capability_is_refused_whatever_the_params() {
    let h = handler(false);
    assert_eq!(
        refusal(&h, invalid_stream()).await,
        ErrorCode::UnsupportedOperation
    );
    let subscribe = Call::SubscribeToTask(v1::SubscribeToTaskRequest::default());
    assert_eq!(
        refusal(&h, subscribe).await,
        ErrorCode::UnsupportedOperation
    );
    let push = Call::CreatePushConfig(Default::default());
    assert_eq!(
        refusal(&h, push).await,
        ErrorCode::PushNotificationNotSupported
    );
}

#[tokio::test]
async fn with_the_capability_declared_bad_params_are_refused_as_such() {
    let h = handler(true);
    assert_eq!(
        refusal(&h, invalid_stream()).await,
        ErrorCode::InvalidParams
    );
    let subscribe = Call::SubscribeToTask(v1::SubscribeToTaskRequest::default());
    assert_eq!(refusal(&h, subscribe).await, ErrorCode::InvalidParams);
}
