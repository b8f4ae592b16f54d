//! The embedded SQLite store.
//!
//! * No SQLite call runs on an async worker thread: every one can wait on the
//!   database file's locks (another process writing the same file, a
//!   checkpoint), up to [`BUSY_TIMEOUT`], and a worker stalled that long
//!   stalls every request it serves.
//! * One write connection, owned by the writer thread. Saves join a queue;
//!   the first one into an empty queue starts a gather task on the runtime,
//!   which lets the runtime run a few turns (so the saves of the requests it
//!   is serving join the batch), then hands the queue to the writer thread.
//!   The thread commits what is queued in one transaction (group commit),
//!   answers each caller, and keeps committing while more arrives. So `save`
//!   returns only once its row is committed, and N concurrent saves cost one
//!   commit and one thread wake-up instead of N.
//! * WAL checkpoints run on a thread and connection of their own, after
//!   commits but at most one per [`CHECKPOINT_INTERVAL`]. A WAL file past
//!   [`WAL_LIMIT`] is checkpointed with `TRUNCATE`, and the writer has
//!   `journal_size_limit` set to the same size, so the WAL stays bounded
//!   instead of keeping its high-water size.
//! * Reads run on a small pool of read-only connections via
//!   `spawn_blocking`; WAL mode lets them proceed while the writer commits.
//! * Each task is one row: protobuf bytes plus the columns ListTasks filters
//!   and sorts on, with an index per ListTasks shape.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use heddle_core::v1;
use prost::Message as _;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OpenFlags, Row, TransactionBehavior, params, params_from_iter};
use tokio::sync::{Semaphore, oneshot};

use crate::memory::{interrupted_status, page_size, was_running};
use crate::page::{PageToken, status_ms};
use crate::{ListPage, ListQuery, PushStore, Scope, StoreError, TaskStore};

/// Schema migrations, applied in order; `PRAGMA user_version` records how
/// many have run. Append only: never edit a migration that has shipped.
const MIGRATIONS: &[&str] = &[
    // 1: tasks, with one index per ListTasks shape so every page is an index
    // range scan already in output order, plus a small partial index so
    // fail_interrupted at start-up only visits live tasks.
    "CREATE TABLE tasks (
        agent      TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        owner      TEXT    NOT NULL,
        context_id TEXT    NOT NULL,
        state      INTEGER NOT NULL,
        status_ms  INTEGER NOT NULL,
        body       BLOB    NOT NULL,
        PRIMARY KEY (agent, id)
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_time ON tasks (agent, owner, status_ms DESC, id DESC);
    CREATE INDEX tasks_by_context ON tasks (agent, owner, context_id, status_ms DESC, id DESC);
    CREATE INDEX tasks_by_state ON tasks (agent, owner, state, status_ms DESC, id DESC);
    CREATE INDEX tasks_running ON tasks (state) WHERE state IN (1, 2);",
    // 2: push notification configs and the delivery outbox (crate::sqlite_push).
    crate::sqlite_push::MIGRATION,
    // 3: the hub's registry and task links.
    crate::sqlite_registry::MIGRATION,
    // 4: the ledger (crate::sqlite_ledger).
    crate::sqlite_ledger::MIGRATION,
    // 5: the trace context of each push delivery (crate::sqlite_push).
    crate::sqlite_push::TRACE_MIGRATION,
    // 6: the generation each task was saved at (its count of applied events).
    "ALTER TABLE tasks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;",
    // 7: each push delivery's config id, and the index of each group's first.
    crate::sqlite_push::HEADS_MIGRATION,
    // 8: the ended tasks by status time, for retention (purge_finished).
    "CREATE INDEX tasks_finished ON tasks (status_ms) WHERE state IN (3, 4, 5, 7);",
];

/// The ended tasks before `?1` (a status time in ms) whose push deliveries
/// are all out, oldest first, at most `?2`: what retention may delete.
/// Read from `tasks_finished`; the `state` term matches the index's own.
pub(crate) const FINISHED_SQL: &str = "SELECT agent, id FROM tasks t
     WHERE state IN (3, 4, 5, 7) AND status_ms < ?1
       AND NOT EXISTS (SELECT 1 FROM push_outbox o
                       WHERE o.state = 0 AND o.agent = t.agent AND o.task_id = t.id)
     ORDER BY status_ms LIMIT ?2";

/// How long a connection waits on a lock held by another connection (e.g. a
/// second process, or a checkpoint) before failing with SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most operations the writer commits in one transaction, so one huge burst
/// does not hold the write lock (and every caller's reply) for long.
const MAX_BATCH: usize = 1024;

/// Most turns of the runtime a gather task waits for a batch to grow.
const MAX_YIELDS: usize = 4;

/// The size past which the WAL file is truncated: the writer's
/// `journal_size_limit`, and the size at which a checkpoint is a `TRUNCATE`
/// one. (SQLite's own automatic checkpoint comes at 1000 pages, ~4 MB.)
const WAL_LIMIT: u64 = 4 << 20;

/// Least time between two checkpoints: a checkpoint syncs the database
/// file, so under a steady trickle of saves it should not follow each one.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);

/// How long a `TRUNCATE` checkpoint waits for readers to move off the WAL.
/// It holds the write lock meanwhile, so this is also the longest it stalls
/// the writer; readers are never blocked by it.
const CHECKPOINT_BUSY_TIMEOUT: Duration = Duration::from_millis(100);

/// Longest pause between retries of a `TRUNCATE` checkpoint that found the
/// WAL in use (e.g. another process keeps a read transaction open).
const MAX_CHECKPOINT_RETRY: Duration = Duration::from_secs(30);

