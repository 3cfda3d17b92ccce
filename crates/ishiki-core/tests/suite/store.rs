//! The history store (PRJ-13, SEC-3, SEC-4): atomic batches, exact reopen, crash safety.
//!
//! The store contract is one test body run against every store in [`super::backends`]
//! (SQLite, memory, PostgreSQL); what only one store has (SQLite's file checks, memory's
//! shared clones) is tested on that store alone.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use ishiki_core::store::{Batch, StoredAttachment, StoredMessage, StoredState};
use ishiki_core::{Durability, HistoryStore, MemoryStore, SqliteStore, StoreErrorKind};
use serde_json::{Value, json};

use super::backends::{Backend, backends};
use super::with_snapshots;

fn message(id: &str, n: u64) -> StoredMessage {
    StoredMessage {
        id: id.to_owned(),
        json: json!({ "role": "user", "n": n, "text": format!("message {id} ✓") }),
    }
}

fn attachment(id: &str) -> StoredAttachment {
    StoredAttachment {
        id: id.to_owned(),
        json: json!({ "url": format!("artifact://read/{id}.png"), "lifetime": "once" }),
    }
}

/// Three batches touching every part of the store; ids deliberately not in sorted order.
fn history() -> Vec<Batch> {
    vec![
        Batch {
            messages: vec![message("zeta", 1), message("alpha", 2)],
            attachments: vec![attachment("a2"), attachment("a1")],
            delivery: Some(json!({ "a2": "delivered" })),
            meta: vec![("session".into(), json!("s1"))],
            ..Batch::default()
        },
        Batch {
            messages: vec![message("mid", 3)],
            withdrawn: vec!["zeta".into()],
            delivery_records: vec![
                ("a2".into(), json!({ "id": "a2", "seq": 0, "viewed": true })),
                ("a1".into(), json!({ "id": "a1", "seq": 1 })),
            ],
            catalog: Some(json!({ "discovered": ["write_file"] })),
            meta: vec![("session".into(), json!("s2")), ("step".into(), json!(2))],
            ..Batch::default()
        },
        Batch {
            messages: vec![message("last", 4)],
            withdrawn: vec!["last".into(), "zeta".into()],
            delivery: Some(json!({ "a2": "delivered", "a1": "delivered" })),
            // A record's row is replaced, the others stay.
            delivery_records: vec![(
                "a1".into(),
                json!({ "id": "a1", "seq": 1, "viewed": true, "consumed": true }),
            )],
            ..Batch::default()
        },
    ]
}

fn expected_after_history() -> StoredState {
    StoredState {
        messages: vec![
            (message("zeta", 1), true),
            (message("alpha", 2), false),
            (message("mid", 3), false),
            (message("last", 4), true),
        ],
        attachments: vec![attachment("a2"), attachment("a1")],
        delivery: Some(json!({ "a2": "delivered", "a1": "delivered" })),
        delivery_records: [
            (
                "a1".to_owned(),
                json!({ "id": "a1", "seq": 1, "viewed": true, "consumed": true }),
            ),
            (
                "a2".to_owned(),
                json!({ "id": "a2", "seq": 0, "viewed": true }),
            ),
        ]
        .into_iter()
        .collect(),
        catalog: Some(json!({ "discovered": ["write_file"] })),
        meta: [
            ("session".to_owned(), json!("s2")),
            ("step".to_owned(), json!(2)),
        ]
        .into_iter()
        .collect(),
    }
}

#[tokio::test]
async fn prj13_commit_then_load_round_trips_in_commit_order() {
    for backend in backends() {
        let mut store = backend.open().await;
        assert_eq!(
            store.load().await.unwrap(),
            StoredState::default(),
            "{backend:?}"
        );
        for batch in history() {
            store.commit(&batch).await.unwrap();
        }
        assert_eq!(
            store.load().await.unwrap(),
            expected_after_history(),
            "{backend:?}"
        );
        // An empty batch changes nothing.
        store.commit(&Batch::default()).await.unwrap();
        assert_eq!(
            store.load().await.unwrap(),
            expected_after_history(),
            "{backend:?}"
        );
    }
}

