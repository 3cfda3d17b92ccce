//! The crate's error type: a kind to match on and a message a model or user can read.

use std::fmt;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceErrorKind {
    /// The text is not a URL, or not one this handler accepts.
    InvalidUrl,
    /// No handler is registered for the URL's scheme.
    UnknownScheme,
    /// A query parameter is unknown or its value is malformed.
    InvalidParameter,
    /// The URL's path would leave the handler's root (SEC-2).
    Escape,
    /// Nothing exists at that URL.
    NotFound,
    /// The handler does not allow this operation (e.g. writing to `local://`).
    NotAllowed,
    /// The bytes are not what was expected (e.g. text that is not UTF-8).
    InvalidData,
    /// The resource is larger than the handler's limit.
    TooLarge,
    /// The operating system refused or failed an I/O operation.
    Io,
}

/// An error from the resource center or one of its handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceError {
    kind: ResourceErrorKind,
    message: String,
}

impl ResourceError {
    /// An error of `kind` with a message that names what was wrong (lower-case, no period).
    pub fn new(kind: ResourceErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ResourceErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ResourceError {}
