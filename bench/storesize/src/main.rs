//! How Heddle's stores behave as they grow. For each size (10 thousand, 1
//! million, 10 million tasks by default) the store is filled to that size
//! in one scope (the worst case: every task one caller's), then timed
//! through the store API, one call at a time:
//!
//! * `get`: GetTask's load of a random stored task;
//! * `list`: ListTasks filtered by a random context (1,000 tasks each), its
//!   first page of 50 and the page after it (keyset token);
//! * `send`: a SendMessage's three saves of a new task (SUBMITTED, WORKING,
//!   COMPLETED).
//!
//! The fill writes rows straight into the tables (SQLite: one prepared
//! insert in a transaction; PostgreSQL: `generate_series`), with the
//! store's columns and protobuf bodies, then the timing goes through
//! `TaskStore` as a server would. (PostgreSQL's bodies are built by the
//! server from one template: their status time is the first task's, the
//! column holds each task's own; a body is 6 bytes shorter than the
//! store's.) HTTP costs the same at any size, so it is left out.
//!
//! ```text
//! cargo run --release -p heddle-bench-storesize -- sqlite /tmp/size.db
//! cargo run --release -p heddle-bench-storesize -- postgres 'postgres://postgres@127.0.0.1/test?schema=size'
//! ```
//!
//! `SIZES=10000,1000000` and `SAMPLES=2000` change what is measured.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use heddle_core::{v1, wkt::Timestamp};
use heddle_store::{ListQuery, Scope, TaskStore};
use prost::Message as _;

/// Tasks per context: a ListTasks by context matches this many.
const PER_CONTEXT: u64 = 1000;
const AGENT: &str = "bench";
const OWNER: &str = "alice";
/// Status times start here and grow by 1 ms per task.
const T0: i64 = 1_700_000_000_000;

fn id(i: u64) -> String {
    format!("t{i:09}")
}

fn context(i: u64) -> String {
    format!("c{:07}", i / PER_CONTEXT)
}

/// A stored task as the store writes one: its protobuf body.
fn task(i: u64, state: v1::TaskState) -> v1::Task {
    v1::Task {
        id: id(i),
        context_id: context(i),
        status: Some(v1::TaskStatus {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp::from_millis(T0 + i as i64)),
        }),
        ..Default::default()
    }
}

/// Fills an SQLite file's tasks table from `from` up to `to` tasks.
fn fill_sqlite(path: &str, from: u64, to: u64) -> anyhow::Result<()> {
    let mut conn = rusqlite::Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;")?;
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT INTO tasks (agent, id, owner, context_id, state, status_ms, body, generation)
             VALUES (?1, ?2, ?3, ?4, 3, ?5, ?6, 3)",
        )?;
        for i in from..to {
            let t = task(i, v1::TaskState::Completed);
            stmt.execute(rusqlite::params![
                AGENT,
                t.id,
                OWNER,
                t.context_id,
                T0 + i as i64,
                t.encode_to_vec()
            ])?;
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); ANALYZE;")?;
    Ok(())
}

/// Fills the PostgreSQL tasks table from `from` up to `to` tasks, the
/// bodies built by the server from one template: the ids and contexts are
/// of fixed length, so only their bytes differ.
async fn fill_postgres(pool: &sqlx::PgPool, from: u64, to: u64) -> anyhow::Result<()> {
    let template = task(0, v1::TaskState::Completed).encode_to_vec();
    let (id0, ctx0) = (id(0).into_bytes(), context(0).into_bytes());
    let at = |needle: &[u8]| {
        template
            .windows(needle.len())
            .position(|w| w == needle)
            .context("template field")
    };
    let (id_at, ctx_at) = (at(&id0)?, at(&ctx0)?);
    anyhow::ensure!(id_at + id0.len() <= ctx_at, "id before context in the body");
    let head = &template[..id_at];
    let middle = &template[id_at + id0.len()..ctx_at];
    let tail = &template[ctx_at + ctx0.len()..];
    // Batches of a million, so no one statement runs for long.
    let mut start = from;
    while start < to {
        let end = (start + 1_000_000).min(to);
        sqlx::query(
            "INSERT INTO tasks (agent, id, owner, context_id, state, status_ms, body, generation)
             SELECT $1, 't' || lpad(i::text, 9, '0'), $2,
                    'c' || lpad((i / $3)::text, 7, '0'), 3, $4 + i,
                    $5 || convert_to('t' || lpad(i::text, 9, '0'), 'UTF8') || $6
                       || convert_to('c' || lpad((i / $3)::text, 7, '0'), 'UTF8') || $7,
                    3
             FROM generate_series($8::bigint, $9::bigint - 1) AS i",
        )
        .bind(AGENT)
        .bind(OWNER)
        .bind(PER_CONTEXT as i64)
        .bind(T0)
        .bind(head)
        .bind(middle)
        .bind(tail)
        .bind(start as i64)
        .bind(end as i64)
        .execute(pool)
        .await?;
        start = end;
    }
    sqlx::query("ANALYZE tasks").execute(pool).await?;
    Ok(())
}