/// Keeps the original owner and refuses to touch another owner's row: an
/// upsert from a different owner matches the conflict but not the `WHERE`,
/// so it changes nothing.
/// Generation 0 (a plain `save`) keeps the stored generation; a later one
/// replaces it. One process writes a SQLite store, so a save is never
/// older than the stored one.
const UPSERT: &str =
    "INSERT INTO tasks (agent, id, owner, context_id, state, status_ms, body, generation)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    ON CONFLICT (agent, id) DO UPDATE SET
        context_id = excluded.context_id,
        state = excluded.state,
        status_ms = excluded.status_ms,
        body = excluded.body,
        generation = MAX(tasks.generation, excluded.generation)
    WHERE tasks.owner = excluded.owner";

/// How to open a [`SqliteStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The database file (created if missing). Must be a real file: WAL mode
    /// and the separate reader connections need one.
    pub path: PathBuf,
    /// Read-only connections in the read pool (at least 1 is used).
    pub readers: usize,
    /// `synchronous=FULL` instead of `NORMAL`. With WAL, `NORMAL` (the
    /// default) keeps every committed save across a process crash but may lose
    /// the most recent commits on power loss or an OS crash; `FULL` syncs the
    /// WAL on every commit so they survive that too, at a cost per commit
    /// (group commit amortizes it across concurrent saves).
    pub synchronous_full: bool,
}

impl SqliteOptions {
    /// Defaults for `path`: 2 readers, `synchronous=NORMAL`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            readers: 2,
            synchronous_full: false,
        }
    }
}

