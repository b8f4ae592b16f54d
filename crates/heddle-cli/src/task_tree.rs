//! `heddle task tree`: a task and, below it, the tasks its delegated calls
//! made, with their states and, on a Heddle hub, their costs.
//!
//! Each task's metadata names the tasks its calls made (under the
//! delegation extension, as `children`, by the callee's interface URL and
//! task id); the tree is read from the root down with GetTask on each
//! agent, through the same connection options as any other command.
//!
//! Only agents on the origin the user named are asked: a child's URL is
//! written by an agent, and the user's credentials go nowhere the user did
//! not say. A child elsewhere is listed, not read.

use std::{collections::HashSet, process::ExitCode};

use heddle_client::{A2aClient, delegation};
use heddle_core::{ProtocolVersion, method::Method, v1};
use serde_json::{Value, json};

use crate::remote::{Connection, Output, print_json};

/// The most tasks one tree shows: a chain is bounded by its hop limit, but
/// an agent's metadata is the agent's to write.
const MAX_NODES: usize = 500;

/// One task of the tree.
struct Node {
    agent: String,
    task_id: String,
    found: Result<v1::Task, String>,
    cost: Option<String>,
    children: Vec<Node>,
}

/// Runs `heddle task tree`.
pub async fn run(conn: &Connection, url: &str, id: &str) -> anyhow::Result<ExitCode> {
    let mut walk = Walk {
        conn,
        origin: origin(url).unwrap_or_default().to_owned(),
        seen: HashSet::new(),
        http: heddle_client::reqwest::Client::new(),
    };
    let root = walk.node(url.to_owned(), id.to_owned(), 0).await;
    let ok = root.found.is_ok();
    if conn.output == Output::Json {
        print_json(&to_json(&root))?;
    } else {
        print_node(&root, 0);
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> Option<&str> {
    let after = url.find("://")? + 3;
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    Some(&url[..end])
}

struct Walk<'a> {
    conn: &'a Connection,
    /// Where the user's credentials may go.
    origin: String,
    seen: HashSet<(String, String)>,
    http: heddle_client::reqwest::Client,
}

impl Walk<'_> {
    /// Task `id` of the agent at `agent`, and its children, depth first.
    async fn node(&mut self, agent: String, task_id: String, depth: usize) -> Node {
        self.seen.insert((agent.clone(), task_id.clone()));
        let found = if origin(&agent) == Some(self.origin.as_str()) {
            self.task(&agent, &task_id).await
        } else {
            Err("on another origin: not read with your credentials".to_owned())
        };
        let cost = match &found {
            Ok(_) => self.cost(&agent, &task_id).await,
            Err(_) => None,
        };
        let mut children = Vec::new();
        if let Ok(task) = &found
            && depth < delegation::MAX_HOPS_CAP as usize
        {
            for hop in delegation::children_of(task.metadata.as_ref()) {
                let key = (hop.agent.clone(), hop.task_id.clone());
                if self.seen.len() >= MAX_NODES || self.seen.contains(&key) {
                    continue;
                }
                children.push(Box::pin(self.node(hop.agent, hop.task_id, depth + 1)).await);
            }
        }
        Node {
            agent,
            task_id,
            found,
            cost,
            children,
        }
    }

    /// GetTask at the agent that `agent` names: its card's URL, or an
    /// interface URL one path segment below it (a hub agent's `/a2a`).
    async fn task(&self, agent: &str, id: &str) -> Result<v1::Task, String> {
        let client = self.client(agent).await?;
        client
            .get_task(id, None)
            .await
            .map_err(|e| format!("GetTask: {e}"))
    }

    async fn client(&self, agent: &str) -> Result<A2aClient, String> {
        let first = match self.conn.client(agent).await {
            Ok(c) => return Ok(c),
            Err(e) => e,
        };
        let trimmed = agent.trim_end_matches('/');
        match trimmed.rsplit_once('/') {
            Some((parent, _)) if parent.contains("://") && !parent.ends_with('/') => {
                self.conn.client(parent).await.map_err(|e| e.to_string())
            }
            _ => Err(first.to_string()),
        }
    }

    /// What the task cost, from the hub's a2ahub form (`tasks/get` at the
    /// hub's root), when the agent is a hub's that answers it.
    async fn cost(&self, agent: &str, id: &str) -> Option<String> {
        let root = &agent[..agent.find("/api/v1/agents/")?];
        let method = Method::GetTask.jsonrpc_name(ProtocolVersion::V0_3)?;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"task_id": id}});
        let mut req = self.http.post(format!("{root}/")).json(&body);
        for (k, v) in self.conn.options().ok()?.headers {
            req = req.header(k, v);
        }
        if let Some(key) = &self.conn.api_key {
            req = req.header("api-key", key);
        }
        if let Some(token) = &self.conn.bearer {
            req = req.bearer_auth(token);
        }
        let answer: Value = req.send().await.ok()?.json().await.ok()?;
        let cost = answer.get("result")?.get("cost")?;
        Some(format!(
            "{} {}",
            cost.get("amount")?.as_str()?,
            cost.get("currency")?.as_str()?
        ))
    }
}

fn state_name(t: &v1::Task) -> &'static str {
    let s = t
        .status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state);
    s.as_str_name()
        .strip_prefix("TASK_STATE_")
        .unwrap_or("UNSPECIFIED")
}

fn print_node(n: &Node, depth: usize) {
    let indent = "  ".repeat(depth);
    let what = match &n.found {
        Ok(t) => state_name(t).to_owned(),
        Err(e) => format!("UNREADABLE ({e})"),
    };
    let cost = n
        .cost
        .as_deref()
        .map(|c| format!("  cost {c}"))
        .unwrap_or_default();
    println!("{indent}{}  {what}  {}{cost}", n.task_id, n.agent);
    for c in &n.children {
        print_node(c, depth + 1);
    }
}

fn to_json(n: &Node) -> Value {
    let mut o = json!({
        "agent": n.agent,
        "taskId": n.task_id,
        "children": n.children.iter().map(to_json).collect::<Vec<_>>(),
    });
    match &n.found {
        Ok(t) => o["state"] = json!(state_name(t)),
        Err(e) => o["error"] = json!(e),
    }
    if let Some(c) = &n.cost {
        o["cost"] = json!(c);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::origin;

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        assert_eq!(
            origin("http://h:8080/api/v1/agents/a"),
            Some("http://h:8080")
        );
        assert_eq!(origin("https://h"), Some("https://h"));
        assert_eq!(origin("h:50051"), None);
    }
}
