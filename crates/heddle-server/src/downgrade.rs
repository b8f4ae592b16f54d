//! v1.0 events in a v0.3 form, the same way on every binding.
//!
//! Every v1.0 event the handler emits has a v0.3 form today; one without
//! (an event with no payload) would be an agent bug. Each binding then sends
//! InvalidAgentResponse in its own error form (a JSON-RPC error event, a
//! REST `google.rpc.Status` event, a gRPC status) and ends the stream: a
//! client is told, never silently short of an event.

use futures::{Stream, StreamExt};
use heddle_core::{A2aError, ErrorCode, v1};

use crate::handler::EventStream;

/// `events` converted by `convert`, each with its generation; the first
/// event without a v0.3 form becomes an InvalidAgentResponse error, and the
/// stream ends there.
pub(crate) fn v03_events<T: Send + 'static>(
    events: EventStream,
    convert: fn(&v1::StreamResponse) -> Option<T>,
) -> impl Stream<Item = Result<(u64, T), A2aError>> + Send + 'static {
    futures::stream::unfold((events, false), move |(mut events, ended)| async move {
        if ended {
            return None;
        }
        let update = events.next().await?;
        Some(match convert(&update.response) {
            Some(event) => (Ok((update.generation, event)), (events, false)),
            None => (
                Err(A2aError::new(
                    ErrorCode::InvalidAgentResponse,
                    "the agent sent an event that has no A2A 0.3 form",
                )),
                (events, true),
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn an_event_without_a_v03_form_ends_the_stream_with_an_error() {
        let good = v1::StreamResponse {
            payload: Some(v1::stream_response::Payload::Message(v1::Message::default())),
        };
        let event = |response| {
            Arc::new(crate::live::Event {
                generation: 1,
                response,
            })
        };
        let events: EventStream = Box::pin(futures::stream::iter([
            event(good.clone()),
            event(v1::StreamResponse::default()),
            event(good),
        ]));
        let out: Vec<_> = v03_events(events, |e| e.payload.as_ref().map(|_| ()))
            .collect()
            .await;
        assert_eq!(out.len(), 2, "the stream ends at the error");
        assert!(out[0].is_ok());
        let err = out[1].as_ref().expect_err("second is the error");
        assert_eq!(err.code, ErrorCode::InvalidAgentResponse);
    }
}
