//! The Ishiki history store contract (PRJ-13, SEC-4): records, attachment records, delivery
//! state, the catalog's discovered set and small metadata, committed in atomic batches.
//!
//! The store is generic over JSON so it needs no other crate's types: the runtime
//! (`ishiki-core`) serializes its messages, attachment records, projection delivery state and
//! toolsearch catalog into [`serde_json::Value`]s and commits one [`Batch`] per step phase. A
//! batch is all or nothing: a failed commit (a duplicate id, an unknown withdrawn message, a
//! full disk, a crash in the middle) leaves the store exactly as it was, which is what makes
//! "nothing lost, nothing delivered twice" hold across crashes.
//!
//! This crate is the contract alone (serde and serde_json), for whoever implements a store:
//! [`HistoryStore`], its types, [`StoreError`], and [`MemoryStore`], the same contract in
//! memory for tests and embedders. `ishiki-core` has the embedded default (SQLite in WAL mode)
//! and re-exports everything here; `ishiki-postgres` keeps history in PostgreSQL.
//!
//! ```
//! use ishiki_store::{Batch, HistoryStore, MemoryStore, StoreErrorKind, StoredMessage};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut store = MemoryStore::new();
//! let hello = StoredMessage { id: "m1".into(), json: json!({ "text": "hello" }) };
//! store.commit(&Batch { messages: vec![hello.clone()], ..Batch::default() }).await?;
//!
//! // An id is stored once; a refused batch changes nothing.
//! let again = Batch {
//!     messages: vec![StoredMessage { id: "m2".into(), json: json!({}) }, hello.clone()],
//!     ..Batch::default()
//! };
//! let error = store.commit(&again).await.unwrap_err();
//! assert_eq!(error.kind(), StoreErrorKind::DuplicateId);
//! assert_eq!(store.load().await?.messages, [(hello, false)]);
//! # Ok::<(), ishiki_store::StoreError>(())
//! # }).unwrap();
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where history lives. Implementations must make [`commit`](HistoryStore::commit) atomic and
/// [`load`](HistoryStore::load) return exactly what earlier commits wrote, in commit order.
/// A store shared by several machines (PostgreSQL) also keeps one writer per conversation: it
/// refuses the commits of a writer that lost its lease with [`StoreErrorKind::Lease`].
///
/// The methods are async so a networked store waits for its server without holding a thread
/// of the caller's runtime. **A commit must be cancel-safe:** the caller may drop its future
/// at any await (a step cancelled by its embedder, a timeout), and the store must then be as
/// if the commit never started, or (when the drop lands after the database received its
/// `COMMIT` and before the reply came back) report the next call's outcome honestly: a store
/// that cannot know whether a commit landed says so with [`StoreErrorKind::InDoubt`] rather
/// than guessing. An embedded store whose calls cannot be cut (SQLite) may run a commit
/// within one poll on a blocking-thread boundary; then there is no await to drop it at.
#[async_trait::async_trait]
pub trait HistoryStore: Send + Sync + fmt::Debug {
    /// Everything stored: messages in commit order (with their withdrawn flag), attachment
    /// records in commit order, the latest delivery state and catalog, and metadata.
    async fn load(&self) -> Result<StoredState, StoreError>;

    /// Applies `batch` in one transaction: all of it, or (on error, or when the future is
    /// dropped before it completes) none of it.
    async fn commit(&mut self, batch: &Batch) -> Result<(), StoreError>;

    /// The messages committed after the first `after` ones, in commit order with their
    /// withdrawn flags: what a reader that already holds the first `after` needs, without
    /// reading (and decoding) the whole history again. The default loads everything and skips;
    /// stores that can read a range override it.
    async fn load_messages_since(
        &self,
        after: usize,
    ) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
        let mut messages = self.load().await?.messages;
        Ok(messages.split_off(after.min(messages.len())))
    }
}

/// One atomic change. Messages and attachment records are append-only: an id may be stored
/// once. Within a batch, messages are added before withdrawals apply, so a batch may add and
/// withdraw the same message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// New messages, appended in this order.
    pub messages: Vec<StoredMessage>,
    /// Ids of stored messages that leave the active context (PRJ-7); withdrawing twice is
    /// harmless, withdrawing an unknown id is an error.
    pub withdrawn: Vec<String>,
    /// New attachment records (`ishiki.attachment`, PRJ-1), appended in this order.
    pub attachments: Vec<StoredAttachment>,
    /// A whole delivery state, replacing the stored whole state (PRJ-13); the rows of
    /// [`Batch::delivery_records`] stay. Stores of schema version 1 kept the state this way;
    /// `ishiki-core` now writes only rows, and reads both (a record's flags are the union of
    /// the two). **A store must keep both fields**: one that ignores `delivery_records`
    /// loses every delivery state, and `once` images would be shown again after a restart.
    pub delivery: Option<Value>,
    /// The delivery state of single attachment records, inserted or replaced by record id:
    /// a commit writes only the records whose state changed, so its cost does not grow with
    /// the conversation (issue 26).
    #[serde(default)]
    pub delivery_records: Vec<(String, Value)>,
    /// The whole catalog state (the discovered set), replacing the stored one.
    pub catalog: Option<Value>,
    /// Metadata entries, inserted or replaced by key.
    pub meta: Vec<(String, Value)>,
}

