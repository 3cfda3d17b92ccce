//! [`SqliteStore`]: the embedded default history store (feature `sqlite`): one SQLite file in
//! WAL mode, the schema versioned with `user_version`.

use std::fmt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::{
    Batch, Durability, HistoryStore, StoreError, StoreErrorKind, StoredAttachment, StoredMessage,
    StoredState,
};

fn db_error(error: rusqlite::Error) -> StoreError {
    StoreError::new(StoreErrorKind::Database, format!("history store: {error}"))
}

/// The schema version this crate writes (`PRAGMA user_version`): 2 keeps each attachment
/// record's delivery state in its own row (`delivery`) instead of one document rewritten at
/// every commit (issue 26).
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    json TEXT NOT NULL,
    withdrawn INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE attachments (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    json TEXT NOT NULL
);
CREATE TABLE state (
    key TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
CREATE TABLE delivery (
    id TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
";

/// Version 1 → 2: the delivery document (`state` key `delivery`, `{"records": [...]}`) becomes
/// one `delivery` row per record, keyed by the record's id. Same flags, same rows' JSON. A
/// record listed twice (the document is never written so) keeps its first entry, as in
/// PostgreSQL's migration 2.
const MIGRATE_1_TO_2: &str = "
CREATE TABLE delivery (
    id TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
INSERT OR IGNORE INTO delivery (id, json)
    SELECT json_extract(r.value, '$.id'), r.value
    FROM state, json_each(state.json, '$.records') AS r
    WHERE state.key = 'delivery';
DELETE FROM state WHERE key = 'delivery';
";

/// The embedded default store: one SQLite file in WAL mode, one transaction per commit.
/// Opening a file left by a crashed process recovers it (SQLite replays or discards the WAL).
#[derive(Debug)]
pub struct SqliteStore {
    /// Behind a mutex only so the store is `Sync` (the trait's futures are `Send`); `commit`
    /// takes `&mut self` and never locks it.
    conn: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(|e| cannot_open(path, &e))?;
        Self::init(conn, durability, true)
    }

    /// Opens the store at `path`, which must already hold a history: a missing file, an empty
    /// one, or one without the store's tables (a lost write-ahead log leaves such a file) is a
    /// [`StoreErrorKind::Missing`] error, never a new, empty history.
    pub fn open_existing(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let missing = |why: &str| {
            StoreError::new(
                StoreErrorKind::Missing,
                format!("the history store {} {why}", path.display()),
            )
        };
        let size = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(missing("is missing"));
            }
            Err(e) => {
                return Err(StoreError::new(
                    StoreErrorKind::Database,
                    format!("cannot open history store {}: {e}", path.display()),
                ));
            }
        };
        let flags = rusqlite::OpenFlags::default() - rusqlite::OpenFlags::SQLITE_OPEN_CREATE;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| cannot_open(path, &e))?;
        match Self::init(conn, durability, false) {
            Err(e) if e.kind() == StoreErrorKind::Missing && size == 0 => {
                Err(missing("is empty (0 bytes)"))
            }
            Err(e) if e.kind() == StoreErrorKind::Missing => Err(missing(
                "has none of its tables (its write-ahead log may have been lost)",
            )),
            other => other,
        }
    }

    /// A store that lives only as long as the value (tests, throwaway sessions).
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(db_error)?;
        Self::init(conn, Durability::Normal, true)
    }

    /// Sets the connection up; an empty database gets the schema when `create`, and is a
    /// [`StoreErrorKind::Missing`] error otherwise.
    fn init(
        mut conn: Connection,
        durability: Durability,
        create: bool,
    ) -> Result<Self, StoreError> {
        // Another process may hold the write lock briefly (a second reader of the same state
        // directory); wait for it rather than failing at once.
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(db_error)?;
        if !create {
            // Before anything can write to the file: an empty database stays as it was found.
            let version: i64 = conn
                .pragma_query_value(None, "user_version", |row| row.get(0))
                .map_err(db_error)?;
            if version == 0 {
                return Err(StoreError::new(
                    StoreErrorKind::Missing,
                    "the history store has no tables",
                ));
            }
        }
        // In-memory databases answer "memory"; only files switch to WAL.
        let _mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(db_error)?;
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(db_error)?;

        // Check and create under the write lock, so two processes opening a fresh file do not
        // both create the schema.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(db_error)?;
        match version {
            0 if !create => {
                return Err(StoreError::new(
                    StoreErrorKind::Missing,
                    "the history store has no tables",
                ));
            }
            0 => {
                tx.execute_batch(SCHEMA).map_err(db_error)?;
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                    .map_err(db_error)?;
            }
            SCHEMA_VERSION => check_tables(&tx)?,
            1 => {
                tx.execute_batch(MIGRATE_1_TO_2).map_err(|e| {
                    // Malformed JSON in the old document is damage; anything else (a full
                    // disk, I/O) is the database's failure.
                    let kind = match &e {
                        rusqlite::Error::SqliteFailure(_, Some(m)) if m.contains("JSON") => {
                            StoreErrorKind::Corrupt
                        }
                        _ => StoreErrorKind::Database,
                    };
                    StoreError::new(
                        kind,
                        format!(
                            "cannot move the history store's delivery state to schema version {SCHEMA_VERSION}: {e}"
                        ),
                    )
                })?;
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                    .map_err(db_error)?;
                check_tables(&tx)?;
            }
            newer => {
                return Err(StoreError::new(
                    StoreErrorKind::Version,
                    format!(
                        "history store schema version {newer} is newer than this build supports ({SCHEMA_VERSION})"
                    ),
                ));
            }
        }
        tx.commit().map_err(db_error)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }
}

