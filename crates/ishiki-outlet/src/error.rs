//! The crate's error type: a kind to match on and a message a model or user can read.

use std::fmt;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutletErrorKind {
    /// The artifact store could not archive media or an over-long text (OUT-3, OUT-5).
    Archive,
    /// [`Outlet::next_page`](crate::Outlet::next_page) was given a continuation this outlet
    /// cannot read: not an artifact of its store, or a malformed `offset`.
    Continuation,
}

/// An error from the outlet. Paging itself cannot fail; archiving and reading an archived
/// page back can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutletError {
    kind: OutletErrorKind,
    message: String,
}

impl OutletError {
    /// An error of `kind` with a message that names what was wrong (lower-case, no period).
    pub fn new(kind: OutletErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> OutletErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for OutletError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OutletError {}