/// Batches that must fail, each with a valid part that must not be applied.
fn failing_batches() -> Vec<(&'static str, Batch)> {
    let valid_part = Batch {
        messages: vec![message("fresh", 9)],
        attachments: vec![attachment("fresh-a")],
        delivery: Some(json!({ "poisoned": true })),
        delivery_records: vec![("a1".into(), json!({ "poisoned": true }))],
        catalog: Some(json!({ "poisoned": true })),
        meta: vec![("session".into(), json!("poisoned"))],
        withdrawn: vec!["alpha".into()],
    };
    let with = |f: &dyn Fn(&mut Batch)| {
        let mut b = valid_part.clone();
        f(&mut b);
        b
    };
    vec![
        (
            "message id already stored",
            with(&|b| b.messages.push(message("mid", 0))),
        ),
        (
            "message id twice in the batch",
            with(&|b| b.messages.push(message("fresh", 0))),
        ),
        (
            "attachment id already stored",
            with(&|b| b.attachments.push(attachment("a1"))),
        ),
        (
            "attachment id twice in the batch",
            with(&|b| b.attachments.push(attachment("fresh-a"))),
        ),
        (
            "withdrawing an unknown message",
            with(&|b| b.withdrawn.push("ghost".into())),
        ),
    ]
}

#[tokio::test]
async fn sec4_a_failing_batch_leaves_nothing() {
    let mut reports = Vec::new();
    for backend in backends() {
        let mut report = String::new();
        let mut store = backend.open().await;
        for batch in history() {
            store.commit(&batch).await.unwrap();
        }
        for (name, batch) in failing_batches() {
            let error = store.commit(&batch).await.unwrap_err();
            assert_eq!(
                store.load().await.unwrap(),
                expected_after_history(),
                "{name} left a trace in {backend:?}"
            );
            let kind = match error.kind() {
                StoreErrorKind::DuplicateId => "duplicate_id",
                StoreErrorKind::UnknownMessage => "unknown_message",
                other => panic!("{backend:?}: {name}: unexpected kind {other:?}"),
            };
            let _ = writeln!(report, "{name}: [{kind}] {error}");
        }
        // The store is still usable after the failures.
        store
            .commit(&Batch {
                messages: vec![message("after", 5)],
                ..Batch::default()
            })
            .await
            .unwrap();
        assert_eq!(store.load().await.unwrap().messages.len(), 5, "{backend:?}");
        reports.push((backend.name, report));
    }
    // Every store reports the same errors in the same words.
    let (_, first) = &reports[0];
    for (name, report) in &reports {
        assert_eq!(report, first, "{name}");
    }
    with_snapshots(|| insta::assert_snapshot!("store_errors", first.trim_end()));
}

#[tokio::test]
async fn prj13_reopening_restores_exactly() {
    for backend in backends() {
        reopening_restores_exactly(&backend).await;
    }
}

async fn reopening_restores_exactly(backend: &Backend) {
    {
        let mut store = backend.open().await;
        for batch in history().into_iter().take(2) {
            store.commit(&batch).await.expect("the commit succeeds");
        }
    }
    {
        let mut store = backend.open().await;
        for batch in history().into_iter().skip(2) {
            store.commit(&batch).await.expect("the commit succeeds");
        }
    }
    let mut store = backend.open().await;
    assert_eq!(
        store.load().await.expect("the store loads"),
        expected_after_history(),
        "{backend:?}"
    );

    // New records keep coming after the reopened ones (append-only, in commit order).
    store
        .commit(&Batch {
            messages: vec![message("0-first-by-name", 5)],
            ..Batch::default()
        })
        .await
        .expect("the commit succeeds");
    let ids: Vec<String> = store
        .load()
        .await
        .expect("the store loads")
        .messages
        .into_iter()
        .map(|(m, _)| m.id)
        .collect();
    assert_eq!(
        ids,
        ["zeta", "alpha", "mid", "last", "0-first-by-name"],
        "{backend:?}"
    );
}

#[tokio::test]
async fn prj13_sqlite_reopens_across_durability_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    for (k, durability) in [Durability::Full, Durability::Normal, Durability::Full]
        .into_iter()
        .enumerate()
    {
        let mut store = SqliteStore::open(&path, durability).unwrap();
        if let Some(batch) = history().into_iter().nth(k) {
            store.commit(&batch).await.unwrap();
        }
    }
    let store = SqliteStore::open(&path, Durability::Normal).unwrap();
    assert_eq!(store.load().await.unwrap(), expected_after_history());
}

#[tokio::test]
async fn prj13_memory_store_clones_share_history() {
    let mut store = MemoryStore::new();
    let reopened = store.clone();
    for batch in history() {
        store.commit(&batch).await.unwrap();
    }
    drop(store);
    assert_eq!(reopened.load().await.unwrap(), expected_after_history());
}

#[test]
fn sec3_foreign_and_newer_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();

    let garbage = dir.path().join("not-a-db");
    std::fs::write(
        &garbage,
        b"this is not SQLite, just some bytes that fill a header....",
    )
    .unwrap();
    let error = SqliteStore::open(&garbage, Durability::Full).unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Database);
    assert!(error.message().starts_with("history store: "), "{error}");

    let newer = dir.path().join("newer.db");
    drop(SqliteStore::open(&newer, Durability::Full).unwrap());
    {
        let conn = rusqlite::Connection::open(&newer).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let error = SqliteStore::open(&newer, Durability::Full).unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Version);
    assert_eq!(
        error.message(),
        "history store schema version 99 is newer than this build supports (2)"
    );

    let missing_dir = dir.path().join("no/such/dir/history.db");
    let error = SqliteStore::open(&missing_dir, Durability::Full).unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Database);
}

