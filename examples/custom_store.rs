//! A task store of your own: a few lines over a `BTreeMap`, proven by the
//! store contract every Heddle store passes, then serving an agent.
//!
//! ```sh
//! cargo run -p heddle-examples --example custom_store            # contract, then serve on :8084
//! cargo run -p heddle-examples --example custom_store -- --check # contract, one call, exit
//! ```
//!
//! A store implements `heddle_api::TaskStore`. `heddle_store::contract`
//! (feature `contract`) holds the rules as functions that panic at the first
//! violation; a real store calls them from its `#[tokio::test]`s. This store
//! keeps tasks only: push configs need a `PushStore` too, and a server on
//! this store answers those calls with PushNotificationNotSupported.

use std::{collections::BTreeMap, sync::Arc, sync::Mutex};

use anyhow::{bail, ensure};
use heddle_api::{
    AgentError, AgentExecutor, ListPage, ListQuery, RequestContext, Scope, StoreError, TaskEvents,
    TaskStore, async_trait,
};
use heddle_client::{A2aClient, ClientOptions, SendReply};
use heddle_core::{v1, wkt::Timestamp};
// The ListTasks order and page-token format the built-in stores use; any
// opaque token would do, as long as a foreign one is refused.
use heddle_store::{PageToken, sort_key};

/// Tasks by (agent, task id), each with the owner that created it.
#[derive(Default)]
struct MapStore {
    tasks: Mutex<BTreeMap<(String, String), (String, v1::Task)>>,
}

impl MapStore {
    fn tasks(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), (String, v1::Task)>> {
        // A panic elsewhere while holding the lock leaves whole entries behind.
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn len(&self) -> usize {
        self.tasks().len()
    }
}

fn key(scope: &Scope, id: &str) -> (String, String) {
    (scope.agent.clone(), id.to_owned())
}

fn state(task: &v1::Task) -> v1::TaskState {
    task.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

#[async_trait]
impl TaskStore for MapStore {
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError> {
        // Another owner's task is not found, never an error that confirms it exists.
        Ok(self
            .tasks()
            .get(&key(scope, task_id))
            .filter(|(owner, _)| *owner == scope.owner)
            .map(|(_, task)| task.clone()))
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        let mut tasks = self.tasks();
        match tasks.get_mut(&key(scope, &task.id)) {
            // The owner recorded first never changes; another owner's save is ignored.
            Some((owner, _)) if *owner != scope.owner => {}
            Some((_, stored)) => stored.clone_from(task),
            None => {
                tasks.insert(key(scope, &task.id), (scope.owner.clone(), task.clone()));
            }
        }
        Ok(())
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        let after = match query.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => Some(PageToken::decode(token)?),
        };
        let tasks = self.tasks();
        let mut matching: Vec<&v1::Task> = tasks
            .iter()
            .filter(|((agent, _), (owner, _))| *agent == scope.agent && *owner == scope.owner)
            .map(|(_, (_, task))| task)
            .filter(|t| query.context_id.as_ref().is_none_or(|c| t.context_id == *c))
            .filter(|t| query.state.is_none_or(|s| state(t) == s))
            .filter(|t| query.status_after_ms.is_none_or(|ms| sort_key(t).0 >= ms))
            .collect();
        // Newest status first, ties by id descending: a total order, so
        // pages neither skip nor repeat.
        matching.sort_by_key(|t| std::cmp::Reverse(sort_key(t)));
        let total_size = u32::try_from(matching.len()).unwrap_or(u32::MAX);
        let size = query.page_size.max(1) as usize;
        let rest: Vec<&v1::Task> = matching
            .into_iter()
            .filter(|t| {
                after
                    .as_ref()
                    .is_none_or(|a| sort_key(t) < (a.ts_ms, a.id.clone()))
            })
            .collect();
        let page: Vec<v1::Task> = rest.iter().take(size).map(|t| (*t).clone()).collect();
        let next_page_token = match page.last() {
            Some(last) if rest.len() > size => PageToken::after(last).encode(),
            _ => String::new(),
        };
        Ok(ListPage {
            tasks: page,
            next_page_token,
            total_size,
        })
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        let now = Timestamp::now();
        let mut failed = 0;
        for (_, task) in self.tasks().values_mut() {
            if matches!(
                state(task),
                v1::TaskState::Submitted | v1::TaskState::Working
            ) {
                let id = format!("{}-interrupted-{}", task.id, now.as_millis());
                let mut said = v1::Message::new(id, v1::Role::Agent, vec![v1::Part::text(reason)]);
                said.task_id.clone_from(&task.id);
                said.context_id.clone_from(&task.context_id);
                task.status = Some(v1::TaskStatus::now(v1::TaskState::Failed, Some(said)));
                failed += 1;
            }
        }
        Ok(failed)
    }
    // `save_with_deliveries` and `push_store` keep their defaults: this store
    // keeps no push configs.
}

/// The agent served from the store: it files each note as a task.
struct Notes;

#[async_trait]
impl AgentExecutor for Notes {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.artifact_text("note", ctx.text()).await?;
        events.complete(Some("noted")).await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");

    // The contract wants an empty store of its own; it panics, naming the
    // rule, at the first violation.
    heddle_store::contract::task_store(&MapStore::default()).await;
    println!("MapStore keeps the TaskStore contract");

    let addr = if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8084"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let store = Arc::new(MapStore::default());
    let card = v1::AgentCard {
        name: "Notes".into(),
        description: "Keeps each message as a task, in a store of its own.".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![v1::AgentInterface {
            url: url.clone(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: "1.0".into(),
            ..Default::default()
        }],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        ..Default::default()
    };
    let handler = heddle_server::RequestHandler::new(
        "notes",
        card,
        Arc::new(Notes),
        store.clone(),
        heddle_server::Limits::default(),
    );
    // Tasks a previous process left running: none in a fresh map, but a
    // durable store would have some.
    handler.recover().await?;
    let app = heddle_server::AgentRoutes::new(handler).router();
    if !check {
        println!("notes agent at {url}");
        heddle_server::listen::serve(listener, app, std::future::pending()).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(heddle_server::listen::serve(listener, app, async {
        let _ = stopped.await;
    }));
    self_check(&url).await?;
    ensure!(store.len() == 1, "the task is in MapStore");
    println!("check: MapStore holds {} task", store.len());
    let _ = stop.send(());
    server.await??;
    Ok(())
}

/// A note sent, then read back and listed: each a call into the store.
async fn self_check(url: &str) -> anyhow::Result<()> {
    let client = A2aClient::discover(url, ClientOptions::default()).await?;
    let SendReply::Task(sent) = client.send_text("buy milk").await? else {
        bail!("the notes agent answers with a task, not a message");
    };
    let read = client.get_task(&sent.id, None).await?;
    let listed = client.list_tasks(v1::ListTasksRequest::default()).await?;
    let notes: Vec<String> = read.artifacts.iter().map(v1::Artifact::text).collect();
    ensure!(
        notes == ["buy milk"] && listed.total_size == 1,
        "expected one task noting \"buy milk\", got {notes:?} and {} listed",
        listed.total_size
    );
    println!(
        "check: task {} read back with {notes:?}; ListTasks finds {}",
        read.id, listed.total_size
    );
    Ok(())
}