impl Batch {
    /// Checks that no message id and no attachment id appears twice in the batch (every
    /// store calls this before it writes; ids already stored are the store's own check).
    pub fn check_ids(&self) -> Result<(), StoreError> {
        let mut seen = HashSet::new();
        for message in &self.messages {
            if !seen.insert(message.id.as_str()) {
                return Err(StoreError::duplicate_id(
                    "message",
                    &message.id,
                    "appears twice in the batch",
                ));
            }
        }
        let mut seen = HashSet::new();
        for attachment in &self.attachments {
            if !seen.insert(attachment.id.as_str()) {
                return Err(StoreError::duplicate_id(
                    "attachment",
                    &attachment.id,
                    "appears twice in the batch",
                ));
            }
        }
        Ok(())
    }

    /// Whether committing the batch would change nothing.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
            && self.withdrawn.is_empty()
            && self.attachments.is_empty()
            && self.delivery.is_none()
            && self.delivery_records.is_empty()
            && self.catalog.is_none()
            && self.meta.is_empty()
    }
}

/// A history record. The store assigns its position (a monotonic sequence) in commit order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Unique id of the record.
    pub id: String,
    /// The record itself, opaque to the store.
    pub json: Value,
}

/// An attachment record (PRJ-1), opaque to the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAttachment {
    /// Unique id of the record.
    pub id: String,
    /// The record itself.
    pub json: Value,
}

/// Everything a store holds, as [`HistoryStore::load`] returns it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredState {
    /// Messages in commit order, each with its withdrawn flag.
    pub messages: Vec<(StoredMessage, bool)>,
    /// Attachment records in commit order.
    pub attachments: Vec<StoredAttachment>,
    /// The latest whole delivery state, if one was ever committed ([`Batch::delivery`]).
    pub delivery: Option<Value>,
    /// The delivery state of single records by record id ([`Batch::delivery_records`]).
    #[serde(default)]
    pub delivery_records: BTreeMap<String, Value>,
    /// The latest catalog state, if one was ever committed.
    pub catalog: Option<Value>,
    /// Metadata by key.
    pub meta: BTreeMap<String, Value>,
}

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The database failed: I/O, a locked or full disk, a file that is not a database, a lost
    /// connection.
    Database,
    /// A message or attachment id is already stored, or repeated within the batch.
    DuplicateId,
    /// A withdrawn id names no stored message.
    UnknownMessage,
    /// The store was written by a newer version of this crate.
    Version,
    /// A stored row cannot be read: not valid JSON, a value of the wrong type or shape (the
    /// file was changed behind the store's back). The message names the table and the row.
    Corrupt,
    /// The store refuses this writer: another runtime holds the conversation's lease, or this
    /// runtime's lease was taken over (one writer per conversation).
    Lease,
    /// A history that must exist is not there: the database file is missing, empty, or has no
    /// tables (`ishiki_core::SqliteStore::open_existing`).
    Missing,
    /// A commit's outcome is unknown: the connection was lost (or the commit's future was
    /// dropped) after the database was asked to commit and before it answered. The batch is
    /// either wholly stored or not at all; reload to find out which. A networked store
    /// (PostgreSQL) reports it; an embedded one never does.
    InDoubt,
}

/// An error from a [`HistoryStore`]. A failed commit has changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
}

impl StoreError {
    /// An error of `kind` (messages are lower-case, without a trailing period).
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// A [`StoreErrorKind::DuplicateId`] error for a `what` (`message`, `attachment`) whose
    /// `id` is stored already or repeated (`why`), worded the same by every store.
    pub fn duplicate_id(what: &str, id: &str, why: &str) -> Self {
        Self::new(
            StoreErrorKind::DuplicateId,
            format!("{what} id `{id}` {why}; nothing was committed"),
        )
    }

    /// A [`StoreErrorKind::UnknownMessage`] error for withdrawing `id`, worded the same by
    /// every store.
    pub fn unknown_message(id: &str) -> Self {
        Self::new(
            StoreErrorKind::UnknownMessage,
            format!("cannot withdraw unknown message `{id}`; nothing was committed"),
        )
    }

    /// What went wrong.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

mod memory;

pub use memory::MemoryStore;
