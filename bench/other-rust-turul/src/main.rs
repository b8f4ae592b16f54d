//! The `turul-a2a` crate (crates.io; its `A2aServer`, `AgentExecutor` and
//! SQLite / PostgreSQL stores) serving the benchmark's two agents with the
//! same semantics as Heddle's demo agents and bench/other-rust, so Heddle can
//! be compared with it on durable stores:
//!
//! * `/echo` (JSON-RPC): a COMPLETED task whose one artifact, `echo`, repeats
//!   the user's text, the user message in its history.
//! * `/stream` (JSON-RPC, streaming): one artifact, `report`, in three chunks
//!   (append, lastChunk), then COMPLETED, as Heddle's `writer-stream` (without
//!   its pause).
//!
//! turul-a2a speaks A2A v1.0 only: the v1.0 method names (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`, ...) and the `A2A-Version: 1.0` header
//! (a request without it is refused; the `compat-v03` feature is off). Its
//! JSON-RPC endpoint is `/jsonrpc` of the router an `A2aServer` builds, one
//! agent per router; each router is mounted here at its agent's path, the
//! request path rewritten to `/jsonrpc`. Its other routes (HTTP+JSON, agent
//! card) are not reachable.
//!
//! Its streams end by themselves after the terminal event. They open with the
//! task as stored when the executor starts: the framework commits SUBMITTED
//! and then WORKING before that, and WORKING -> WORKING is not a transition
//! its stores accept, so `/stream` sends five events (the task in WORKING,
//! three chunks, COMPLETED), not Heddle's six.
//!
//! Both agents share one store (one connection pool). `A2aServer::run` is not
//! used (it serves one agent); the background loops only it starts (the
//! cross-instance cancel poller, push-delivery sweeps) are not needed here.
//!
//! `heddle-bench-turul ADDR STORE_URL`, STORE_URL one of:
//! * `sqlite:/path/file.db`: the file is created if missing and put in WAL
//!   mode (a property of the file, kept by the store's own connections; the
//!   crate leaves SQLite's journal mode alone, and `synchronous` at SQLite's
//!   default, FULL). Its tables are created by the store (`CREATE TABLE IF
//!   NOT EXISTS a2a_*`).
//! * `postgres://...`: its tables (`a2a_*`, fixed names, no prefix option)
//!   are created by the store, in the schema named by an optional
//!   `schema=NAME` query parameter (as Heddle's `--store` takes it; created
//!   here if missing, then made the connections' `search_path`), else in the
//!   database's default schema.

use async_trait::async_trait;
use axum::{Router, extract::Request, http::Uri, serve::ListenerExt as _};
use sqlx::{
    ConnectOptions as _, Connection as _,
    sqlite::{SqliteConnectOptions, SqliteJournalMode},
};
use tower::util::MapRequest;
use turul_a2a::{
    prelude::*,
    storage::{
        A2aAtomicStore, A2aCancellationSupervisor, A2aEventStore, A2aPushNotificationStorage,
        A2aTaskStorage,
        postgres::{PostgresA2aStorage, PostgresConfig},
        sqlite::{SqliteA2aStorage, SqliteConfig},
    },
};
use turul_a2a_proto::AgentCard;

type Error = Box<dyn std::error::Error>;

const CHUNKS: [&str; 3] = [
    "Report, part one: the findings. ",
    "Part two: what they mean. ",
    "Part three: what to do next.",
];

/// Holds its agent card: the server asks for it on every request.
struct Echo(AgentCard);

#[async_trait]
impl AgentExecutor for Echo {
    async fn execute(
        &self,
        task: &mut Task,
        message: &Message,
        _ctx: &ExecutionContext,
    ) -> Result<(), A2aError> {
        // The framework commits what the executor leaves on the task: the
        // artifact, then the terminal state. The task (loaded from the store)
        // already has the user message in its history.
        let artifact_id = format!("{}-echo", task.id());
        task.push_text_artifact(artifact_id, "echo", message.joined_text());
        task.complete();
        Ok(())
    }

    fn agent_card(&self) -> AgentCard {
        self.0.clone()
    }
}

struct WriterStream(AgentCard);

