//! CancelTask: stop the executor and end the task CANCELED.

use std::sync::{Arc, atomic::Ordering};

use heddle_core::{A2aError, ErrorCode, ProtocolVersion, v1};

use super::{CallContext, RequestHandler};
use crate::{
    agent::{Caller, RequestContext},
    events::{TaskEvents, current_state},
    live::LiveTask,
};

impl RequestHandler {
    /// CancelTask: stops the executor and ends the task CANCELED.
    pub(super) async fn cancel_task(
        &self,
        cx: &CallContext,
        id: &str,
    ) -> Result<v1::Task, A2aError> {
        let scope = self.scope(&cx.caller);
        // Run by another replica: that one cancels it.
        if let Some(answer) = self.cancel_elsewhere(&scope, id).await {
            return answer;
        }
        let attached = self
            .inner
            .live
            .attach(&scope, id, &self.inner.store, false)
            .await?;
        let lease = self.inner.live.lease(attached);
        if !lease.live.running.load(Ordering::Acquire) {
            // What a dead replica published after its last save.
            self.catch_up(&lease.live).await;
        }
        self.cancel_live(&lease.live, &cx.caller).await
    }

    pub(super) async fn cancel_live(
        &self,
        live: &Arc<LiveTask>,
        caller: &Caller,
    ) -> Result<v1::Task, A2aError> {
        let (running, snapshot) = {
            let mut st = live.state.lock().await;
            if !st.created {
                return Err(A2aError::task_not_found(&live.id));
            }
            let state = current_state(&st);
            // Already CANCELED included (v1 §3.1.5 names it): a second cancel
            // changes nothing, as §3.3.1 asks, and says so the same way.
            if state.is_terminal() {
                return Err(A2aError::new(
                    ErrorCode::TaskNotCancelable,
                    format!("task {} is already {}", live.id, state.as_str_name()),
                )
                .with_meta("taskId", live.id.clone()));
            }
            if st.queued {
                let canceled = Self::cancel_queued(live, &mut st).await?;
                drop(st);
                if let Some(cluster) = &self.inner.cluster {
                    cluster.release(&live.scope, &live.id).await;
                }
                self.tell_gate(&canceled);
                return Ok(canceled);
            }
            (live.running.load(Ordering::Acquire), st.task.clone())
        };
        let events = TaskEvents::new(live.clone(), snapshot.context_id.clone());
        // The agent is asked to stop whether or not a run is going on: a
        // task waiting for its caller may have work elsewhere to stop too
        // (an upstream task, or the tasks it delegated).
        {
            if running {
                live.cancel.cancel();
            }
            let ctx = RequestContext {
                task_id: live.id.clone(),
                context_id: snapshot.context_id.clone(),
                message: snapshot.history.last().cloned().unwrap_or_default(),
                task: Some(Box::new(snapshot.clone())),
                caller: caller.clone(),
                extensions: Vec::new(),
                configuration: None,
                metadata: None,
                protocol_version: ProtocolVersion::V1_0,
                cancel: live.cancel.clone(),
                streaming: false,
                agent: self.inner.agent_url.clone(),
                delegation: None,
                max_hops: self.inner.max_hops,
            };
            let grace = self.inner.limits.cancel_grace;
            if let Err(e) =
                tokio::time::timeout(grace, self.inner.executor.cancel(ctx, events.clone()))
                    .await
                    .unwrap_or(Ok(()))
            {
                tracing::warn!(task = %live.id, error = %e, "agent cancel failed; canceling anyway");
            }
        }
        let mut st = live.state.lock().await;
        let state = current_state(&st);
        if !state.is_terminal() {
            let msg =
                events.agent_message(vec![v1::Part::text("canceled at the caller's request")]);
            live.apply_status(
                &mut st,
                events.context_id(),
                v1::TaskState::Canceled,
                Some(msg),
            )
            .await
            .map_err(|e| A2aError::internal(e.to_string()))?;
        }
        if let Some(abort) = st.abort.take() {
            // The agent had its grace period in `cancel`; stop it for good.
            // Its run ends without finishing, so its lease is let go here.
            abort.abort();
            live.running.store(false, Ordering::Release);
            if let Some(cluster) = &self.inner.cluster {
                cluster.release(&live.scope, &live.id).await;
                live.lease_let_go();
            }
        }
        if current_state(&st) == v1::TaskState::Canceled {
            if !running {
                self.tell_gate(&st.task);
            }
            Ok(st.task.clone())
        } else {
            let s = current_state(&st);
            Err(A2aError::new(
                ErrorCode::TaskNotCancelable,
                format!(
                    "task {} ended {} before it could be canceled",
                    live.id,
                    s.as_str_name()
                ),
            ))
        }
    }

    /// Tells the send gate of a task canceled with no run going on (a run
    /// tells its own pass).
    fn tell_gate(&self, task: &v1::Task) {
        if let Some(gate) = &self.inner.gate {
            gate.ended_outside_run(task);
        }
    }

    /// Cancels a task whose execution waits for a place, under its lock
    /// (`st`): the executor never saw it, so it is not asked to stop; the
    /// task ends CANCELED here, and its wait is aborted, which gives its
    /// place in the queue back. The waiter also sees the cancel signal
    /// (should the abort come before the abort handle is set) and leaves.
    async fn cancel_queued(
        live: &Arc<LiveTask>,
        st: &mut crate::live::LiveState,
    ) -> Result<v1::Task, A2aError> {
        live.cancel.cancel();
        let events = TaskEvents::new(live.clone(), st.task.context_id.clone());
        let msg = events.agent_message(vec![v1::Part::text(
            "canceled at the caller's request before it ran",
        )]);
        live.apply_status(st, events.context_id(), v1::TaskState::Canceled, Some(msg))
            .await
            .map_err(|e| A2aError::internal(e.to_string()))?;
        st.queued = false;
        if let Some(abort) = st.abort.take() {
            abort.abort();
            live.running.store(false, Ordering::Release);
        }
        Ok(st.task.clone())
    }
}
