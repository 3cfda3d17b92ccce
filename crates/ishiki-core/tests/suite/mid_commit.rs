//! A step's future dropped mid-commit (issue 26, SEC-4): on every store (SQLite, memory,
//! PostgreSQL) a step cut at any poll, the cuts landing before a commit reached the store,
//! inside the store's own commit (PostgreSQL's round trips), and after the store had stored the
//! batch but before the runtime heard back. The store holds either the whole batch or none of
//! it; a runtime whose commit was cut while in doubt refuses to go on and says to reopen; the
//! reopened runtime finds every call answered and steps on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::store::{Batch, StoredMessage, StoredState};
use ishiki_core::{
    Durability, HistoryStore, MemoryStore, Runtime, RuntimeErrorKind, SqliteStore, StoreError,
    StoreErrorKind,
};
use ishiki_postgres::{PoolOptions, PostgresOptions, PostgresPool};

use super::backends::postgres_url;
use super::cancel::{Hidden, Model4, Slow, calls_answered, warm_then_cut, yields};
use super::runtime::{assembly, clock_at};

/// What the wrapped store saw of its commits.
#[derive(Debug, Default)]
struct Log {
    /// Messages in the batches the inner store said it committed.
    committed: usize,
    /// The messages of the commit under way (`None` when no commit is).
    pending: Option<usize>,
    /// The commit under way was handed to the inner store.
    inside: bool,
    /// The commit under way was stored (the inner store answered) and has not returned yet.
    landed: bool,
}

/// A store that yields before and after handing each commit to the store it wraps: each yield
/// is an await the step can be cut at, around whatever awaits the inner store has.
#[derive(Debug)]
struct Yielding {
    inner: Box<dyn HistoryStore>,
    log: Arc<Mutex<Log>>,
}

#[async_trait]
impl HistoryStore for Yielding {
    async fn load(&self) -> Result<StoredState, StoreError> {
        self.inner.load().await
    }

    async fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        {
            let mut log = self.log.lock().expect("the log");
            log.pending = Some(batch.messages.len());
            log.landed = false;
            log.inside = false;
        }
        yields(2).await;
        self.log.lock().expect("the log").inside = true;
        let outcome = self.inner.commit(batch).await;
        {
            let mut log = self.log.lock().expect("the log");
            if outcome.is_ok() {
                log.committed += batch.messages.len();
                log.landed = true;
            }
        }
        yields(2).await;
        let mut log = self.log.lock().expect("the log");
        log.pending = None;
        log.landed = false;
        log.inside = false;
        outcome
    }

    async fn load_messages_since(
        &self,
        after: usize,
    ) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
        self.inner.load_messages_since(after).await
    }
}

/// Where each cut's fresh history lives.
enum Histories {
    Sqlite(tempfile::TempDir),
    Memory,
    Postgres(PostgresPool),
}

impl Histories {
    fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Memory => "memory",
            Self::Postgres(_) => "postgres",
        }
    }

    /// The history of cut `n`, empty at first.
    fn fresh(&self, n: usize) -> History {
        match self {
            Self::Sqlite(dir) => History::Sqlite(dir.path().join(format!("cut-{n}.sqlite"))),
            Self::Memory => History::Memory(MemoryStore::new()),
            Self::Postgres(pool) => History::Postgres(pool.clone(), format!("cut-{n}")),
        }
    }
}

enum History {
    Sqlite(PathBuf),
    Memory(MemoryStore),
    Postgres(PostgresPool, String),
}

impl History {
    /// Opens this history again, as a restarted process does.
    async fn open(&self) -> Box<dyn HistoryStore> {
        match self {
            Self::Sqlite(path) => {
                Box::new(SqliteStore::open(path, Durability::Normal).expect("sqlite opens"))
            }
            Self::Memory(store) => Box::new(store.clone()),
            Self::Postgres(pool, conversation) => Box::new(
                pool.open(conversation, &PostgresOptions::default())
                    .await
                    .expect("postgres opens"),
            ),
        }
    }
}