#[async_trait]
impl AgentExecutor for WriterStream {
    async fn execute(
        &self,
        _task: &mut Task,
        _message: &Message,
        ctx: &ExecutionContext,
    ) -> Result<(), A2aError> {
        // Each emit is committed to the store, then streamed from it.
        let artifact_id = format!("{}-report", ctx.task_id);
        for (i, chunk) in CHUNKS.iter().enumerate() {
            let artifact =
                Artifact::new(artifact_id.clone(), vec![Part::text(*chunk)]).with_name("report");
            let (append, last_chunk) = (i > 0, i == CHUNKS.len() - 1);
            ctx.events
                .emit_artifact(artifact, append, last_chunk)
                .await?;
        }
        ctx.events.complete(None).await?;
        Ok(())
    }

    fn agent_card(&self) -> AgentCard {
        self.0.clone()
    }
}

fn card(name: &str, url: String) -> Result<AgentCard, A2aError> {
    AgentCardBuilder::new(name, "1.0.0")
        .description("heddle benchmark agent")
        .url(url, "JSONRPC", "1.0")
        // Without it the server refuses SendStreamingMessage.
        .streaming(true)
        .default_input_modes(vec!["text/plain"])
        .default_output_modes(vec!["text/plain"])
        .build()
}

/// An agent's router answers JSON-RPC at `/jsonrpc` only.
fn to_jsonrpc(mut req: Request) -> Request {
    *req.uri_mut() = Uri::from_static("/jsonrpc");
    req
}

/// Both agents on one router, over one store.
fn agents<S>(addr: &str, storage: S) -> Result<Router, A2aError>
where
    S: A2aTaskStorage
        + A2aPushNotificationStorage
        + A2aEventStore
        + A2aAtomicStore
        + A2aCancellationSupervisor
        + Clone
        + 'static,
{
    let echo = A2aServer::builder()
        .executor(Echo(card("echo", format!("http://{addr}/echo"))?))
        .storage(storage.clone())
        .build()?
        .into_router();
    let writer = A2aServer::builder()
        .executor(WriterStream(card(
            "writer-stream",
            format!("http://{addr}/stream"),
        )?))
        .storage(storage)
        .build()?
        .into_router();
    Ok(Router::new()
        .route_service("/echo", MapRequest::new(echo, to_jsonrpc))
        .route_service("/stream", MapRequest::new(writer, to_jsonrpc)))
}

async fn open_sqlite(url: &str) -> Result<SqliteA2aStorage, Error> {
    // The store's own connections neither create the file nor pick WAL.
    let options = url
        .parse::<SqliteConnectOptions>()?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    options.connect().await?.close().await?;
    let config = SqliteConfig {
        database_url: url.to_owned(),
        ..SqliteConfig::default()
    };
    Ok(SqliteA2aStorage::new(config).await?)
}

async fn open_postgres(url: &str) -> Result<PostgresA2aStorage, Error> {
    let (url, schema) = split_schema(url);
    let url = match schema {
        None => url,
        Some(schema) => {
            if schema.is_empty()
                || !schema
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(format!("schema {schema:?}: use ASCII letters, digits and _").into());
            }
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let sql = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await?;
            conn.close().await?;
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}options=-csearch_path%3D{schema}")
        }
    };
    let config = PostgresConfig {
        database_url: url,
        ..PostgresConfig::default()
    };
    Ok(PostgresA2aStorage::new(config).await?)
}

/// Takes `schema=NAME` out of a PostgreSQL URL's query.
fn split_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let (schema, rest): (Vec<&str>, Vec<&str>) = query
        .split('&')
        .partition(|pair| pair.starts_with("schema="));
    let schema = schema.last().map(|pair| pair["schema=".len()..].to_owned());
    if rest.is_empty() {
        (base.to_owned(), schema)
    } else {
        (format!("{base}?{}", rest.join("&")), schema)
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(store)) = (args.next(), args.next()) else {
        return Err("usage: heddle-bench-turul ADDR sqlite:/path/file.db|postgres://...".into());
    };
    let app = if store.starts_with("sqlite:") {
        agents(&addr, open_sqlite(&store).await?)?
    } else if store.starts_with("postgres://") || store.starts_with("postgresql://") {
        agents(&addr, open_postgres(&store).await?)?
    } else {
        return Err(format!("unknown store {store:?}: sqlite:... or postgres://...").into());
    };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("turul-a2a listening on http://{addr}");
    // The SDK's `run` binds its own listener; like `heddle serve`, send small
    // writes (SSE events) without waiting out Nagle's algorithm.
    let nodelay = |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    };
    axum::serve(listener.tap_io(nodelay), app).await?;
    Ok(())
}
