//! [`RuntimeError`]: what went wrong in the runtime itself, with a kind to branch on. Tool
//! failures are results the model reads, not runtime errors.

use crate::message::{ModelError, ModelErrorKind};
use crate::store::{StoreError, StoreErrorKind};

/// What went wrong, for embedders that branch on it (retry, move the conversation, alert).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeErrorKind {
    /// The setup cannot work: a tool definition, a duplicate or built-in tool name, a state
    /// directory the model could reach, codemode without its feature. Fix the configuration.
    Config,
    /// A call the runtime's state refuses: a message id used twice, withdrawing an unknown
    /// message, preparing before the last step's calls ran. Nothing was changed.
    Usage,
    /// Another runtime holds this conversation (the state directory's lock, or the store's
    /// lease). Retry later, or from the holder.
    Busy,
    /// The stored history is damaged or missing: a row of the wrong shape, a lost database.
    /// Nothing was written over it; restore it or choose another state.
    Damaged,
    /// The history store failed (see [`RuntimeError::store_kind`]): a database or connection
    /// error, a store written by a newer version. The failed commit changed nothing.
    Store,
    /// The model request failed (see [`RuntimeError::model_kind`] for whether repeating it may
    /// succeed). The step was abandoned; the next `prepare` sends the same request.
    Model,
    /// Reading or writing the state directory, the artifacts or the assets failed.
    Io,
    /// The runtime could not encode its own state (a bug; please report it).
    Internal,
}

/// What went wrong in the runtime itself (tool failures are results, not errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeError {
    kind: RuntimeErrorKind,
    store: Option<StoreErrorKind>,
    model: Option<ModelErrorKind>,
    message: String,
}

impl RuntimeError {
    pub(crate) fn new(kind: RuntimeErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            store: None,
            model: None,
            message: message.into(),
        }
    }

    /// A history store's error, after `context`: a lease is [`Busy`](RuntimeErrorKind::Busy),
    /// an unreadable or missing history [`Damaged`](RuntimeErrorKind::Damaged), a refused id
    /// [`Usage`](RuntimeErrorKind::Usage), the rest [`Store`](RuntimeErrorKind::Store).
    pub(crate) fn store(context: &str, e: &StoreError) -> Self {
        let kind = match e.kind() {
            StoreErrorKind::Lease => RuntimeErrorKind::Busy,
            StoreErrorKind::Corrupt | StoreErrorKind::Missing => RuntimeErrorKind::Damaged,
            StoreErrorKind::DuplicateId | StoreErrorKind::UnknownMessage => RuntimeErrorKind::Usage,
            _ => RuntimeErrorKind::Store,
        };
        Self {
            store: Some(e.kind()),
            ..Self::new(kind, format!("{context}: {e}"))
        }
    }

    /// A commit whose outcome is unknown (`context` says which): its future was dropped
    /// while the store worked, or the store lost the reply.
    pub(crate) fn in_doubt(context: &str) -> Self {
        Self {
            store: Some(StoreErrorKind::InDoubt),
            ..Self::new(
                RuntimeErrorKind::Store,
                format!(
                    "{context}: the commit was cut before the store answered (its step was cancelled, or the connection was lost), so whether it was stored is unknown; reopen the runtime from its store, which holds exactly what was stored"
                ),
            )
        }
    }

    /// A failed model request.
    pub(crate) fn model(e: &ModelError) -> Self {
        Self {
            model: Some(e.kind()),
            ..Self::new(
                RuntimeErrorKind::Model,
                format!("the model request failed: {e}"),
            )
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> RuntimeErrorKind {
        self.kind
    }

    /// The store's own kind, when a history store failed.
    pub fn store_kind(&self) -> Option<StoreErrorKind> {
        self.store
    }

    /// The model's own kind, when the model request failed.
    pub fn model_kind(&self) -> Option<ModelErrorKind> {
        self.model
    }

    /// Whether the same call may succeed later without a change: another runtime held the
    /// conversation, the database failed (a lost connection, a locked file), or the model
    /// request failed in a retryable way (rate limit, overload, network).
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            RuntimeErrorKind::Busy => true,
            RuntimeErrorKind::Store => self.store == Some(StoreErrorKind::Database),
            RuntimeErrorKind::Model => self.model == Some(ModelErrorKind::Retryable),
            _ => false,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {}

/// `context: error` as a runtime error of `kind`.
pub(crate) fn err(
    kind: RuntimeErrorKind,
    context: &str,
) -> impl Fn(&dyn std::fmt::Display) -> RuntimeError + '_ {
    move |e| RuntimeError::new(kind, format!("{context}: {e}"))
}