async fn runtime(dir: &std::path::Path, store: Box<dyn HistoryStore>) -> Runtime {
    Runtime::builder(assembly("toolsearch: { enable: true }\n", "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .durability(Durability::Normal)
        .tool(Arc::new(Slow))
        .tool(Arc::new(Hidden))
        .store(store)
        .build()
        .await
        .expect("the runtime builds")
}

#[derive(Debug, Default)]
struct Tally {
    /// Cuts that left no commit in doubt (before one started, or after it returned).
    clean: usize,
    /// Cuts in doubt whose batch the store had not stored.
    in_doubt_not_stored: usize,
    /// Cuts in doubt whose batch the store had stored.
    in_doubt_stored: usize,
    /// Of the cuts in doubt, those inside the inner store's own commit.
    inside_the_store: usize,
}

async fn cut_every_poll(histories: &Histories) -> Tally {
    let name = histories.name();
    let mut tally = Tally::default();
    let mut n = 0;
    for (warm, polls) in (0..2).flat_map(|warm| (0..70).map(move |polls| (warm, polls))) {
        n += 1;
        let at = format!("{name}: cut at poll {polls} after {warm} whole steps");
        let dir = tempfile::tempdir().expect("tempdir");
        let history = histories.fresh(n);
        let log = Arc::new(Mutex::new(Log::default()));
        let store = Yielding {
            inner: history.open().await,
            log: log.clone(),
        };
        let model = Model4::default();
        let mut rt = runtime(dir.path(), Box::new(store)).await;
        let finished = warm_then_cut(&mut rt, &model, warm, polls).await;
        let (committed, pending, landed, inside) = {
            let log = log.lock().expect("the log");
            (log.committed, log.pending, log.landed, log.inside)
        };
        // A cut mid-commit leaves the runtime unsure what its store holds: it refuses to go
        // on and says why, and keeps refusing.
        let in_doubt = match rt.prepare().await {
            Err(e) if e.store_kind() == Some(StoreErrorKind::InDoubt) => {
                assert_eq!(e.kind(), RuntimeErrorKind::Store, "{at}");
                assert!(
                    e.message().contains("reopen the runtime from its store"),
                    "{at}: {e}"
                );
                assert!(
                    pending.is_some(),
                    "{at}: in doubt without a commit under way"
                );
                tally.inside_the_store += usize::from(inside && !landed);
                let again = rt.execute().await.expect_err("still refused");
                assert_eq!(again.store_kind(), Some(StoreErrorKind::InDoubt), "{at}");
                true
            }
            Err(e) if e.kind() == RuntimeErrorKind::Usage => false, // calls wait to run
            Ok(prepared) => {
                rt.abandon(prepared);
                false
            }
            Err(e) => panic!("{at}: {e}"),
        };
        if !in_doubt {
            assert!(
                finished.is_some() || pending.is_none(),
                "{at}: a commit was cut and the runtime did not notice"
            );
        }
        drop(rt);

        // Reopened: the store holds each batch whole or not at all.
        let reopened = history.open().await;
        let stored = reopened.load().await.expect("loads").messages.len();
        let before = committed;
        match (in_doubt, landed, pending) {
            (true, true, _) => {
                assert_eq!(stored, before, "{at}: stored, then cut");
                tally.in_doubt_stored += 1;
            }
            (true, false, Some(batch)) => {
                // Inside the inner commit: PostgreSQL may have run its COMMIT and lost the
                // reply; the embedded stores cannot be cut there.
                if stored == before + batch && batch > 0 {
                    assert_eq!(name, "postgres", "{at}: an embedded commit was cut inside");
                    tally.in_doubt_stored += 1;
                } else {
                    assert_eq!(stored, before, "{at}: a cut commit left part of its batch");
                    tally.in_doubt_not_stored += 1;
                }
            }
            (true, false, None) => unreachable!("checked above"),
            (false, ..) => {
                assert_eq!(stored, before, "{at}: the store and the runtime disagree");
                tally.clean += 1;
            }
        }

        // The reopened runtime finds every call answered (calls cut while they ran are
        // answered as interrupted) and steps on.
        let mut rt = runtime(dir.path(), reopened).await;
        match rt.prepare().await {
            Ok(prepared) => rt.abandon(prepared),
            Err(e) if e.kind() == RuntimeErrorKind::Usage => {
                rt.execute().await.expect("the waiting calls run");
            }
            Err(e) => panic!("{at}: reopening: {e}"),
        }
        let prepared = rt.prepare().await.expect("the next request");
        calls_answered(&prepared.request).unwrap_or_else(|e| panic!("{at}: {e}"));
        rt.abandon(prepared);
        rt.add_user_message("after", "and now?", &[])
            .await
            .expect("user message");
        rt.step_with(&model)
            .await
            .unwrap_or_else(|e| panic!("{at}: the next step: {e}"));
    }
    tally
}

async fn check(histories: Histories) -> Tally {
    let name = histories.name();
    let tally = cut_every_poll(&histories).await;
    eprintln!("{name}: {tally:?}");
    assert!(
        tally.clean > 0 && tally.in_doubt_not_stored > 0 && tally.in_doubt_stored > 0,
        "{name}: the cuts landed outside commits, inside them before the store stored, and after: {tally:?}"
    );
    tally
}

#[tokio::test]
async fn sec4_a_step_dropped_mid_commit_on_sqlite_reopens_consistent() {
    let tally = check(Histories::Sqlite(tempfile::tempdir().expect("tempdir"))).await;
    // SQLite commits within one poll, behind its blocking-thread boundary.
    assert_eq!(tally.inside_the_store, 0, "{tally:?}");
}

#[tokio::test]
async fn sec4_a_step_dropped_mid_commit_on_memory_reopens_consistent() {
    check(Histories::Memory).await;
}

/// PostgreSQL's commit has awaits of its own (connection, `BEGIN`, statements, `COMMIT`): a
/// cut there rolls the transaction back, on a connection the pool hands out again.
#[tokio::test]
async fn sec4_a_step_dropped_mid_commit_on_postgres_reopens_consistent() {
    let Some(url) = postgres_url("sec4_a_step_dropped_mid_commit_on_postgres") else {
        return;
    };
    // One connection: every cut's rolled-back transaction is on the connection the next
    // commit gets.
    let options = PoolOptions {
        max_connections: 1,
        ..PoolOptions::default()
    };
    let pool = PostgresPool::connect(&url, &options)
        .await
        .expect("the pool connects");
    let tally = check(Histories::Postgres(pool)).await;
    assert!(
        tally.inside_the_store > 0,
        "some cuts landed inside PostgreSQL's own commit: {tally:?}"
    );
}