fn cannot_open(path: &Path, e: &rusqlite::Error) -> StoreError {
    StoreError::new(
        StoreErrorKind::Database,
        format!("cannot open history store {}: {e}", path.display()),
    )
}

/// The tables of the schema, all of which a versioned store must have.
const TABLES: [&str; 5] = ["messages", "attachments", "state", "meta", "delivery"];

fn check_tables(conn: &Connection) -> Result<(), StoreError> {
    for table in TABLES {
        let found: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |row| row.get(0),
            )
            .optional()
            .map_err(db_error)?;
        if found.is_none() {
            return Err(StoreError::new(
                StoreErrorKind::Corrupt,
                format!("the history store has no table `{table}`"),
            ));
        }
    }
    Ok(())
}

fn to_text(value: &Value) -> String {
    // Serializing a `Value` cannot fail: its map keys are strings.
    value.to_string()
}

fn corrupt(table: &str, row: &str, why: impl fmt::Display) -> StoreError {
    StoreError::new(
        StoreErrorKind::Corrupt,
        format!("table `{table}`, {row}: {why}"),
    )
}

/// A column's text, if it is text (and UTF-8).
fn text(value: ValueRef<'_>) -> Option<String> {
    match value {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
        _ => None,
    }
}

/// What a column holds, for a message.
fn describe(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Text(_) => "text".to_owned(),
        ValueRef::Blob(_) => "a blob".to_owned(),
    }
}

/// Column `index` of `row` as JSON text, parsed.
fn json_column(
    row: &rusqlite::Row<'_>,
    index: usize,
    table: &str,
    name: &str,
) -> Result<Value, StoreError> {
    let value = row.get_ref(index).map_err(db_error)?;
    let Some(json) = text(value) else {
        return Err(corrupt(
            table,
            name,
            format!("the stored JSON is {}, not text", describe(value)),
        ));
    };
    serde_json::from_str(&json).map_err(|e| corrupt(table, name, format!("not valid JSON: {e}")))
}