/// A [`TaskStore`] in an SQLite file. See the module docs for the design.
///
/// Dropping the store lets the writer thread commit everything already
/// queued, then close. Outside an async runtime the drop waits for that;
/// inside one it does not (the commits may wait on the file lock), and the
/// thread finishes on its own.
pub struct SqliteStore {
    path: PathBuf,
    committer: Arc<Committer>,
    /// The writer thread; taken when the drop waits for it.
    thread: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
    #[cfg(test)]
    stats: Arc<Stats>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Counters the tests use to observe group commit.
#[cfg(test)]
#[derive(Debug, Default)]
struct Stats {
    /// Operations handed to the writer.
    sent: std::sync::atomic::AtomicUsize,
    /// Transactions the writer committed.
    commits: std::sync::atomic::AtomicUsize,
}

/// Work for the committer. Every reply is the number of rows affected.
enum WriteOp {
    Save {
        row: TaskRow,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    FailInterrupted {
        reason: String,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    /// Any other write, run in the committer's transaction.
    Exec {
        f: ExecFn,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    /// Parks the committer until the sender is dropped or signals, so a test
    /// can queue many saves and see them committed together.
    #[cfg(test)]
    Hold(mpsc::Receiver<()>),
}

/// A write run by the writer thread inside its transaction.
pub(crate) type ExecFn =
    Box<dyn FnOnce(&rusqlite::Transaction<'_>) -> Result<u64, StoreError> + Send>;

/// A task as the `tasks` table stores it.
struct TaskRow {
    agent: String,
    id: String,
    owner: String,
    context_id: String,
    state: i32,
    status_ms: i64,
    body: Vec<u8>,
    generation: i64,
}

pub(crate) fn db(e: rusqlite::Error) -> StoreError {
    StoreError::Database(e.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `opts.path`, migrates its
    /// schema and starts the writer and checkpoint threads.
    ///
    /// This blocks: the migration waits (up to a few seconds) for another
    /// process's write lock on the file. From async code, call it from
    /// `spawn_blocking` or before the server starts serving.
    pub fn open(opts: SqliteOptions) -> Result<Self, StoreError> {
        let mut conn = Connection::open_with_flags(&opts.path, OpenFlags::default()).map_err(db)?;
        configure_writer(&conn, opts.synchronous_full)?;
        migrate(&mut conn)?;

        let readers = opts.readers.max(1);
        let idle = (0..readers)
            .map(|_| open_reader(&opts.path))
            .collect::<Result<Vec<_>, _>>()?;
        let readers = Arc::new(Readers {
            path: opts.path.clone(),
            idle: Mutex::new(idle),
            permits: Arc::new(Semaphore::new(readers)),
        });

        #[cfg(test)]
        let stats = Arc::new(Stats::default());
        let checkpoints = Checkpointer::start(&opts.path)?;
        let mut writer = Writer {
            conn,
            checkpoints,
            #[cfg(test)]
            stats: Arc::clone(&stats),
        };
        let committer = Arc::new(Committer {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
        });
        let thread = {
            let committer = Arc::clone(&committer);
            std::thread::Builder::new()
                .name("heddle-store-writer".into())
                .spawn(move || committer.run(&mut writer))
                .map_err(|e| StoreError::Database(format!("cannot start writer thread: {e}")))?
        };
        Ok(Self {
            path: opts.path,
            committer,
            thread: Some(thread),
            readers,
            #[cfg(test)]
            stats,
        })
    }

    /// [`open`](Self::open) with default options.
    pub fn open_path(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        Self::open(SqliteOptions::new(path))
    }

    /// Runs `f` in the next transaction and waits for the commit.
    pub(crate) async fn exec(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<u64, StoreError> + Send + 'static,
    ) -> Result<u64, StoreError> {
        let f: ExecFn = Box::new(f);
        self.write(|reply| WriteOp::Exec { f, reply }).await
    }

    /// Runs `f` on a pooled read-only connection.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.readers.with(f).await
    }

    /// Queues `op` for the committer and waits for its answer.
    async fn write(
        &self,
        op: impl FnOnce(oneshot::Sender<Result<u64, StoreError>>) -> WriteOp,
    ) -> Result<u64, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.committer.enqueue(op(reply))?;
        #[cfg(test)]
        self.stats
            .sent
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // A dropped reply means the committer went away before answering.
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Close idle readers first so the writer's connection is among the
        // last ones, and SQLite checkpoints the WAL when the last one closes.
        self.readers.lock().clear();
        self.committer.close();
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        let joined = self.thread.take().map(JoinHandle::join);
        if matches!(joined, Some(Err(_))) {
            tracing::error!("task store: the writer thread panicked");
        }
    }
}

// ---- committer -----------------------------------------------------------

/// The write queue, shared by the callers, the gather task and the writer
/// thread.
struct Committer {
    queue: Mutex<Queue>,
    /// Signalled when the queue is handed to the writer thread, or closed.
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    ops: Vec<WriteOp>,
    /// A gather task or the writer thread owns the queue; new operations
    /// just join it.
    busy: bool,
    /// The writer thread may drain the queue (the gather task is done).
    ready: bool,
    closed: bool,
}

impl Committer {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `op` to the queue, starting a gather task if nothing owns it.
    fn enqueue(self: &Arc<Self>, op: WriteOp) -> Result<(), StoreError> {
        {
            let mut q = self.queue();
            if q.closed {
                return Err(StoreError::Closed);
            }
            q.ops.push(op);
            if std::mem::replace(&mut q.busy, true) {
                return Ok(());
            }
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(Arc::clone(self).gather());
            }
            // No runtime to gather on (a synchronous caller): commit now.
            Err(_) => self.hand_over(),
        }
        Ok(())
    }

    /// The gather task: lets the runtime turn while that brings more work
    /// (under load each turn adds the saves of the requests it just served),
    /// then hands the queue to the writer thread. Never touches SQLite.
    async fn gather(self: Arc<Self>) {
        // Dropped unfinished (its runtime shut down), it still hands over.
        let handover = HandOver(self);
        let mut queued = 0;
        for _ in 0..MAX_YIELDS {
            tokio::task::yield_now().await;
            let now = handover.0.queue().ops.len();
            if now <= queued {
                break;
            }
            queued = now;
        }
        drop(handover);
    }

    /// Lets the writer thread drain the queue.
    fn hand_over(&self) {
        self.queue().ready = true;
        self.ready.notify_one();
    }

    /// Refuses new writes; the writer thread commits what is queued, then
    /// exits.
    fn close(&self) {
        {
            let mut q = self.queue();
            q.closed = true;
            q.ready = true;
        }
        self.ready.notify_one();
    }

    /// The writer thread: commits batches while the queue is handed over,
    /// until it is closed and empty.
    fn run(&self, writer: &mut Writer) {
        let mut q = self.queue();
        loop {
            if q.ready {
                #[cfg(test)]
                if let Some(WriteOp::Hold(_)) = q.ops.first() {
                    let hold = q.ops.remove(0);
                    drop(q);
                    if let WriteOp::Hold(release) = hold {
                        let _ = release.recv();
                    }
                    q = self.queue();
                    continue;
                }
                if !q.ops.is_empty() {
                    let n = q.ops.len().min(MAX_BATCH);
                    let batch: Vec<WriteOp> = if n == q.ops.len() {
                        std::mem::take(&mut q.ops)
                    } else {
                        q.ops.drain(..n).collect()
                    };
                    drop(q);
                    writer.commit_batch(batch);
                    q = self.queue();
                    continue;
                }
                // Drained: the next operation starts a new gather.
                q.busy = false;
                q.ready = q.closed;
            }
            if q.closed && q.ops.is_empty() {
                return;
            }
            q = self
                .ready
                .wait(q)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// Hands the queue to the writer thread when dropped.
struct HandOver(Arc<Committer>);

impl Drop for HandOver {
    fn drop(&mut self) {
        self.0.hand_over();
    }
}

/// Runs WAL checkpoints off the commit path, on a connection of its own. The
/// writer asks for one after every commit; asks made while one runs or
/// during the pause after it are merged into the next.
struct Checkpointer {
    wake: mpsc::SyncSender<()>,
}

impl Checkpointer {
    fn start(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open_with_flags(path, OpenFlags::default()).map_err(db)?;
        conn.busy_timeout(CHECKPOINT_BUSY_TIMEOUT).map_err(db)?;
        let wal = wal_path(path);
        let (wake, rx) = mpsc::sync_channel::<()>(1);
        std::thread::Builder::new()
            .name("heddle-store-checkpoint".into())
            .spawn(move || checkpoint_loop(&conn, &wal, &rx))
            .map_err(|e| StoreError::Database(format!("cannot start checkpoint thread: {e}")))?;
        Ok(Self { wake })
    }

    /// Asks for a checkpoint; one already asked for covers this one.
    fn request(&self) {
        let _ = self.wake.try_send(());
    }
}

/// The `-wal` file beside the database at `path`.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// The checkpoint thread's loop; ends when the writer (the only sender) is
/// dropped.
fn checkpoint_loop(conn: &Connection, wal: &Path, rx: &mpsc::Receiver<()>) {
    while rx.recv().is_ok() {
        let mut pause = CHECKPOINT_INTERVAL;
        loop {
            let bounded = checkpoint(conn, wal);
            std::thread::sleep(pause);
            match rx.try_recv() {
                // More commits since: checkpoint them too.
                Ok(()) => {}
                Err(mpsc::TryRecvError::Empty) if bounded => break,
                // Still too big (the WAL was in use): try again, less often
                // each time, so a long reader is not met with a stalled
                // writer every half second.
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
            pause = if bounded {
                CHECKPOINT_INTERVAL
            } else {
                pause.saturating_mul(2).min(MAX_CHECKPOINT_RETRY)
            };
        }
    }
}

/// One checkpoint: `TRUNCATE` when the WAL file is past [`WAL_LIMIT`],
/// `PASSIVE` (which never waits) otherwise. Whether the WAL is now within
/// the limit.
fn checkpoint(conn: &Connection, wal: &Path) -> bool {
    let size = std::fs::metadata(wal).map_or(0, |m| m.len());
    let truncate = size > WAL_LIMIT;
    let sql = if truncate {
        "PRAGMA wal_checkpoint(TRUNCATE)"
    } else {
        "PRAGMA wal_checkpoint(PASSIVE)"
    };
    // The first column is 1 when the checkpoint could not finish (busy).
    match conn.query_row(sql, [], |r| r.get::<_, i64>(0)) {
        Ok(busy) => !truncate || busy == 0,
        Err(e) => {
            tracing::warn!(error = %e, "task store: WAL checkpoint failed");
            !truncate
        }
    }
}

fn configure_writer(conn: &Connection, synchronous_full: bool) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(db)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Database(format!(
            "cannot enable WAL (journal_mode is {mode}); SqliteStore needs a database file"
        )));
    }
    // Checkpoints run on their own thread (see `Checkpointer`). When the
    // WAL restarts after a complete checkpoint, the writer truncates it to
    // `journal_size_limit`.
    let sync = if synchronous_full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 0;
         PRAGMA journal_size_limit = {WAL_LIMIT};"
    ))
    .map_err(db)
}

/// Brings the schema up to date in one transaction, so a crash mid-way
/// leaves the previous version intact.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(db)?;
    let applied = usize::try_from(version)
        .ok()
        .filter(|v| *v <= MIGRATIONS.len())
        .ok_or_else(|| {
            StoreError::Database(format!(
                "database schema version {version} is not one this build knows (1..={})",
                MIGRATIONS.len()
            ))
        })?;
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(migration).map_err(db)?;
        // Migration 7's rows need Rust to read their config ids.
        if i + 1 == 7 {
            crate::sqlite_push::fill_config_ids(&tx)?;
        }
        tx.pragma_update(None, "user_version", i as i64 + 1)
            .map_err(db)?;
    }
    tx.commit().map_err(db)
}

fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(db)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
    // Room for every ListTasks shape (filters x token, page and count), so
    // the dynamic list SQL is prepared once per connection.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

// ---- writer --------------------------------------------------------------

/// The write connection and what the commits need.
struct Writer {
    conn: Connection,
    checkpoints: Checkpointer,
    #[cfg(test)]
    stats: Arc<Stats>,
}

/// An operation's reply channel and outcome, held until the commit.
type Pending = (
    oneshot::Sender<Result<u64, StoreError>>,
    Result<u64, StoreError>,
);

impl Writer {
    /// Applies `batch` in one transaction and answers every operation once
    /// the outcome is durable (or known to have failed).
    fn commit_batch(&mut self, batch: Vec<WriteOp>) {
        let mut ops = Vec::with_capacity(batch.len());
        for op in batch {
            match op {
                WriteOp::Save { row, reply } => ops.push((Op::Save(row), reply)),
                WriteOp::FailInterrupted { reason, reply } => {
                    ops.push((Op::FailInterrupted(reason), reply));
                }
                WriteOp::Exec { f, reply } => ops.push((Op::Exec(f), reply)),
                #[cfg(test)]
                WriteOp::Hold(release) => {
                    let _ = release.recv();
                }
            }
        }
        if ops.is_empty() {
            return;
        }
        let count = ops.len();
        let tx = match self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
        {
            Ok(tx) => tx,
            Err(e) => {
                tracing::warn!(error = %e, count, "task store: cannot begin write transaction");
                let msg = e.to_string();
                for (_, reply) in ops {
                    let _ = reply.send(Err(StoreError::Database(msg.clone())));
                }
                return;
            }
        };
        let mut pending: Vec<Pending> = Vec::with_capacity(count);
        let mut aborted: Option<String> = None;
        for (op, reply) in ops {
            if let Some(msg) = &aborted {
                pending.push((reply, Err(StoreError::Database(msg.clone()))));
                continue;
            }
            let result = match op {
                Op::Save(row) => save_row(&tx, &row),
                Op::FailInterrupted(reason) => fail_rows(&tx, &reason),
                Op::Exec(f) => f(&tx),
            };
            // Some errors (disk full, I/O) make SQLite roll back the whole
            // transaction; later statements would then autocommit one by
            // one, so stop and fail the rest of the batch instead.
            if result.is_err() && tx.is_autocommit() {
                aborted = Some("transaction rolled back by an earlier error".to_owned());
            }
            pending.push((reply, result));
        }
        let commit = tx.commit().map_err(|e| e.to_string());
        if let Err(e) = &commit {
            tracing::warn!(error = %e, count, "task store: commit failed");
        }
        self.checkpoints.request();
        #[cfg(test)]
        if commit.is_ok() {
            self.stats
                .commits
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        for (reply, result) in pending {
            let result = match (&commit, result) {
                (Err(e), Ok(_)) => Err(StoreError::Database(e.clone())),
                (_, result) => result,
            };
            // The caller may have stopped waiting; its write stands anyway.
            let _ = reply.send(result);
        }
    }
}

/// A queued write, unpacked from its reply channel.
enum Op {
    Save(TaskRow),
    FailInterrupted(String),
    Exec(ExecFn),
}

fn save_row(conn: &Connection, row: &TaskRow) -> Result<u64, StoreError> {
    let mut stmt = conn.prepare_cached(UPSERT).map_err(db)?;
    let changed = stmt
        .execute(params![
            row.agent,
            row.id,
            row.owner,
            row.context_id,
            row.state,
            row.status_ms,
            row.body,
            row.generation
        ])
        .map_err(db)?;
    Ok(changed as u64)
}

/// Fails every SUBMITTED/WORKING task inside a savepoint, so a corrupt row
/// leaves all of them untouched rather than half done.
fn fail_rows(tx: &rusqlite::Transaction<'_>, reason: &str) -> Result<u64, StoreError> {
    let running: Vec<(String, String, Vec<u8>)> = {
        let mut stmt = tx
            .prepare("SELECT agent, id, body FROM tasks WHERE state IN (1, 2)")
            .map_err(db)?;
        let mut rows = stmt.query([]).map_err(db)?;
        let mut running = Vec::new();
        while let Some(row) = rows.next().map_err(db)? {
            let agent = text(row, 0)?;
            let id = text(row, 1)?;
            let body = blob(row, 2, &id)?.to_vec();
            running.push((agent, id, body));
        }
        running
    };
    tx.execute_batch("SAVEPOINT fail_interrupted").map_err(db)?;
    let result = (|| -> Result<u64, StoreError> {
        let mut update = tx
            .prepare_cached(
                "UPDATE tasks SET state = ?1, status_ms = ?2, body = ?3, generation = generation + 1
                 WHERE agent = ?4 AND id = ?5",
            )
            .map_err(db)?;
        let mut failed = 0;
        for (agent, id, body) in running {
            let mut task = decode(&id, &body)?;
            if !task.status.as_ref().is_some_and(|s| was_running(s.state)) {
                // The column and the body disagree; trust the body.
                continue;
            }
            task.status = Some(interrupted_status(&task, reason));
            let state = v1::TaskState::Failed as i32;
            update
                .execute(params![
                    state,
                    status_ms(&task),
                    task.encode_to_vec(),
                    agent,
                    id
                ])
                .map_err(db)?;
            failed += 1;
        }
        Ok(failed)
    })();
    let end = if result.is_ok() {
        "RELEASE fail_interrupted"
    } else {
        "ROLLBACK TO fail_interrupted; RELEASE fail_interrupted"
    };
    tx.execute_batch(end).map_err(db)?;
    result
}

// ---- readers -------------------------------------------------------------

/// The read-only connection pool. The semaphore bounds concurrent readers to
/// the pool size, so `idle` normally has a connection for every permit
/// holder; one lost to a panic is simply reopened.
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl Readers {
    fn lock(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on a pooled connection on the blocking thread pool.
    async fn with<T, F>(self: &Arc<Self>, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Closed)?;
        let this = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let pooled = this.lock().pop();
            let mut conn = match pooled {
                Some(conn) => conn,
                None => open_reader(&this.path)?,
            };
            let result = f(&mut conn);
            this.lock().push(conn);
            result
        });
        match job.await {
            Ok(result) => result,
            Err(e) if e.is_cancelled() => Err(StoreError::Closed),
            Err(e) => Err(StoreError::Database(format!("read failed: {e}"))),
        }
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.permits.close();
    }
}

