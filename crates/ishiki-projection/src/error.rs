//! The crate's error type: a kind to match on and a message naming the offending key.

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProjectionErrorKind {
    /// A configuration value is out of its allowed range.
    InvalidConfig,
}

/// An error from this crate. Projection itself never fails; only configuration checks do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProjectionError {
    kind: ProjectionErrorKind,
    message: String,
}

impl ProjectionError {
    /// An error of `kind` with a message that names what was wrong (lower-case, no period).
    pub fn new(kind: ProjectionErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ProjectionErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}