/// The `id` (column 1) and `json` (column 2) of a `messages` or `attachments` row; column 0 is
/// its `seq`, to name a row whose id is unreadable.
fn id_and_json(row: &rusqlite::Row<'_>, table: &str) -> Result<(String, Value), StoreError> {
    let Some(id) = text(row.get_ref(1).map_err(db_error)?) else {
        let seq = describe(row.get_ref(0).map_err(db_error)?);
        return Err(corrupt(table, &format!("seq {seq}"), "the id is not text"));
    };
    let json = json_column(row, 2, table, &format!("id `{id}`"))?;
    Ok((id, json))
}

/// A `messages` row selected as `seq, id, json, withdrawn`, decoded strictly.
fn message_row(row: &rusqlite::Row<'_>) -> Result<(StoredMessage, bool), StoreError> {
    let (id, json) = id_and_json(row, "messages")?;
    let withdrawn = match row.get_ref(3).map_err(db_error)? {
        ValueRef::Integer(0) => false,
        ValueRef::Integer(1) => true,
        other => {
            return Err(corrupt(
                "messages",
                &format!("id `{id}`"),
                format!("the withdrawn flag is {}, not 0 or 1", describe(other)),
            ));
        }
    };
    Ok((StoredMessage { id, json }, withdrawn))
}

/// Inserts or replaces each `(key, value)` with `upsert` (`?1` the key, `?2` the JSON).
fn put_keyed(
    tx: &rusqlite::Transaction<'_>,
    upsert: &str,
    entries: &[(String, Value)],
) -> Result<(), StoreError> {
    let mut put = tx.prepare_cached(upsert).map_err(db_error)?;
    for (key, value) in entries {
        put.execute(params![key, to_text(value)])
            .map_err(db_error)?;
    }
    Ok(())
}

fn is_unique_violation(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(e, _)
            if e.code == rusqlite::ErrorCode::ConstraintViolation
    )
}

/// SQLite is synchronous: each call runs whole within one poll, on the blocking-thread
/// boundary of this module's `blocking` (`block_in_place` on a multi-thread runtime, so the
/// worker's other tasks move to another thread while the disk works). A call therefore has no
/// await at which its future could be dropped half-way: a commit's future either never
/// started or finished, which is the trait's cancel-safety rule.
#[async_trait::async_trait]
impl HistoryStore for SqliteStore {
    async fn load(&self) -> Result<StoredState, StoreError> {
        blocking(|| self.load_now())
    }

    async fn load_messages_since(
        &self,
        after: usize,
    ) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
        blocking(|| self.messages_since_now(after))
    }

    async fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        blocking(|| self.commit_now(batch))
    }
}

impl SqliteStore {
    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves at most an open transaction, which rusqlite
        // rolls back when it drops; the connection stays usable.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn load_now(&self) -> Result<StoredState, StoreError> {
        let conn = self.connection();
        // One read transaction: a consistent snapshot even if another connection commits.
        let tx = conn.unchecked_transaction().map_err(db_error)?;
        let mut state = StoredState::default();