fn decode(id: &str, body: &[u8]) -> Result<v1::Task, StoreError> {
    v1::Task::decode(body).map_err(|e| StoreError::Corrupt(id.to_owned(), e.to_string()))
}

/// A TEXT column; anything else means the row was not written by this store.
fn text(row: &Row<'_>, idx: usize) -> Result<String, StoreError> {
    match row.get_ref(idx).map_err(db)? {
        ValueRef::Text(t) => String::from_utf8(t.to_vec())
            .map_err(|_| StoreError::Corrupt("?".into(), format!("column {idx} is not UTF-8"))),
        other => Err(StoreError::Corrupt(
            "?".into(),
            format!("column {idx} is {}", other.data_type()),
        )),
    }
}

/// A BLOB column of task `id`.
fn blob<'r>(row: &'r Row<'_>, idx: usize, id: &str) -> Result<&'r [u8], StoreError> {
    match row.get_ref(idx).map_err(db)? {
        ValueRef::Blob(b) => Ok(b),
        other => Err(StoreError::Corrupt(
            id.to_owned(),
            format!("body is {}, not a blob", other.data_type()),
        )),
    }
}

/// The SQL and parameters for one ListTasks call. Split out so the tests can
/// `EXPLAIN QUERY PLAN` exactly what `list` runs.
struct ListSql {
    /// One page (plus one row, to tell whether there is a next page).
    page: String,
    page_params: Vec<Value>,
    /// The total over all pages.
    count: String,
    count_params: Vec<Value>,
}

fn list_sql(scope: &Scope, query: &ListQuery, token: Option<&PageToken>) -> ListSql {
    let mut filter = String::from("agent = ? AND owner = ?");
    let mut params = vec![
        Value::Text(scope.agent.clone()),
        Value::Text(scope.owner.clone()),
    ];
    if let Some(context) = &query.context_id {
        filter.push_str(" AND context_id = ?");
        params.push(Value::Text(context.clone()));
    }
    if let Some(state) = query.state {
        filter.push_str(" AND state = ?");
        params.push(Value::Integer(i64::from(state as i32)));
    }
    if let Some(after) = query.status_after_ms {
        filter.push_str(" AND status_ms >= ?");
        params.push(Value::Integer(after));
    }
    let count = format!("SELECT COUNT(*) FROM tasks WHERE {filter}");
    let count_params = params.clone();
    let mut page = format!("SELECT body, id, status_ms FROM tasks WHERE {filter}");
    if let Some(token) = token {
        page.push_str(" AND (status_ms, id) < (?, ?)");
        params.push(Value::Integer(token.ts_ms));
        params.push(Value::Text(token.id.clone()));
    }
    page.push_str(" ORDER BY status_ms DESC, id DESC LIMIT ?");
    params.push(Value::Integer(page_size(query) as i64 + 1));
    ListSql {
        page,
        page_params: params,
        count,
        count_params,
    }
}

