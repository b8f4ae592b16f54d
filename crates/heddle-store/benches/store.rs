//! The stores on the hot path of every request: saving a task (a new one,
//! then its update) and loading it back, for the bounded in-memory store and
//! the SQLite store (WAL, `synchronous=NORMAL`, a temporary file).
//!
//! `cargo bench -p heddle-store --bench store`

use std::{hint::black_box, sync::Arc};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use heddle_core::v1;
use heddle_store::{MemoryStore, Scope, SqliteStore, TaskStore};

/// The task the echo agent finishes with: the user's message in the
/// history and one text artifact.
fn echo_task(id: &str) -> v1::Task {
    let text = "Summarize the quarterly report in three short paragraphs.";
    let mut user = v1::Message::new("bench-0001", v1::Role::User, vec![v1::Part::text(text)]);
    user.task_id = id.to_owned();
    user.context_id = format!("ctx-{id}");
    v1::Task {
        id: id.to_owned(),
        context_id: format!("ctx-{id}"),
        status: Some(v1::TaskStatus {
            state: v1::TaskState::Completed as i32,
            message: None,
            timestamp: None,
        }),
        artifacts: vec![v1::Artifact {
            artifact_id: format!("{id}-echo"),
            name: "echo".into(),
            parts: vec![v1::Part::text(text)],
            ..Default::default()
        }],
        history: vec![user],
        ..Default::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// save (a new task each time), save (the same task again: an update) and
/// load, on one store.
fn bench_store(c: &mut Criterion, name: &str, store: Arc<dyn TaskStore>) {
    let rt = runtime();
    let scope = Scope::new("echo", "");
    let mut n = 0u64;
    c.bench_function(&format!("{name}/save new task"), |b| {
        b.iter_batched(
            || {
                n += 1;
                echo_task(&format!("task-{n:012}"))
            },
            |task| {
                rt.block_on(store.save(&scope, &task))
                    .expect("save succeeds");
            },
            BatchSize::SmallInput,
        );
    });
    let task = echo_task("task-updated");
    c.bench_function(&format!("{name}/save update"), |b| {
        b.iter(|| {
            rt.block_on(store.save(&scope, black_box(&task)))
                .expect("save succeeds");
        });
    });
    c.bench_function(&format!("{name}/load"), |b| {
        b.iter(|| {
            let loaded = rt
                .block_on(store.load(&scope, black_box("task-updated")))
                .expect("load succeeds");
            assert!(loaded.is_some(), "the saved task loads");
            loaded
        });
    });
}

fn memory(c: &mut Criterion) {
    bench_store(c, "memory", Arc::new(MemoryStore::default()));
}

fn sqlite(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open_path(dir.path().join("bench.db")).expect("open the SQLite store");
    bench_store(c, "sqlite", Arc::new(store));
}

criterion_group!(benches, memory, sqlite);
criterion_main!(benches);
