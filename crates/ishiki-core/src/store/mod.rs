//! The history store (PRJ-13, SEC-4). The contract — [`HistoryStore`], [`Batch`] and the
//! stored types, [`StoreError`], [`MemoryStore`] — is the `ishiki-store` crate, so a store
//! implementer (`ishiki-postgres`) takes it without the runtime; it is re-exported here.
//!
//! `SqliteStore` (feature `sqlite`, on by default) is the embedded default (SQLite in WAL mode,
//! schema versioned with `user_version`), and [`Durability`] its setting.

pub use ishiki_store::{
    Batch, HistoryStore, MemoryStore, StoreError, StoreErrorKind, StoredAttachment, StoredMessage,
    StoredState,
};

/// How hard SQLite works to keep a commit (CRATES.md). Both survive a crash of the process;
/// only `Full` also survives a power loss or an OS crash, at ~1.7 ms instead of ~0.1 ms a
/// commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// `synchronous=FULL`: every commit is on disk before `commit` returns.
    #[default]
    Full,
    /// `synchronous=NORMAL`: the WAL is synced at checkpoints only.
    Normal,
}

#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