fn run_list(conn: &mut Connection, sql: &ListSql, size: usize) -> Result<ListPage, StoreError> {
    // One read transaction, so the page and the total see the same snapshot.
    let tx = conn.transaction().map_err(db)?;
    let total: i64 = tx
        .prepare_cached(&sql.count)
        .and_then(|mut s| s.query_row(params_from_iter(&sql.count_params), |r| r.get(0)))
        .map_err(db)?;
    // Capped: `size` comes from the request.
    let mut tasks = Vec::with_capacity(size.min(100));
    let mut last = None;
    let mut more = false;
    {
        let mut stmt = tx.prepare_cached(&sql.page).map_err(db)?;
        let mut rows = stmt.query(params_from_iter(&sql.page_params)).map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            if tasks.len() == size {
                // The extra row: there is a next page, starting after `last`.
                more = true;
                break;
            }
            let id = text(row, 1)?;
            let ts_ms: i64 = row
                .get(2)
                .map_err(|e| StoreError::Corrupt(id.clone(), e.to_string()))?;
            tasks.push(decode(&id, blob(row, 0, &id)?)?);
            last = Some(PageToken { ts_ms, id });
        }
    }
    tx.commit().map_err(db)?;
    Ok(ListPage {
        tasks,
        next_page_token: last
            .filter(|_| more)
            .map(|t| t.encode())
            .unwrap_or_default(),
        total_size: u32::try_from(total).unwrap_or(u32::MAX),
    })
}

fn task_row(scope: &Scope, task: &v1::Task, generation: u64) -> TaskRow {
    TaskRow {
        generation: i64::try_from(generation).unwrap_or(i64::MAX),
        agent: scope.agent.clone(),
        id: task.id.clone(),
        owner: scope.owner.clone(),
        context_id: task.context_id.clone(),
        state: task.status.as_ref().map_or(0, |s| s.state),
        status_ms: status_ms(task),
        body: task.encode_to_vec(),
    }
}

