//! Reading: GetTask, ListTasks and the extended Agent Card.

use heddle_core::{A2aError, ErrorCode, v1};
use heddle_store::{ListQuery, PageToken};

use super::{CallContext, RequestHandler, store_err, truncate_history};

impl RequestHandler {
    /// GetTask, scoped to the caller; the live state when there is one.
    pub async fn get_task(
        &self,
        cx: &CallContext,
        id: &str,
        history: Option<i32>,
    ) -> Result<v1::Task, A2aError> {
        let scope = self.scope(&cx.caller);
        if let Some(live) = self.inner.live.get(&scope, id) {
            let st = live.state.lock().await;
            if st.created {
                return Ok(with_history(st.task.clone(), history));
            }
        }
        let task = self
            .inner
            .store
            .load(&scope, id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2aError::task_not_found(id))?;
        Ok(with_history(task, history))
    }

    pub(super) async fn list_tasks(
        &self,
        cx: &CallContext,
        r: v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, A2aError> {
        let page_size = r.page_size.unwrap_or(50).clamp(1, 100) as u32;
        if let Some(t) = r
            .page_token
            .as_str()
            .chars()
            .next()
            .map(|_| r.page_token.as_str())
        {
            PageToken::decode(t).map_err(store_err)?;
        }
        let state = match r.status() {
            v1::TaskState::Unspecified => None,
            s => Some(s),
        };
        let query = ListQuery {
            context_id: (!r.context_id.is_empty()).then(|| r.context_id.clone()),
            state,
            status_after_ms: r.status_timestamp_after.map(|t| t.as_millis()),
            page_size,
            page_token: (!r.page_token.is_empty()).then(|| r.page_token.clone()),
        };
        let page = self
            .inner
            .store
            .list(&self.scope(&cx.caller), &query)
            .await
            .map_err(store_err)?;
        let include_artifacts = r.include_artifacts.unwrap_or(false);
        let tasks = page
            .tasks
            .into_iter()
            .map(|mut t| {
                if !include_artifacts {
                    t.artifacts.clear();
                }
                with_history(t, r.history_length)
            })
            .collect();
        Ok(v1::ListTasksResponse {
            tasks,
            next_page_token: page.next_page_token,
            page_size: page_size as i32,
            total_size: page.total_size as i32,
        })
    }

    pub(super) fn extended_card(&self, cx: &CallContext) -> Result<v1::AgentCard, A2aError> {
        let declared = self
            .inner
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false);
        if !declared {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                "this agent declares no extended card",
            ));
        }
        match &self.inner.extended_card {
            Some(c) if cx.caller.authenticated => Ok(c.clone()),
            Some(_) => Err(A2aError::new(
                ErrorCode::ExtendedAgentCardNotConfigured,
                "the extended card needs an authenticated caller",
            )),
            None => Err(A2aError::from(ErrorCode::ExtendedAgentCardNotConfigured)),
        }
    }
}

pub(super) fn with_history(mut task: v1::Task, n: Option<i32>) -> v1::Task {
    truncate_history(&mut task, n);
    task
}