        let mut statement = tx
            .prepare("SELECT seq, id, json, withdrawn FROM messages ORDER BY seq")
            .map_err(db_error)?;
        let mut rows = statement.query([]).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            state.messages.push(message_row(row)?);
        }
        drop(rows);
        drop(statement);

        let mut statement = tx
            .prepare("SELECT seq, id, json FROM attachments ORDER BY seq")
            .map_err(db_error)?;
        let mut rows = statement.query([]).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            let (id, json) = id_and_json(row, "attachments")?;
            state.attachments.push(StoredAttachment { id, json });
        }
        drop(rows);
        drop(statement);

        // A table of `(column, json)` rows, in the key column's order.
        let keyed = |table: &str, column: &str| -> Result<Vec<(String, Value)>, StoreError> {
            let mut statement = tx
                .prepare(&format!(
                    "SELECT {column}, json FROM {table} ORDER BY {column}"
                ))
                .map_err(db_error)?;
            let mut rows = statement.query([]).map_err(db_error)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db_error)? {
                let Some(key) = text(row.get_ref(0).map_err(db_error)?) else {
                    return Err(corrupt(table, "a row", format!("the {column} is not text")));
                };
                let json = json_column(row, 1, table, &format!("{column} `{key}`"))?;
                out.push((key, json));
            }
            Ok(out)
        };
        for (key, json) in keyed("state", "key")? {
            match key.as_str() {
                "delivery" => state.delivery = Some(json),
                "catalog" => state.catalog = Some(json),
                _ => {} // written by a later version; not this build's to read
            }
        }
        state.meta = keyed("meta", "key")?.into_iter().collect();
        state.delivery_records = keyed("delivery", "id")?.into_iter().collect();

        tx.commit().map_err(db_error)?;
        Ok(state)
    }

    fn messages_since_now(&self, after: usize) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
        // Skipping rows in the primary-key order reads none of the skipped JSON.
        let offset = i64::try_from(after).unwrap_or(i64::MAX);
        let conn = self.connection();
        let mut statement = conn
            .prepare_cached(
                "SELECT seq, id, json, withdrawn FROM messages ORDER BY seq LIMIT -1 OFFSET ?1",
            )
            .map_err(db_error)?;
        let mut rows = statement.query([offset]).map_err(db_error)?;
        let mut messages = Vec::new();
        while let Some(row) = rows.next().map_err(db_error)? {
            messages.push(message_row(row)?);
        }
        Ok(messages)
    }

    fn commit_now(&mut self, batch: &Batch) -> Result<(), StoreError> {
        batch.check_ids()?;
        if batch.is_empty() {
            return Ok(());
        }
        // Dropping `tx` on any early return rolls the whole batch back.
        let tx = self
            .conn
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error)?;
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO messages (id, json) VALUES (?1, ?2)")
                .map_err(db_error)?;
            for message in &batch.messages {
                insert
                    .execute(params![message.id, to_text(&message.json)])
                    .map_err(|e| {
                        if is_unique_violation(&e) {
                            StoreError::duplicate_id("message", &message.id, "is already stored")
                        } else {
                            db_error(e)
                        }
                    })?;
            }

            let mut withdraw = tx
                .prepare_cached("UPDATE messages SET withdrawn = 1 WHERE id = ?1")
                .map_err(db_error)?;
            for id in &batch.withdrawn {
                if withdraw.execute([id]).map_err(db_error)? == 0 {
                    return Err(StoreError::unknown_message(id));
                }
            }

            let mut insert = tx
                .prepare_cached("INSERT INTO attachments (id, json) VALUES (?1, ?2)")
                .map_err(db_error)?;
            for attachment in &batch.attachments {
                insert
                    .execute(params![attachment.id, to_text(&attachment.json)])
                    .map_err(|e| {
                        if is_unique_violation(&e) {
                            StoreError::duplicate_id(
                                "attachment",
                                &attachment.id,
                                "is already stored",
                            )
                        } else {
                            db_error(e)
                        }
                    })?;
            }

            let mut put_state = tx
                .prepare_cached(
                    "INSERT INTO state (key, json) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET json = excluded.json",
                )
                .map_err(db_error)?;
            if let Some(delivery) = &batch.delivery {
                put_state
                    .execute(params!["delivery", to_text(delivery)])
                    .map_err(db_error)?;
            }
            if let Some(catalog) = &batch.catalog {
                put_state
                    .execute(params!["catalog", to_text(catalog)])
                    .map_err(db_error)?;
            }
            put_keyed(
                &tx,
                "INSERT INTO delivery (id, json) VALUES (?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET json = excluded.json",
                &batch.delivery_records,
            )?;
            put_keyed(
                &tx,
                "INSERT INTO meta (key, json) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET json = excluded.json",
                &batch.meta,
            )?;
        }
        tx.commit().map_err(db_error)
    }
}

/// Runs synchronous store work (a commit's fsync): the blocking-thread boundary. On a
/// multi-threaded Tokio runtime the calling worker first hands its other tasks to another
/// worker (`block_in_place`), so the wait stalls only this conversation, not every task queued
/// behind it on the same worker; on any other runtime, or none, it runs in place.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