/// A store of schema version 1 kept the delivery state as one document; opening it moves each
/// record's state to its own row, keeps everything else, and the runtime reads the same state.
#[tokio::test]
async fn a_version_1_store_is_migrated_with_its_delivery_state_split_into_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let mut store = SqliteStore::open(&path, Durability::Full).unwrap();
    for batch in history() {
        store.commit(&batch).await.unwrap();
    }
    drop(store);
    let whole = json!({ "records": [
        { "id": "a2", "seq": 0, "viewed": true, "consumed": true },
        { "id": "a1", "seq": 1, "released": true },
    ] });
    {
        // What version 1 was: no `delivery` table, the state in `state`.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("DROP TABLE delivery; PRAGMA user_version = 1;")
            .unwrap();
        conn.execute(
            "UPDATE state SET json = ?1 WHERE key = 'delivery'",
            [whole.to_string()],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, Durability::Full).unwrap();
    let mut expected = expected_after_history();
    expected.delivery = None;
    expected.delivery_records = [
        (
            "a1".to_owned(),
            json!({ "id": "a1", "seq": 1, "released": true }),
        ),
        (
            "a2".to_owned(),
            json!({ "id": "a2", "seq": 0, "viewed": true, "consumed": true }),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(store.load().await.unwrap(), expected);
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 2);
}

// --- SEC-4: a writer killed with SIGKILL at random points -----------------------------------
//
// The test binary re-executes itself: each crash test, started with `CHILD_DB` or `CHILD_PG`
// set, is the writer (`crash_child`) instead of the test. This keeps the crash test inside the
// one integration binary, with no extra `[[bin]]` to publish, and no test that asserts nothing.

const CHILD_DB: &str = "ISHIKI_CORE_CRASH_CHILD_DB";
const CHILD_DURABILITY: &str = "ISHIKI_CORE_CRASH_CHILD_DURABILITY";
/// Set to a PostgreSQL connection string: the child writes there instead of `CHILD_DB`.
const CHILD_PG: &str = "ISHIKI_CORE_CRASH_CHILD_PG";

/// Where the killed writer writes.
#[derive(Debug, Clone)]
enum CrashStore {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl CrashStore {
    /// Opens the store. A killed writer leaves its PostgreSQL lease behind until it expires;
    /// the test knows the writer is dead, so it takes the lease over.
    async fn open(&self, durability: Durability) -> Box<dyn HistoryStore> {
        match self {
            Self::Sqlite(path) => {
                Box::new(SqliteStore::open(path, durability).expect("the store opens"))
            }
            Self::Postgres(url) => Box::new(
                ishiki_postgres::PostgresStore::connect(
                    url,
                    "crash",
                    &ishiki_postgres::PostgresOptions {
                        when_held: ishiki_postgres::WhenHeld::TakeOver,
                        ..ishiki_postgres::PostgresOptions::default()
                    },
                )
                .await
                .expect("postgres opens"),
            ),
        }
    }
}

/// Batch `k` of the crash test: `1 + k % 4` messages, an attachment, a withdrawal of the
/// previous batch's first message, and delivery, catalog and meta all naming `k`.
fn crash_batch(k: u64) -> Batch {
    let pad = "x".repeat(usize::try_from(k % 7).unwrap_or(0) * 1500);
    Batch {
        messages: (0..1 + k % 4)
            .map(|j| StoredMessage {
                id: format!("b{k}-m{j}"),
                json: json!({ "batch": k, "j": j, "pad": pad }),
            })
            .collect(),
        withdrawn: if k > 1 {
            vec![format!("b{}-m0", k - 1)]
        } else {
            Vec::new()
        },
        attachments: vec![StoredAttachment {
            id: format!("b{k}-a"),
            json: json!({ "batch": k }),
        }],
        delivery: Some(json!({ "batch": k })),
        // One row each batch writes anew, one every batch replaces.
        delivery_records: vec![
            (format!("b{k}-a"), json!({ "batch": k })),
            ("latest".into(), json!({ "batch": k })),
        ],
        catalog: Some(json!({ "batch": k })),
        meta: vec![("last_batch".into(), json!(k))],
    }
}

/// What the store holds after batches `1..=last` and nothing else.
fn crash_state(last: u64) -> StoredState {
    let mut state = StoredState::default();
    for k in 1..=last {
        let batch = crash_batch(k);
        for m in batch.messages {
            // Batch k+1 withdraws batch k's first message.
            let withdrawn = k < last && m.id == format!("b{k}-m0");
            state.messages.push((m, withdrawn));
        }
        state.attachments.extend(batch.attachments);
        state.delivery = batch.delivery;
        state.delivery_records.extend(batch.delivery_records);
        state.catalog = batch.catalog;
        state.meta.extend(batch.meta);
    }
    state
}

/// The writer the crash tests below kill: their own test binary, run again with [`CHILD_DB`] or
/// [`CHILD_PG`] set. Returns `false` at once in any other process.
#[expect(
    clippy::unwrap_used,
    reason = "a test's child process: it fails and reports as its test would"
)]
async fn crash_child() -> bool {
    let target = match (std::env::var(CHILD_PG), std::env::var(CHILD_DB)) {
        (Ok(url), _) => CrashStore::Postgres(url),
        (_, Ok(db)) => CrashStore::Sqlite(db.into()),
        _ => return false,
    };
    let durability = match std::env::var(CHILD_DURABILITY).as_deref() {
        Ok("full") => Durability::Full,
        _ => Durability::Normal,
    };
    let mut store = target.open(durability).await;
    let start = store
        .load()
        .await
        .unwrap()
        .meta
        .get("last_batch")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut out = std::io::stdout().lock();
    // Bounded, so an orphaned child (parent gone) stops by itself.
    for k in start + 1..start + 10_000 {
        store.commit(&crash_batch(k)).await.unwrap();
        if writeln!(out, "committed {k}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    true
}

/// xorshift64*: enough randomness for kill points without another dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[tokio::test]
async fn sec4_killed_writer_leaves_whole_batches() {
    if crash_child().await {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    killed_writer_leaves_whole_batches(
        &CrashStore::Sqlite(dir.path().join("history.db")),
        "suite::store::sec4_killed_writer_leaves_whole_batches",
    )
    .await;
}

#[tokio::test]
async fn sec4_killed_postgres_writer_leaves_whole_batches() {
    if crash_child().await {
        return;
    }
    let Some(url) =
        super::backends::postgres_url("sec4_killed_postgres_writer_leaves_whole_batches")
    else {
        return;
    };
    killed_writer_leaves_whole_batches(
        &CrashStore::Postgres(url),
        "suite::store::sec4_killed_postgres_writer_leaves_whole_batches",
    )
    .await;
}

/// Kills a writer (`test`, run again as [`crash_child`]) at random points and checks what
/// reopens.
async fn killed_writer_leaves_whole_batches(target: &CrashStore, test: &str) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = Rng(seed);
    let exe = std::env::current_exe().expect("the test binary has a path");
    let mut last_seen = 0;

    for round in 0..20 {
        let kill_after = 1 + rng.next() % 30;
        let durability = if round % 2 == 0 { "normal" } else { "full" };
        let mut command = Command::new(&exe);
        command.args(["--exact", test, "--nocapture", "--test-threads=1"]);
        match target {
            CrashStore::Sqlite(db) => command.env(CHILD_DB, db),
            CrashStore::Postgres(url) => command.env(CHILD_PG, url),
        };
        let mut child = command
            .env(CHILD_DURABILITY, durability)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the child starts");
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let mut reported = 0;
        let mut lines_seen = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(k) = line.strip_prefix("committed ") {
                reported = k.parse::<u64>().expect("a number");
                lines_seen += 1;
                if lines_seen >= kill_after {
                    break;
                }
            }
        }
        // SIGKILL, while the child is somewhere in its next commits.
        child.kill().expect("the child can be killed");
        let status = child.wait().expect("the child is reaped");
        assert!(
            lines_seen >= kill_after,
            "seed {seed} round {round}: the writer stopped early ({status})"
        );

        let store = target.open(Durability::Normal).await;
        let state = store.load().await.expect("the store loads");
        let last = state
            .meta
            .get("last_batch")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        assert!(
            last >= reported,
            "seed {seed} round {round}: batch {reported} was committed but the store ends at {last}"
        );
        assert!(
            last >= last_seen,
            "seed {seed} round {round}: history shrank"
        );
        // Every batch is whole, in order, with nothing of a later one: exactly 1..=last.
        assert_eq!(
            state,
            crash_state(last),
            "seed {seed} round {round}: store is not exactly batches 1..={last}"
        );
        last_seen = last;
        drop(store);

        if let CrashStore::Sqlite(db) = target {
            let conn = rusqlite::Connection::open(db).expect("sqlite opens");
            let check: String = conn
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .expect("the integrity check runs");
            assert_eq!(check, "ok", "seed {seed} round {round}");
        }
    }
    assert!(last_seen >= 20);
}