impl SqliteStore {
    /// The task and the generation it was saved at (`load` and `load_at`).
    async fn select(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        let (agent, owner, id) = (scope.agent.clone(), scope.owner.clone(), task_id.to_owned());
        self.readers
            .with(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT body, generation FROM tasks
                         WHERE agent = ?1 AND id = ?2 AND owner = ?3",
                    )
                    .map_err(db)?;
                let mut rows = stmt.query(params![agent, id, owner]).map_err(db)?;
                match rows.next().map_err(db)? {
                    Some(row) => {
                        let task = decode(&id, blob(row, 0, &id)?)?;
                        let generation: i64 = row.get(1).map_err(db)?;
                        Ok(Some((task, u64::try_from(generation).unwrap_or(0))))
                    }
                    None => Ok(None),
                }
            })
            .await
    }
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn load(&self, scope: &Scope, task_id: &str) -> Result<Option<v1::Task>, StoreError> {
        Ok(self.select(scope, task_id).await?.map(|(task, _)| task))
    }

    async fn save(&self, scope: &Scope, task: &v1::Task) -> Result<(), StoreError> {
        self.save_at(scope, task, 0).await
    }

    async fn save_at(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
    ) -> Result<(), StoreError> {
        let row = task_row(scope, task, generation);
        self.write(|reply| WriteOp::Save { row, reply }).await?;
        Ok(())
    }

    async fn load_at(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<(v1::Task, u64)>, StoreError> {
        self.select(scope, task_id).await
    }

    /// One transaction when `outbox` is this store (the server's usual
    /// set-up, one store in both roles); otherwise save, then record.
    async fn save_with_deliveries(
        &self,
        scope: &Scope,
        task: &v1::Task,
        generation: u64,
        deliveries: Vec<crate::NewDelivery>,
        outbox: &dyn PushStore,
    ) -> Result<(), StoreError> {
        if deliveries.is_empty() {
            return self.save_at(scope, task, generation).await;
        }
        if !std::ptr::addr_eq(self, outbox) {
            self.save_at(scope, task, generation).await?;
            return outbox.enqueue_deliveries(deliveries).await;
        }
        let row = task_row(scope, task, generation);
        self.exec(move |tx| {
            let saved = save_row(tx, &row)?;
            crate::sqlite_push::insert_deliveries(tx, &deliveries)?;
            Ok(saved)
        })
        .await?;
        Ok(())
    }

    async fn list(&self, scope: &Scope, query: &ListQuery) -> Result<ListPage, StoreError> {
        let token = query
            .page_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(PageToken::decode)
            .transpose()?;
        let sql = list_sql(scope, query, token.as_ref());
        let size = page_size(query);
        self.readers
            .with(move |conn| run_list(conn, &sql, size))
            .await
    }

    async fn fail_interrupted(&self, reason: &str) -> Result<u64, StoreError> {
        let reason = reason.to_owned();
        self.write(|reply| WriteOp::FailInterrupted { reason, reply })
            .await
    }

    async fn purge_finished(&self, before_ms: i64, limit: usize) -> Result<u64, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.exec(move |tx| {
            let gone: Vec<(String, String)> = {
                let mut stmt = tx.prepare_cached(FINISHED_SQL).map_err(db)?;
                let rows = stmt
                    .query_map(params![before_ms, limit], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)?
            };
            for sql in [
                "DELETE FROM tasks WHERE agent = ?1 AND id = ?2",
                "DELETE FROM push_configs WHERE agent = ?1 AND task_id = ?2",
                "DELETE FROM task_links WHERE agent = ?1 AND task_id = ?2",
            ] {
                let mut stmt = tx.prepare_cached(sql).map_err(db)?;
                for (agent, id) in &gone {
                    stmt.execute(params![agent, id]).map_err(db)?;
                }
            }
            Ok(gone.len() as u64)
        })
        .await
    }

    /// The configs and outbox tables beside `tasks` (`crate::sqlite_push`).
    fn push_store(self: Arc<Self>) -> Option<Arc<dyn PushStore>> {
        Some(self)
    }

    /// The registry tables beside `tasks` (`crate::sqlite_registry`).
    fn registry_store(self: Arc<Self>) -> Option<Arc<dyn crate::RegistryStore>> {
        Some(self)
    }

    /// The ledger tables beside `tasks` (`crate::sqlite_ledger`).
    fn ledger_store(self: Arc<Self>) -> Option<Arc<dyn crate::LedgerStore>> {
        Some(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;
    use crate::contract::task;
    use std::sync::atomic::Ordering;

    fn temp_store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_path(dir.path().join("tasks.db")).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn survives_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        let s = Scope::new("agent", "alice");
        let t = task("t-1", "ctx", v1::TaskState::Working, 42);
        {
            let store = SqliteStore::open(SqliteOptions {
                synchronous_full: true,
                ..SqliteOptions::new(&path)
            })
            .unwrap();
            store.save(&s, &t).await.unwrap();
        }
        let store = SqliteStore::open_path(&path).unwrap();
        assert_eq!(store.load(&s, "t-1").await.unwrap(), Some(t));
        // Reopening must not re-run migrations.
        drop(store);
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
    }

    #[tokio::test]
    async fn rejects_unknown_schema_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99;")
            .unwrap();
        assert!(matches!(
            SqliteStore::open_path(&path),
            Err(StoreError::Database(_))
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_saves_share_commits() {
        let (_dir, store) = temp_store();
        let store = Arc::new(store);
        const N: usize = 200;

        // Park the writer, queue N saves, then release it: they must all
        // land in one transaction.
        let (release, hold) = mpsc::channel();
        store.committer.enqueue(WriteOp::Hold(hold)).unwrap();
        let sent_before = store.stats.sent.load(Ordering::SeqCst);
        let commits_before = store.stats.commits.load(Ordering::SeqCst);
        let saves: Vec<_> = (0..N)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let s = Scope::new("agent", format!("owner-{}", i % 3));
                    let t = task(&format!("t-{i}"), "ctx", v1::TaskState::Completed, i as i64);
                    store.save(&s, &t).await
                })
            })
            .collect();
        while store.stats.sent.load(Ordering::SeqCst) < sent_before + N {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        release.send(()).unwrap();
        for save in saves {
            save.await.unwrap().unwrap();
        }
        assert_eq!(
            store.stats.commits.load(Ordering::SeqCst),
            commits_before + 1
        );

        // And without holding: many tasks at once, every save committed.
        let saves: Vec<_> = (0..N)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let t = task(&format!("u-{i}"), "ctx", v1::TaskState::Working, 1);
                    store.save(&Scope::new("agent", "bob"), &t).await
                })
            })
            .collect();
        for save in saves {
            save.await.unwrap().unwrap();
        }
        for i in 0..N {
            let s = Scope::new("agent", format!("owner-{}", i % 3));
            assert!(store.load(&s, &format!("t-{i}")).await.unwrap().is_some());
            let s = Scope::new("agent", "bob");
            assert!(store.load(&s, &format!("u-{i}")).await.unwrap().is_some());
        }
    }

    /// A current-thread runtime (the `#[tokio::test]` default) must keep
    /// serving while another process holds the file's write lock: the
    /// commits wait for it on the writer thread, not on the runtime.
    #[tokio::test]
    async fn a_held_write_lock_does_not_stall_the_runtime() {
        let (dir, store) = temp_store();
        let path = dir.path().join("tasks.db");
        const HOLD: Duration = Duration::from_secs(2);

        let (locked, is_locked) = mpsc::channel();
        let holder = std::thread::spawn(move || {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .unwrap();
            locked.send(()).unwrap();
            std::thread::sleep(HOLD);
            tx.commit().unwrap();
        });
        is_locked.recv().unwrap();

        let started = std::time::Instant::now();
        let s = Scope::new("agent", "alice");
        let t = task("t-1", "ctx", v1::TaskState::Working, 1);
        let save = async {
            store.save(&s, &t).await.unwrap();
            started.elapsed()
        };
        let config = crate::PushConfigRecord {
            config: v1::TaskPushNotificationConfig {
                task_id: "t-1".into(),
                id: "c-1".into(),
                url: "https://example.com/hook".into(),
                ..Default::default()
            },
            version: "1.0".into(),
        };
        let push = async {
            store.put_push_config(&s, &config).await.unwrap();
            started.elapsed()
        };
        // A 10 ms timer, run beside the writes for most of the lock's hold.
        let ticks = async {
            let mut worst = Duration::ZERO;
            let mut last = std::time::Instant::now();
            while started.elapsed() < HOLD - Duration::from_millis(500) {
                tokio::time::sleep(Duration::from_millis(10)).await;
                worst = worst.max(last.elapsed());
                last = std::time::Instant::now();
            }
            worst
        };
        let (saved_after, pushed_after, worst) = tokio::join!(save, push, ticks);
        holder.join().unwrap();

        assert!(
            worst < Duration::from_millis(500),
            "the timer stalled {worst:?}"
        );
        // The writes really did wait for the lock, then went through.
        assert!(saved_after >= Duration::from_secs(1), "{saved_after:?}");
        assert!(pushed_after >= Duration::from_secs(1), "{pushed_after:?}");
        assert_eq!(store.load(&s, "t-1").await.unwrap(), Some(t));
        assert!(
            store
                .get_push_config(&s, "t-1", "c-1")
                .await
                .unwrap()
                .is_some()
        );
    }

    /// Many large saves: once they stop and the checkpoint thread has run,
    /// the WAL file is back within `WAL_LIMIT` rather than at its high-water
    /// size.
    #[tokio::test]
    async fn the_wal_is_truncated_after_many_writes() {
        let (dir, store) = temp_store();
        let wal = wal_path(&dir.path().join("tasks.db"));
        let s = Scope::new("agent", "alice");
        let big = "x".repeat(64 << 10);
        // ~20 MB of rows, committed one by one.
        for i in 0..300 {
            let mut t = task(&format!("t-{i}"), "ctx", v1::TaskState::Completed, i);
            t.history = vec![v1::Message::new(
                format!("m-{i}"),
                v1::Role::Agent,
                vec![v1::Part::text(big.as_str())],
            )];
            store.save(&s, &t).await.unwrap();
        }
        let size = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while size() > WAL_LIMIT && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(size() <= WAL_LIMIT, "the WAL is {} bytes", size());
        // Nothing was lost on the way.
        let q = ListQuery {
            page_size: 1,
            ..Default::default()
        };
        assert_eq!(store.list(&s, &q).await.unwrap().total_size, 300);
    }

    #[tokio::test]
    async fn every_list_shape_uses_an_index() {
        let (dir, store) = temp_store();
        // Some rows so the planner has something to plan for.
        let s = Scope::new("agent", "alice");
        for i in 0..20 {
            let t = task(&format!("t-{i}"), "ctx", v1::TaskState::Working, i);
            store.save(&s, &t).await.unwrap();
        }
        let conn = Connection::open(dir.path().join("tasks.db")).unwrap();
        let token = PageToken {
            ts_ms: 5,
            id: "t-5".into(),
        };
        let shapes = [
            ListQuery::default(),
            ListQuery {
                context_id: Some("ctx".into()),
                ..Default::default()
            },
            ListQuery {
                state: Some(v1::TaskState::Working),
                ..Default::default()
            },
            ListQuery {
                status_after_ms: Some(3),
                ..Default::default()
            },
            ListQuery {
                context_id: Some("ctx".into()),
                status_after_ms: Some(3),
                ..Default::default()
            },
            ListQuery {
                state: Some(v1::TaskState::Working),
                status_after_ms: Some(3),
                ..Default::default()
            },
        ];
        for query in shapes {
            for token in [None, Some(&token)] {
                let sql = list_sql(
                    &s,
                    &ListQuery {
                        page_size: 10,
                        ..query.clone()
                    },
                    token,
                );
                for (text, params) in [
                    (&sql.page, &sql.page_params),
                    (&sql.count, &sql.count_params),
                ] {
                    let plan = explain(&conn, text, params);
                    assert!(
                        plan.contains("USING INDEX tasks_by")
                            || plan.contains("USING COVERING INDEX tasks_by"),
                        "{query:?} {text}: {plan}"
                    );
                    assert!(
                        !plan.contains("TEMP B-TREE"),
                        "{query:?} {text} sorts: {plan}"
                    );
                }
            }
        }
    }

    /// Retention reads the ended tasks from their own index, oldest first:
    /// no scan of every task, no sort.
    #[tokio::test]
    async fn retention_reads_the_finished_index() {
        let (dir, _store) = temp_store();
        let conn = Connection::open(dir.path().join("tasks.db")).unwrap();
        let plan = explain(
            &conn,
            FINISHED_SQL,
            &[Value::Integer(5_000), Value::Integer(100)],
        );
        assert!(plan.contains("tasks_finished"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }

    fn explain(conn: &Connection, sql: &str, params: &[Value]) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt
            .query_map(params_from_iter(params), |r| r.get::<_, String>(3))
            .unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    #[tokio::test]
    async fn corrupt_rows_are_reported_not_panicked_on() {
        let (dir, store) = temp_store();
        let s = Scope::new("agent", "alice");
        store
            .save(&s, &task("ok", "ctx", v1::TaskState::Working, 1))
            .await
            .unwrap();
        let conn = Connection::open(dir.path().join("tasks.db")).unwrap();
        conn.execute_batch(
            "INSERT INTO tasks VALUES ('agent', 'bad', 'alice', 'ctx', 2, 2, x'ffffffff', 0);
             INSERT INTO tasks VALUES ('agent', 'text', 'alice', 'ctx', 3, 3, 'not a blob', 0);",
        )
        .unwrap();
        for id in ["bad", "text"] {
            assert!(
                matches!(store.load(&s, id).await, Err(StoreError::Corrupt(got, _)) if got == id)
            );
        }
        let q = ListQuery {
            page_size: 10,
            ..Default::default()
        };
        assert!(matches!(
            store.list(&s, &q).await,
            Err(StoreError::Corrupt(..))
        ));
        // fail_interrupted is all or nothing: the good WORKING task stays.
        assert!(matches!(
            store.fail_interrupted("x").await,
            Err(StoreError::Corrupt(..))
        ));
        let ok = store.load(&s, "ok").await.unwrap().unwrap();
        assert_eq!(ok.status.unwrap().state, v1::TaskState::Working as i32);
    }
}