/// A small deterministic generator: the same calls at every size.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// p50 and p99 of `times`, in microseconds.
fn percentiles(times: &mut [Duration]) -> (f64, f64) {
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 - 1.0) * q).round() as usize;
        times.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    (at(0.50), at(0.99))
}

struct Row {
    op: &'static str,
    p50: f64,
    p99: f64,
}

async fn measure(
    store: &Arc<dyn TaskStore>,
    size: u64,
    samples: usize,
) -> anyhow::Result<Vec<Row>> {
    let scope = Scope::new(AGENT, OWNER);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut get = Vec::with_capacity(samples);
    for _ in 0..samples {
        let i = rng.below(size);
        let t = Instant::now();
        let found = store.load(&scope, &id(i)).await?;
        get.push(t.elapsed());
        anyhow::ensure!(found.is_some(), "task {i} is missing");
    }
    let (mut first, mut next) = (Vec::new(), Vec::new());
    for _ in 0..samples / 4 {
        let c = context(rng.below(size));
        let mut q = ListQuery {
            context_id: Some(c),
            page_size: 50,
            ..Default::default()
        };
        let t = Instant::now();
        let page = store.list(&scope, &q).await?;
        first.push(t.elapsed());
        anyhow::ensure!(!page.tasks.is_empty(), "an empty page");
        if page.next_page_token.is_empty() {
            continue;
        }
        q.page_token = Some(page.next_page_token);
        let t = Instant::now();
        store.list(&scope, &q).await?;
        next.push(t.elapsed());
    }
    let mut send = Vec::with_capacity(samples / 4);
    for n in 0..(samples / 4) as u64 {
        let i = 1_000_000_000_000 + size * 10 + n;
        let t = Instant::now();
        for state in [
            v1::TaskState::Submitted,
            v1::TaskState::Working,
            v1::TaskState::Completed,
        ] {
            store.save(&scope, &task(i, state)).await?;
        }
        send.push(t.elapsed());
    }
    let mut rows = Vec::new();
    for (op, times) in [
        ("get", &mut get),
        ("list (first page)", &mut first),
        ("list (next page)", &mut next),
        ("send (3 saves)", &mut send),
    ] {
        let (p50, p99) = percentiles(times);
        rows.push(Row { op, p50, p99 });
    }
    Ok(rows)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(kind), Some(target)) = (args.next(), args.next()) else {
        bail!("usage: storesize sqlite PATH | postgres URL");
    };
    let sizes: Vec<u64> = std::env::var("SIZES")
        .unwrap_or_else(|_| "10000,1000000,10000000".into())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()
        .context("SIZES")?;
    let samples: usize = std::env::var("SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let (store, pool): (Arc<dyn TaskStore>, Option<sqlx::PgPool>) = match kind.as_str() {
        "sqlite" => {
            let _ = std::fs::remove_file(&target);
            (
                Arc::new(heddle_store::SqliteStore::open_path(&target)?),
                None,
            )
        }
        "postgres" => {
            let store = heddle_store::PostgresStore::connect(&target, Default::default()).await?;
            sqlx::query("TRUNCATE tasks").execute(store.pool()).await?;
            let pool = store.pool().clone();
            (Arc::new(store), Some(pool))
        }
        other => bail!("unknown store {other}: sqlite or postgres"),
    };
    println!("| {kind} tasks | operation | p50 µs | p99 µs | fill s |");
    println!("|---:|---|---:|---:|---:|");
    let mut filled = 0;
    for size in sizes {
        let t = Instant::now();
        match &pool {
            Some(pool) => fill_postgres(pool, filled, size).await?,
            None => {
                let path = target.clone();
                let from = filled;
                tokio::task::spawn_blocking(move || fill_sqlite(&path, from, size)).await??;
            }
        }
        let fill = t.elapsed().as_secs_f64();
        filled = size;
        for (n, row) in measure(&store, size, samples).await?.iter().enumerate() {
            let fill = if n == 0 {
                format!("{fill:.0}")
            } else {
                String::new()
            };
            println!(
                "| {size} | {} | {:.0} | {:.0} | {fill} |",
                row.op, row.p50, row.p99
            );
        }
    }
    Ok(())
}
